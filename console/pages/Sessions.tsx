/** The signed-in wallet's sessions, a page at a time, and ending one (the current one is signing out). */
import { TimeAndText } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import { type Credential, deviceProof } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, TableHead, useAction, usePaged, when } from "../ui.js"

export const Sessions = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const list = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.auth.sessions({ urlParams: { limit: 20, cursor: cursorOf(TimeAndText, cursor) } }))
    return { items: page.sessions, next: page.next_cursor }
  })
  const end = useAction()
  return (
    <main>
      <PageTitle>Sessions</PageTitle>
      {props.credential.kind === "wallet" ? null : <p class="hint">Sessions are a signed-in wallet's; an API key has none (the gateway says so below).</p>}
      <RefusalNote refusal={list.refusal} />
      <RefusalNote refusal={end.refusal} />
      <div class="table-wrap">
        <table>
          <TableHead columns={["Session", "Device", "Started", "Last refreshed"]} actions />
          <tbody>
            {list.items.map((s) => (
              <tr data-session={s.id}>
                <td>
                  <code>{s.id}</code>
                  {s.current ? " (this one)" : ""}
                </td>
                <td>{s.device_id ?? "none"}</td>
                <td>{when(s.created_at)}</td>
                <td>{when(s.refreshed_at)}</td>
                <td>
                  {s.current ? (
                    <span class="hint">sign out to end it</span>
                  ) : (
                    <ConfirmButton
                      label="End"
                      confirm={`End ${s.id.slice(0, 12)}…`}
                      disabled={end.busy}
                      onConfirm={() =>
                        void end.run(async () => {
                          // from a device-bound session, with this browser's proof (action end-session)
                          const proof = await deviceProof("end-session", s.id)
                          await call(token, (c) => c.auth.endSession({ path: { id: s.id }, payload: proof === undefined ? {} : { device_proof: proof } }))
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
    </main>
  )
}
