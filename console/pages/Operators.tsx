/**
 * The operator list, removing an operator (confirmed; the API refuses a PORTICO_OPERATORS wallet
 * and the last operator, said in words), and an invite (shown once) for another wallet to join it
 * (docs/operators.md).
 */
import { useEffect, useState } from "preact/hooks"
import { call } from "../api.js"
import type { Credential } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, ShownOnce, TableHead, useAction, when } from "../ui.js"

type Listed = Awaited<ReturnType<typeof listOperators>>
const listOperators = (token: string) => call(token, (c) => c.operator.listOperators())

export const Operators = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [listed, setListed] = useState<Listed | undefined>(undefined)
  const load = useAction()
  const reload = () => load.run(async () => setListed(await listOperators(token)))
  useEffect(() => void reload(), [token])
  const remove = useAction()
  const [removed, setRemoved] = useState<string | undefined>(undefined)
  const self = props.credential.whoami.subject.toLowerCase()
  const [invite, setInvite] = useState<{ readonly invite: string; readonly expiresAt: number } | undefined>(undefined)
  const make = useAction()
  return (
    <main>
      <PageTitle>Operators</PageTitle>
      <RefusalNote refusal={load.refusal} />
      <div class="table-wrap">
        <table>
          <TableHead columns={["wallet", "added", "by", "source"]} actions="remove" />
          <tbody>
            {(listed?.operators ?? []).map((o) => (
              <tr data-operator={o.wallet} aria-current={o.wallet === self ? "true" : undefined}>
                <td>
                  <code>{o.wallet}</code>
                </td>
                <td>{when(o.added_at)}</td>
                <td>
                  <code>{o.added_by}</code>
                </td>
                <td>{o.source === "config" ? "PORTICO_OPERATORS" : "registry"}</td>
                <td>
                  <ConfirmButton
                    label="Remove"
                    confirm={o.wallet === self ? "Remove yourself" : `Remove ${o.wallet.slice(0, 10)}…`}
                    disabled={remove.busy}
                    onConfirm={() =>
                      void remove.run(async () => {
                        setRemoved(undefined)
                        const answer = await call(token, (c) => c.operator.removeOperator({ path: { wallet: o.wallet } }))
                        setRemoved(answer.changed ? `${answer.wallet} is no longer an operator` : `${answer.wallet} was not on the list`)
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
      <RefusalNote refusal={remove.refusal} />
      {removed === undefined ? null : <p role="status">{removed}</p>}
      <section>
        <h2>Invite an operator</h2>
        <p>An invite lets one wallet join this list: it signs in to the platform and redeems it within the hour.</p>
        <button
          type="button"
          disabled={make.busy}
          onClick={() =>
            void make.run(async () => {
              const made = await call(token, (c) => c.operator.makeInvite({ payload: {} }))
              setInvite({ invite: made.invite, expiresAt: made.expires_at })
            })
          }
        >
          Make an invite
        </button>
        <RefusalNote refusal={make.refusal} />
        {invite === undefined ? null : <ShownOnce label={`An invite, until ${when(invite.expiresAt)}`} secret={invite.invite} />}
      </section>
    </main>
  )
}
