import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Duration, Effect, Either, Schema } from "effect"
import * as fc from "effect/FastCheck"
import * as fs from "node:fs"
import { createServer, type Server } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import type { AnswerShape } from "../../../src/domain/SqlAnswers.js"
import { RqliteAnswer, rqliteResults } from "../../../src/layers/sql/RqliteAnswer.js"
import { RqliteSqlEngine } from "../../../src/layers/sql/RqliteSqlEngine.js"
import type { StatementOp } from "../../../src/layers/sql/SqliteProtocol.js"
import type { SqlRefused } from "../../../src/layers/sql/SqlRefused.js"
import { hasRqlited, rqlited, rqlitedMissingMessage } from "../../support/rqlited.js"

/** Listens on a free loopback port for the scope; the port. */
const listening = (server: Server) =>
  Effect.acquireRelease(
    Effect.async<number>((resume) => {
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
      })
    }),
    () =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

describe("rqliteResults", () => {
  it("accepts exactly the answers the schema accepts, with the same results", () => {
    const scalar = fc.oneof(fc.string(), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.bigInt(), fc.constant(undefined))
    const member = fc.oneof(scalar, fc.array(fc.string(), { maxLength: 3 }), fc.array(fc.array(scalar, { maxLength: 3 }), { maxLength: 3 }), fc.array(scalar, { maxLength: 2 }))
    const names = ["error", "columns", "types", "values", "rows_affected", "last_insert_id", "time", "extra"] as const
    const result = fc.oneof(
      fc.dictionary(fc.constantFrom(...names), member, { maxKeys: 4 }),
      // mostly well-formed results, so acceptance is exercised as much as refusal
      fc.record(
        {
          columns: fc.array(fc.string(), { maxLength: 3 }),
          types: fc.array(fc.string(), { maxLength: 3 }),
          values: fc.array(fc.array(fc.oneof(fc.string(), fc.integer(), fc.bigInt(), fc.boolean(), fc.constant(null)), { maxLength: 3 }), { maxLength: 3 }),
          rows_affected: fc.oneof(fc.integer(), fc.bigInt()),
          last_insert_id: fc.integer(),
          time: fc.double(),
          error: fc.string()
        },
        { requiredKeys: [] }
      ),
      scalar
    )
    const answer = fc.oneof(fc.record({ results: fc.array(result, { maxLength: 3 }) }, { requiredKeys: [] }), fc.record({ results: scalar }), scalar, fc.array(result))
    const decode = Schema.decodeUnknownEither(RqliteAnswer)
    /** A result as the schema outputs it: the members it names. */
    const named = (r: object) => Object.fromEntries(Object.entries(r).filter(([k]) => k !== "extra"))
    fc.assert(
      fc.property(answer, (input) => {
        const expected = decode(input)
        const got = rqliteResults(input)
        if (Either.isLeft(expected)) expect(got).toBeUndefined()
        else expect(got?.map(named)).toEqual((expected.right.results ?? []).map(named))
      }),
      { numRuns: 5000 }
    )
  })
})

describe("RqliteSqlEngine credentials", () => {
  it.scopedLive("sends a URL's user and password on statements, export and import", () =>
    Effect.gen(function* () {
      const expected = `Basic ${Buffer.from("ten@nt:p:ss").toString("base64")}`
      const seen: Array<string> = []
      const server = createServer((request, response) => {
        seen.push(`${request.url ?? ""} ${request.headers.authorization === expected ? "auth" : "none"}`)
        if (request.headers.authorization !== expected) {
          response.writeHead(401).end("unauthorized")
          return
        }
        request.resume()
        request.on("end", () => {
          if (request.url === "/db/backup") response.writeHead(200, { "content-type": "application/octet-stream" }).end("SQLite format 3\0")
          else response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ results: [{ rows_affected: 1, last_insert_id: 1 }] }))
        })
      })
      const port = yield* listening(server)
      const engine = RqliteSqlEngine.make({ url: `http://ten%40nt:p%3Ass@127.0.0.1:${port}/`, timeout: Duration.seconds(5) })
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-engine-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      yield* engine.statement({ sql: "INSERT INTO t VALUES (1)", params: [], kind: "write" }, "counted")
      yield* engine.exportTo(path.join(dir, "copy.db"))
      fs.writeFileSync(path.join(dir, "load.db"), "SQLite format 3\0")
      yield* engine.importFrom(path.join(dir, "load.db"))
      expect(seen).toEqual(["/db/execute?timings&db_timeout=5000ms auth", "/db/backup auth", "/db/load auth"])
    })
  )
})

describe("RqliteSqlEngine deadline", () => {
  it.scopedLive("sends a read that outlives the HTTP deadline once: the statement timeout plus 5 s, then 503", () =>
    Effect.gen(function* () {
      let requests = 0
      // an rqlite that never answers: its statement would not have been stopped either
      const server = createServer((request) => {
        requests++
        request.resume()
      })
      const port = yield* listening(server)
      const engine = RqliteSqlEngine.make({ url: `http://127.0.0.1:${port}`, timeout: Duration.millis(300) })
      const started = Date.now()
      const error = yield* Effect.flip(engine.statement({ sql: "SELECT 1", params: [], kind: "read" }, "counted"))
      expect(error.status).toBe(503)
      expect(requests).toBe(1)
      expect(Date.now() - started).toBeGreaterThanOrEqual(5_300)
      expect(Date.now() - started).toBeLessThan(7_000)
    })
  , 20_000)
})

if (!hasRqlited()) {
  describe("RqliteSqlEngine", () => {
    it("needs the rqlited binary", () => {
      expect.fail(rqlitedMissingMessage())
    })
  })
} else {
  describe("RqliteSqlEngine", () => {
    // node fires a timer past 2^31-1 ms at once and refuses an infinite AbortSignal.timeout: a
    // deadline that long must mean "none", not "already over"
    for (const [label, timeout] of [
      ["a 40-day", Duration.days(40)],
      ["an infinite", Duration.infinity]
    ] as const) {
      it.scopedLive(`answers and exports with ${label} deadline`, () =>
        Effect.gen(function* () {
          const server = yield* rqlited()
          const engine = RqliteSqlEngine.make({ url: server.url, timeout })
          yield* engine.statement({ sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)", params: [], kind: "write" }, "counted")
          yield* engine.statement({ sql: "INSERT INTO t VALUES (?, ?)", params: [7, "seven"], kind: "write" }, "counted")
          const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-engine-"))
          yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
          const dest = path.join(dir, "copy.db")
          yield* engine.exportTo(dest)
          const copy = new Database(dest, { readonly: true })
          try {
            expect(copy.prepare("SELECT id, name FROM t").all()).toEqual([{ id: 7, name: "seven" }])
          } finally {
            copy.close()
          }
        })
      )
    }

    // What ClusterSql's read route leans on besides the guard's allow-list (docs/databases.md):
    // rqlited's /db/query asks SQLite whether a statement is read-only and refuses it otherwise
    it.scopedLive("refuses a statement that would write on the read path, and writes nothing", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(5) })
        yield* engine.statement({ sql: "CREATE TABLE t (a)", params: [], kind: "write" }, "counted")
        yield* engine.statement({ sql: "CREATE INDEX t_a ON t (a)", params: [], kind: "write" }, "counted")
        for (const sql of ["ANALYZE", "PRAGMA user_version = 5", "INSERT INTO t VALUES (1) RETURNING a"]) {
          const refused = yield* Effect.flip(engine.statement({ sql, params: [], kind: "read", readOnly: true }, "counted"))
          expect(refused, sql).toMatchObject({ status: 400, code: "SQL_ERROR" })
        }
        const schema = yield* engine.statement({ sql: "SELECT name FROM sqlite_schema ORDER BY name", params: [], kind: "read" }, "counted")
        expect(JSON.parse(schema).rows).toEqual([["t"], ["t_a"]])
        const version = yield* engine.statement({ sql: "PRAGMA user_version", params: [], kind: "read" }, "counted")
        expect(JSON.parse(version).rows).toEqual([[0]])
      })
    )
  })

  describe("RqliteSqlEngine statement timeout", () => {
    const RUNAWAY_READ = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    const RUNAWAY_WRITE = "INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    // the embedded engine's refusal, word for word (SqliteWorkers, SqlRefused.fromSqlite)
    const stopped = {
      status: 400,
      code: "STATEMENT_TIMEOUT",
      reason: "the statement ran over 1 s and was stopped",
      hint: "add an index, narrow the query, or page it"
    }
    const refusal = (e: { readonly status: number; readonly code: string; readonly reason: string; readonly hint?: string | undefined }) => ({
      status: e.status,
      code: e.code,
      reason: e.reason,
      hint: e.hint
    })
    const seconds = (since: number) => (Date.now() - since) / 1000

    it.scopedLive("stops a runaway read at the timeout, once, and answers 400 STATEMENT_TIMEOUT", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(1) })
        const started = Date.now()
        const error = yield* Effect.flip(engine.statement({ sql: RUNAWAY_READ, params: [], kind: "read" }, "counted"))
        // no retry: one stop at ~1 s, not four attempts
        expect(seconds(started)).toBeLessThan(2.5)
        expect(refusal(error)).toEqual(stopped)
        expect(yield* engine.statement({ sql: "SELECT 40 + 2", params: [], kind: "read" }, "counted")).toBe(
          '{"columns":["40 + 2"],"rows":[[42]],"count":1}'
        )
      })
    )

    it.scopedLive("stops a runaway write, applies none of it, and later writes go through", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(1) })
        yield* engine.statement({ sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v)", params: [], kind: "write" }, "counted")
        const started = Date.now()
        const error = yield* Effect.flip(engine.statement({ sql: RUNAWAY_WRITE, params: [], kind: "write" }, "counted"))
        expect(seconds(started)).toBeLessThan(2.5)
        expect(refusal(error)).toEqual(stopped)
        const after = Date.now()
        expect(yield* engine.statement({ sql: "INSERT INTO t (v) VALUES (7)", params: [], kind: "write" }, "counted")).toBe(
          '{"rows_affected":1,"last_insert_id":1}'
        )
        expect(seconds(after)).toBeLessThan(1)
        expect(yield* engine.statement({ sql: "SELECT v FROM t", params: [], kind: "read" }, "counted")).toBe(
          '{"columns":["v"],"rows":[[7]],"count":1}'
        )
      })
    )

    it.scopedLive("stops a runaway op of a transaction, with or without rows asked for; nothing is applied", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(1) })
        yield* engine.statement({ sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v)", params: [], kind: "write" }, "counted")
        const first = { sql: "INSERT INTO t (v) VALUES (1)", params: [], kind: "write" } as const
        for (const [ops, returnResults] of [
          [[first, { sql: RUNAWAY_WRITE, params: [], kind: "write" }], false],
          [[first, { sql: RUNAWAY_READ, params: [], kind: "read" }], true],
          [[first, { sql: RUNAWAY_WRITE, params: [], kind: "write" }, { sql: "SELECT 1", params: [], kind: "read" }], true]
        ] as const) {
          const started = Date.now()
          const error = yield* Effect.flip(engine.batch(ops, returnResults))
          expect(seconds(started)).toBeLessThan(2.5)
          expect(refusal(error)).toEqual(stopped)
        }
        expect(yield* engine.statement({ sql: "SELECT count(*) FROM t", params: [], kind: "read" }, "counted")).toBe(
          '{"columns":["count(*)"],"rows":[[0]],"count":1}'
        )
      })
    )
  })

  describe("RqliteSqlEngine batches", () => {
    /** rqlited's own counters: HTTP requests and statements received, per endpoint. */
    const counters = (url: string) =>
      Effect.promise(async () => {
        const vars = (await (await fetch(`${url}/debug/vars`)).json()) as { http: Record<string, number> }
        return { queries: vars.http.queries ?? 0, executions: vars.http.executions ?? 0 }
      })
    const read = (sql: string, ...params: ReadonlyArray<string | number>) => ({ sql, params, kind: "read" as const })
    const write = (sql: string, ...params: ReadonlyArray<string | number>) => ({ sql, params, kind: "write" as const })
    const POINT = "SELECT id, name FROM t WHERE id = ?"
    /** A statement's outcome as one line: its answer, or its refusal's status, code and (with `reason`) reason. */
    const outcome =
      (reason = true) =>
      (o: Either.Either<string, SqlRefused>) =>
        o._tag === "Right" ? o.right : reason ? `${o.left.status} ${o.left.code} ${o.left.reason}` : `${o.left.status} ${o.left.code}`

    it.scopedLive("sends concurrent fast reads and writes together, each answered as if alone", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(10) })
        yield* engine.statement(write("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, b BLOB)"), "counted")
        const insert = "INSERT INTO t (name) VALUES (?)"
        // first runs, alone: they teach the engine that these texts are fast
        expect(yield* engine.statement(write(insert, "n1"), "counted")).toBe('{"rows_affected":1,"last_insert_id":1}')
        expect(yield* engine.statement(read(POINT, 1), "counted")).toBe('{"columns":["id","name"],"rows":[[1,"n1"]],"count":1}')

        const before = yield* counters(server.url)
        const inserted = yield* Effect.forEach(
          Array.from({ length: 60 }, (_, i) => `n${i + 2}`),
          (name) => engine.statement(write(insert, name), "counted"),
          { concurrency: "unbounded" }
        )
        const afterWrites = yield* counters(server.url)
        // each insert answered its own row id, in the order they were sent
        expect(inserted).toEqual(Array.from({ length: 60 }, (_, i) => `{"rows_affected":1,"last_insert_id":${i + 2}}`))
        expect(afterWrites.executions - before.executions).toBeLessThanOrEqual(3)

        const rows = yield* Effect.forEach(
          Array.from({ length: 61 }, (_, i) => i + 1),
          (id) => engine.statement(read(POINT, id), "one"),
          { concurrency: "unbounded" }
        )
        const afterReads = yield* counters(server.url)
        expect(rows).toEqual(Array.from({ length: 61 }, (_, i) => `{"id":${i + 1},"name":"n${i + 1}"}`))
        expect(afterReads.queries - afterWrites.queries).toBeLessThanOrEqual(3)
      })
    )

    it.scopedLive("fails only the statement that fails, and answers blobs and texts as stored in a batch", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(10) })
        yield* engine.statement(write("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, b BLOB)"), "counted")
        yield* engine.statement(write("INSERT INTO t (id, name) VALUES (1, X'00FF'), (2, 'two')"), "counted")
        // abs() of the smallest integer fails when run, not when prepared
        const ABS = "SELECT abs(?) AS a"
        yield* engine.statement(read(ABS, 1), "counted")
        yield* engine.statement(read(POINT, 2), "one")
        const before = yield* counters(server.url)
        const outcomes = yield* Effect.forEach(
          [read(ABS, -5), read(ABS, "-9223372036854775808"), read(POINT, 1), read(POINT, 2), read(ABS, 7)],
          (op) => Effect.either(engine.statement(op.sql === ABS && op.params[0] === "-9223372036854775808" ? { ...op, params: [-9223372036854775808n] } : op, "counted")),
          { concurrency: "unbounded" }
        )
        // one batch, and the read whose TEXT column held a blob once more with that column wrapped
        expect((yield* counters(server.url)).queries - before.queries).toBe(2)
        expect(outcomes.map(outcome())).toEqual([
          '{"columns":["a"],"rows":[[5]],"count":1}',
          "400 SQL_ERROR integer overflow",
          // the blob in a TEXT column comes back as the embedded engine answers a blob, not as lossy text
          '{"columns":["id","name"],"rows":[[1,"AP8="]],"count":1}',
          '{"columns":["id","name"],"rows":[[2,"two"]],"count":1}',
          '{"columns":["a"],"rows":[[7]],"count":1}'
        ])
      })
    )

    it.scopedLive("checks text columns for blobs instead of wrapping them: a read that meets one goes again, wrapped", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(10) })
        // TEXT and untyped columns are checked; DATE and BOOLEAN ones, whose integers and texts rqlite converts, are wrapped
        yield* engine.statement(write("CREATE TABLE m (id INTEGER PRIMARY KEY, t TEXT, d DATE, ok BOOLEAN, u)"), "counted")
        yield* engine.statement(write("INSERT INTO m VALUES (1, 'a', 20, 1, 'x'), (2, 'b', '2024-01-02', 0, 2.5), (3, X'00', 30, 1, X'FF')"), "counted")
        const UPTO = "SELECT t, d, ok, u FROM m WHERE id <= ? ORDER BY id"
        const two = '{"columns":["t","d","ok","u"],"rows":[["a",20,1,"x"],["b","2024-01-02",0,2.5]],"count":2}'
        const three = '{"columns":["t","d","ok","u"],"rows":[["a",20,1,"x"],["b","2024-01-02",0,2.5],["AA==",30,1,"/w=="]],"count":3}'
        expect(yield* engine.statement(read(UPTO, 2), "counted")).toBe(two)

        const before = yield* counters(server.url)
        const outcomes = yield* Effect.forEach([read(UPTO, 2), read(UPTO, 3), read(UPTO, 1)], (op) => engine.statement(op, "counted"), {
          concurrency: "unbounded"
        })
        expect(outcomes).toEqual([two, three, '{"columns":["t","d","ok","u"],"rows":[["a",20,1,"x"]],"count":1}'])
        // one batch; only the read whose third row holds blobs went once more
        expect((yield* counters(server.url)).queries - before.queries).toBe(2)
        // and again: the blobs are found again, the answer is the same
        expect(yield* engine.statement(read(UPTO, 3), "counted")).toBe(three)
      })
    )

    it.scopedLive("gives a fast read that turned slow its own timeout: the reads after it run again alone", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(1) })
        // fast with a small bound, a runaway with a large one
        const COUNT = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c"
        expect(yield* engine.statement(read(COUNT, 3), "counted")).toBe('{"columns":["n"],"rows":[[3]],"count":1}')
        const started = Date.now()
        const outcomes = yield* Effect.forEach(
          [read(COUNT, 1e15), read(COUNT, 2), read(COUNT, 4)],
          (op) => Effect.either(engine.statement(op, "counted")),
          { concurrency: "unbounded" }
        )
        expect(outcomes.map(outcome(false))).toEqual([
          "400 STATEMENT_TIMEOUT",
          '{"columns":["n"],"rows":[[2]],"count":1}',
          '{"columns":["n"],"rows":[[4]],"count":1}'
        ])
        expect(Date.now() - started).toBeLessThan(2_500)
      })
    )

    it.scopedLive("answers the same without a fiber (statementNow): batched, as stored, a runaway alone, a changed schema learnt again", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(1) })
        let taken = 0
        /** The statement through `statementNow` where the engine takes it, else through `statement`. */
        const now = (op: StatementOp, shape: AnswerShape = "counted") =>
          Effect.either(
            Effect.async<string, SqlRefused>((resume) => {
              let returned = false
              const took = engine.statementNow?.(op, shape, (exit) => {
                // never before statementNow has returned
                expect(returned).toBe(true)
                resume(exit)
              })
              returned = true
              if (took === true) taken++
              else resume(engine.statement(op, shape))
            })
          )

        yield* engine.statement(write("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, b BLOB)"), "counted")
        yield* engine.statement(write("INSERT INTO t (id, name, b) VALUES (1, X'00FF', 'x'), (2, 'two', X'0102')"), "counted")
        const ALL = "SELECT * FROM t WHERE id = ?"
        const ABS = "SELECT abs(?) AS a"
        const COUNT = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c"
        // not known yet: left to the effect, which learns them
        for (const op of [read(ALL, 1), read(ABS, 1), read(COUNT, 3), read(POINT, 1)]) expect((yield* now(op))._tag).toBe("Right")
        expect(taken).toBe(0)
        // writes are the effect's
        expect(engine.statementNow?.(write("INSERT INTO t (name) VALUES ('w')"), "counted", () => {})).toBe(false)

        const before = yield* counters(server.url)
        const outcomes = yield* Effect.forEach(
          [read(POINT, 1), read(ALL, 2), read(ABS, "-9223372036854775808"), read(POINT, 2), read(ALL, 1), read(ABS, -5)],
          (op) => now(op.sql === ABS && op.params[0] === "-9223372036854775808" ? { ...op, params: [-9223372036854775808n] } : op),
          { concurrency: "unbounded" }
        )
        expect(taken).toBe(6)
        // one batch, and each of the two reads whose TEXT column held a blob once more, wrapped
        expect((yield* counters(server.url)).queries - before.queries).toBe(3)
        expect(outcomes.map(outcome())).toEqual([
          '{"columns":["id","name"],"rows":[[1,"AP8="]],"count":1}',
          '{"columns":["id","name","b"],"rows":[[2,"two","AQI="]],"count":1}',
          "400 SQL_ERROR integer overflow",
          '{"columns":["id","name"],"rows":[[2,"two"]],"count":1}',
          '{"columns":["id","name","b"],"rows":[[1,"AP8=","x"]],"count":1}',
          '{"columns":["a"],"rows":[[5]],"count":1}'
        ])

        // a runaway in a batch: stopped at the batch's deadline, it runs again alone; the others answer
        const started = Date.now()
        const slow = yield* Effect.forEach([read(COUNT, 1e15), read(COUNT, 2), read(COUNT, 4)], (op) => now(op), { concurrency: "unbounded" })
        expect(slow.map(outcome(false))).toEqual([
          "400 STATEMENT_TIMEOUT",
          '{"columns":["n"],"rows":[[2]],"count":1}',
          '{"columns":["n"],"rows":[[4]],"count":1}'
        ])
        expect(Date.now() - started).toBeLessThan(2_500)

        // the schema changed under a known read: it learns the columns again
        yield* engine.statement(write("ALTER TABLE t ADD COLUMN extra BLOB"), "counted")
        yield* engine.statement(write("UPDATE t SET extra = X'FF' WHERE id = 2"), "counted")
        taken = 0
        expect(outcome()(yield* now(read(ALL, 2), "one"))).toBe('{"id":2,"name":"two","b":"AQI=","extra":"/w=="}')
        expect(taken).toBe(1)
      })
    )

    it.scopedLive("rolls a batch of writes back when one fails: that one answers its failure, the others are applied once, alone", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const engine = RqliteSqlEngine.make({ url: server.url, timeout: Duration.seconds(1) })
        yield* engine.statement(write("CREATE TABLE t (id INTEGER PRIMARY KEY, v UNIQUE)"), "counted")
        const FILL = "INSERT INTO t (v) WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT NULL FROM c"
        const ONE = "INSERT INTO t (v) VALUES (?)"
        yield* engine.statement(write(FILL, 1), "counted")
        yield* engine.statement(write(ONE, 0), "counted")

        // a constraint: the duplicate fails as it would after the first, which goes through
        const before = yield* counters(server.url)
        const constrained = yield* Effect.forEach(
          [write(ONE, 10), write(ONE, 20), write(ONE, 10), write(ONE, 30)],
          (op) => Effect.either(engine.statement(op, "counted")),
          { concurrency: "unbounded" }
        )
        expect(constrained.map(outcome())).toEqual([
          '{"rows_affected":1,"last_insert_id":3}',
          '{"rows_affected":1,"last_insert_id":4}',
          "400 SQL_ERROR UNIQUE constraint failed: t.v",
          '{"rows_affected":1,"last_insert_id":5}'
        ])
        // the batch, then the three alone
        expect((yield* counters(server.url)).executions - before.executions).toBe(4)

        // a fast write turned runaway: stopped at the timeout; the write after it gets its own
        const runaway = yield* Effect.forEach(
          [write(FILL, 1e15), write(ONE, 40)],
          (op) => Effect.either(engine.statement(op, "counted")),
          { concurrency: "unbounded" }
        )
        expect(runaway.map(outcome())).toEqual(["400 STATEMENT_TIMEOUT the statement ran over 1 s and was stopped", '{"rows_affected":1,"last_insert_id":6}'])
        expect(yield* engine.statement(read("SELECT count(*) AS n, sum(v) AS s FROM t"), "counted")).toBe(
          '{"columns":["n","s"],"rows":[[6,100]],"count":1}'
        )
      })
    )
  })
}
