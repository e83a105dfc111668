/**
 * A deployment's log, followed live: the API answers the last lines only (`deployments.logs`,
 * `lines` 1-1000, no cursor and no stream), so the page reads the last lines every two seconds and
 * appends those after the ones it shows (logTail.ts). A read that finds none of the shown lines
 * (more came in two seconds than one read holds) says lines may be missing there. Following stops
 * on a refusal (the deployment deleted, the credential expired) and can be resumed.
 */
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks"
import { call, type Refusal, refusalOf } from "../api.js"
import { appended, lastOf } from "../logTail.js"
import { RefusalNote } from "../ui.js"

const EVERY_MS = 2_000
/** The first read's lines; later reads take as many, so a burst up to this size is never cut. */
const READ_LINES = 500
/** The lines kept on the page. */
const KEPT = 2_000

interface Line {
  readonly n: number
  readonly text: string
  readonly gap?: boolean
}

export const DeploymentLogs = (props: { readonly token: string; readonly name: string }) => {
  const { token, name } = props
  const [lines, setLines] = useState<ReadonlyArray<Line>>([])
  const [following, setFollowing] = useState(true)
  const [refusal, setRefusal] = useState<Refusal | undefined>(undefined)
  const [readAt, setReadAt] = useState<string | undefined>(undefined)
  /** Every line read so far (the last KEPT), what the next read is matched against; Clear empties the page, not this. */
  const seen = useRef<ReadonlyArray<string>>([])
  const counter = useRef(0)
  const box = useRef<HTMLOListElement>(null)
  const atBottom = useRef(true)

  useEffect(() => {
    if (!following) return
    let live = true
    let timer: ReturnType<typeof setTimeout> | undefined
    const read = async () => {
      try {
        const answer = await call(token, (c) => c.deploymentRuntime.logs({ urlParams: { name, lines: READ_LINES } }))
        if (!live) return
        const fresh = appended(seen.current, answer.lines)
        if (fresh.lines.length > 0) {
          seen.current = lastOf([...seen.current, ...fresh.lines], KEPT)
          const added = fresh.lines.map((text, i): Line => ({ n: ++counter.current, text, ...(fresh.gap && i === 0 ? { gap: true } : {}) }))
          const el = box.current
          atBottom.current = el === null || el.scrollTop + el.clientHeight >= el.scrollHeight - 4
          setLines((before) => lastOf([...before, ...added], KEPT))
        }
        setRefusal(undefined)
        setReadAt(new Date().toISOString().slice(11, 19))
        timer = setTimeout(() => void read(), EVERY_MS)
      } catch (failure) {
        if (!live) return
        setRefusal(refusalOf(failure))
        setFollowing(false)
      }
    }
    void read()
    return () => {
      live = false
      if (timer !== undefined) clearTimeout(timer)
    }
  }, [name, following])

  // a reader at the bottom stays there as lines come; one who scrolled up is left where they are
  useLayoutEffect(() => {
    const el = box.current
    if (el !== null && atBottom.current) el.scrollTop = el.scrollHeight
  }, [lines])

  return (
    <section aria-label={`logs of ${name}`}>
      <h2>Logs of {name}</h2>
      <div class="row">
        <span data-fact="logs-following">{following ? "following" : "paused"}</span>
        {readAt === undefined ? null : <span class="hint">last read {readAt} UTC</span>}
        <button type="button" onClick={() => setFollowing(!following)}>
          {following ? "Pause" : "Follow"}
        </button>
        <button type="button" onClick={() => setLines([])}>
          Clear
        </button>
      </div>
      <RefusalNote refusal={refusal} />
      <div role="log" aria-label={`the last lines of ${name}'s log, oldest first`}>
        <ol class="frames log-lines" ref={box} tabIndex={0}>
          {lines.map((line) => (
            <li key={line.n} class={line.gap === true ? "gap" : undefined} data-log-line>
              {line.gap === true ? <span class="hint">(lines may be missing here) </span> : null}
              <code>{line.text}</code>
            </li>
          ))}
        </ol>
      </div>
      {lines.length === 0 && refusal === undefined ? <p class="hint">No lines yet.</p> : null}
    </section>
  )
}
