/**
 * A test send (docs/push.md "Sending"): a title and a text to a user's registered devices
 * (`POST /v1/push/send`) or to a topic (`POST /v1/push/topics/send`), answered with the per-device
 * envelope, shown as it came: `ok`, `devices_attempted`, and each device's provider, HTTP status,
 * reason and whether the provider said the registration is gone.
 */
import { useEffect, useState } from "preact/hooks"
import { call } from "../api.js"
import { RefusalNote, TableHead, useAction } from "../ui.js"

interface Envelope {
  readonly ok: boolean
  readonly devices_attempted: number
  readonly results: ReadonlyArray<{
    readonly device_id?: string | undefined
    readonly provider?: string | undefined
    readonly status: number
    readonly reason?: string | undefined
    readonly unregistered: boolean
  }>
}

export const EnvelopeView = (props: { readonly envelope: Envelope }) => (
  <div data-fact="envelope" data-ok={String(props.envelope.ok)}>
    <p role="status">
      {props.envelope.ok ? "ok" : "not ok"}: {props.envelope.devices_attempted} device{props.envelope.devices_attempted === 1 ? "" : "s"} attempted,{" "}
      {props.envelope.results.length} result{props.envelope.results.length === 1 ? "" : "s"}.
    </p>
    <div class="table-wrap">
      <table>
        <TableHead columns={["Device", "Provider", "Status", "Reason", "Unregistered"]} />
        <tbody>
          {props.envelope.results.map((r, i) => (
            <tr data-result={r.device_id ?? `#${i}`} data-provider={r.provider ?? ""} data-status={String(r.status)}>
              <td>{r.device_id ?? "(the topic)"}</td>
              <td>{r.provider ?? "—"}</td>
              <td>{r.status === 0 ? "0 (no answer)" : r.status}</td>
              <td>{r.reason ?? "—"}</td>
              <td>{r.unregistered ? "yes: registration removed" : "no"}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  </div>
)

export const PushSend = (props: { readonly token: string; readonly subject: string; readonly topicId: string | undefined }) => {
  const [target, setTarget] = useState<"user" | "topic">("user")
  const [userId, setUserId] = useState(props.subject)
  const [topicId, setTopicId] = useState(props.topicId ?? "")
  const [title, setTitle] = useState("Test")
  const [body, setBody] = useState("A test from the Portico console")
  const [envelope, setEnvelope] = useState<Envelope | undefined>(undefined)
  const send = useAction()
  // a topic chosen above (registered, or "Send to it") is the one to send to
  useEffect(() => {
    if (props.topicId === undefined) return
    setTopicId(props.topicId)
    setTarget("topic")
  }, [props.topicId])
  return (
    <section>
      <h2>Test send</h2>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void send.run(async () => {
            setEnvelope(undefined)
            const message = { title, body }
            setEnvelope(
              target === "user"
                ? await call(props.token, (c) => c.pushSend.send({ payload: { user_id: userId.trim(), ...message } }))
                : await call(props.token, (c) => c.pushSend.sendTopic({ payload: { topic_id: topicId.trim(), ...message } }))
            )
          })
        }}
      >
        <fieldset>
          <legend>To</legend>
          <label class="inline">
            <input type="radio" name="send-to" value="user" checked={target === "user"} onChange={() => setTarget("user")} /> a user's devices
          </label>
          <label class="inline">
            <input type="radio" name="send-to" value="topic" checked={target === "topic"} onChange={() => setTarget("topic")} /> a topic
          </label>
          {target === "user" ? (
            <label>
              User (a session's subject: a wallet, lowercase)
              <input name="user-id" value={userId} onInput={(e) => setUserId(e.currentTarget.value)} autoComplete="off" />
            </label>
          ) : (
            <label>
              Topic id (64 hex characters)
              <input name="topic-id" value={topicId} onInput={(e) => setTopicId(e.currentTarget.value)} autoComplete="off" />
            </label>
          )}
        </fieldset>
        <label>
          Title
          <input name="title" value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
        </label>
        <label>
          Text
          <textarea name="body" rows={2} value={body} onInput={(e) => setBody(e.currentTarget.value)} />
        </label>
        <button type="submit" name="send" disabled={send.busy}>
          {send.busy ? "Sending…" : "Send"}
        </button>
      </form>
      <RefusalNote refusal={send.refusal} />
      {envelope === undefined ? null : <EnvelopeView envelope={envelope} />}
    </section>
  )
}
