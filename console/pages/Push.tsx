/**
 * Push (docs/push.md): the namespace's provider credentials (PushCredentials.tsx), the signed-in
 * user's registered devices as `GET /v1/push/devices` lists them (tokens redacted by the
 * gateway) with registering and removing one, anonymous topics, and a test send with its
 * per-device results (PushSend.tsx). The gateway lists no topics (it keeps a topic's id and a
 * sealed token, nothing to list them by, spec §2.6): the page lists the topics registered from it
 * in this view, their secrets held in memory only, to remove them or send to them.
 */
import { useState } from "preact/hooks"
import { TimeAndText } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import type { Credential } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, TableHead, useAction, usePaged, when } from "../ui.js"
import { PushCredentials } from "./PushCredentials.js"
import { PushSend } from "./PushSend.js"

const DEVICE_PROVIDERS = ["ios_push", "relay_push", "legacy_push"] as const
const TOPIC_PROVIDERS = ["relay_push", "legacy_push", "ios_push", "ios_voip_push"] as const
type DeviceProvider = (typeof DEVICE_PROVIDERS)[number]
type TopicProvider = (typeof TOPIC_PROVIDERS)[number]

interface Topic {
  readonly id: string
  readonly secret: string
  readonly provider: string
  readonly token: string
  readonly expires_at: number
}

const randomHex = (bytes: number) => Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("")

const Registrations = (props: { readonly token: string }) => {
  const token = props.token
  const list = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.pushRegistrations.devices({ urlParams: { limit: 20, cursor: cursorOf(TimeAndText, cursor) } }))
    return { items: page.devices, next: page.next_cursor }
  })
  const [deviceId, setDeviceId] = useState("console")
  const [provider, setProvider] = useState<DeviceProvider>("relay_push")
  const [pushToken, setPushToken] = useState("")
  const register = useAction()
  const remove = useAction()
  return (
    <section>
      <h2>Your registered devices</h2>
      <p class="hint">The devices the signed-in user's apps registered for push (tokens shown redacted, as the gateway answers them).</p>
      <RefusalNote refusal={list.refusal} />
      <RefusalNote refusal={remove.refusal} />
      <button type="button" onClick={list.reload}>
        Reload
      </button>
      <div class="table-wrap">
        <table>
          <TableHead columns={["Device", "Provider", "Token", "Platform", "Updated"]} actions />
          <tbody>
            {list.items.map((d) => (
              <tr data-push-device={d.device_id}>
                <td>
                  <code>{d.device_id}</code>
                  {d.bound ? " (device-bound)" : ""}
                </td>
                <td>{d.provider}</td>
                <td>
                  <code>{d.token}</code>
                </td>
                <td>{d.platform ?? "—"}</td>
                <td>{when(d.updated_at)}</td>
                <td>
                  <ConfirmButton
                    label="Remove"
                    confirm={`Remove ${d.device_id}`}
                    disabled={remove.busy}
                    onConfirm={() =>
                      void remove.run(async () => {
                        await call(token, (c) => c.pushRegistrations.removeDevice({ path: { device_id: d.device_id } }))
                        list.reload()
                      })
                    }
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {list.pager}
      <h3>Register a device</h3>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void register.run(async () => {
            await call(token, (c) => c.pushRegistrations.registerDevice({ payload: { device_id: deviceId.trim(), provider, token: pushToken.trim() } }))
            list.reload()
          })
        }}
      >
        <label>
          Device id (the app's own label; a device-bound session's registration takes its device's id)
          <input name="push-device-id" value={deviceId} onInput={(e) => setDeviceId(e.currentTarget.value)} autoComplete="off" />
        </label>
        <label>
          Provider
          <select name="push-device-provider" value={provider} onChange={(e) => setProvider(e.currentTarget.value as DeviceProvider)}>
            {DEVICE_PROVIDERS.map((p) => (
              <option value={p}>{p}</option>
            ))}
          </select>
        </label>
        <label>
          Token (a relay topic, an APNs hex token, an Expo token)
          <input name="push-device-token" value={pushToken} onInput={(e) => setPushToken(e.currentTarget.value)} autoComplete="off" />
        </label>
        <button type="submit" name="register-device" disabled={register.busy}>
          Register
        </button>
      </form>
      <RefusalNote refusal={register.refusal} />
    </section>
  )
}

const Topics = (props: { readonly token: string; readonly topics: ReadonlyArray<Topic>; readonly setTopics: (topics: ReadonlyArray<Topic>) => void; readonly onChosen: (id: string) => void }) => {
  const [provider, setProvider] = useState<TopicProvider>("relay_push")
  const [pushToken, setPushToken] = useState("")
  const register = useAction()
  const remove = useAction()
  return (
    <section>
      <h2>Topics</h2>
      <p class="hint">
        A topic is anonymous: its id is the SHA-256 of a secret, and the gateway keeps only that id and a sealed token, so it lists none. The
        topics registered here are listed below while this page is open; their secrets are never stored.
      </p>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void register.run(async () => {
            const secret = randomHex(32)
            const answer = await call(props.token, (c) => c.pushRegistrations.registerTopic({ payload: { topic_secret: secret, provider, token: pushToken.trim() } }))
            props.setTopics([{ id: answer.topic_id, secret, provider, token: pushToken.trim(), expires_at: answer.expires_at }, ...props.topics])
            props.onChosen(answer.topic_id)
          })
        }}
      >
        <label>
          Provider
          <select name="topic-provider" value={provider} onChange={(e) => setProvider(e.currentTarget.value as TopicProvider)}>
            {TOPIC_PROVIDERS.map((p) => (
              <option value={p}>{p}</option>
            ))}
          </select>
        </label>
        <label>
          Device token
          <input name="topic-token" value={pushToken} onInput={(e) => setPushToken(e.currentTarget.value)} autoComplete="off" />
        </label>
        <button type="submit" disabled={register.busy}>
          Register a topic (a new random secret)
        </button>
      </form>
      <RefusalNote refusal={register.refusal} />
      <RefusalNote refusal={remove.refusal} />
      <ul>
        {props.topics.map((t) => (
          <li data-topic={t.id}>
            <code>{t.id}</code> → {t.provider} <code>{t.token}</code>, expires {when(t.expires_at)}{" "}
            <button type="button" onClick={() => props.onChosen(t.id)}>
              Send to it
            </button>{" "}
            <ConfirmButton
              label="Remove"
              confirm="Remove the topic"
              disabled={remove.busy}
              onConfirm={() =>
                void remove.run(async () => {
                  await call(props.token, (c) => c.pushRegistrations.removeTopic({ payload: { topic_secret: t.secret } }))
                  props.setTopics(props.topics.filter((other) => other.id !== t.id))
                })
              }
            />
          </li>
        ))}
      </ul>
    </section>
  )
}

export const Push = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [topics, setTopics] = useState<ReadonlyArray<Topic>>([])
  const [chosen, setChosen] = useState<string | undefined>(undefined)
  return (
    <main>
      <PageTitle>Push</PageTitle>
      <PushCredentials token={token} />
      <Registrations token={token} />
      <Topics token={token} topics={topics} setTopics={setTopics} onChosen={setChosen} />
      <PushSend token={token} subject={props.credential.whoami.subject} topicId={chosen} />
    </main>
  )
}
