/**
 * Databases over HTTP (spec §2.2, §2.3, §4.2, §4.3): node-local SQLite files and the cluster SQL
 * store's ORM routes, on the embedded engines and on real rqlited processes (registry and the
 * namespace's SQL store each on their own cluster).
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { Wallet } from "ethers"
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { freePort } from "../support/process.js"

const expectError = (reply: Reply, status: number, code?: string) => {
  expect(reply.status, reply.text).toBe(status)
  if (code !== undefined) expect(reply.body?.code, reply.text).toBe(code)
  expect(Object.keys(reply.body ?? {}).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
  // nothing of the platform leaks: no path, no stack
  expect(reply.text).not.toMatch(/\/tmp\/|\/work\/|at .*\.ts:\d+|node_modules/)
}

const scratch = mkdtempSync(path.join(testTmp(), "portico-db-files-"))
let fileCounter = 0
/** A SQLite file built in the test process, for import. */
/** A SQLite file built offline; `schemaEdits` run with writable_schema on, as a forger would. */
const sqliteFile = (statements: ReadonlyArray<string>, schemaEdits: ReadonlyArray<string> = []): Buffer => {
  const file = path.join(scratch, `f${++fileCounter}.db`)
  const db = new Database(file)
  for (const s of statements) db.exec(s)
  if (schemaEdits.length > 0) {
    db.unsafeMode(true)
    db.exec("PRAGMA writable_schema = ON")
    for (const s of schemaEdits) db.exec(s)
  }
  db.close()
  return readFileSync(file)
}

/** A raw POST with a streamed body, to watch how the gateway handles a large upload. */
const streamUpload = (
  gw: Gateway,
  route: string,
  token: string,
  options: { readonly contentLength?: number; readonly totalBytes: number; readonly pauseAfter?: number }
) => {
  let release: () => void = () => {}
  const resumed = new Promise<void>((r) => (release = r))
  const reply = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" }
    if (options.contentLength !== undefined) headers["content-length"] = options.contentLength
    let answered = false
    // a pool of its own (keep-alive, so the gateway drains rather than closes): an upload cut
    // short must never leave a socket that the next upload reuses
    const req = http.request(gw.url + route, { method: "POST", headers, agent: new http.Agent({ keepAlive: true }) }, (res) => {
      // as curl does: an early answer ends the upload
      answered = true
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      res.on("error", reject)
    })
    req.on("error", (e) => {
      // the gateway may cut the connection once it has answered; the answer, if any, counts
      setTimeout(() => reject(e), 2000)
    })
    const chunk = Buffer.alloc(1024 * 1024, 7)
    let sent = 0
    const pump = async () => {
      while (sent < options.totalBytes && !req.destroyed && !answered) {
        if (options.pauseAfter !== undefined && sent >= options.pauseAfter) {
          await resumed
          req.destroy()
          return
        }
        const ok = req.write(chunk)
        sent += chunk.length
        if (!ok) await new Promise((r) => req.once("drain", r))
      }
      req.end()
    }
    void pump()
  })
  return { reply, release }
}

const rssKb = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
}

describe.each(["embedded", "rqlite"] as const)("databases over HTTP on %s engines", (engine) => {
  let gw: Gateway
  let owner: string
  let admin: string
  let runtime: string
  let otherOwner: string
  const servers: Array<RqlitedServer> = []

  const post = (route: string, json: unknown, token = owner) => gw.request("POST", route, { token, json })
  /** The cluster SQL store's raw routes, as a client streams a file to and from them. */
  const exportAs = (token = owner) => fetch(`${gw.url}/v1/rqlite/export`, { headers: { authorization: `Bearer ${token}` } })
  const importAs = (token: string, body: Buffer) =>
    fetch(`${gw.url}/v1/rqlite/import`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" }, body })
  const q = (database_name: string, query: string, params?: ReadonlyArray<unknown>, token = owner) =>
    post("/v1/db/sqlite/query", params === undefined ? { database_name, query } : { database_name, query, params }, token)

  beforeAll(async () => {
    const env: Record<string, string> = { PORTICO_SQL_TIMEOUT_MS: "1500", PORTICO_SQL_MAX_RESULT_BYTES: String(1024 * 1024) }
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      const registry = await Effect.runPromise(startRqlited())
      const store = await Effect.runPromise(startRqlited())
      servers.push(registry, store)
      env["PORTICO_RQLITE_URL"] = registry.url
      // "dbns" keeps its tables on its own rqlite cluster; "dbother" stays embedded
      env["PORTICO_SQL_RQLITE_URLS"] = `dbns=${store.url}`
    }
    gw = await startGateway({ env })
    owner = (await gw.cli(["namespace", "create", "dbns"])).api_key
    admin = (await gw.request("POST", "/v1/namespace/keys", { token: owner, json: { profile: "admin" } })).body.api_key
    runtime = (await gw.request("POST", "/v1/namespace/keys", { token: owner, json: { profile: "runtime" } })).body.api_key
    otherOwner = (await gw.cli(["namespace", "create", "dbother"])).api_key
  }, 120_000)
  afterAll(async () => {
    // a statement stopped for its timeout must not keep anything running: shutdown is clean
    expect(await gw?.stop()).toBe(0)
    for (const s of servers) await Effect.runPromise(s.stop)
  })

  describe("node-local databases", () => {
    it("creates (201), refuses a second create (409) and bad names (400)", async () => {
      const created = await post("/v1/db/sqlite/create", { database_name: "app_db-1" })
      expect(created.status, created.text).toBe(201)
      expect(Object.keys(created.body).sort()).toEqual(["created_at", "home_node", "name"])
      expect(created.body.name).toBe("app_db-1")
      expect(Math.abs(created.body.created_at - Date.now() / 1000)).toBeLessThan(60)
      expectError(await post("/v1/db/sqlite/create", { database_name: "app_db-1" }), 409, "DATABASE_EXISTS")
      for (const bad of ["", "a b", "../etc", "x".repeat(65), "naïve", "a.db", "a/b"]) {
        expectError(await post("/v1/db/sqlite/create", { database_name: bad }), 400, "VALIDATION_FAILED")
      }
      expect((await post("/v1/db/sqlite/create", { database_name: "x".repeat(64) })).status).toBe(201)
      expect(existsSync(path.join(gw.dataDir, "databases", "dbns", "app_db-1.db"))).toBe(true)
    })

    it("answers writes with their counts and reads with columns and rows, zero values present", async () => {
      await post("/v1/db/sqlite/create", { database_name: "kinds" })
      expect((await q("kinds", "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, n INTEGER)")).body).toEqual({ rows_affected: 0, last_insert_id: 0 })
      const ins = await q("kinds", "INSERT INTO t (v, n) VALUES (?, ?), (?, ?)", ["a", 1, "b; DROP TABLE t; --", 9223372036854775807n.toString()])
      expect(ins.body).toEqual({ rows_affected: 2, last_insert_id: 2 })
      // the spliced-looking text was bound, not run
      const big = await q("kinds", "INSERT INTO t (v, n) VALUES ('big', 9223372036854775807)")
      expect(big.body.rows_affected).toBe(1)
      const read = await q("kinds", "SELECT id, v, n FROM t ORDER BY id")
      expect(read.text).toBe(
        // an INTEGER column turns the bound text into an integer (SQLite's type affinity)
        '{"columns":["id","v","n"],"rows":[[1,"a",1],[2,"b; DROP TABLE t; --",9223372036854775807],[3,"big",9223372036854775807]]}'
      )
      // an integer argument past 2^53 binds with all 64 bits, not as a rounded REAL
      const wide = await gw.request("POST", "/v1/db/sqlite/query", {
        token: owner,
        headers: { "content-type": "application/json" },
        body: '{"database_name":"kinds","query":"SELECT ?, typeof(?), ? = 9223372036854775806","params":[9223372036854775807,-9007199254740993,9223372036854775806]}'
      })
      expect(wide.text).toBe('{"columns":["?","typeof(?)","? = 9223372036854775806"],"rows":[[9223372036854775807,"integer",1]]}')
      const tooWide = await gw.request("POST", "/v1/db/sqlite/query", {
        token: owner,
        headers: { "content-type": "application/json" },
        body: '{"database_name":"kinds","query":"SELECT ?","params":[18446744073709551616]}'
      })
      expectError(tooWide, 400, "VALIDATION_FAILED")
      expect((await q("kinds", "UPDATE t SET v = 'z' WHERE id = 999")).text).toMatch(/^\{"rows_affected":0,"last_insert_id":\d+\}$/)
      expect((await q("kinds", "WITH x(v) AS (SELECT 'w') INSERT INTO t (v) SELECT v FROM x")).body.rows_affected).toBe(1)
      expect((await q("kinds", "REPLACE INTO t (id, v) VALUES (1, 'r')")).body).toHaveProperty("rows_affected", 1)
      expect((await q("kinds", "DELETE FROM t WHERE id = ?", [4])).body).toHaveProperty("rows_affected", 1)
      expect((await q("kinds", "SELECT * FROM t WHERE id = -1")).body).toEqual({ columns: ["id", "v", "n"], rows: [] })
      expect((await q("kinds", "select count(*) as c from t")).body).toEqual({ columns: ["c"], rows: [[3]] })
      expect((await q("kinds", "SELECT ?, ?, ?", [true, null, 1.5])).body.rows).toEqual([[1, null, 1.5]])
      expect((await q("kinds", "SELECT x'00ff' AS b")).body.rows).toEqual([["AP8="]])
    })

    it("answers a statement error with 400 and the database's message; unknown databases are 404", async () => {
      const bad = await q("kinds", "SELECT * FROM missing_table")
      expectError(bad, 400, "SQL_ERROR")
      expect(bad.body.error).toContain("no such table: missing_table")
      expectError(await q("kinds", "SELEC 1"), 400, "SQL_ERROR")
      expectError(await q("nope", "SELECT 1"), 404, "NOT_FOUND")
      expectError(await post("/v1/db/sqlite/query", { database_name: "kinds", query: "SELECT ?", params: [{ a: 1 }] }), 400, "VALIDATION_FAILED")
    })

    it("keeps a database inside its file: ATTACH, DETACH, VACUUM INTO, other pragmas, extensions and second statements are refused", async () => {
      const refused = [
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "attach ':memory:' as m",
        "DETACH m",
        "VACUUM INTO '/tmp/copy.db'",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA writable_schema = 1",
        "PRAGMA temp.table_info(t)",
        "SELECT * FROM pragma_journal_mode()",
        "SELECT load_extension('/tmp/evil.so')",
        // temp objects live on the shared connection, not in the file
        "CREATE TEMP TABLE z(a)",
        "CREATE TABLE temp.z2(a)",
        "SELECT * FROM temp.sqlite_master"
      ]
      for (const sql of refused) expectError(await q("kinds", sql), 403, "SQL_NOT_ALLOWED")
      // the connection serves every caller: a transaction left open would hold their writes
      for (const sql of ["BEGIN", "begin immediate", "SAVEPOINT s", "COMMIT", "END", "ROLLBACK", "RELEASE s"]) {
        expectError(await q("kinds", sql), 403, "SQL_NOT_ALLOWED")
      }
      expectError(await q("kinds", "SELECT 1; SELECT 2"), 400, "VALIDATION_FAILED")
      expectError(await q("kinds", "INSERT INTO t (v) VALUES ('x'); DROP TABLE t"), 400, "VALIDATION_FAILED")
      expect((await q("kinds", "SELECT count(*) FROM t")).body.rows).toEqual([[3]])
      // the listed pragmas run, also in their table-valued form
      expect((await q("kinds", "PRAGMA table_info(t)")).body.columns).toContain("name")
      expect((await q("kinds", "PRAGMA user_version = 7")).status).toBe(200)
      expect((await q("kinds", "PRAGMA user_version")).body).toEqual({ columns: ["user_version"], rows: [[7]] })
      expect((await q("kinds", "SELECT name FROM pragma_table_info('t') ORDER BY cid")).body.rows).toEqual([["id"], ["v"], ["n"]])
      expect((await q("kinds", "PRAGMA integrity_check")).body.rows).toEqual([["ok"]])
      expect((await q("kinds", "VACUUM")).status).toBe(200)
      expect(existsSync("/tmp/copy.db")).toBe(false)
    })

    it("is control plane only, and a namespace sees only its own databases", async () => {
      expect((await post("/v1/db/sqlite/create", { database_name: "byadmin" }, admin)).status).toBe(201)
      expectError(await q("kinds", "SELECT 1", undefined, runtime), 403, "CONTROL_PLANE_REQUIRED")
      expectError(await gw.request("GET", "/v1/db/sqlite/list", { token: runtime }), 403, "CONTROL_PLANE_REQUIRED")
      expectError(await gw.request("GET", "/v1/db/sqlite/list"), 401, "UNAUTHORIZED")
      expectError(await q("kinds", "SELECT 1", undefined, otherOwner), 404, "NOT_FOUND")
      expect((await gw.request("GET", "/v1/db/sqlite/list", { token: otherOwner })).body).toEqual({ databases: [], count: 0, next_cursor: null })
      expect((await post("/v1/db/sqlite/create", { database_name: "kinds" }, otherOwner)).status).toBe(201)
      expect((await post("/v1/db/sqlite/query", { database_name: "kinds", query: "SELECT count(*) FROM sqlite_schema" }, otherOwner)).body.rows).toEqual([[0]])
    })

    it("lists databases with their size, backup cid and creation time", async () => {
      const list = await gw.request("GET", "/v1/db/sqlite/list", { token: owner })
      expect(list.status).toBe(200)
      expect(list.body.count).toBe(list.body.databases.length)
      const kinds = list.body.databases.find((d: { name: string }) => d.name === "kinds")
      expect(Object.keys(kinds).sort()).toEqual(["backup_cid", "created_at", "name", "size_bytes"])
      expect(kinds.size_bytes).toBeGreaterThan(0)
      expect(kinds.backup_cid).toBeNull()
      expect(list.body.databases.map((d: { name: string }) => d.name)).toEqual(expect.arrayContaining(["app_db-1", "byadmin", "kinds"]))
    })

    it("stops a statement past the timeout without stalling the gateway, and the database stays usable", async () => {
      const started = Date.now()
      const slow = q("kinds", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
      await new Promise((r) => setTimeout(r, 200))
      const during = Date.now()
      const whoami = await gw.request("GET", "/v1/auth/whoami", { token: owner })
      expect(whoami.status).toBe(200)
      expect(Date.now() - during).toBeLessThan(500)
      const reply = await slow
      expectError(reply, 400, "STATEMENT_TIMEOUT")
      expect(Date.now() - started).toBeLessThan(10_000)
      expect((await q("kinds", "SELECT count(*) FROM t")).body.rows).toEqual([[3]])
    })

    it("refuses an answer over the result cap with 413 instead of building it", async () => {
      const huge = await q("kinds", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000) SELECT x, 'some padding text' FROM c")
      expectError(huge, 413, "PAYLOAD_TOO_LARGE")
      expect((await q("kinds", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) SELECT count(*) FROM c")).body.rows).toEqual([[1000]])
    })

    it("deletes the file with its WAL and shared memory; the name is free again", async () => {
      const file = path.join(gw.dataDir, "databases", "dbns", "kinds.db")
      expect(existsSync(file)).toBe(true)
      const del = await post("/v1/db/sqlite/delete", { database_name: "kinds" })
      expect(del.body).toEqual({ name: "kinds", deleted: true })
      for (const suffix of ["", "-wal", "-shm"]) expect(existsSync(file + suffix)).toBe(false)
      expectError(await q("kinds", "SELECT 1"), 404, "NOT_FOUND")
      expectError(await post("/v1/db/sqlite/delete", { database_name: "kinds" }), 404, "NOT_FOUND")
      expect((await post("/v1/db/sqlite/create", { database_name: "kinds" })).status).toBe(201)
      expect((await q("kinds", "SELECT count(*) FROM sqlite_schema")).body.rows).toEqual([[0]])
      // the other namespace's database of the same name was not touched
      expect((await post("/v1/db/sqlite/query", { database_name: "kinds", query: "SELECT 1" }, otherOwner)).status).toBe(200)
      const audit = await gw.request("GET", "/v1/audit?action=sqlite.delete", { token: owner })
      expect(audit.body.entries?.length ?? audit.body.events?.length ?? 0).toBeGreaterThan(0)
    })
  })

  describe("cluster SQL store", () => {
    it("refuses an answer over the result cap with 413, on either engine, and keeps serving", async () => {
      const huge = await post("/v1/rqlite/query", {
        sql: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 200000) SELECT x, 'some padding text' FROM c"
      })
      expectError(huge, 413, "PAYLOAD_TOO_LARGE")
      expect((await post("/v1/rqlite/query", { sql: "SELECT 40 + 2" })).body.rows).toEqual([[42]])
    })

    it("creates tables, executes writes and answers reads with columns, rows and count", async () => {
      const created = await post("/v1/rqlite/create-table", { schema: "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, team INTEGER)" })
      expect(created.status, created.text).toBe(200)
      expect(created.body).toHaveProperty("rows_affected")
      await post("/v1/rqlite/create-table", { schema: "CREATE TABLE teams (id INTEGER PRIMARY KEY, title TEXT)" })
      expect((await post("/v1/rqlite/exec", { sql: "INSERT INTO teams (id, title) VALUES (1, 'red'), (2, 'blue')" })).body).toEqual({ rows_affected: 2, last_insert_id: 2 })
      const ins = await post("/v1/rqlite/exec", {
        sql: "INSERT INTO users (name, age, team) VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?)",
        args: ["ann", 31, 1, "bob", null, 2, "cy'; DROP TABLE users; --", 25, 1]
      })
      expect(ins.body).toEqual({ rows_affected: 3, last_insert_id: 3 })
      const read = await post("/v1/rqlite/query", { sql: "SELECT id, name, age FROM users ORDER BY id" })
      expect(read.body).toEqual({
        columns: ["id", "name", "age"],
        rows: [[1, "ann", 31], [2, "bob", null], [3, "cy'; DROP TABLE users; --", 25]],
        count: 3
      })
      expect((await post("/v1/rqlite/query", { sql: "SELECT * FROM users WHERE id = ?", args: [99] })).body).toEqual({
        columns: ["id", "name", "age", "team"],
        rows: [],
        count: 0
      })
      expect((await post("/v1/rqlite/exec", { sql: "UPDATE users SET age = 1 WHERE id = 99" })).body.rows_affected).toBe(0)
      expectError(await post("/v1/rqlite/query", { sql: "DELETE FROM users" }), 400, "VALIDATION_FAILED")
      expectError(await post("/v1/rqlite/exec", { sql: "SELECT * FROM users" }), 400, "VALIDATION_FAILED")
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM users" })).body.rows).toEqual([[3]])
      const err = await post("/v1/rqlite/query", { sql: "SELECT * FROM nowhere" })
      expectError(err, 400, "SQL_ERROR")
      expect(err.body.error).toContain("no such table")
    })

    it("runs only statements that read on the read route and in query ops: nothing is written through them", async () => {
      expect((await post("/v1/rqlite/exec", { sql: "CREATE INDEX users_age ON users (age)" })).status).toBe(200)
      const statTables = async () =>
        (await post("/v1/rqlite/query", { sql: "SELECT name FROM sqlite_schema WHERE name LIKE 'sqlite\\_stat%' ESCAPE '\\' ORDER BY name" })).body.rows
      const teams = async () => (await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM teams" })).body.rows
      const teamsBefore = await teams()
      expect(await statTables()).toEqual([])
      const refused: ReadonlyArray<readonly [string, number, string]> = [
        ["ANALYZE", 400, "VALIDATION_FAILED"],
        ["analyze users", 400, "VALIDATION_FAILED"],
        ["REINDEX", 400, "VALIDATION_FAILED"],
        ["REINDEX users_age", 400, "VALIDATION_FAILED"],
        ["EXPLAIN INSERT INTO teams (id, title) VALUES (90, 'x')", 400, "VALIDATION_FAILED"],
        ["INSERT INTO teams (id, title) VALUES (91, 'x') RETURNING id", 400, "VALIDATION_FAILED"],
        ["WITH x AS (SELECT 92) INSERT INTO teams (id, title) SELECT *, 'x' FROM x RETURNING id", 400, "VALIDATION_FAILED"],
        ["PRAGMA user_version = 5", 403, "SQL_NOT_ALLOWED"],
        ["VACUUM", 403, "SQL_NOT_ALLOWED"]
      ]
      for (const [sql, status, code] of refused) {
        expectError(await post("/v1/rqlite/query", { sql }), status, code)
        // a transaction's query op reads only too (rqlite runs a transaction as a write)
        const tx = await post("/v1/rqlite/transaction", { ops: [{ kind: "query", sql }], return_results: true })
        expectError(tx, status, code)
        expect(tx.body.error, sql).toMatch(/^op 0: /)
      }
      expect(await statTables()).toEqual([])
      expect(await teams()).toEqual(teamsBefore)
      // what can change the database is the write route's: ANALYZE runs there, answering counts
      const analyzed = await post("/v1/rqlite/exec", { sql: "ANALYZE" })
      expect(analyzed.status, analyzed.text).toBe(200)
      expect(Object.keys(analyzed.body).sort()).toEqual(["last_insert_id", "rows_affected"])
      expect(await statTables()).toContainEqual(["sqlite_stat1"])
      // the answer names the write route
      const hinted = await post("/v1/rqlite/query", { sql: "ANALYZE" })
      expect(hinted.body.hint).toContain("/v1/rqlite/exec")
      expect((await post("/v1/rqlite/exec", { sql: "DROP INDEX users_age" })).status).toBe(200)
      expect((await post("/v1/rqlite/exec", { sql: "DROP TABLE sqlite_stat1" })).status).toBe(200)
    })

    it("answers 64-bit integers digit for digit, past 2^53, on either engine", async () => {
      await post("/v1/rqlite/create-table", { schema: "CREATE TABLE wide (id INTEGER PRIMARY KEY, n INTEGER, r REAL, s TEXT)" })
      const ins = await post("/v1/rqlite/exec", { sql: "INSERT INTO wide (id, n, r, s) VALUES (9223372036854775806, -9223372036854775808, 1.5, '12345678901234567890')" })
      expect(ins.text).toBe('{"rows_affected":1,"last_insert_id":9223372036854775806}')
      const read = await post("/v1/rqlite/query", { sql: "SELECT id, n, r, s, 9007199254740993, 7 FROM wide" })
      expect(read.text).toBe(
        '{"columns":["id","n","r","s","9007199254740993","7"],"rows":[[9223372036854775806,-9223372036854775808,1.5,"12345678901234567890",9007199254740993,7]],"count":1}'
      )
      // arguments past 2^53 reach the engine whole, on every route that binds them
      const raw = (route: string, body: string) => gw.request("POST", route, { token: owner, headers: { "content-type": "application/json" }, body })
      expect((await raw("/v1/rqlite/query", '{"sql":"SELECT id FROM wide WHERE id = ?","args":[9223372036854775806]}')).text).toBe(
        '{"columns":["id"],"rows":[[9223372036854775806]],"count":1}'
      )
      expect((await raw("/v1/rqlite/exec", '{"sql":"INSERT INTO wide (id, n) VALUES (?, ?)","args":[9007199254740993,9007199254740993]}')).text).toBe(
        '{"rows_affected":1,"last_insert_id":9007199254740993}'
      )
      expect((await raw("/v1/rqlite/find", '{"table":"wide","criteria":{"n":9007199254740993}}')).text).toBe(
        '{"items":[{"id":9007199254740993,"n":9007199254740993,"r":null,"s":null}],"count":1}'
      )
      expect((await raw("/v1/rqlite/select", '{"table":"wide","select":["id"],"where":[{"expr":"n = ?","args":[-9223372036854775808]}]}')).text).toBe(
        '{"items":[{"id":9223372036854775806}],"count":1}'
      )
      expect(
        (await raw("/v1/rqlite/transaction", '{"ops":[{"kind":"query","sql":"SELECT typeof(?)","args":[9223372036854775807]}],"return_results":true}')).text
      ).toBe('{"results":[{"columns":["typeof(?)"],"rows":[["integer"]],"count":1}],"count":1}')
      // ±Infinity: null on the embedded engine; rqlite cannot write it as JSON, a 400 that says so
      const infinite = await post("/v1/rqlite/query", { sql: "SELECT 1e999 AS inf" })
      if (engine === "embedded") expect(infinite.body.rows).toEqual([[null]])
      else expectError(infinite, 400, "SQL_ERROR")
      // past 64 bits is refused on both engines (rqlite would round it to a double)
      const past = await raw("/v1/rqlite/query", '{"sql":"SELECT ?","args":[9223372036854775808]}')
      expectError(past, 400, "VALIDATION_FAILED")
      // the client wrote a plain integer, and reads back no bigint's `n`
      expect(past.body.error).toContain("9223372036854775808")
      expect(past.body.error).not.toMatch(/\d+n\b/)
      expectError(await raw("/v1/rqlite/query", '{"sql":"SELECT ?","args":[-9223372036854775809]}'), 400, "VALIDATION_FAILED")
      expect((await raw("/v1/rqlite/query", '{"sql":"SELECT ?","args":[-9223372036854775808]}')).body.rows).toEqual([[-9223372036854775808]])
      // a write with RETURNING answers its counts on both engines
      const returning = await raw("/v1/rqlite/exec", '{"sql":"INSERT INTO wide (id, n) VALUES (5, 6) RETURNING id, n"}')
      expect(Object.keys(returning.body).sort()).toEqual(["last_insert_id", "rows_affected"])
      expect(returning.body.rows_affected).toBe(1)
      // a criterion named __proto__ would vanish from a decoded object and widen the match
      expectError(await raw("/v1/rqlite/find", '{"table":"wide","criteria":{"__proto__":"x"}}'), 400, "VALIDATION_FAILED")
      await post("/v1/rqlite/drop-table", { table: "wide" })
    })

    it("finds by criteria with options, and find-one answers the row or null", async () => {
      const found = await post("/v1/rqlite/find", { table: "users", criteria: { team: 1 }, options: { order_by: ["age DESC"], limit: 5 } })
      expect(found.body).toEqual({
        items: [
          { id: 1, name: "ann", age: 31, team: 1 },
          { id: 3, name: "cy'; DROP TABLE users; --", age: 25, team: 1 }
        ],
        count: 2
      })
      expect((await post("/v1/rqlite/find", { table: "users", criteria: { age: null } })).body.items.map((u: { id: number }) => u.id)).toEqual([2])
      expect((await post("/v1/rqlite/find", { table: "users", criteria: {}, options: { order_by: ["id"], limit: 1, offset: 1 } })).body.items[0].id).toBe(2)
      const joined = await post("/v1/rqlite/find", {
        table: "users",
        criteria: { "teams.title": "blue" },
        options: { joins: [{ table: "teams", on: "teams.id = users.team" }] }
      })
      expect(joined.body.count).toBe(1)
      expect((await post("/v1/rqlite/find-one", { table: "users", criteria: { name: "bob" } })).body).toEqual({ id: 2, name: "bob", age: null, team: 2 })
      const none = await post("/v1/rqlite/find-one", { table: "users", criteria: { name: "zed" } })
      expect(none.status).toBe(200)
      expect(none.text).toBe("null")
      // a column name is data: quoted as an identifier, never SQL, and never read as a string
      // (rqlite's SQLite reads an unknown double-quoted name as one: a criterion named like its
      // value would match every row)
      expectError(await post("/v1/rqlite/find", { table: "users", criteria: { "1=1 OR name": "x" } }), 400, "SQL_ERROR")
      expectError(await post("/v1/rqlite/find", { table: "users", criteria: { nocol: "nocol" } }), 400, "SQL_ERROR")
      expectError(await post("/v1/rqlite/find", { table: "users", criteria: { name: { $ne: 1 } } }), 400, "VALIDATION_FAILED")
    })

    it("selects with columns, where clauses and their args, joins, grouping, ordering, paging and one", async () => {
      const s = await post("/v1/rqlite/select", {
        table: "users",
        alias: "u",
        select: ["t.title AS team", "count(*) AS n", "max(u.age) AS oldest"],
        joins: [{ kind: "LEFT", table: "teams", alias: "t", on: "t.id = u.team" }],
        where: [{ expr: "u.age > ?", args: [20] }, { conj: "OR", expr: "u.age IS NULL" }],
        group_by: ["t.title"],
        order_by: ["n DESC", "team"],
        limit: 10,
        offset: 0
      })
      expect(s.body, s.text).toEqual({ items: [{ team: "red", n: 2, oldest: 31 }, { team: "blue", n: 1, oldest: null }], count: 2 })
      const one = await post("/v1/rqlite/select", { table: "users", where: [{ expr: "name = ?", args: ["ann"] }], one: true })
      expect(one.body).toEqual({ id: 1, name: "ann", age: 31, team: 1 })
      expect((await post("/v1/rqlite/select", { table: "users", where: [{ expr: "0" }], one: true })).text).toBe("null")
      expect((await post("/v1/rqlite/select", { table: "users", offset: 2 })).body.count).toBe(1)
      // fragments cannot carry a second statement
      expectError(await post("/v1/rqlite/select", { table: "users", where: [{ expr: "1); DELETE FROM users; --" }] }), 400)
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM users" })).body.rows).toEqual([[3]])
    })

    it("binds each where clause to its own args, and nothing else to any", async () => {
      // two clauses, two args, each where it belongs
      const both = await post("/v1/rqlite/select", {
        table: "users",
        where: [{ expr: "name = ?", args: ["ann"] }, { conj: "OR", expr: "id = ?", args: [2] }],
        order_by: ["id"]
      })
      expect(both.body.items.map((u: { id: number }) => u.id)).toEqual([1, 2])
      // a `?` inside a string literal is text, not a placeholder
      expect((await post("/v1/rqlite/select", { table: "users", where: [{ expr: "name <> '?' AND id = ?", args: [3] }] })).body.count).toBe(1)
      // an extra arg would have bound the next clause's placeholder (or LIMIT's)
      const overflow = await post("/v1/rqlite/select", {
        table: "users",
        where: [{ expr: "id > ?", args: [0, "ann"] }, { expr: "name = ?" }]
      })
      expectError(overflow, 400, "VALIDATION_FAILED")
      expect(overflow.body.error).toContain("where[0].expr has 1 ? placeholder but 2 args")
      expectError(await post("/v1/rqlite/select", { table: "users", where: [{ expr: "id > ?", args: [0, 5] }], limit: 10 }), 400, "VALIDATION_FAILED")
      // one short would have matched against NULL
      expectError(await post("/v1/rqlite/select", { table: "users", where: [{ expr: "id = ? OR name = ?", args: [1] }] }), 400, "VALIDATION_FAILED")
      expectError(await post("/v1/rqlite/select", { table: "users", where: [{ expr: "id = ?" }] }), 400, "VALIDATION_FAILED")
      // numbered and named parameters address the whole statement's list
      expectError(await post("/v1/rqlite/select", { table: "users", where: [{ expr: "id = ?2", args: [1] }] }), 400, "VALIDATION_FAILED")
      expectError(await post("/v1/rqlite/select", { table: "users", where: [{ expr: "id = :id", args: [1] }] }), 400, "VALIDATION_FAILED")
      // fragments other than where clauses take no arguments
      for (const request of [
        { table: "users", select: ["?"], where: [{ expr: "id = ?", args: [1] }] },
        { table: "users", order_by: ["?"] },
        { table: "users", group_by: ["$x"] },
        { table: "users", joins: [{ table: "teams", on: "teams.id = ?" }] }
      ]) {
        expectError(await post("/v1/rqlite/select", request), 400, "VALIDATION_FAILED")
      }
      expectError(await post("/v1/rqlite/find", { table: "users", criteria: { id: 1 }, options: { order_by: ["?"], limit: 1 } }), 400, "VALIDATION_FAILED")
    })

    it("refuses text that is not valid Unicode in statements, arguments and names, on every route", async () => {
      // SQLite keeps UTF-8: a lone surrogate would be stored as U+FFFD, two values read back as one
      const lone = "\ud800"
      for (const [route, body] of [
        ["/v1/rqlite/query", { sql: "SELECT ?", args: [`a${lone}`] }],
        ["/v1/rqlite/query", { sql: `SELECT '${lone}'` }],
        ["/v1/rqlite/exec", { sql: "INSERT INTO teams (id, title) VALUES (?, ?)", args: [70, lone] }],
        ["/v1/rqlite/find", { table: `teams${lone}`, criteria: {} }],
        ["/v1/rqlite/find", { table: "teams", criteria: { [`title${lone}`]: 1 } }],
        ["/v1/rqlite/select", { table: "teams", where: [{ expr: "title = ?", args: [lone] }] }],
        ["/v1/rqlite/transaction", { ops: [{ kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (71, ?)", args: [lone] }] }],
        ["/v1/db/sqlite/query", { database_name: "kinds", query: "SELECT ?", params: [lone] }]
      ] as const) {
        expectError(await post(route, body), 400, "VALIDATION_FAILED")
      }
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM teams WHERE id >= 70" })).body.rows).toEqual([[0]])
      // a well-formed pair is text like any other
      expect((await post("/v1/rqlite/query", { sql: "SELECT ?", args: ["😀"] })).body.rows).toEqual([["😀"]])
    })

    it("runs a transaction atomically: a failing op is named and nothing is applied", async () => {
      const ok = await post("/v1/rqlite/transaction", {
        ops: [
          { kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (?, ?)", args: [3, "green"] },
          { kind: "query", sql: "SELECT count(*) AS n FROM teams" }
        ],
        return_results: true
      })
      expect(ok.body, ok.text).toEqual({
        results: [{ rows_affected: 1, last_insert_id: 3 }, { columns: ["n"], rows: [[3]], count: 1 }],
        count: 2
      })
      expect((await post("/v1/rqlite/transaction", { ops: [{ kind: "exec", sql: "UPDATE teams SET title = 'g' WHERE id = 3" }] })).body).toEqual({
        status: "ok",
        count: 1
      })
      const failed = await post("/v1/rqlite/transaction", {
        ops: [
          { kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (4, 'four')" },
          { kind: "exec", sql: "UPDATE teams SET title = 'changed'" },
          { kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (1, 'duplicate')" },
          { kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (5, 'five')" }
        ]
      })
      expectError(failed, 400, "TRANSACTION_FAILED")
      expect(failed.body.error).toContain("op 2")
      const teams = await post("/v1/rqlite/query", { sql: "SELECT id, title FROM teams ORDER BY id" })
      expect(teams.body.rows).toEqual([[1, "red"], [2, "blue"], [3, "g"]])
      // a guard refusal names its op and nothing runs
      const guarded = await post("/v1/rqlite/transaction", {
        ops: [{ kind: "exec", sql: "DELETE FROM teams" }, { kind: "query", sql: "SELECT * FROM keys" }]
      })
      expectError(guarded, 403, "SQL_NOT_ALLOWED")
      expect(guarded.body.error).toContain("op 1")
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM teams" })).body.rows).toEqual([[3]])
      // an op that fails to prepare (a missing function or table) applies nothing either, with or
      // without results asked for (rqlite's /db/request skips such a statement and commits the rest)
      for (const return_results of [true, false]) {
        for (const broken of [
          { kind: "query", sql: "SELECT nosuchfn(1)" },
          { kind: "query", sql: "SELECT * FROM nosuch" },
          { kind: "exec", sql: "INSERT INTO nosuch VALUES (1)" }
        ]) {
          const prepared = await post("/v1/rqlite/transaction", {
            ops: [
              { kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (7, 'seven')" },
              broken,
              { kind: "exec", sql: "UPDATE teams SET title = 'changed'" }
            ],
            return_results
          })
          expectError(prepared, 400, "TRANSACTION_FAILED")
          expect(prepared.body.error).toContain("op 1")
          expect((await post("/v1/rqlite/query", { sql: "SELECT id, title FROM teams ORDER BY id" })).body.rows).toEqual([[1, "red"], [2, "blue"], [3, "g"]])
        }
      }
      // transaction control inside a transaction, or on its own, would break all-or-nothing
      for (const control of ["COMMIT", "ROLLBACK", "END", "SAVEPOINT s", "RELEASE s", "BEGIN", "CREATE TEMP TABLE tt(a)"]) {
        const split = await post("/v1/rqlite/transaction", {
          ops: [
            { kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (6, 'six')" },
            { kind: "query", sql: control },
            { kind: "exec", sql: "INSERT INTO teams (id, title) VALUES (1, 'duplicate')" }
          ]
        })
        expectError(split, 403, "SQL_NOT_ALLOWED")
        expect(split.body.error).toContain("op 1")
        expectError(await post("/v1/rqlite/query", { sql: control }), 403, "SQL_NOT_ALLOWED")
        expectError(await post("/v1/rqlite/exec", { sql: control }), 403, "SQL_NOT_ALLOWED")
      }
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM teams" })).body.rows).toEqual([[3]])
      expectError(await post("/v1/rqlite/transaction", { ops: [] }), 400)
      expectError(await post("/v1/rqlite/transaction", { ops: [{ kind: "drop", sql: "SELECT 1" }] }), 400, "VALIDATION_FAILED")
    })

    it("refuses every way of naming a reserved table, and refused statements, for everyone", async () => {
      const bypasses = [
        "SELECT * FROM keys",
        "select * from KEYS",
        'SELECT * FROM "keys"',
        "SELECT * FROM [keys]",
        "SELECT * FROM `keys`",
        "SELECT * FROM main.keys",
        "SELECT * FROM main . keys",
        'SELECT * FROM main/**/./**/"keys"',
        'SELECT * FROM "main"."sessions"',
        "SELECT * FROM/*c*/namespaces",
        "SELECT * FROM\napi_keys--c",
        "SELECT name FROM sqlite_master WHERE name = 'keys'",
        "SELECT * FROM pragma_table_info('keys')",
        "SELECT * FROM pragma_table_info('users')",
        "WITH x AS (SELECT * FROM sessions) SELECT * FROM x",
        "SELECT * FROM users WHERE id IN (SELECT id FROM grants)",
        "SELECT * FROM users JOIN deployments d ON 1",
        "SELECT * FROM portico_migrations",
        "SELECT * FROM signing_keys",
        "SELECT * FROM local_databases"
      ]
      for (const sql of bypasses) expectError(await post("/v1/rqlite/query", { sql }), 403, "SQL_NOT_ALLOWED")
      const writes = [
        "INSERT INTO users (name) SELECT wallet FROM members",
        "CREATE TABLE functions (id)",
        "ALTER TABLE users RENAME TO keys",
        "CREATE VIEW v AS SELECT * FROM keys",
        "CREATE TRIGGER tr AFTER INSERT ON users BEGIN DELETE FROM users; END",
        "create temp trigger tr after insert on users begin select 1; end",
        "ATTACH 'x.db' AS x",
        "DETACH x",
        "PRAGMA foreign_keys = OFF",
        "VACUUM",
        "VACUUM INTO '/tmp/x.db'",
        "DROP TABLE \"functions\""
      ]
      for (const sql of writes) expectError(await post("/v1/rqlite/exec", { sql }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/query", { sql: "SELECT load_extension('x')" }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/create-table", { schema: "CREATE TABLE sessions (id)" }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/drop-table", { table: "keys" }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/drop-table", { table: "Namespaces" }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/find", { table: "keys", criteria: {} }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/select", { table: "users", joins: [{ table: "api_keys", on: "1" }] }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/select", { table: "users", where: [{ expr: "name IN (SELECT wallet FROM members)" }] }), 403, "SQL_NOT_ALLOWED")
      expectError(await post("/v1/rqlite/query", { sql: "SELECT 1; SELECT 2" }), 400, "VALIDATION_FAILED")
      // an admin key is held to the same guard
      expectError(await post("/v1/rqlite/query", { sql: "SELECT * FROM keys" }, admin), 403, "SQL_NOT_ALLOWED")
      // look-alikes name other (absent) tables, and names merely containing a reserved word pass
      expectError(await post("/v1/rqlite/query", { sql: 'SELECT * FROM "ke""ys"' }), 400, "SQL_ERROR")
      expect((await post("/v1/rqlite/query", { sql: "SELECT 1 AS keys_count -- keys" })).status).toBe(200)
      // text needed as data passes as an argument
      expect((await post("/v1/rqlite/query", { sql: "SELECT ? AS word", args: ["keys"] })).body.rows).toEqual([["keys"]])
    })

    it("shows tables and views with their CREATE statements; dropping an absent table succeeds", async () => {
      await post("/v1/rqlite/exec", { sql: "CREATE VIEW adults AS SELECT * FROM users WHERE age >= 18" })
      const schema = await gw.request("GET", "/v1/rqlite/schema", { token: owner })
      expect(schema.status).toBe(200)
      expect(schema.body.tables.map((t: { name: string; type: string }) => [t.name, t.type])).toEqual([
        ["adults", "view"],
        ["teams", "table"],
        ["users", "table"]
      ])
      expect(schema.body.tables[2].sql).toContain("CREATE TABLE users")
      expect(schema.body.count).toBe(3)
      expect((await post("/v1/rqlite/drop-table", { table: "never_was" })).status).toBe(200)
      expectError(await post("/v1/rqlite/create-table", { schema: "INSERT INTO users (name) VALUES ('x')" }), 400, "VALIDATION_FAILED")
      // what the guard refuses is its 403 here too, as on /v1/rqlite/exec
      expectError(await post("/v1/rqlite/create-table", { schema: "CREATE TEMP TABLE t5 (a)" }), 403, "SQL_NOT_ALLOWED")
      // one `member: problem`, the member named once
      const badName = await gw.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "a.b" } })
      expect([badName.status, badName.body.error]).toEqual([400, "database_name: 1-64 letters, digits, underscores or hyphens"])
    })

    it("needs db:write on the control plane; runtime keys and other namespaces are out", async () => {
      expectError(await post("/v1/rqlite/query", { sql: "SELECT 1" }, runtime), 403, "CONTROL_PLANE_REQUIRED")
      const custom = (await gw.request("POST", "/v1/namespace/keys", { token: owner, json: { scopes: ["cache"] } })).body.api_key
      expectError(await post("/v1/rqlite/query", { sql: "SELECT 1" }, custom), 403)
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM users" }, admin)).body.rows).toEqual([[3]])
      // another namespace has its own database: no users table there
      expectError(await post("/v1/rqlite/query", { sql: "SELECT * FROM users" }, otherOwner), 400, "SQL_ERROR")
    })

    it("refuses bodies over 4 MiB before parsing, and blank or unparsable bodies", async () => {
      const big = `{"sql":"SELECT ?","args":["${"x".repeat(4 * 1024 * 1024)}"]}`
      expectError(await gw.request("POST", "/v1/rqlite/query", { token: owner, body: big, headers: { "content-type": "application/json" } }), 413, "PAYLOAD_TOO_LARGE")
      expectError(await gw.request("POST", "/v1/rqlite/query", { token: owner, body: "", headers: { "content-type": "application/json" } }), 400)
      expectError(await gw.request("POST", "/v1/rqlite/exec", { token: owner, body: "{sql:", headers: { "content-type": "application/json" } }), 400)
      expectError(await gw.request("POST", "/v1/rqlite/exec", { token: owner, body: '{"sql":"SELECT 1","sql":"DROP TABLE users"}', headers: { "content-type": "application/json" } }), 400)
    })

    it("exports the raw database (owner only) and imports it into another namespace", async () => {
      expectError(await gw.request("GET", "/v1/rqlite/export", { token: admin }), 403, "OWNER_REQUIRED")
      const res = await exportAs()
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toBe("application/vnd.sqlite3")
      const bytes = Buffer.from(await res.arrayBuffer())
      expect(Number(res.headers.get("content-length"))).toBe(bytes.length)
      expect(bytes.subarray(0, 16).toString("latin1")).toBe("SQLite format 3\0")
      const file = path.join(scratch, "exported.db")
      writeFileSync(file, bytes)
      const db = new Database(file, { readonly: true })
      expect(db.prepare("SELECT count(*) AS n FROM users").get()).toEqual({ n: 3 })
      db.close()

      expectError(await gw.request("POST", "/v1/rqlite/import", { token: admin, body: bytes.toString("latin1") }), 403, "OWNER_REQUIRED")
      const imported = await importAs(otherOwner, bytes)
      const answer = await imported.json()
      expect(imported.status, JSON.stringify(answer)).toBe(200)
      expect(answer).toEqual({ status: "ok", bytes: bytes.length, tables: 2 })
      expect((await post("/v1/rqlite/query", { sql: "SELECT name FROM users ORDER BY id" }, otherOwner)).body.rows).toEqual([
        ["ann"],
        ["bob"],
        ["cy'; DROP TABLE users; --"]
      ])
    })

    it("imports into a namespace whose store was never used: its first request may be the import", async () => {
      const res = await exportAs()
      const bytes = Buffer.from(await res.arrayBuffer())
      const fresh = (await gw.cli(["namespace", "create", "dbfresh"])).api_key as string
      const imported = await importAs(fresh, bytes)
      const answer = await imported.json()
      expect(imported.status, JSON.stringify(answer)).toBe(200)
      expect(answer).toEqual({ status: "ok", bytes: bytes.length, tables: 2 })
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM users" }, fresh)).body.rows).toEqual([[3]])
    })

    it("gives the transfer slot back with the export's last byte: an import right after it is never 429", async () => {
      for (let round = 0; round < 5; round++) {
        const res = await exportAs()
        expect(res.status).toBe(200)
        const bytes = Buffer.from(await res.arrayBuffer())
        const imported = await importAs(otherOwner, bytes)
        const answer = await imported.text()
        expect(imported.status, `round ${round}: ${answer}`).toBe(200)
      }
    })

    it("checks an import offline: damaged files, triggers and reserved names give 400 and nothing is written", async () => {
      const importOther = (body: Buffer) => importAs(otherOwner, body).then(async (r) => ({ status: r.status, body: await r.json() }))
      const good = sqliteFile(["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"])
      const damaged = Buffer.concat([good.subarray(0, 100), Buffer.alloc(good.length - 100, 0xab)])
      const cases: Array<[string, Buffer]> = [
        ["not sqlite", Buffer.from("hello, this is not a database file at all".repeat(200))],
        ["damaged", damaged],
        ["empty", Buffer.alloc(0)],
        ["trigger", sqliteFile(["CREATE TABLE t (x)", "CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t; END"])],
        ["view over a platform table", sqliteFile(["CREATE TABLE keys (k)", "CREATE VIEW v AS SELECT * FROM keys"])],
        ["platform table", sqliteFile(["CREATE TABLE sessions (id)"])],
        ["prefixed table", sqliteFile(["CREATE TABLE portico_secrets (id)"])],
        ["view over a pragma", sqliteFile(["CREATE VIEW v AS SELECT file FROM pragma_database_list"])],
        // objects renamed into SQLite's own prefix with writable_schema are inspected all the same
        [
          "trigger under SQLite's prefix",
          sqliteFile(
            ["CREATE TABLE t (x)", "CREATE TABLE logt (m)", "CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO logt VALUES ('fired'); END"],
            ["UPDATE sqlite_schema SET name = 'sqlite_tr', sql = replace(sql, 'TRIGGER tr ', 'TRIGGER sqlite_tr ') WHERE name = 'tr'"]
          )
        ],
        [
          "view under SQLite's prefix",
          sqliteFile(
            ["CREATE TABLE t (x)", "CREATE VIEW v AS SELECT file FROM pragma_database_list"],
            ["UPDATE sqlite_schema SET name = 'sqlite_v', tbl_name = 'sqlite_v', sql = replace(sql, 'VIEW v ', 'VIEW sqlite_v ') WHERE name = 'v'"]
          )
        ],
        ["table under SQLite's prefix", sqliteFile(["CREATE TABLE t (x)"], ["UPDATE sqlite_schema SET name = 'sqlite_x', tbl_name = 'sqlite_x', sql = 'CREATE TABLE sqlite_x (x)' WHERE name = 't'"])],
        [
          "table posing as ANALYZE's",
          sqliteFile(["CREATE TABLE t (b)"], ["UPDATE sqlite_schema SET name = 'sqlite_stat1', tbl_name = 'sqlite_stat1', sql = 'CREATE TABLE sqlite_stat1 (b)' WHERE name = 't'"])
        ]
      ]
      for (const [what, body] of cases) {
        const r = await importOther(body)
        expect(r.status, `${what}: ${JSON.stringify(r.body)}`).toBe(400)
        expect(Object.keys(r.body as object).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
      }
      // the earlier import is still what the namespace holds
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM users" }, otherOwner)).body.rows).toEqual([[3]])
      // SQLite's own bookkeeping (AUTOINCREMENT's counter, constraint indexes, ANALYZE) imports
      const internals = sqliteFile([
        "CREATE TABLE users (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE)",
        "INSERT INTO users (name) VALUES ('a'), ('b'), ('c')",
        "ANALYZE"
      ])
      const imported = await importOther(internals)
      expect(imported.status, JSON.stringify(imported.body)).toBe(200)
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM users" }, otherOwner)).body.rows).toEqual([[3]])
    })

    it("refuses an import over 256 MiB: at once when announced, and when a stream crosses it, without buffering it", async () => {
      const announced = streamUpload(gw, "/v1/rqlite/import", otherOwner, { contentLength: 300 * 1024 * 1024, totalBytes: 8 * 1024 * 1024 })
      const a = await announced.reply
      expect(a.status).toBe(413)
      expect(JSON.parse(a.body).code).toBe("PAYLOAD_TOO_LARGE")

      const before = rssKb(gw.pid)
      const streamed = streamUpload(gw, "/v1/rqlite/import", otherOwner, { totalBytes: 300 * 1024 * 1024 })
      const s = await streamed.reply
      expect(s.status).toBe(413)
      expect(JSON.parse(s.body).code).toBe("PAYLOAD_TOO_LARGE")
      // the upload went to disk, not memory
      expect(rssKb(gw.pid) - before).toBeLessThan(128 * 1024)
      expect((await post("/v1/rqlite/query", { sql: "SELECT count(*) FROM users" }, otherOwner)).body.rows).toEqual([[3]])
    }, 120_000)

    it("shares one transfer slot per gateway: a second transfer is 429 with Retry-After", async () => {
      const slow = streamUpload(gw, "/v1/rqlite/import", otherOwner, { totalBytes: 64 * 1024 * 1024, pauseAfter: 2 * 1024 * 1024 })
      await new Promise((r) => setTimeout(r, 500))
      const busy = await gw.request("GET", "/v1/rqlite/export", { token: owner })
      expectError(busy, 429, "RATE_LIMITED")
      expect(Number(busy.headers.get("retry-after"))).toBeGreaterThan(0)
      slow.release()
      await slow.reply.catch(() => undefined)
      // the slot is free again once the cut-off upload is gone
      await new Promise((r) => setTimeout(r, 300))
      expect((await exportAs()).status).toBe(200)
    })
  })

  // Written out answer for answer: both engines must give exactly these bodies.
  describe("cluster SQL store: the same answers on both engines", () => {
    const stopped = {
      error: "the statement ran over 1.5 s and was stopped",
      code: "STATEMENT_TIMEOUT",
      hint: "add an index, narrow the query, or page it"
    }
    const RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"

    it("stops a runaway read, write or transaction at the statement timeout, once, and keeps serving", async () => {
      await post("/v1/rqlite/create-table", { schema: "CREATE TABLE slow (id INTEGER PRIMARY KEY, v)" })
      const attempts: ReadonlyArray<readonly [string, unknown]> = [
        ["/v1/rqlite/query", { sql: `${RUNAWAY.replace("SELECT x FROM c", "SELECT count(*) FROM c")}` }],
        ["/v1/rqlite/exec", { sql: `INSERT INTO slow (v) ${RUNAWAY}` }],
        ["/v1/rqlite/transaction", { ops: [{ kind: "exec", sql: "INSERT INTO slow (v) VALUES (1)" }, { kind: "exec", sql: `INSERT INTO slow (v) ${RUNAWAY}` }] }],
        ["/v1/rqlite/transaction", { ops: [{ kind: "exec", sql: "INSERT INTO slow (v) VALUES (1)" }, { kind: "query", sql: `SELECT count(*) FROM (${RUNAWAY})` }], return_results: true }]
      ]
      for (const [route, body] of attempts) {
        const started = Date.now()
        const reply = await post(route, body)
        expect(reply.status, `${route} ${reply.text}`).toBe(400)
        expect(reply.body).toEqual(stopped)
        // stopped once at 1.5 s: not retried, not left to the gateway's deadline
        expect(Date.now() - started).toBeLessThan(4_000)
      }
      // nothing of the stopped writes was applied, and writes go through at once (a comment
      // after the `;` is no further statement: rqlite's driver used to answer no counts for it)
      const started = Date.now()
      expect((await post("/v1/rqlite/exec", { sql: "INSERT INTO slow (v) VALUES (7); -- seven" })).body).toEqual({ rows_affected: 1, last_insert_id: 1 })
      expect(Date.now() - started).toBeLessThan(1_000)
      expect((await post("/v1/rqlite/query", { sql: "SELECT v FROM slow" })).body).toEqual({ columns: ["v"], rows: [[7]], count: 1 })
    }, 30_000)

    it("answers blobs as base64 in every kind of column, and every value as stored", async () => {
      await post("/v1/rqlite/create-table", { schema: "CREATE TABLE vals (id INTEGER PRIMARY KEY, u, b BLOB, t TEXT, d DATE, f BOOLEAN)" })
      const ins = await post("/v1/rqlite/exec", {
        sql: "INSERT INTO vals (u, b, t, d, f) VALUES (X'00FF', X'00FF', X'6869', 5, 5), (?, ?, ?, ?, ?), (NULL, X'', 'plain', 1700000000, 0)",
        args: ["text", 1, 2.5, "hello", "x"]
      })
      expect(ins.body).toEqual({ rows_affected: 3, last_insert_id: 3 })
      const rows = [
        [1, "AP8=", "AP8=", "aGk=", 5, 5],
        [2, "text", 1, "2.5", "hello", "x"],
        [3, null, "", "plain", 1700000000, 0]
      ]
      // each twice: the second read is the one rqlite answers wrapped from the start
      for (let round = 0; round < 2; round++) {
        expect((await post("/v1/rqlite/query", { sql: "SELECT X'00FF', X'6869', X'', 'hi'" })).body).toEqual({
          columns: ["X'00FF'", "X'6869'", "X''", "'hi'"],
          rows: [["AP8=", "aGk=", "", "hi"]],
          count: 1
        })
        expect((await post("/v1/rqlite/query", { sql: "SELECT id, u, b, t, d, f FROM vals ORDER BY id; -- all of it" })).body).toEqual({
          columns: ["id", "u", "b", "t", "d", "f"],
          rows,
          count: 3
        })
        expect((await post("/v1/rqlite/query", { sql: "SELECT u, b FROM vals ORDER BY id DESC LIMIT 2" })).body.rows).toEqual([
          [null, ""],
          ["text", 1]
        ])
        expect((await post("/v1/rqlite/find-one", { table: "vals", criteria: { id: 1 } })).body).toEqual({
          id: 1, u: "AP8=", b: "AP8=", t: "aGk=", d: 5, f: 5
        })
        expect((await post("/v1/rqlite/select", { table: "vals", select: ["u", "b AS u"], where: [{ expr: "id = ?", args: [1] }] })).body).toEqual({
          items: [{ u: "AP8=", "u:2": "AP8=" }],
          count: 1
        })
        const tx = await post("/v1/rqlite/transaction", {
          ops: [
            { kind: "exec", sql: "UPDATE vals SET f = f WHERE id = 1" },
            { kind: "query", sql: "SELECT u, t FROM vals WHERE id = 1" }
          ],
          return_results: true
        })
        expect(tx.body).toEqual({
          results: [{ rows_affected: 1, last_insert_id: 3 }, { columns: ["u", "t"], rows: [["AP8=", "aGk="]], count: 1 }],
          count: 2
        })
      }
      // a schema change renames what the same statement answers
      const all = { sql: "SELECT * FROM vals WHERE id = 1" }
      expect((await post("/v1/rqlite/query", all)).body.columns).toEqual(["id", "u", "b", "t", "d", "f"])
      expect((await post("/v1/rqlite/exec", { sql: "ALTER TABLE vals RENAME COLUMN u TO untyped" })).status).toBe(200)
      expect((await post("/v1/rqlite/query", all)).body).toEqual({
        columns: ["id", "untyped", "b", "t", "d", "f"],
        rows: [rows[0]],
        count: 1
      })
      expect((await post("/v1/rqlite/exec", { sql: "ALTER TABLE vals ADD COLUMN e BLOB" })).status).toBe(200)
      expect((await post("/v1/rqlite/query", all)).body).toEqual({
        columns: ["id", "untyped", "b", "t", "d", "f", "e"],
        rows: [[...rows[0] ?? [], null]],
        count: 1
      })
    })

    // rqlite: only the columns whose declared type it alters are sent wrapped, learnt with no row
    // in hand; an expression's type is filled in from its first row, which must not be trusted
    it("answers as stored when typed columns pass through: expressions, unions, and a blob after an integer", async () => {
      await post("/v1/rqlite/create-table", { schema: "CREATE TABLE mix (id INTEGER PRIMARY KEY, n INTEGER, b BLOB, t TEXT, d DATETIME)" })
      const ins = await post("/v1/rqlite/exec", {
        sql: "INSERT INTO mix (n, b, t, d) VALUES (5, X'00FF', 'a', '2024-01-02'), (X'0102', 'text in blob', X'6869', 7), ('9x', 2.5, NULL, X'')"
      })
      expect(ins.body).toEqual({ rows_affected: 3, last_insert_id: 3 })
      const reads: ReadonlyArray<readonly [string, ReadonlyArray<ReadonlyArray<unknown>>]> = [
        // typed columns only: INTEGER and BLOB hold a blob, a text and a real as stored
        ["SELECT id, n, b FROM mix ORDER BY id", [[1, 5, "AP8="], [2, "AQI=", "text in blob"], [3, "9x", 2.5]]],
        // an expression answering an integer first, then a blob and a text
        ["SELECT CASE id WHEN 1 THEN 5 WHEN 2 THEN X'00FF' ELSE 'x' END AS e FROM mix ORDER BY id", [[5], ["AP8="], ["x"]]],
        // a union takes its first part's declared type (BLOB) for rows of a TEXT column
        ["SELECT b AS v FROM mix WHERE id = 1 UNION ALL SELECT t FROM mix WHERE id = 2", [["AP8="], ["aGk="]]],
        // and the TEXT type for rows of a BLOB column
        ["SELECT t AS v FROM mix WHERE id = 2 UNION ALL SELECT b FROM mix WHERE id = 1", [["aGk="], ["AP8="]]],
        // DATETIME: texts and integers as stored, not as times
        ["SELECT d, t FROM mix ORDER BY id", [["2024-01-02", "a"], [7, "aGk="], ["", null]]],
        ["SELECT count(*) AS c, max(n) AS m FROM mix WHERE id = ?", [[1, "AQI="]]]
      ]
      for (let round = 0; round < 3; round++) {
        for (const [sql, rows] of reads) {
          const args = sql.includes("?") ? [2] : []
          const answer = await post("/v1/rqlite/query", { sql, args })
          expect({ sql, round, rows: answer.body.rows }).toEqual({ sql, round, rows })
        }
      }
      // many at once, so that they share batches on rqlite
      const together = await Promise.all(
        Array.from({ length: 40 }, (_, i) => {
          const [sql, rows] = reads[i % reads.length] ?? ["", []]
          return post("/v1/rqlite/query", { sql, args: sql.includes("?") ? [2] : [] }).then((a) => [a.body.rows, rows])
        })
      )
      for (const [got, want] of together) expect(got).toEqual(want)
    })
  })
})

describe("node-local databases on another node: forwarded to the home node", () => {
  let server: RqlitedServer
  let a: Gateway
  let b: Gateway
  let owner: string
  const secret = "11".repeat(32)

  beforeAll(async () => {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    server = await Effect.runPromise(startRqlited())
    const [portA, portB] = [await Effect.runPromise(freePort), await Effect.runPromise(freePort)]
    const shared = { PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: secret }
    a = await startGateway({ port: portA, env: { ...shared, PORTICO_NODE_ID: "node-a", PORTICO_PEERS: `node-b=http://127.0.0.1:${portB}` } })
    b = await startGateway({ port: portB, env: { ...shared, PORTICO_NODE_ID: "node-b", PORTICO_PEERS: `node-a=http://127.0.0.1:${portA}` } })
    owner = (await a.cli(["namespace", "create", "homes"])).api_key
  }, 90_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await Effect.runPromise(server?.stop ?? Effect.void)
  })

  const q = (gw: Gateway, database: string, query: string, params?: ReadonlyArray<unknown>) =>
    gw.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: database, query, ...(params === undefined ? {} : { params }) } })

  it("runs queries, backups and deletes on the home node whichever gateway takes them", async () => {
    const created = await a.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "ledger" } })
    expect(created.status, created.text).toBe(201)
    expect(created.body.home_node).toBe("node-a")
    expect((await q(b, "ledger", "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")).status).toBe(200)
    // a boolean binds as the integer 1, also into a TEXT column (not "1.0")
    expect((await q(b, "ledger", "INSERT INTO t (v) VALUES (?), (?)", ["x", true])).body).toEqual({ rows_affected: 2, last_insert_id: 2 })
    expect((await q(a, "ledger", "SELECT id, v FROM t ORDER BY id")).body).toEqual({ columns: ["id", "v"], rows: [[1, "x"], [2, "1"]] })
    expect((await q(b, "ledger", "SELECT count(*) AS n FROM t")).body.rows).toEqual([[2]])
    // the file is on the home node only
    expect(existsSync(path.join(a.dataDir, "databases", "homes", "ledger.db"))).toBe(true)
    expect(existsSync(path.join(b.dataDir, "databases", "homes", "ledger.db"))).toBe(false)
    // the home node's refusals come back as it gave them; the guard still runs at the front
    expectError(await q(b, "ledger", "SELECT * FROM nope"), 400, "SQL_ERROR")
    expectError(await q(b, "ledger", "ATTACH DATABASE '/tmp/x' AS x"), 403, "SQL_NOT_ALLOWED")
    expectError(await q(b, "absent", "SELECT 1"), 404, "NOT_FOUND")

    const backup = await b.request("POST", "/v1/db/sqlite/backup", { token: owner, json: { database_name: "ledger" } })
    expect(backup.status, backup.text).toBe(201)
    expect(backup.body.database_name).toBe("ledger")
    expect((await a.request("GET", "/v1/db/sqlite/backups?database_name=ledger", { token: owner })).body.backups[0].backup_cid).toBe(backup.body.backup_cid)
    // the embedded content engine kept the backup's blocks on the home node: read there; through
    // the other gateway the answer says where to read it instead of "retry shortly"
    // (reading content takes a signed-in wallet's session)
    const reader = Wallet.createRandom()
    await a.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: reader.address, role: "developer" } })
    const { message } = (await a.request("POST", "/v1/auth/challenge", { json: { wallet: reader.address, namespace: "homes" } })).body
    const session = (await a.request("POST", "/v1/auth/verify", { json: { message, signature: await reader.signMessage(message) } })).body
    const there = await a.request("GET", `/v1/storage/get/${backup.body.backup_cid}`, { token: session.access_token })
    expect(there.status).toBe(200)
    const elsewhere = await b.request("GET", `/v1/storage/get/${backup.body.backup_cid}`, { token: session.access_token })
    expectError(elsewhere, 503, "UNAVAILABLE")
    expect(elsewhere.body.hint).toContain("home node")

    const deleted = await b.request("POST", "/v1/db/sqlite/delete", { token: owner, json: { database_name: "ledger" } })
    expect(deleted.body).toEqual({ name: "ledger", deleted: true })
    expect(existsSync(path.join(a.dataDir, "databases", "homes", "ledger.db"))).toBe(false)
    expectError(await q(a, "ledger", "SELECT 1"), 404, "NOT_FOUND")
  })

  it("refuses internal calls without the coordination MAC", async () => {
    const forged = await b.request("POST", "/v1/internal/sqlite/query", {
      json: { principal: { namespace: "homes", subject: "x", method: "api_key", role: "owner", grants: [] }, database_name: "ledger", query: "SELECT 1", params: [] },
      headers: { "x-portico-coordination-mac": "v1=" + "A".repeat(43), "x-portico-coordination-time": String(Math.floor(Date.now() / 1000)) }
    })
    expectError(forged, 403)
    // nor a peer channel opened without it, or with a forged one
    const { WebSocket } = await import("ws")
    for (const headers of [{}, { "x-portico-coordination-mac": "v2=" + "A".repeat(43), "x-portico-coordination-time": String(Math.floor(Date.now() / 1000)), "x-portico-coordination-nonce": "n".repeat(24), "x-portico-forward-envelope": '{"from":"node-a","generation":0}' }]) {
      const refused = await new Promise<{ status: number; body: string }>((resolve) => {
        const ws = new WebSocket(b.url.replace("http", "ws") + "/v1/internal/channel", { headers })
        ws.on("unexpected-response", (_req, res) => {
          const chunks: Array<Buffer> = []
          res.on("data", (c: Buffer) => chunks.push(c)).on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
        })
        ws.on("open", () => resolve({ status: 101, body: "" }))
        ws.on("error", () => undefined)
      })
      expect(refused.status).toBe(403)
      expect(JSON.parse(refused.body)).toMatchObject({ code: "COORDINATION_REFUSED" })
    }
  })

  it("accepts a forwarded call once: a captured one replayed to the home node runs nothing", async () => {
    // a listener on the overlay, between gateway C and the home node A
    const captured: Array<{ headers: http.IncomingHttpHeaders; body: string }> = []
    const [portA, portProxy] = [Number(new URL(a.url).port), await Effect.runPromise(freePort)]
    const proxy = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8")
        captured.push({ headers: req.headers, body })
        const out = http.request({ host: "127.0.0.1", port: portA, path: req.url, method: req.method, headers: req.headers }, (back) => {
          res.writeHead(back.statusCode ?? 502, back.headers)
          back.pipe(res)
        })
        out.end(body)
      })
    })
    await new Promise<void>((resolve) => proxy.listen(portProxy, "127.0.0.1", resolve))
    const c = await startGateway({
      env: { PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: secret, PORTICO_NODE_ID: "node-c", PORTICO_PEERS: `node-a=http://127.0.0.1:${portProxy}` }
    })
    try {
      expect((await a.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "once" } })).status).toBe(201)
      await q(a, "once", "CREATE TABLE t (v)")
      expect((await q(c, "once", "INSERT INTO t (v) VALUES (?)", ["via-c"])).body).toEqual({ rows_affected: 1, last_insert_id: 1 })
      const call = captured.at(-1)
      expect(call?.headers["x-portico-coordination-mac"]).toMatch(/^v2=/)
      const replay = await fetch(`${a.url}/v1/internal/sqlite/query`, {
        method: "POST",
        headers: Object.fromEntries(Object.entries(call?.headers ?? {}).filter(([k]) => k.startsWith("x-portico-") || k === "content-type")) as Record<string, string>,
        body: call?.body
      })
      expect(replay.status).toBe(403)
      expect(await replay.json()).toMatchObject({ code: "COORDINATION_REFUSED", error: "coordination call replayed" })
      expect((await q(a, "once", "SELECT count(*) FROM t")).body.rows).toEqual([[1]])
      // numbers reach the home node as the client wrote them: a double stays a double
      for (const literal of ["3e18", "1e19", "-1.5e19", "1e400"]) {
        const body = `{"database_name":"once","query":"SELECT v, typeof(v) FROM (SELECT ? AS v)","params":[${literal}]}`
        const send = (gw: Gateway) => gw.request("POST", "/v1/db/sqlite/query", { token: owner, headers: { "content-type": "application/json" }, body })
        const [direct, forwarded] = [await send(a), await send(c)]
        expect(direct.status, direct.text).toBe(200)
        expect(forwarded.text, literal).toBe(direct.text)
      }
      // a body within the cap at the front is within it at the home node too, principal and all
      const long = "SELECT 1 -- " + "a".repeat(4 * 1024 * 1024 - 200)
      const near = await c.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "once", query: long } })
      expect(near.status, near.text.slice(0, 200)).toBe(200)
    } finally {
      await c.stop()
      await new Promise<void>((resolve) => proxy.close(() => resolve()))
    }
  }, 90_000)

  it("sends forwarded queries on a kept peer channel once it is open; a replayed handshake is refused; a cut channel falls back to HTTP", async () => {
    // a TCP listener on the overlay between gateway E and the home node A, noting each request line it relays
    const lines: Array<string> = []
    const firstBytes: Array<Buffer> = []
    const links = new Set<net.Socket>()
    const [portA, portProxy] = [Number(new URL(a.url).port), await Effect.runPromise(freePort)]
    const proxy = net.createServer((client) => {
      const upstream = net.connect(portA, "127.0.0.1")
      links.add(client).add(upstream)
      let first = true
      client.on("data", (chunk: Buffer) => {
        if (first) firstBytes.push(chunk)
        first = false
        // request heads only: a client's WebSocket frames are masked, so no head appears in them
        for (const m of chunk.toString("latin1").matchAll(/^(GET|POST) (\S+) HTTP\/1\.1\r$/gm)) lines.push(`${m[1]} ${m[2]}`)
      })
      client.pipe(upstream).pipe(client)
      const end = () => {
        client.destroy()
        upstream.destroy()
      }
      client.on("error", end).on("close", end)
      upstream.on("error", end).on("close", end)
    })
    await new Promise<void>((resolve) => proxy.listen(portProxy, "127.0.0.1", resolve))
    const e = await startGateway({
      env: { PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: secret, PORTICO_NODE_ID: "node-e", PORTICO_PEERS: `node-a=http://127.0.0.1:${portProxy}` }
    })
    const posts = () => lines.filter((l) => l === "POST /v1/internal/sqlite/query").length
    const channels = () => lines.filter((l) => l === "GET /v1/internal/channel").length
    try {
      expect((await a.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "chan" } })).status).toBe(201)
      await q(a, "chan", "CREATE TABLE t (v)")
      /** Reads through E until a read goes by without an HTTP call on the overlay: the channel is open. */
      const untilOnChannel = async () => {
        for (let i = 0; i < 100; i++) {
          const before = posts()
          const reply = await q(e, "chan", "SELECT count(*) FROM t")
          expect(reply.status, reply.text).toBe(200)
          if (posts() === before) return
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        throw new Error(`no channel: ${lines.join(", ")}`)
      }
      // the first calls go as HTTP (the node's address read, then while the channel opens)
      await untilOnChannel()
      expect(channels()).toBe(1)
      const beforeChannel = posts()
      for (let i = 0; i < 20; i++) {
        const reply = await q(e, "chan", "INSERT INTO t (v) VALUES (?)", [`row ${i}`])
        expect(reply.body, reply.text).toEqual({ rows_affected: 1, last_insert_id: i + 1 })
      }
      expect(posts(), lines.join(", ")).toBe(beforeChannel)
      expect((await q(e, "chan", "SELECT count(*), max(v) FROM t")).body.rows).toEqual([[20, "row 9"]])
      // a refusal from the home node comes back on the channel as it was given
      expectError(await q(e, "chan", "SELECT * FROM nope"), 400, "SQL_ERROR")
      // a body at the front's cap fits the channel too, principal and all
      const long = await q(e, "chan", "SELECT 1 -- " + "a".repeat(4 * 1024 * 1024 - 200))
      expect(long.status, long.text.slice(0, 200)).toBe(200)
      expect(posts()).toBe(beforeChannel)

      // the channel's handshake, captured on the overlay and sent again: its nonce is spent
      const handshake = firstBytes.find((b) => b.toString("latin1").startsWith("GET /v1/internal/channel"))
      if (handshake === undefined) throw new Error("no channel handshake was seen on the overlay")
      const replayed = await new Promise<string>((resolve) => {
        const socket = net.connect(portA, "127.0.0.1", () => socket.end(handshake))
        const chunks: Array<Buffer> = []
        socket.on("data", (c: Buffer) => chunks.push(c)).on("close", () => resolve(Buffer.concat(chunks).toString("utf8")))
      })
      expect(replayed).toMatch(/^HTTP\/1\.1 403/)
      expect(replayed).toContain("coordination call replayed")

      // the overlay cut: queries go as HTTP until a new channel is open, then on it again (a call
      // on its way when the link dropped is 503 HOME_NODE_UNREACHABLE, as over HTTP)
      for (const link of links) link.destroy()
      await new Promise((resolve) => setTimeout(resolve, 100))
      await untilOnChannel()
      expect(channels()).toBe(2)
      const beforeReopened = posts()
      for (let i = 0; i < 5; i++) expect((await q(e, "chan", "SELECT count(*) FROM t")).body.rows).toEqual([[20]])
      expect(posts()).toBe(beforeReopened)
    } finally {
      await e.stop()
      await new Promise<void>((resolve) => proxy.close(() => resolve()))
    }
  }, 90_000)

  it("tells the client the home node is unreachable when it refuses this gateway's coordination", async () => {
    // node-a's id pointed at node-b's address: B refuses a MAC addressed to A
    const d = await startGateway({
      env: { PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: secret, PORTICO_NODE_ID: "node-d", PORTICO_PEERS: `node-a=${b.url}` }
    })
    try {
      expect((await a.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "misrouted" } })).status).toBe(201)
      const reply = await q(d, "misrouted", "SELECT 1")
      expectError(reply, 503, "HOME_NODE_UNREACHABLE")
      expect(reply.text).not.toContain("MAC")
      expect(d.logs()).toContain("refused this gateway's coordination call")
    } finally {
      await d.stop()
    }
  }, 90_000)

  it("answers 503 HOME_NODE_UNREACHABLE with Retry-After when the home node is down", async () => {
    expect((await a.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "orphan" } })).status).toBe(201)
    await a.stop()
    const reply = await q(b, "orphan", "SELECT 1")
    expectError(reply, 503, "HOME_NODE_UNREACHABLE")
    expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0)
  })
})
