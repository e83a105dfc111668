/**
 * Deploying from the page: a content archive (tar.gz, as `portico deploy` packs a directory) sent
 * to `POST /v1/deployments/{type}/upload` for a new deployment or `/update` for a new version,
 * with its progress shown. The fields go first and the archive last, as the routes take them.
 */
import { useState } from "preact/hooks"
import { Deployment } from "../../src/api/groups/DeploymentsGroup.js"
import { RefusedError } from "../api.js"
import { RefusalNote, SentProgress, useAction } from "../ui.js"
import { uploadForm } from "../upload.js"

const TYPES = ["static", "nodejs", "go", "nextjs"] as const

export const DeployForm = (props: { readonly token: string; readonly onDeployed: () => void }) => {
  const [type, setType] = useState<(typeof TYPES)[number]>("static")
  const [name, setName] = useState("")
  const [subdomain, setSubdomain] = useState("")
  const [update, setUpdate] = useState(false)
  const [archive, setArchive] = useState<File | undefined>(undefined)
  const [fraction, setFraction] = useState<number | undefined>(undefined)
  const [done, setDone] = useState<string | undefined>(undefined)
  const deploy = useAction()
  return (
    <section>
      <h2>Deploy</h2>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void deploy.run(async () => {
            setDone(undefined)
            if (archive === undefined) throw new RefusedError({ error: "choose the content archive first", code: "VALIDATION_FAILED", hint: "a .tar.gz of the app's directory" })
            const form = new FormData()
            form.append("name", name.trim())
            if (!update && subdomain.trim() !== "") form.append("subdomain", subdomain.trim())
            form.append("archive", archive, archive.name)
            setFraction(0)
            const made = await uploadForm(`/v1/deployments/${type}/${update ? "update" : "upload"}`, props.token, form, Deployment, setFraction)
            setDone(`${made.name} version ${made.version} (${made.type}, ${made.status}): ${made.domain}`)
            props.onDeployed()
          })
        }}
      >
        <label>
          Type
          <select name="deploy-type" value={type} onChange={(e) => setType(TYPES.find((t) => t === e.currentTarget.value) ?? "static")}>
            {TYPES.map((t) => (
              <option value={t}>{t}</option>
            ))}
          </select>
        </label>
        <label>
          Name
          <input name="deploy-name" value={name} onInput={(e) => setName(e.currentTarget.value)} autoComplete="off" placeholder="hello" />
        </label>
        <label class="inline">
          <input type="checkbox" name="deploy-update" checked={update} onChange={(e) => setUpdate(e.currentTarget.checked)} /> a new version of an existing deployment
        </label>
        {update ? null : (
          <label>
            Subdomain (optional: else name-random)
            <input name="deploy-subdomain" value={subdomain} onInput={(e) => setSubdomain(e.currentTarget.value)} autoComplete="off" />
          </label>
        )}
        <label>
          Content archive (.tar.gz)
          <input name="deploy-archive" type="file" accept=".tar.gz,.tgz,application/gzip" onChange={(e) => setArchive(e.currentTarget.files?.[0])} />
        </label>
        <button type="submit" disabled={deploy.busy}>
          {update ? "Deploy the new version" : "Deploy"}
        </button>
        <SentProgress fraction={fraction} />
      </form>
      <RefusalNote refusal={deploy.refusal} />
      {done === undefined ? null : (
        <p role="status" data-fact="deployed">
          {done}
        </p>
      )}
    </section>
  )
}
