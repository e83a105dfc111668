/**
 * The anchor of the node-local SQL benchmark: a bare `node:http` server doing by hand what
 * `POST /v1/db/sqlite/query` does for a read or an insert. It checks the bearer token, parses the same JSON
 * body (`{database_name, query, params}`), runs the statement with better-sqlite3 in this process
 * on an equivalent SQLite file, and answers `{"columns":[...],"rows":[[...]]}`.
 *
 * The file is built at start: WAL on like the gateway's node-local files, the same `users` table
 * and rows as the gateway's copy and an empty `events` table (bench/sql/shared.ts).
 *
 *   node --import tsx bench/sql/servers.ts bare <port> <sqlite-file>
 */
import Database from "better-sqlite3"
import * as http from "node:http"
import { bareAuthorization, eventsSchema, insertUser, USERS, userRow, usersSchema } from "./shared.js"

interface QueryBody {
  readonly database_name: string
  readonly query: string
  readonly params?: ReadonlyArray<string | number | boolean | null>
}

const isQueryBody = (value: unknown): value is QueryBody =>
  typeof value === "object" &&
  value !== null &&
  "database_name" in value &&
  typeof value.database_name === "string" &&
  "query" in value &&
  typeof value.query === "string" &&
  (!("params" in value) || value.params === undefined || Array.isArray(value.params))

const answer = (res: http.ServerResponse, status: number, text: string) => {
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text)
}

const bare = (port: number, file: string) => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.exec(usersSchema)
  // the node-local insert row's table
  db.exec(eventsSchema)
  const insert = db.prepare(insertUser)
  db.transaction(() => {
    for (let id = 1; id <= USERS; id++) insert.run(...userRow(id))
  })()

  const statements = new Map<string, Database.Statement>()
  const prepared = (sql: string): Database.Statement => {
    const cached = statements.get(sql)
    if (cached !== undefined) return cached
    const stmt = db.prepare(sql)
    statements.set(sql, stmt)
    return stmt
  }

  http
    .createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        if (req.headers.authorization !== bareAuthorization) return answer(res, 401, `{"error":"unauthorized"}`)
        if (req.method !== "POST" || req.url !== "/v1/db/sqlite/query") return answer(res, 404, `{"error":"not found"}`)
        try {
          const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
          if (!isQueryBody(body)) return answer(res, 400, `{"error":"bad body"}`)
          const stmt = prepared(body.query)
          const params = body.params ?? []
          if (!stmt.reader) {
            const result = stmt.run(...params)
            return answer(res, 200, JSON.stringify({ rows_affected: result.changes, last_insert_id: Number(result.lastInsertRowid) }))
          }
          const columns = stmt.columns().map((c) => c.name)
          const rows = stmt.raw(true).all(...params) as Array<Array<unknown>>
          return answer(res, 200, JSON.stringify({ columns, rows }))
        } catch (e) {
          return answer(res, 400, JSON.stringify({ error: e instanceof Error ? e.message : String(e) }))
        }
      })
    })
    .listen(port, "127.0.0.1", () => process.stdout.write("READY\n"))

  process.once("SIGTERM", () => {
    db.close()
    process.exit(0)
  })
}

/**
 * Reference for the cluster comparisons: the least any Node front of rqlited does per request.
 * A bare `node:http` server that takes the gateway's body `{sql, args}`, posts `[[sql, ...args]]`
 * to rqlited over a keep-alive pool and answers rqlited's text as it came. No credential, no
 * guard, no reshaping: what it costs on CPU 0 beside rqlited bounds what a Node gateway can reach.
 *
 *   node --import tsx bench/sql/servers.ts proxy <port> <rqlited url>
 */
const proxy = (port: number, rqlited: string) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
  const target = new URL(rqlited)
  http
    .createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const path = req.url === "/v1/rqlite/query" ? "/db/query?level=weak" : req.url === "/v1/rqlite/exec" ? "/db/execute" : undefined
        if (req.method !== "POST" || path === undefined) return answer(res, 404, `{"error":"not found"}`)
        let forwarded: string
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { sql: string; args?: ReadonlyArray<unknown> }
          forwarded = JSON.stringify([[body.sql, ...(body.args ?? [])]])
        } catch {
          return answer(res, 400, `{"error":"bad body"}`)
        }
        const upstream = http.request(
          { hostname: target.hostname, port: target.port, path, method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(forwarded) } },
          (answerStream) => {
            const parts: Array<Buffer> = []
            answerStream.on("data", (c: Buffer) => parts.push(c))
            answerStream.on("end", () => answer(res, answerStream.statusCode ?? 502, Buffer.concat(parts).toString("utf8")))
          }
        )
        upstream.on("error", () => answer(res, 502, `{"error":"upstream"}`))
        upstream.end(forwarded)
      })
    })
    .listen(port, "127.0.0.1", () => process.stdout.write("READY\n"))
  process.once("SIGTERM", () => process.exit(0))
}

/**
 * Reference: a bare batching front of rqlited. Reads arriving while earlier batches are out go
 * to rqlited together (at most two requests out and 128 reads each, like the gateway), each
 * answered with its own result reshaped to `{columns, rows, count}`. No credential, guard,
 * statement timeout (`db_timeout`), schema-version bounds or answering as stored: what batching
 * alone gives a Node front.
 *
 *   node --import tsx bench/sql/servers.ts batch <port> <rqlited url>
 */
const batchProxy = (port: number, rqlited: string) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 })
  const target = new URL(rqlited)
  type Waiting = { readonly statement: string; readonly res: http.ServerResponse }
  let queue: Array<Waiting> = []
  let out = 0
  let scheduled = false
  const schedule = () => {
    if (scheduled || out >= 2 || queue.length === 0) return
    scheduled = true
    setImmediate(flush)
  }
  const flush = () => {
    scheduled = false
    while (out < 2 && queue.length > 0) {
      const batch = queue.slice(0, 128)
      queue = queue.slice(batch.length)
      out++
      const text = `[${batch.map((w) => w.statement).join(",")}]`
      const upstream = http.request(
        { hostname: target.hostname, port: target.port, path: "/db/query?level=weak", method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } },
        (answerStream) => {
          const parts: Array<Buffer> = []
          answerStream.on("data", (c: Buffer) => parts.push(c))
          answerStream.on("end", () => {
            out--
            let results: Array<{ columns?: Array<string>; values?: Array<Array<unknown>>; error?: string }>
            try {
              results = (JSON.parse(Buffer.concat(parts).toString("utf8")) as { results: typeof results }).results
            } catch {
              for (const w of batch) answer(w.res, 502, `{"error":"upstream answered no JSON"}`)
              return schedule()
            }
            batch.forEach((w, i) => {
              const r = results[i]
              if (r === undefined || r.error !== undefined) answer(w.res, 400, JSON.stringify({ error: r?.error ?? "no result" }))
              else answer(w.res, 200, JSON.stringify({ columns: r.columns ?? [], rows: r.values ?? [], count: (r.values ?? []).length }))
            })
            schedule()
          })
        }
      )
      upstream.on("error", () => {
        out--
        for (const w of batch) answer(w.res, 502, `{"error":"upstream"}`)
        schedule()
      })
      upstream.end(text)
    }
  }
  http
    .createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        if (req.method !== "POST" || req.url !== "/v1/rqlite/query") return answer(res, 404, `{"error":"not found"}`)
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { sql: string; args?: ReadonlyArray<unknown> }
          queue.push({ statement: JSON.stringify([body.sql, ...(body.args ?? [])]), res })
        } catch {
          return answer(res, 400, `{"error":"bad body"}`)
        }
        schedule()
      })
    })
    .listen(port, "127.0.0.1", () => process.stdout.write("READY\n"))
  process.once("SIGTERM", () => process.exit(0))
}

const [kind, portArg, arg] = process.argv.slice(2)
if ((kind !== "bare" && kind !== "proxy" && kind !== "batch") || portArg === undefined || arg === undefined) {
  process.stderr.write("usage: node --import tsx bench/sql/servers.ts bare <port> <sqlite-file> | proxy <port> <rqlited url>\n")
  process.exit(2)
}
if (kind === "bare") bare(Number(portArg), arg)
else if (kind === "batch") batchProxy(Number(portArg), arg)
else proxy(Number(portArg), arg)
