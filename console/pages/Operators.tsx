/** The operator list, and an invite (shown once) for another wallet to join it (docs/operators.md). */
import { useEffect, useState } from "preact/hooks"
import { call } from "../api.js"
import type { Credential } from "../session.js"
import { DataTable, PageTitle, RefusalNote, ShownOnce, useAction, when } from "../ui.js"

type Listed = Awaited<ReturnType<typeof listOperators>>
const listOperators = (token: string) => call(token, (c) => c.operator.listOperators())

export const Operators = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [listed, setListed] = useState<Listed | undefined>(undefined)
  const load = useAction()
  useEffect(() => void load.run(async () => setListed(await listOperators(token))), [token])
  const [invite, setInvite] = useState<{ readonly invite: string; readonly expiresAt: number } | undefined>(undefined)
  const make = useAction()
  return (
    <main>
      <PageTitle>Operators</PageTitle>
      <RefusalNote refusal={load.refusal} />
      <DataTable
        columns={["wallet", "added", "by", "source"]}
        rows={(listed?.operators ?? []).map((o) => [o.wallet, when(o.added_at), o.added_by, o.source === "config" ? "PORTICO_OPERATORS" : "registry"])}
      />
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
