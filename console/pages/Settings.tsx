/**
 * The operator's settings (spec §4.9, docs/operators.md "Settings"): every setting with its value,
 * each changed through its own route (`PUT /v1/operator/settings/<name>`), whose request schema is
 * the setting's rule (src/domain/OperatorSettings.ts), so a value outside it is refused in words:
 * by the console with that rule before sending, in the gateway's own words, or by the gateway;
 * and the creators allowlist (Creators.tsx), read when `namespace-creation` is `allowlist`.
 */
import type { Effect } from "effect"
import { useEffect, useState } from "preact/hooks"
import { type SettingName, settingRefusal } from "../../src/domain/OperatorSettings.js"
import type { Client } from "../../src/client.js"
import { call, RefusedError } from "../api.js"
import type { Credential } from "../session.js"
import { PageTitle, RefusalNote, useAction } from "../ui.js"
import { Creators } from "./Creators.js"

interface SettingFacts {
  readonly name: SettingName
  /** The rule, in words (as the gateway says it when refusing). */
  readonly rule: string
  /** A closed set of values: a choice rather than text. */
  readonly choices?: ReadonlyArray<string>
  readonly put: (client: Client, value: string) => Effect.Effect<{ readonly name: string; readonly value: string }, unknown>
}

// the client's method for each setting takes that setting's own type: the page's text is checked by
// the method's schema before it is sent (the choices cannot be other than their literals)
const SETTINGS: ReadonlyArray<SettingFacts> = [
  {
    name: "namespace-creation",
    rule: "who may create namespaces: operators, allowlist (operators and the creators below) or open",
    choices: ["operators", "allowlist", "open"],
    put: (c, value) => c.operator.putNamespaceCreation({ payload: { value: value as "operators" } })
  },
  {
    name: "max-namespaces-per-wallet",
    rule: "namespaces one wallet may own: an integer from 1 to 10000",
    put: (c, value) => c.operator.putMaxNamespacesPerWallet({ payload: { value } })
  },
  {
    name: "auto-update",
    rule: "off, notify or auto (stored for the updater; this gateway does not update itself)",
    choices: ["off", "notify", "auto"],
    put: (c, value) => c.operator.putAutoUpdate({ payload: { value: value as "off" } })
  },
  { name: "update-channel", rule: "1-32 characters of a-z, 0-9 and -", put: (c, value) => c.operator.putUpdateChannel({ payload: { value } }) },
  {
    name: "update-window",
    rule: "HH-HH, two different UTC hours 00-23 (22-04 wraps midnight), or empty for none",
    put: (c, value) => c.operator.putUpdateWindow({ payload: { value } })
  },
  {
    name: "release-repo",
    rule: "an https URL without credentials, at most 2048 characters, or empty",
    put: (c, value) => c.operator.putReleaseRepo({ payload: { value } })
  }
]

const SettingRow = (props: { readonly token: string; readonly facts: SettingFacts; readonly value: string | undefined; readonly onStored: (value: string) => void }) => {
  const { facts } = props
  const [draft, setDraft] = useState(props.value ?? "")
  const [stored, setStored] = useState(false)
  const save = useAction()
  useEffect(() => setDraft(props.value ?? ""), [props.value])
  const field = `setting-${facts.name}`
  return (
    <li data-setting={facts.name}>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          setStored(false)
          void save.run(async () => {
            // the route's own rule, said as the gateway says it, before anything is sent
            const why = settingRefusal(facts.name, draft)
            if (why !== undefined) throw new RefusedError({ error: why, code: "VALIDATION_FAILED", hint: "checked by the console with the setting's rule before sending; nothing was stored" })
            const answer = await call(props.token, (c) => facts.put(c, draft))
            props.onStored(answer.value)
            setStored(true)
          })
        }}
      >
        <h3>
          <label for={field}>
            <code>{facts.name}</code>
          </label>
        </h3>
        <p class="hint">{facts.rule}</p>
        <p>
          Now: <code data-fact="value">{props.value === undefined ? "…" : props.value === "" ? "(empty)" : props.value}</code>
        </p>
        <div class="row">
          {facts.choices === undefined ? (
            <input id={field} name={facts.name} value={draft} onInput={(e) => setDraft(e.currentTarget.value)} autoComplete="off" />
          ) : (
            <select id={field} name={facts.name} value={draft} onChange={(e) => setDraft(e.currentTarget.value)}>
              {facts.choices.map((choice) => (
                <option value={choice}>{choice}</option>
              ))}
            </select>
          )}
          <button type="submit" disabled={save.busy || draft === props.value}>
            Save
          </button>
        </div>
        <RefusalNote refusal={save.refusal} />
        {stored && save.refusal === undefined ? <p role="status">Stored.</p> : null}
      </form>
    </li>
  )
}

export const Settings = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [values, setValues] = useState<Readonly<Record<string, string>> | undefined>(undefined)
  const load = useAction()
  useEffect(() => void load.run(async () => setValues((await call(token, (c) => c.operator.getSettings())).settings)), [token])
  return (
    <main>
      <PageTitle>Settings</PageTitle>
      <p>The platform's settings, shared by every node (the registry holds them); a change is audited in the operator audit trail.</p>
      <RefusalNote refusal={load.refusal} />
      <ul class="settings">
        {SETTINGS.map((facts) => (
          <SettingRow
            token={token}
            facts={facts}
            value={values?.[facts.name]}
            onStored={(value) => setValues((known) => ({ ...known, [facts.name]: value }))}
          />
        ))}
      </ul>
      <Creators token={token} creation={values?.["namespace-creation"]} />
    </main>
  )
}
