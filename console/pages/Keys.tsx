/** API keys: the namespace's keys a page at a time, minting one (a profile or scopes; its secret shown once), revoking. */
import { useState } from "preact/hooks"
import { TimeAndText } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import type { Credential } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, ShownOnce, TableHead, useAction, usePaged, when } from "../ui.js"

const PAGE = 20

export const Keys = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const list = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.namespace.listKeys({ urlParams: { limit: PAGE, cursor: cursorOf(TimeAndText, cursor) } }))
    return { items: page.keys, next: page.next_cursor }
  })
  const [mode, setMode] = useState<"profile" | "scopes">("profile")
  const [profile, setProfile] = useState<"runtime" | "admin">("runtime")
  const [scopes, setScopes] = useState("cache, invoke")
  const [label, setLabel] = useState("")
  const [days, setDays] = useState("")
  const [minted, setMinted] = useState<{ readonly id: string; readonly secret: string } | undefined>(undefined)
  const mint = useAction()
  const revoke = useAction()
  return (
    <main>
      <PageTitle>API keys</PageTitle>
      <section>
        <h2>Mint a key</h2>
        <form
          class="stack"
          onSubmit={(event) => {
            event.preventDefault()
            void mint.run(async () => {
              setMinted(undefined)
              const grants = scopes.split(/[\s,]+/).filter((s) => s !== "")
              const answer = await call(token, (c) =>
                c.namespace.mintKey({
                  payload: {
                    ...(mode === "profile" ? { profile } : { scopes: grants }),
                    ...(label.trim() === "" ? {} : { label: label.trim() }),
                    ...(days.trim() === "" ? {} : { expires_in_days: Number(days) })
                  }
                })
              )
              setMinted({ id: answer.id, secret: answer.api_key })
              list.reload()
            })
          }}
        >
          <fieldset>
            <legend>Grants</legend>
            <label class="inline">
              <input type="radio" name="mode" checked={mode === "profile"} onChange={() => setMode("profile")} /> a profile
            </label>
            <label class="inline">
              <input type="radio" name="mode" checked={mode === "scopes"} onChange={() => setMode("scopes")} /> scopes
            </label>
            {mode === "profile" ? (
              <label>
                Profile
                <select name="profile" value={profile} onChange={(e) => setProfile(e.currentTarget.value === "admin" ? "admin" : "runtime")}>
                  <option value="runtime">runtime (an app's data-plane grants)</option>
                  <option value="admin">admin (control plane)</option>
                </select>
              </label>
            ) : (
              <label>
                Scopes, separated by commas
                <input name="scopes" value={scopes} onInput={(e) => setScopes(e.currentTarget.value)} />
              </label>
            )}
          </fieldset>
          <label>
            Label
            <input name="label" value={label} onInput={(e) => setLabel(e.currentTarget.value)} />
          </label>
          <label>
            Expires after (days, empty: never)
            <input name="expires" inputMode="numeric" value={days} onInput={(e) => setDays(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={mint.busy}>
            Mint key
          </button>
        </form>
        <RefusalNote refusal={mint.refusal} />
        {minted === undefined ? null : <ShownOnce label={`Key ${minted.id}`} secret={minted.secret} />}
      </section>
      <section>
        <h2>Keys</h2>
        <RefusalNote refusal={list.refusal} />
        <RefusalNote refusal={revoke.refusal} />
        <div class="table-wrap">
          <table class="keys">
            <TableHead columns={["Id", "Label", "Role", "Scopes", "Created", "Expires", "State"]} />
            <tbody>
              {list.items.map((key) => (
                <tr data-key={key.id}>
                  <td>
                    <code>{key.id}</code>
                  </td>
                  <td>{key.label}</td>
                  <td>{key.role}</td>
                  <td>{key.scopes.join(", ")}</td>
                  <td>{when(key.created_at)}</td>
                  <td>{when(key.expires_at)}</td>
                  <td>
                    {key.revoked_at !== null ? (
                      <span class="state revoked">revoked {when(key.revoked_at)}</span>
                    ) : (
                      <ConfirmButton
                        label="Revoke"
                        confirm={`Revoke ${key.id}`}
                        disabled={revoke.busy}
                        onConfirm={() =>
                          void revoke.run(async () => {
                            await call(token, (c) => c.namespace.revokeKey({ path: { id: key.id } }))
                            list.reload()
                          })
                        }
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {list.pager}
      </section>
    </main>
  )
}
