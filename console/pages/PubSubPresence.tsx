/**
 * Who is present on a topic, live (docs/pubsub.md, "Presence"): the listing
 * (`GET /v1/pubsub/presence`: each member once, its connections counted over every gateway), read
 * again at every `presence` frame (a member's first connection joining, its last leaving or
 * expiring) that a socket subscribed to the topic receives. The page's own socket does not enter
 * presence (no `presence=true`): watching is not being there.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { call, type Refusal } from "../api.js"
import { socketToken } from "../session.js"
import { RefusalNote, TableHead, useAction, when } from "../ui.js"

type Listing = Awaited<ReturnType<typeof loadPresence>>
const loadPresence = (token: string, topic: string) => call(token, (c) => c.pubsub.presence({ urlParams: { topic } }))

/** The last join or leave seen, said in words. */
interface Change {
  readonly event: string
  readonly member: string
  readonly at: number
}

export const Presence = (props: { readonly token: string; readonly topic: string; readonly onTopic: (topic: string) => void }) => {
  const [typed, setTyped] = useState(props.topic)
  const [listing, setListing] = useState<Listing | undefined>(undefined)
  const [changes, setChanges] = useState<ReadonlyArray<Change>>([])
  const [state, setState] = useState<"closed" | "opening" | "open">("closed")
  const [trouble, setTrouble] = useState<Refusal | undefined>(undefined)
  const load = useAction()
  const socket = useRef<WebSocket | undefined>(undefined)
  const topic = props.topic

  useEffect(() => setTyped(topic), [topic])
  useEffect(() => {
    if (topic === "") return
    let live = true
    setListing(undefined)
    setChanges([])
    setTrouble(undefined)
    const reload = () => void load.run(async () => {
      const answer = await loadPresence(props.token, topic)
      if (live) setListing(answer)
    })
    reload()
    // a socket on the topic hears every join and leave; the listing is then read again
    void (async () => {
      try {
        const query = new URLSearchParams([["topic", topic]])
        query.set("jwt", await socketToken())
        if (!live) return
        setState("opening")
        const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/pubsub/ws?${query.toString()}`)
        socket.current = ws
        ws.onopen = () => live && setState("open")
        ws.onmessage = (event) => {
          if (!live || typeof event.data !== "string") return
          const frame = JSON.parse(event.data) as { type?: string; event?: string; timestamp?: number; member?: { member_id?: string } }
          if (frame.type !== "presence") return
          setChanges((seen) => [{ event: String(frame.event), member: String(frame.member?.member_id), at: frame.timestamp ?? Date.now() }, ...seen].slice(0, 20))
          reload()
        }
        ws.onclose = (event) => {
          if (!live) return
          setState("closed")
          if (event.code !== 1000) setTrouble({ error: `the presence watch closed${event.reason === "" ? "" : `: ${event.reason}`}`, code: `SOCKET_CLOSED_${event.code}` })
        }
      } catch (failure) {
        if (live) setTrouble({ error: String(failure), code: "CONSOLE_ERROR" })
      }
    })()
    return () => {
      live = false
      socket.current?.close(1000)
      socket.current = undefined
      setState("closed")
    }
  }, [topic, props.token])

  return (
    <section aria-labelledby="presence-heading">
      <h2 id="presence-heading">Presence</h2>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault()
          props.onTopic(typed.trim())
        }}
      >
        <label>
          Topic
          <input name="presence-topic" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" />
        </label>
        <button type="submit">Watch presence</button>
      </form>
      {topic === "" ? (
        <p class="hint">Name a topic to see who is present on it, live.</p>
      ) : (
        <p>
          Watching <code data-fact="presence-topic">{topic}</code>: <span data-fact="presence-socket">{state}</span>;{" "}
          <span data-fact="presence-count">{listing?.count ?? "…"}</span> present.
        </p>
      )}
      <RefusalNote refusal={load.refusal ?? trouble} />
      {listing === undefined ? null : (
        <div class="table-wrap">
          <table>
            <caption>present on {listing.topic}</caption>
            <TableHead columns={["member", "subject", "since", "connections", "meta"]} />
            <tbody>
              {listing.members.map((m) => (
                <tr data-member={m.member_id}>
                  <td>
                    <code>{m.member_id}</code>
                  </td>
                  <td>
                    <code>{m.subject}</code>
                  </td>
                  <td>{when(Math.floor(m.joined_at / 1000))}</td>
                  <td data-connections>{m.connections}</td>
                  <td>
                    {m.meta === null ? "" : <code>{JSON.stringify(m.meta)}</code>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {changes.length === 0 ? null : (
        <ul class="changes" aria-live="polite" aria-label="joins and leaves, newest first">
          {changes.map((c) => (
            <li data-change={c.event}>
              {c.member} {c.event === "join" ? "joined" : c.event === "leave" ? "left" : c.event} at {new Date(c.at).toISOString().slice(11, 19)} UTC
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}
