/**
 * Deployments: the namespace's apps a page at a time; deploying one (DeployForm.tsx); one's
 * versions and a rollback to an earlier one; its status and events (DeploymentStatus.tsx), its log
 * followed live (DeploymentLogs.tsx), its custom domains (DeploymentDomains.tsx); its environment
 * and deletion (DeploymentSettings.tsx).
 */
import { useState } from "preact/hooks"
import { TextKey } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import type { Credential } from "../session.js"
import { ConfirmButton, PageTitle, RefusalNote, TableHead, useAction, usePaged, when } from "../ui.js"
import { DeployForm } from "./DeployForm.js"
import { DeploymentDomains } from "./DeploymentDomains.js"
import { DeploymentLogs } from "./DeploymentLogs.js"
import { DeploymentSettings } from "./DeploymentSettings.js"
import { DeploymentStatus } from "./DeploymentStatus.js"

interface Versions {
  readonly name: string
  readonly current: number
  readonly versions: ReadonlyArray<{ readonly version: number; readonly source: string; readonly rollback_from: number | null; readonly created_at: number }>
}

export const Deployments = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const list = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.deployments.list({ urlParams: { limit: 20, cursor: cursorOf(TextKey, cursor) } }))
    return { items: page.deployments, next: page.next_cursor }
  })
  const [versions, setVersions] = useState<Versions | undefined>(undefined)
  /** The opened deployment's type: a static site runs no process, so it has no log to follow. */
  const [openType, setOpenType] = useState<string | undefined>(undefined)
  const open = useAction()
  const rollback = useAction()
  const [done, setDone] = useState<string | undefined>(undefined)
  /** Bumped by a change made here, so the status and events are read again. */
  const [changed, setChanged] = useState(0)
  const show = (name: string, type: string) =>
    open.run(async () => {
      setDone(undefined)
      setOpenType(type)
      setVersions(await call(token, (c) => c.deployments.versions({ urlParams: { name } })))
    })
  return (
    <main>
      <PageTitle>Deployments</PageTitle>
      <RefusalNote refusal={list.refusal} />
      <div class="table-wrap">
        <table>
          <TableHead columns={["Name", "Type", "Status", "Version", "Served at", "Updated"]} actions />
          <tbody>
            {list.items.map((d) => (
              <tr data-deployment={d.name}>
                <td>{d.name}</td>
                <td>{d.type}</td>
                <td>
                  <span class={`state ${d.status}`}>{d.status}</span>
                </td>
                <td data-fact="version">{d.version}</td>
                <td>
                  <a href={`${location.protocol}//${d.domain}${location.port === "" ? "" : `:${location.port}`}/`} rel="noreferrer" target="_blank">
                    <code>{d.domain}</code>
                  </a>
                </td>
                <td>{when(d.updated_at)}</td>
                <td>
                  <button type="button" onClick={() => void show(d.name, d.type)}>
                    Versions, status, logs and settings
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {list.items.length === 0 && !list.loading && list.refusal === undefined ? (
        <p>
          No deployments yet: deploy one below, or with <code>npx portico deploy ./site --name hello</code>.
        </p>
      ) : null}
      {list.pager}
      <RefusalNote refusal={open.refusal} />
      {versions === undefined ? null : (
        <section aria-label={`versions of ${versions.name}`}>
          <h2>
            Versions of {versions.name} (current: <span data-fact="current-version">{versions.current}</span>)
          </h2>
          <RefusalNote refusal={rollback.refusal} />
          {done === undefined ? null : <p role="status">{done}</p>}
          <div class="table-wrap">
            <table>
              <TableHead columns={["Version", "Made by", "Created"]} actions />
              <tbody>
                {versions.versions.map((v) => (
                  <tr data-version={v.version}>
                    <td>{v.version}</td>
                    <td>{v.source === "rollback" ? `rollback to ${v.rollback_from ?? "?"}` : v.source}</td>
                    <td>{when(v.created_at)}</td>
                    <td>
                      {v.version === versions.current ? (
                        <span class="state active">serving</span>
                      ) : (
                        <ConfirmButton
                          label="Roll back to this"
                          confirm={`Roll back to version ${v.version}`}
                          disabled={rollback.busy}
                          onConfirm={() =>
                            void rollback.run(async () => {
                              const after = await call(token, (c) => c.deployments.rollback({ payload: { name: versions.name, version: v.version } }))
                              setDone(`${after.name} is at version ${after.version}, serving version ${v.version}'s content`)
                              setVersions(await call(token, (c) => c.deployments.versions({ urlParams: { name: versions.name } })))
                              setChanged((n) => n + 1)
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
        </section>
      )}
      {versions === undefined ? null : <DeploymentStatus key={versions.name} token={token} name={versions.name} changed={changed} />}
      {versions === undefined || openType === "static" ? null : <DeploymentLogs key={versions.name} token={token} name={versions.name} />}
      {versions === undefined ? null : <DeploymentDomains key={versions.name} token={token} name={versions.name} onChanged={() => setChanged((n) => n + 1)} />}
      {versions === undefined ? null : (
        <DeploymentSettings
          key={versions.name}
          token={token}
          name={versions.name}
          onDeleted={() => {
            setDone(`${versions.name} is deleted`)
            setVersions(undefined)
            list.reload()
          }}
        />
      )}
      {versions === undefined && done !== undefined ? <p role="status">{done}</p> : null}
      <DeployForm token={token} onDeployed={list.reload} />
    </main>
  )
}
