/**
 * Content storage: upload a file with its progress shown (upload.ts), then its CID, size and pin
 * status; pins (Pins.tsx); fetch capabilities (FetchCaps.tsx).
 */
import { useState } from "preact/hooks"
import { Uploaded } from "../../src/api/groups/StorageGroup.js"
import { call } from "../api.js"
import { uploadForm } from "../upload.js"
import type { Credential } from "../session.js"
import { PageTitle, RefusalNote, SentProgress, useAction } from "../ui.js"
import { FetchCaps } from "./FetchCaps.js"
import { Pins } from "./Pins.js"

type UploadedFile = typeof Uploaded.Type

export const Storage = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [file, setFile] = useState<File | undefined>(undefined)
  const [fraction, setFraction] = useState<number | undefined>(undefined)
  const [uploaded, setUploaded] = useState<UploadedFile | undefined>(undefined)
  const [status, setStatus] = useState<string | undefined>(undefined)
  const send = useAction()
  const check = useAction()
  return (
    <main>
      <PageTitle>Content storage</PageTitle>
      {props.credential.kind === "wallet" ? null : (
        <p class="hint">Content storage takes a signed-in wallet's session; an API key is refused (the gateway says so below).</p>
      )}
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          if (file === undefined) return
          void send.run(async () => {
            setUploaded(undefined)
            setStatus(undefined)
            setFraction(0)
            const form = new FormData()
            form.append("file", file, file.name)
            const answer = await uploadForm("/v1/storage/upload", token, form, Uploaded, setFraction)
            setFraction(1)
            setUploaded(answer)
          })
        }}
      >
        <label>
          File
          <input name="file" type="file" onChange={(e) => setFile(e.currentTarget.files?.[0])} />
        </label>
        <button type="submit" disabled={send.busy || file === undefined}>
          Upload
        </button>
        <SentProgress fraction={fraction} />
      </form>
      <RefusalNote refusal={send.refusal} />
      {uploaded === undefined ? null : (
        <section>
          <h2>Uploaded</h2>
          <dl class="facts">
            <dt>CID</dt>
            <dd>
              <code data-fact="cid">{uploaded.Cid}</code>
            </dd>
            <dt>Size</dt>
            <dd>{uploaded.Size} bytes</dd>
            <dt>Name</dt>
            <dd>{uploaded.Name}</dd>
            <dt>Pin status</dt>
            <dd data-fact="pin-status">{status ?? "—"}</dd>
          </dl>
          <button
            type="button"
            disabled={check.busy}
            onClick={() =>
              void check.run(async () => {
                const pin = await call(token, (c) => c.storage.status({ path: { cid: uploaded.Cid } }))
                setStatus(pin.Status)
              })
            }
          >
            Check pin status
          </button>
          <RefusalNote refusal={check.refusal} />
        </section>
      )}
      <Pins token={token} cid={uploaded?.Cid} />
      <FetchCaps credential={props.credential} cid={uploaded?.Cid} />
    </main>
  )
}
