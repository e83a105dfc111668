/**
 * Devices (docs/auth.md "Devices"): the signed-in account's devices, revoked ones included, a page
 * at a time, and revoking one (confirmed; from a device-bound session with this browser's proof,
 * action `revoke`); this browser's own device is marked, and revoking it ends this session. For an
 * owner or admin, any account's devices by its wallet, and revoking one of them.
 */
import { useState } from "preact/hooks"
import { TimeAndText } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import { forgetDevice } from "../device.js"
import { type Credential, deviceProof, endedElsewhere } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, TableHead, useAction, usePaged, when } from "../ui.js"

interface DeviceRow {
  readonly id: string
  readonly label: string
  readonly status: "active" | "pending" | "revoked"
  readonly created_at: number
  readonly revoked_at: number | null
}

const PAGE = 20

const DeviceTable = (props: {
  readonly devices: ReadonlyArray<DeviceRow>
  readonly current?: string | undefined
  readonly busy: boolean
  readonly onRevoke: (device: DeviceRow) => void
}) => (
  <div class="table-wrap">
    <table>
      <TableHead columns={["Device", "Label", "Status", "Enrolled", "Revoked"]} actions />
      <tbody>
        {props.devices.map((d) => (
          <tr data-device={d.id} data-status={d.status}>
            <td>
              <code>{d.id}</code>
              {d.id === props.current ? " (this browser)" : ""}
            </td>
            <td>{d.label}</td>
            <td data-fact="device-status">{d.status}</td>
            <td>{when(d.created_at)}</td>
            <td>{when(d.revoked_at)}</td>
            <td>
              {d.status === "revoked" ? null : (
                <ConfirmButton
                  label="Revoke"
                  confirm={d.id === props.current ? "Revoke this browser (signs out)" : `Revoke ${d.id.slice(0, 10)}…`}
                  disabled={props.busy}
                  onConfirm={() => props.onRevoke(d)}
                />
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
)

/** Another account's devices, as an owner or admin sees them (members write). */
const SubjectDevices = (props: { readonly token: string; readonly subject: string }) => {
  const list = usePaged(async (cursor) => {
    const page = await call(props.token, (c) => c.devices.listFor({ urlParams: { subject: props.subject, limit: PAGE, cursor: cursorOf(TimeAndText, cursor) } }))
    return { items: page.devices, next: page.next_cursor }
  })
  const revoke = useAction()
  return (
    <div data-subject={props.subject}>
      <RefusalNote refusal={list.refusal} />
      <RefusalNote refusal={revoke.refusal} />
      {list.loading || list.refusal !== undefined || list.items.length > 0 ? null : <p>This account has no devices.</p>}
      <DeviceTable
        devices={list.items}
        busy={revoke.busy}
        onRevoke={(d) =>
          void revoke.run(async () => {
            await call(props.token, (c) => c.devices.revokeAny({ path: { id: d.id } }))
            list.reload()
          })
        }
      />
      {list.pager}
    </div>
  )
}

export const Devices = (props: { readonly credential: Credential }) => {
  const credential = props.credential
  const token = credential.token
  const current = credential.kind === "wallet" ? credential.deviceId : undefined
  const list = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.devices.list({ urlParams: { limit: PAGE, cursor: cursorOf(TimeAndText, cursor) } }))
    return { items: page.devices, next: page.next_cursor }
  })
  const revoke = useAction()
  const [subject, setSubject] = useState("")
  const [shown, setShown] = useState<string | undefined>(undefined)
  const manages = credential.whoami.role === "owner" || credential.whoami.role === "admin"
  return (
    <main>
      <PageTitle>Devices</PageTitle>
      {credential.kind === "wallet" ? (
        <p>
          This session is{" "}
          <span data-fact="session-device">{current === undefined ? "bound to no device" : `bound to this browser's device ${current}`}</span>.
        </p>
      ) : (
        <p class="hint">Devices are a signed-in wallet's; an API key has none (the gateway says so below).</p>
      )}
      <section>
        <h2>Your devices</h2>
        <RefusalNote refusal={list.refusal} />
        <RefusalNote refusal={revoke.refusal} />
        <button type="button" onClick={list.reload}>
          Reload
        </button>
        {list.loading || list.refusal !== undefined || list.items.length > 0 ? null : (
          <p>No device yet: sign in with "Bind this browser as a device" to enrol this browser.</p>
        )}
        <DeviceTable
          devices={list.items}
          current={current}
          busy={revoke.busy}
          onRevoke={(d) =>
            void revoke.run(async () => {
              const proof = await deviceProof("revoke", d.id)
              await call(token, (c) => c.devices.revoke({ path: { id: d.id }, payload: proof === undefined ? {} : { device_proof: proof } }))
              if (d.id === current) {
                // this browser's key never signs in again: forget it, and the session it ended
                await forgetDevice(credential.whoami.namespace, credential.whoami.subject)
                endedElsewhere({ error: "this browser's device was revoked, which ended its session", code: "DEVICE_REVOKED", hint: "sign in again; binding a device enrols a new key" })
                return
              }
              list.reload()
            })
          }
        />
        {list.pager}
      </section>
      {manages ? (
        <section>
          <h2>An account's devices</h2>
          <form
            class="row"
            onSubmit={(event) => {
              event.preventDefault()
              setShown(subject.trim())
            }}
          >
            <label>
              Wallet
              <input name="subject" value={subject} onInput={(e) => setSubject(e.currentTarget.value)} placeholder="0x…" autoComplete="off" />
            </label>
            <button type="submit">Show devices</button>
          </form>
          {shown === undefined || shown === "" ? null : <SubjectDevices key={shown} token={token} subject={shown} />}
        </section>
      ) : null}
    </main>
  )
}
