/**
 * SQL: a query box for the namespace's cluster SQL store (`/v1/rqlite/query` for reads,
 * `/v1/rqlite/exec` for writes) or one of its node-local databases (`/v1/db/sqlite/query`, which
 * tells reads from writes itself); a read's rows as a table, a write's counts. Node-local
 * databases are listed a page at a time and can be created here; the cluster store exported and
 * imported as a file (SqlTransfer.tsx).
 */
import { useState } from "preact/hooks"
import { TextKey } from "../../src/api/Paging.js"
import { call, cursorOf } from "../api.js"
import type { Credential } from "../session.js"
import { DataTable, PageTitle, RefusalNote, useAction, usePaged, when } from "../ui.js"
import { SqlTransfer } from "./SqlTransfer.js"

const CLUSTER = ""

/** The spec's rule (§2.2): these statements write; anything else reads. */
const isWrite = (sql: string) => /^\s*(insert|update|delete|create|drop|alter|truncate|replace)\b/i.test(sql)

type Result =
  | { readonly kind: "rows"; readonly columns: ReadonlyArray<string>; readonly rows: ReadonlyArray<ReadonlyArray<unknown>> }
  | { readonly kind: "write"; readonly rowsAffected: number; readonly lastInsertId: number }

export const Sql = (props: { readonly credential: Credential }) => {
  const token = props.credential.token
  const databases = usePaged(async (cursor) => {
    const page = await call(token, (c) => c.databases.list({ urlParams: { limit: 50, cursor: cursorOf(TextKey, cursor) } }))
    return { items: page.databases, next: page.next_cursor }
  })
  const [target, setTarget] = useState(CLUSTER)
  const [sql, setSql] = useState("SELECT 1 AS one")
  const [result, setResult] = useState<Result | undefined>(undefined)
  const [newName, setNewName] = useState("")
  const run = useAction()
  const create = useAction()
  return (
    <main>
      <PageTitle>SQL</PageTitle>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault()
          void run.run(async () => {
            setResult(undefined)
            if (target === CLUSTER) {
              if (isWrite(sql)) {
                const done = await call(token, (c) => c.sql.exec({ payload: { sql } }))
                setResult({ kind: "write", rowsAffected: done.rows_affected, lastInsertId: done.last_insert_id })
              } else {
                const rows = await call(token, (c) => c.sql.query({ payload: { sql } }))
                setResult({ kind: "rows", columns: rows.columns, rows: rows.rows })
              }
            } else {
              const answer = await call(token, (c) => c.databases.query({ payload: { database_name: target, query: sql } }))
              setResult("columns" in answer ? { kind: "rows", columns: answer.columns, rows: answer.rows } : { kind: "write", rowsAffected: answer.rows_affected, lastInsertId: answer.last_insert_id })
            }
          })
        }}
      >
        <label>
          Database
          <select name="database" value={target} onChange={(e) => setTarget(e.currentTarget.value)}>
            <option value={CLUSTER}>cluster SQL store</option>
            {databases.items.map((db) => (
              <option value={db.name}>node-local: {db.name}</option>
            ))}
          </select>
        </label>
        <label>
          Statement (one per run)
          <textarea
            name="sql"
            rows={5}
            spellcheck={false}
            value={sql}
            onInput={(e) => setSql(e.currentTarget.value)}
            onKeyDown={(e) => {
              // Ctrl/Cmd+Enter runs, as in most query consoles
              if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) e.currentTarget.form?.requestSubmit()
            }}
          />
        </label>
        <button type="submit" disabled={run.busy}>
          {run.busy ? "Running…" : "Run"}
        </button>
      </form>
      <RefusalNote refusal={run.refusal} />
      <section aria-live="polite" class="result">
        {result === undefined ? null : result.kind === "rows" ? (
          <DataTable columns={result.columns} rows={result.rows} caption={`${result.rows.length} row${result.rows.length === 1 ? "" : "s"}`} />
        ) : (
          <p data-result="write">
            {result.rowsAffected} row{result.rowsAffected === 1 ? "" : "s"} affected; last insert id {result.lastInsertId}
          </p>
        )}
      </section>
      <section>
        <h2>Node-local databases</h2>
        <RefusalNote refusal={databases.refusal} />
        <DataTable
          columns={["name", "size (bytes)", "backup CID", "created"]}
          rows={databases.items.map((db) => [db.name, db.size_bytes, db.backup_cid, when(db.created_at)])}
        />
        {databases.pager}
        <form
          class="row"
          onSubmit={(event) => {
            event.preventDefault()
            void create.run(async () => {
              const made = await call(token, (c) => c.databases.create({ payload: { database_name: newName.trim() } }))
              setNewName("")
              setTarget(made.name)
              databases.reload()
            })
          }}
        >
          <label>
            New database
            <input name="new-database" value={newName} onInput={(e) => setNewName(e.currentTarget.value)} placeholder="orders" autoComplete="off" />
          </label>
          <button type="submit" disabled={create.busy}>
            Create
          </button>
        </form>
        <RefusalNote refusal={create.refusal} />
      </section>
      <SqlTransfer token={token} namespace={props.credential.whoami.namespace} />
    </main>
  )
}
