/**
 * Namespaces, for a wallet signed in to the platform realm: the namespaces it may see (every one
 * for an operator), creating one (its owner-level key shown once), and, for an operator, deleting
 * one with `POST /v1/operator/namespaces/remove`, confirmed by typing its name and a reason.
 */
import { useEffect, useState } from "preact/hooks"
import { NamespaceName } from "../../src/client.js"
import { call, RefusedError } from "../api.js"
import type { Credential } from "../session.js"
import { PageTitle, RefusalNote, ShownOnce, TableHead, useAction, when } from "../ui.js"

interface Listed {
  readonly all: boolean
  readonly namespaces: ReadonlyArray<{ readonly name: string; readonly owner: string | null; readonly created_at: number; readonly role: string | null }>
}

const nameOf = (text: string) => {
  try {
    return NamespaceName.make(text.trim())
  } catch {
    throw new RefusedError({ error: `"${text.trim()}" is not a namespace name`, code: "VALIDATION_FAILED", hint: "3-63 of a-z, 0-9 and inner hyphens" })
  }
}

export const Namespaces = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const [listed, setListed] = useState<Listed | undefined>(undefined)
  const load = useAction()
  const reload = () => void load.run(async () => setListed(await call(token, (c) => c.namespaceCreate.listNamespaces())))
  useEffect(reload, [token])
  const [name, setName] = useState("")
  const [created, setCreated] = useState<{ readonly namespace: string; readonly key: string } | undefined>(undefined)
  const create = useAction()
  const [doomed, setDoomed] = useState<string | undefined>(undefined)
  const [typed, setTyped] = useState("")
  const [reason, setReason] = useState("")
  const [removed, setRemoved] = useState<string | undefined>(undefined)
  const remove = useAction()
  return (
    <main>
      <PageTitle>Namespaces</PageTitle>
      <section>
        <h2>Create a namespace</h2>
        <form
          class="row"
          onSubmit={(event) => {
            event.preventDefault()
            void create.run(async () => {
              setCreated(undefined)
              const made = await call(token, (c) => c.namespaceCreate.createNamespace({ payload: { name: nameOf(name) } }))
              setCreated({ namespace: made.namespace, key: made.api_key })
              setName("")
              reload()
            })
          }}
        >
          <label>
            Name
            <input name="namespace-name" value={name} onInput={(e) => setName(e.currentTarget.value)} placeholder="acme" autoComplete="off" />
          </label>
          <button type="submit" disabled={create.busy}>
            Create
          </button>
        </form>
        <RefusalNote refusal={create.refusal} />
        {created === undefined ? null : <ShownOnce label={`The owner's admin key of ${created.namespace}`} secret={created.key} />}
      </section>
      <section>
        <h2>{listed?.all === true ? "Every namespace" : "Your namespaces"}</h2>
        <RefusalNote refusal={load.refusal} />
        {removed === undefined ? null : <p role="status">{removed}</p>}
        <div class="table-wrap">
          <table>
            <TableHead columns={["Name", "Owner", "Your role", "Created"]} actions />
            <tbody>
              {(listed?.namespaces ?? []).map((ns) => (
                <tr data-namespace={ns.name}>
                  <td>{ns.name}</td>
                  <td>
                    <code>{ns.owner ?? "none"}</code>
                  </td>
                  <td>{ns.role ?? "—"}</td>
                  <td>{when(ns.created_at)}</td>
                  <td>
                    {listed?.all === true ? (
                      <button
                        type="button"
                        onClick={() => {
                          setDoomed(ns.name)
                          setTyped("")
                          setRemoved(undefined)
                        }}
                      >
                        Delete…
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
      {doomed === undefined ? null : (
        <section class="danger-zone" aria-label={`delete ${doomed}`}>
          <h2>Delete {doomed}</h2>
          <p>Everything the namespace holds goes: its keys, members, data, content and deployments. This cannot be undone.</p>
          <form
            class="stack"
            onSubmit={(event) => {
              event.preventDefault()
              void remove.run(async () => {
                const answer = await call(token, (c) => c.namespaceDelete.removeNamespace({ payload: { namespace: nameOf(doomed), reason: reason.trim() } }))
                setRemoved(answer.cleanup_pending ? `${answer.namespace} is deleted; some cleanup is still pending and will be retried` : `${answer.namespace} is deleted`)
                setDoomed(undefined)
                reload()
              })
            }}
          >
            <label>
              Type the namespace's name to confirm
              <input name="confirm-name" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" autoFocus />
            </label>
            <label>
              Reason (kept in the operator audit trail)
              <input name="reason" value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
            </label>
            <div class="row">
              <button type="submit" class="danger" disabled={remove.busy || typed !== doomed || reason.trim() === ""}>
                Delete {doomed}
              </button>
              <button type="button" onClick={() => setDoomed(undefined)}>
                Cancel
              </button>
            </div>
          </form>
          <RefusalNote refusal={remove.refusal} />
        </section>
      )}
    </main>
  )
}
