/**
 * The cluster SQL store as a file (the owner's): export it (`GET /v1/rqlite/export`, saved from a
 * link to the bytes in the page) and import one in its place (`POST /v1/rqlite/import`, confirmed:
 * it replaces the namespace's tables).
 */
import { useEffect, useState } from "preact/hooks"
import { call, RefusedError } from "../api.js"
import { ConfirmButton, RefusalNote, useAction } from "../ui.js"

export const SqlTransfer = (props: { readonly token: string; readonly namespace: string }) => {
  const [saved, setSaved] = useState<{ readonly url: string; readonly bytes: number } | undefined>(undefined)
  const [file, setFile] = useState<File | undefined>(undefined)
  const [imported, setImported] = useState<string | undefined>(undefined)
  const exporting = useAction()
  const importing = useAction()
  // the link's bytes are let go when another export replaces them or the page closes
  useEffect(() => () => void (saved === undefined ? undefined : URL.revokeObjectURL(saved.url)), [saved])
  const fileName = `${props.namespace}.sqlite`
  return (
    <section>
      <h2>Export and import the cluster SQL store</h2>
      <div class="row">
        <button
          type="button"
          disabled={exporting.busy}
          onClick={() =>
            void exporting.run(async () => {
              const bytes = await call(props.token, (c) => c.sql.export())
              // copied into a plain ArrayBuffer, which a Blob takes
              setSaved({ url: URL.createObjectURL(new Blob([new Uint8Array(bytes)], { type: "application/vnd.sqlite3" })), bytes: bytes.byteLength })
            })
          }
        >
          Export
        </button>
        {saved === undefined ? null : (
          <a href={saved.url} download={fileName} data-fact="export-link">
            Save {fileName} ({saved.bytes} bytes)
          </a>
        )}
      </div>
      <RefusalNote refusal={exporting.refusal} />
      <div class="row">
        <label>
          A SQLite file to import in its place
          <input name="import-file" type="file" onChange={(e) => setFile(e.currentTarget.files?.[0])} />
        </label>
        <ConfirmButton
          label="Import"
          confirm="Replace every table"
          disabled={importing.busy}
          onConfirm={() =>
            void importing.run(async () => {
              setImported(undefined)
              if (file === undefined) throw new RefusedError({ error: "choose a SQLite file first", code: "VALIDATION_FAILED" })
              const bytes = new Uint8Array(await file.arrayBuffer())
              const answer = await call(props.token, (c) => c.sql.import({ payload: bytes }))
              setImported(`imported ${answer.bytes} bytes, ${answer.tables} table${answer.tables === 1 ? "" : "s"}`)
            })
          }
        />
      </div>
      <RefusalNote refusal={importing.refusal} />
      {imported === undefined ? null : (
        <p role="status" data-fact="imported">
          {imported}
        </p>
      )}
    </section>
  )
}
