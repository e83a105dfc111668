/**
 * The creators allowlist (docs/operators.md "Creators allowlist"): the wallets that may create
 * namespaces when `namespace-creation` is `allowlist`; add one, remove one (confirmed). The API
 * answers the list whole (it is not paged) and `changed: false` when there was nothing to change,
 * which the page says.
 */
import { useEffect, useState } from "preact/hooks"
import { call } from "../api.js"
import { ConfirmButton, RefusalNote, TableHead, useAction, when } from "../ui.js"

type Listed = Awaited<ReturnType<typeof listCreators>>
const listCreators = (token: string) => call(token, (c) => c.operator.listCreators())

export const Creators = (props: { readonly token: string; readonly creation: string | undefined }) => {
  const { token } = props
  const [listed, setListed] = useState<Listed | undefined>(undefined)
  const [wallet, setWallet] = useState("")
  const [said, setSaid] = useState<string | undefined>(undefined)
  const load = useAction()
  const change = useAction()
  const reload = () => load.run(async () => setListed(await listCreators(token)))
  useEffect(() => void reload(), [token])
  return (
    <section aria-labelledby="creators-heading">
      <h2 id="creators-heading">Creators allowlist</h2>
      <p class="hint">
        Wallets that may create namespaces besides operators, read when <code>namespace-creation</code> is <code>allowlist</code>
        {props.creation === undefined ? "" : props.creation === "allowlist" ? " (it is now)" : ` (it is ${props.creation} now, so the list is not read)`}.
      </p>
      <RefusalNote refusal={load.refusal} />
      <div class="table-wrap">
        <table>
          <TableHead columns={["wallet", "added", "by"]} actions="remove" />
          <tbody>
            {(listed?.creators ?? []).map((c) => (
              <tr data-creator={c.wallet}>
                <td>
                  <code>{c.wallet}</code>
                </td>
                <td>{when(c.added_at)}</td>
                <td>
                  <code>{c.added_by}</code>
                </td>
                <td>
                  <ConfirmButton
                    label="Remove"
                    confirm={`Remove ${c.wallet.slice(0, 10)}…`}
                    disabled={change.busy}
                    onConfirm={() =>
                      void change.run(async () => {
                        setSaid(undefined)
                        const answer = await call(token, (client) => client.operator.removeCreator({ path: { wallet: c.wallet } }))
                        setSaid(answer.changed ? `${answer.wallet} removed` : `${answer.wallet} was not on the list`)
                        await reload()
                      })
                    }
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {listed !== undefined && listed.creators.length === 0 ? <p>No wallet is on the list.</p> : null}
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault()
          void change.run(async () => {
            setSaid(undefined)
            // the client checks the address with the route's schema (form and EIP-55 checksum) before sending
            const answer = await call(token, (c) => c.operator.addCreator({ payload: { wallet: wallet.trim() } }))
            setSaid(answer.changed ? `${answer.wallet} added` : `${answer.wallet} was on the list already`)
            setWallet("")
            await reload()
          })
        }}
      >
        <label>
          Wallet
          <input name="creator" value={wallet} onInput={(e) => setWallet(e.currentTarget.value)} autoComplete="off" placeholder="0x…" />
        </label>
        <button type="submit" disabled={change.busy}>
          Add to the list
        </button>
      </form>
      <RefusalNote refusal={change.refusal} />
      {said === undefined ? null : <p role="status">{said}</p>}
    </section>
  )
}
