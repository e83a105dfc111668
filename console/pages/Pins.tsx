/**
 * Pins of content storage: a CID's pin status, pinning one the namespace holds under a name, and
 * unpinning it, either plainly (the blocks are reclaimed by the periodic sweep) or as a privacy
 * delete (`immediate=true`: evicted on every node now when no other reference is left), with the
 * answer's `evicted` said in words (spec §4.4).
 */
import { useEffect, useState } from "preact/hooks"
import { call } from "../api.js"
import { ConfirmButton, RefusalNote, useAction } from "../ui.js"

const EVICTED: Record<string, string> = {
  true: "the blocks are gone from every node",
  partial: "the pin is gone everywhere; some node did not confirm, and its blocks go at its next sweep",
  shared: "another namespace still holds the same content: nothing was removed",
  skipped: "the pin is gone; the blocks are reclaimed by the next sweep"
}

export const Pins = (props: { readonly token: string; readonly cid: string | undefined }) => {
  const [cid, setCid] = useState(props.cid ?? "")
  useEffect(() => setCid(props.cid ?? ""), [props.cid])
  const [name, setName] = useState("")
  const [immediate, setImmediate] = useState(false)
  const [said, setSaid] = useState<string | undefined>(undefined)
  const act = useAction()
  const run = (what: () => Promise<string>) =>
    act.run(async () => {
      setSaid(undefined)
      setSaid(await what())
    })
  const target = cid.trim()
  return (
    <section>
      <h2>Pins</h2>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void run(async () => {
            const pin = await call(props.token, (c) => c.storage.pin({ payload: { cid: target, ...(name.trim() === "" ? {} : { name: name.trim() }) } }))
            return `${pin.Cid} is ${pin.Status}${pin.Name === "" ? "" : ` as ${pin.Name}`}`
          })
        }}
      >
        <label>
          CID
          <input name="pin-cid" value={cid} onInput={(e) => setCid(e.currentTarget.value)} autoComplete="off" />
        </label>
        <label>
          Name (optional)
          <input name="pin-name" value={name} onInput={(e) => setName(e.currentTarget.value)} autoComplete="off" />
        </label>
        <div class="row">
          <button type="submit" disabled={act.busy}>
            Pin
          </button>
          <button
            type="button"
            disabled={act.busy}
            onClick={() =>
              void run(async () => {
                const pin = await call(props.token, (c) => c.storage.status({ path: { cid: target } }))
                return `${pin.Cid} is ${pin.Status} (${pin.ReplicationFactor} of ${pin.ReplicationMin}-${pin.ReplicationMax} peers)`
              })
            }
          >
            Status
          </button>
          <ConfirmButton
            label="Unpin"
            confirm={immediate ? "Unpin and evict now" : "Unpin"}
            disabled={act.busy}
            onConfirm={() =>
              void run(async () => {
                const answer = await call(props.token, (c) => c.storage.unpin({ path: { cid: target }, urlParams: immediate ? { immediate: "true" } : {} }))
                return `unpinned ${answer.Cid}: ${EVICTED[answer.evicted] ?? answer.evicted} (evicted: ${answer.evicted})`
              })
            }
          />
        </div>
        <label class="inline">
          <input type="checkbox" name="immediate" checked={immediate} onChange={(e) => setImmediate(e.currentTarget.checked)} /> a privacy delete: evict the blocks now
        </label>
      </form>
      <RefusalNote refusal={act.refusal} />
      {said === undefined ? null : (
        <p role="status" data-fact="pin-said">
          {said}
        </p>
      )}
    </section>
  )
}
