/**
 * A namespace's push credentials (docs/push.md, spec §2.6, §4.6): which providers are configured
 * and supported, each one's redacted view (identifying fields, `has_<field>` for the secrets:
 * nothing secret ever comes back), setting one (the form's secrets are cleared once stored) and
 * deleting one (confirmed). `secrets:write`: owner, admin and developer.
 */
import { useState } from "preact/hooks"
import { call } from "../api.js"
import { ConfirmButton, RefusalNote, TableHead, useAction, usePaged, when } from "../ui.js"

const PROVIDERS = ["ios_push", "ios_voip_push", "relay_push", "legacy_push"] as const
type Provider = (typeof PROVIDERS)[number]

/** Each provider's fields, as the credential body names them; `secret` ones are never shown back. */
const FIELDS: Record<Provider, ReadonlyArray<{ readonly name: string; readonly label: string; readonly secret?: boolean; readonly multiline?: boolean; readonly choices?: ReadonlyArray<string> }>> = {
  ios_push: [
    { name: "team_id", label: "Team id" },
    { name: "key_id", label: "Key id (10 letters and digits)" },
    { name: "bundle_id", label: "Bundle id" },
    { name: "p8_key", label: "Private key (.p8 text)", secret: true, multiline: true },
    { name: "environment", label: "Environment", choices: ["production", "sandbox"] }
  ],
  ios_voip_push: [
    { name: "team_id", label: "Team id" },
    { name: "key_id", label: "Key id (10 letters and digits)" },
    { name: "bundle_id", label: "Bundle id" },
    { name: "p8_key", label: "Private key (.p8 text)", secret: true, multiline: true },
    { name: "environment", label: "Environment", choices: ["production", "sandbox"] }
  ],
  relay_push: [
    { name: "base_url", label: "Relay URL (https; empty: the platform relay)" },
    { name: "auth_token", label: "Relay token", secret: true },
    { name: "topic_mode", label: "Topic mode", choices: ["", "opaque", "path", "user"] },
    { name: "topic_secret", label: "Topic secret (opaque mode)", secret: true }
  ],
  legacy_push: [{ name: "access_token", label: "Access token", secret: true }]
}

const isProvider = (s: string): s is Provider => (PROVIDERS as ReadonlyArray<string>).includes(s)

const Stored = (props: { readonly token: string; readonly provider: string; readonly onRemoved: () => void }) => {
  const view = usePaged(async () => {
    const answer = await call(props.token, (c) => c.push.credential({ path: { provider: props.provider as Provider } }))
    return { items: [answer], next: null }
  })
  const remove = useAction()
  const shown = view.items[0]
  return (
    <tr data-credential={props.provider}>
      <th scope="row">
        <code>{props.provider}</code>
      </th>
      <td data-fact="fields">
        {shown === undefined
          ? "…"
          : Object.entries(shown.fields)
              .map(([field, has]) => `${field}: ${has ? "yes" : "no"}`)
              .join(", ")}
      </td>
      <td>{shown === undefined ? "" : `${when(shown.updated_at)} by ${shown.updated_by ?? "—"}`}</td>
      <td>
        <ConfirmButton
          label="Delete"
          confirm={`Delete ${props.provider}`}
          disabled={remove.busy}
          onConfirm={() =>
            void remove.run(async () => {
              await call(props.token, (c) => c.push.removeCredential({ path: { provider: props.provider as Provider } }))
              props.onRemoved()
            })
          }
        />
        <RefusalNote refusal={view.refusal ?? remove.refusal} />
      </td>
    </tr>
  )
}

export const PushCredentials = (props: { readonly token: string }) => {
  const token = props.token
  const summary = usePaged(async () => {
    const answer = await call(token, (c) => c.push.credentials())
    return { items: [answer], next: null }
  })
  const [provider, setProvider] = useState<Provider>("ios_push")
  const [values, setValues] = useState<Record<string, string>>({ environment: "production" })
  const [stored, setStored] = useState<string | undefined>(undefined)
  const put = useAction()
  const current = summary.items[0]
  return (
    <section>
      <h2>Provider credentials</h2>
      <RefusalNote refusal={summary.refusal} />
      {current === undefined ? null : (
        <>
          <p>
            Supported: <span data-fact="supported">{current.supported.join(", ")}</span>. Configured:{" "}
            <span data-fact="configured">{current.configured.length === 0 ? "none" : current.configured.join(", ")}</span>.
          </p>
          <div class="table-wrap">
            <table>
              <TableHead columns={["Provider", "Fields held (secrets never shown)", "Updated"]} actions />
              <tbody>
                {current.configured.map((p) => (
                  <Stored key={p} token={token} provider={p} onRemoved={summary.reload} />
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      <h3>Set a credential</h3>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void put.run(async () => {
            setStored(undefined)
            const payload = Object.fromEntries(
              FIELDS[provider].map((f) => [f.name, (values[f.name] ?? "").trim()] as const).filter(([, v]) => v !== "")
            )
            const answer = await call(token, (c) => c.push.putCredential({ path: { provider }, payload }))
            // the secrets leave the form once the gateway holds them
            setValues((before) => Object.fromEntries(Object.entries(before).filter(([name]) => !FIELDS[provider].some((f) => f.name === name && f.secret === true))))
            setStored(
              `${answer.provider} stored; the gateway answers: ${Object.entries(answer.redacted)
                .map(([k, v]) => `${k}: ${String(v)}`)
                .join(", ")}`
            )
            summary.reload()
          })
        }}
      >
        <label>
          Provider
          <select name="provider" value={provider} onChange={(e) => isProvider(e.currentTarget.value) && setProvider(e.currentTarget.value)}>
            {PROVIDERS.map((p) => (
              <option value={p}>{p}</option>
            ))}
          </select>
        </label>
        {FIELDS[provider].map((f) => (
          <label>
            {f.label}
            {f.choices !== undefined ? (
              <select name={f.name} value={values[f.name] ?? ""} onChange={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}>
                {f.choices.map((choice) => (
                  <option value={choice}>{choice === "" ? "(none)" : choice}</option>
                ))}
              </select>
            ) : f.multiline === true ? (
              <textarea name={f.name} rows={4} value={values[f.name] ?? ""} onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })} />
            ) : f.secret === true ? (
              <input name={f.name} type="password" value={values[f.name] ?? ""} onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })} autoComplete="off" />
            ) : (
              <input name={f.name} value={values[f.name] ?? ""} onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })} autoComplete="off" />
            )}
          </label>
        ))}
        <button type="submit" disabled={put.busy}>
          Store credential
        </button>
      </form>
      <RefusalNote refusal={put.refusal} />
      {stored === undefined ? null : (
        <p role="status" data-fact="stored">
          {stored}
        </p>
      )}
    </section>
  )
}
