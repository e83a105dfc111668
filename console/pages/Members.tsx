/** Members: the namespace's wallets and roles a page at a time; adding one with a role, removing one. */
import { useState } from "preact/hooks"
import { TimeAndText } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import type { Credential } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, TableHead, useAction, usePaged, when } from "../ui.js"

const ROLES = ["admin", "developer", "runtime", "reader"] as const
type AddableRole = (typeof ROLES)[number]

export const Members = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [owner, setOwner] = useState<string | null>(null)
  const list = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.namespace.listMembers({ urlParams: { limit: 20, cursor: cursorOf(TimeAndText, cursor) } }))
    setOwner(page.owner)
    return { items: page.members, next: page.next_cursor }
  })
  const [wallet, setWallet] = useState("")
  const [role, setRole] = useState<AddableRole>("developer")
  const add = useAction()
  const remove = useAction()
  return (
    <main>
      <PageTitle>Members</PageTitle>
      <p>
        Owner: <code>{owner ?? "none"}</code>
      </p>
      <section>
        <h2>Add or change a member</h2>
        <form
          class="stack"
          onSubmit={(event) => {
            event.preventDefault()
            void add.run(async () => {
              await call(token, (c) => c.namespace.addMember({ payload: { wallet: wallet.trim(), role } }))
              setWallet("")
              list.reload()
            })
          }}
        >
          <label>
            Wallet
            <input name="wallet" value={wallet} onInput={(e) => setWallet(e.currentTarget.value)} placeholder="0x…" autoComplete="off" />
          </label>
          <label>
            Role
            <select name="role" value={role} onChange={(e) => setRole(ROLES.find((r) => r === e.currentTarget.value) ?? "developer")}>
              {ROLES.map((r) => (
                <option value={r}>{r}</option>
              ))}
            </select>
          </label>
          <button type="submit" disabled={add.busy}>
            Add member
          </button>
        </form>
        <RefusalNote refusal={add.refusal} />
      </section>
      <section>
        <h2>Members</h2>
        <RefusalNote refusal={list.refusal} />
        <RefusalNote refusal={remove.refusal} />
        <div class="table-wrap">
          <table>
            <TableHead columns={["Wallet", "Role", "Added", "By"]} actions />
            <tbody>
              {list.items.map((member) => (
                <tr data-wallet={member.wallet}>
                  <td>
                    <code>{member.wallet}</code>
                  </td>
                  <td>{member.role}</td>
                  <td>{when(member.added_at)}</td>
                  <td>{member.added_by}</td>
                  <td>
                    {member.role === "owner" ? null : (
                      <ConfirmButton
                        label="Remove"
                        confirm={`Remove ${member.wallet.slice(0, 10)}…`}
                        disabled={remove.busy}
                        onConfirm={() =>
                          void remove.run(async () => {
                            await call(token, (c) => c.namespace.removeMember({ path: { wallet: member.wallet } }))
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
