/**
 * Publish/subscribe: the topics with subscribers (a page at a time), a live view of one or more
 * topics over the socket (`/v1/pubsub/ws`, the access token as `?jwt=` since a browser cannot set
 * a handshake's headers; docs/pubsub.md), publishing a text message, and who is present on a
 * topic, live (PubSubPresence.tsx).
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { TextKey } from "../../src/api/Paging.js"
import { call, cursorOf, type Refusal } from "../api.js"
import { type Credential, socketToken } from "../session.js"
import { PageTitle, RefusalNote, useAction, usePaged } from "../ui.js"
import { Presence } from "./PubSubPresence.js"

interface Frame {
  readonly type: string
  readonly topic?: string
  readonly offset?: number
  readonly timestamp?: number
  readonly data?: string
  readonly [member: string]: unknown
}

const utf8ToBase64 = (text: string) => {
  let binary = ""
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte)
  return btoa(binary)
}

const base64ToText = (data: string) => {
  try {
    return new TextDecoder("utf-8", { fatal: false }).decode(Uint8Array.from(atob(data), (c) => c.charCodeAt(0)))
  } catch {
    return data
  }
}

const MAX_SHOWN = 200

export const PubSub = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const topics = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.pubsub.topics({ urlParams: { limit: 50, cursor: cursorOf(TextKey, cursor) } }))
    return { items: page.topics, next: page.next_cursor }
  })
  const [watch, setWatch] = useState("news")
  const [state, setState] = useState<"closed" | "opening" | "open">("closed")
  const [frames, setFrames] = useState<ReadonlyArray<Frame>>([])
  const [socketRefusal, setSocketRefusal] = useState<Refusal | undefined>(undefined)
  const socket = useRef<WebSocket | undefined>(undefined)
  const [topic, setTopic] = useState("news")
  const [text, setText] = useState("")
  const [published, setPublished] = useState<string | undefined>(undefined)
  const publish = useAction()
  const open = useAction()
  const [presenceTopic, setPresenceTopic] = useState("")

  useEffect(() => () => socket.current?.close(1000), [])

  const subscribe = () =>
    open.run(async () => {
      socket.current?.close(1000)
      setFrames([])
      setSocketRefusal(undefined)
      const names = watch.split(/[\s,]+/).filter((t) => t !== "")
      const query = new URLSearchParams(names.map((t) => ["topic", t]))
      query.set("jwt", await socketToken())
      const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v1/pubsub/ws?${query.toString()}`
      setState("opening")
      const ws = new WebSocket(url)
      socket.current = ws
      ws.onopen = () => socket.current === ws && setState("open")
      ws.onmessage = (event) => {
        if (socket.current !== ws || typeof event.data !== "string") return
        const frame = JSON.parse(event.data) as Frame
        setFrames((shown) => [frame, ...shown].slice(0, MAX_SHOWN))
      }
      ws.onclose = (event) => {
        if (socket.current !== ws) return
        setState("closed")
        // a refused handshake never opens: the browser tells no status, so the page says what it can
        if (event.code !== 1000) {
          setSocketRefusal({
            error: event.reason === "" ? "the live view closed" : `the live view closed: ${event.reason}`,
            code: `SOCKET_CLOSED_${event.code}`,
            hint: event.code === 1006 ? "the gateway refused or dropped the socket: check the topic names and your pubsub grant" : undefined
          })
        }
      }
    })

  return (
    <main>
      <PageTitle>Publish/subscribe</PageTitle>
      <section>
        <h2>Live view</h2>
        <form
          class="row"
          onSubmit={(event) => {
            event.preventDefault()
            void subscribe()
          }}
        >
          <label>
            Topics (separated by commas)
            <input name="watch" value={watch} onInput={(e) => setWatch(e.currentTarget.value)} autoComplete="off" />
          </label>
          <button type="submit" disabled={open.busy}>
            {state === "closed" ? "Subscribe" : "Subscribe again"}
          </button>
          {state === "closed" ? null : (
            <button type="button" onClick={() => socket.current?.close(1000)}>
              Close
            </button>
          )}
        </form>
        <p>
          Socket: <span data-fact="socket">{state}</span>
        </p>
        <RefusalNote refusal={open.refusal ?? socketRefusal} />
        <ol class="frames" aria-live="polite" aria-label="frames received, newest first">
          {frames.map((frame) => (
            <li data-type={frame.type}>
              <span class="frame-type">{frame.type}</span> <code>{frame.topic ?? ""}</code>
              {frame.offset === undefined ? null : <span class="offset"> #{frame.offset}</span>}
              {typeof frame.data === "string" ? <span class="data"> {base64ToText(frame.data)}</span> : null}
              {frame.type === "message" || frame.type === "subscribed" ? null : <code class="raw"> {JSON.stringify(frame)}</code>}
            </li>
          ))}
        </ol>
      </section>
      <section>
        <h2>Publish</h2>
        <form
          class="stack"
          onSubmit={(event) => {
            event.preventDefault()
            void publish.run(async () => {
              setPublished(undefined)
              const answer = await call(token, (c) => c.pubsub.publish({ payload: { topic, data_base64: utf8ToBase64(text) } }))
              setPublished(`published on ${answer.topic} at offset ${answer.offset}`)
            })
          }}
        >
          <label>
            Topic
            <input name="topic" value={topic} onInput={(e) => setTopic(e.currentTarget.value)} autoComplete="off" />
          </label>
          <label>
            Message (text)
            <textarea name="message" rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={publish.busy}>
            Publish
          </button>
        </form>
        <RefusalNote refusal={publish.refusal} />
        {published === undefined ? null : <p role="status">{published}</p>}
      </section>
      <section>
        <h2>Topics with subscribers</h2>
        <RefusalNote refusal={topics.refusal} />
        <button type="button" onClick={topics.reload}>
          Reload
        </button>
        <ul>
          {topics.items.map((t) => (
            <li data-topic={t}>
              <code>{t}</code>{" "}
              <button type="button" onClick={() => setPresenceTopic(t)}>
                Who is present
              </button>
            </li>
          ))}
        </ul>
        {topics.pager}
      </section>
      <Presence token={token} topic={presenceTopic} onTopic={setPresenceTopic} />
    </main>
  )
}
