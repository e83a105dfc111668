/**
 * Fetch capabilities (docs/storage.md "Fetch capabilities"): mint some for a CID (a device-bound
 * session only: anything else is refused with FETCH_CAP_DEVICE_REQUIRED, said in words), each
 * with its fetch URL and header, fetched once from the page to show it works, and revoked with its
 * revoke key. The gateway lists no capabilities (ids are not enumerable, and it keeps only hashes
 * of the token and revoke key), so the page lists those minted in this tab, kept in its
 * sessionStorage beside the credential; one minted elsewhere is revoked with its id and revoke key.
 */
import { useEffect, useState } from "preact/hooks"
import { call } from "../api.js"
import type { Credential } from "../session.js"
import { ConfirmButton, RefusalNote, useAction, when } from "../ui.js"

interface Cap {
  readonly cid: string
  readonly id: string
  readonly token: string
  readonly revoke_key: string
  readonly expires_at: number
  readonly revoked?: boolean
}

const storageKey = (namespace: string) => `portico.console.fetch-caps.${namespace}`
const keptCaps = (namespace: string): ReadonlyArray<Cap> => {
  try {
    return JSON.parse(sessionStorage.getItem(storageKey(namespace)) ?? "[]") as ReadonlyArray<Cap>
  } catch {
    return []
  }
}

const fetchUrl = (cid: string) => `${location.origin}/v1/storage/relayed/${cid}`

const CapRow = (props: { readonly cap: Cap; readonly busy: boolean; readonly onRevoke: () => void }) => {
  const cap = props.cap
  const tried = useAction()
  const [fetched, setFetched] = useState<string | undefined>(undefined)
  return (
    <li data-cap={cap.id} data-revoked={cap.revoked === true ? "true" : "false"}>
      <p>
        <code>{cap.id}</code> for <code>{cap.cid}</code>, expires {when(cap.expires_at)}
        {cap.revoked === true ? <span class="state revoked"> revoked</span> : null}
      </p>
      <p class="hint">Fetch it with no other credential:</p>
      <pre class="fetch-url">
        <code data-fact="fetch-url">{`GET ${fetchUrl(cap.cid)}\nX-Portico-Fetch-Cap: ${cap.token}`}</code>
      </pre>
      <div class="row">
        <button
          type="button"
          disabled={tried.busy}
          onClick={() =>
            void tried.run(async () => {
              setFetched(undefined)
              // no credential beside the capability (FETCH_CAP_NOT_ALONE otherwise), and never the
              // browser's cached copy (the bytes are cacheable: a revoked capability must be seen failing)
              const bytes = await call(
                undefined,
                (c) => c.storage.relayed({ path: { cid: cap.cid }, headers: { "x-portico-fetch-cap": cap.token } }),
                { cache: "no-store" }
              )
              setFetched(`fetched ${bytes.byteLength} bytes`)
            })
          }
        >
          Fetch with it
        </button>
        {cap.revoked === true ? null : <ConfirmButton label="Revoke" confirm={`Revoke ${cap.id.slice(0, 8)}…`} disabled={props.busy} onConfirm={props.onRevoke} />}
      </div>
      {fetched === undefined ? null : (
        <p role="status" data-fact="fetched">
          {fetched}
        </p>
      )}
      <RefusalNote refusal={tried.refusal} />
    </li>
  )
}

export const FetchCaps = (props: { readonly credential: Credential; readonly cid: string | undefined }) => {
  const credential = props.credential
  const namespace = credential.whoami.namespace
  const [cid, setCid] = useState(props.cid ?? "")
  const [count, setCount] = useState("1")
  const [hours, setHours] = useState("24")
  const [caps, setCaps] = useState<ReadonlyArray<Cap>>(() => keptCaps(namespace))
  const [otherId, setOtherId] = useState("")
  const [otherKey, setOtherKey] = useState("")
  const [otherDone, setOtherDone] = useState<string | undefined>(undefined)
  const mint = useAction()
  const revoke = useAction()
  const other = useAction()
  const keep = (next: ReadonlyArray<Cap>) => {
    sessionStorage.setItem(storageKey(namespace), JSON.stringify(next))
    setCaps(next)
  }
  const revokeCap = (id: string, revokeKey: string) =>
    call(undefined, (c) => c.storage.revokeFetchCap({ path: { id }, headers: { "x-portico-revoke-key": revokeKey } }))
  // a file uploaded on the page is the CID to mint for
  useEffect(() => void (props.cid !== undefined && setCid(props.cid)), [props.cid])
  const bound = credential.kind === "wallet" && credential.deviceId !== undefined
  return (
    <section>
      <h2>Fetch capabilities</h2>
      <p class="hint">
        A capability lets anyone holding it read one CID of this namespace, with no other credential, until it expires or is revoked.
        {bound ? "" : " Minting one needs a device-bound session: sign in with \u201cBind this browser as a device\u201d."}
      </p>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void mint.run(async () => {
            const answer = await call(credential.token, (c) =>
              c.storage.mintFetchCaps({ payload: { cid: cid.trim(), count: Number(count), ttl_seconds: Math.round(Number(hours) * 3600) } })
            )
            keep([...answer.caps.map((cap) => ({ cid: answer.cid, ...cap })), ...caps])
          })
        }}
      >
        <label>
          CID
          <input name="cap-cid" value={cid} onInput={(e) => setCid(e.currentTarget.value)} autoComplete="off" />
        </label>
        <label>
          How many (1-64)
          <input name="cap-count" inputMode="numeric" value={count} onInput={(e) => setCount(e.currentTarget.value)} />
        </label>
        <label>
          Lifetime in hours (1-168)
          <input name="cap-hours" inputMode="numeric" value={hours} onInput={(e) => setHours(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={mint.busy}>
          Mint capabilities
        </button>
      </form>
      <RefusalNote refusal={mint.refusal} />
      <h3>Minted in this tab</h3>
      <RefusalNote refusal={revoke.refusal} />
      {caps.length === 0 ? <p>None yet.</p> : null}
      <ul class="caps">
        {caps.map((cap) => (
          <CapRow
            cap={cap}
            busy={revoke.busy}
            onRevoke={() =>
              void revoke.run(async () => {
                await revokeCap(cap.id, cap.revoke_key)
                keep(caps.map((c) => (c.id === cap.id ? { ...c, revoked: true } : c)))
              })
            }
          />
        ))}
      </ul>
      <h3>Revoke one minted elsewhere</h3>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void other.run(async () => {
            setOtherDone(undefined)
            const answer = await revokeCap(otherId.trim(), otherKey.trim())
            setOtherDone(`revoked ${answer.revoked}`)
          })
        }}
      >
        <label>
          Capability id
          <input name="revoke-id" value={otherId} onInput={(e) => setOtherId(e.currentTarget.value)} autoComplete="off" />
        </label>
        <label>
          Revoke key
          <input name="revoke-key" type="password" value={otherKey} onInput={(e) => setOtherKey(e.currentTarget.value)} autoComplete="off" />
        </label>
        <button type="submit" disabled={other.busy}>
          Revoke
        </button>
      </form>
      <RefusalNote refusal={other.refusal} />
      {otherDone === undefined ? null : (
        <p role="status" data-fact="revoked-other">
          {otherDone}
        </p>
      )}
    </section>
  )
}
