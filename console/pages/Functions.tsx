/**
 * Functions (docs/functions.md): the namespace's functions a page at a time; deploying one
 * (FunctionDeployForm.tsx); one opened to invoke it with a body, read its logs or delete it
 * (FunctionDetail.tsx).
 */
import { useState } from "preact/hooks"
import { TextKey } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import type { Credential } from "../session.js"
import { PageTitle, RefusalNote, TableHead, usePaged, when } from "../ui.js"
import { FunctionDeployForm } from "./FunctionDeployForm.js"
import { FunctionDetail } from "./FunctionDetail.js"

const PAGE = 20

export const Functions = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const list = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.functions.list({ urlParams: { limit: PAGE, cursor: cursorOf(TextKey, cursor) } }))
    return { items: page.functions, next: page.next_cursor }
  })
  const [open, setOpen] = useState<string | undefined>(undefined)
  const [done, setDone] = useState<string | undefined>(undefined)
  /** Bumped by each deploy, so an opened function is read again (a redeploy makes a new version). */
  const [deploys, setDeploys] = useState(0)
  return (
    <main>
      <PageTitle>Functions</PageTitle>
      <RefusalNote refusal={list.refusal} />
      <div class="table-wrap">
        <table>
          <TableHead columns={["Name", "Version", "Size", "Limits", "Public", "Updated"]} actions />
          <tbody>
            {list.items.map((f) => (
              <tr data-function={f.name}>
                <td>{f.name}</td>
                <td data-fact="version">{f.version}</td>
                <td>{f.size} B</td>
                <td>
                  {f.memory_limit_mb} MB, {f.timeout_seconds} s
                </td>
                <td>{f.is_public ? "yes" : "no"}</td>
                <td>{when(f.updated_at / 1000)}</td>
                <td>
                  <button
                    type="button"
                    aria-pressed={open === f.name}
                    onClick={() => {
                      setDone(undefined)
                      setOpen(f.name)
                    }}
                  >
                    Open<span class="visually-hidden"> {f.name}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {list.items.length === 0 && !list.loading && list.refusal === undefined ? (
        <p>
          No functions yet: deploy one below, or with <code>npx portico functions deploy ./hello --name hello</code>.
        </p>
      ) : null}
      {list.pager}
      {done === undefined ? null : <p role="status">{done}</p>}
      {open === undefined ? null : (
        <FunctionDetail
          key={`${open}:${deploys}`}
          token={token}
          name={open}
          onDeleted={() => {
            setDone(`${open} is deleted`)
            setOpen(undefined)
            list.reload()
          }}
        />
      )}
      <FunctionDeployForm
        token={token}
        onDeployed={(name) => {
          list.reload()
          setDeploys((n) => n + 1)
          setOpen(name)
        }}
      />
    </main>
  )
}
