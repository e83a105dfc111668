/**
 * The SQLite worker's code run in the test's own process (SqliteWorkers.inProcess): the same
 * frames and answers as the worker processes, so services over SqliteWorkers can be tested under
 * vitest without starting a process. What only processes can do (the statement timeout, moving
 * reads off a stalled worker) is test/layers/sql/SqliteWorkers.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import type { WorkerRequest, WorkerValue } from "../../../src/layers/sql/SqliteProtocol.js"
import { type SqliteFailure, SqliteWorkers } from "../../../src/layers/sql/SqliteWorkers.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-inprocess-"))),
  (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
)

const statement = (file: string, sql: string, params: ReadonlyArray<string | number | bigint | null> = [], kind: "read" | "write" = "read"): WorkerRequest => ({
  op: "statement",
  file,
  sql,
  params,
  kind,
  shape: "table"
})

const json = (value: WorkerValue): unknown => (value.type === "json" ? JSON.parse(value.json) : value)
const failure = (exit: Exit.Exit<WorkerValue, SqliteFailure>) =>
  Exit.match(exit, {
    onFailure: (cause) => {
      const error = cause._tag === "Fail" ? cause.error : undefined
      return error === undefined ? "defect" : { kind: error.kind, message: error.message, index: error.index }
    },
    onSuccess: (value) => ({ answered: json(value) })
  })

const small = SqliteWorkers.inProcess({
  workers: 1,
  timeoutMs: 10_000,
  maxQueue: 8,
  worker: { maxResultBytes: 1000, busyTimeoutMs: 100, maxOpen: 4 }
})

describe("SQLite workers in process", () => {
  it.scoped("answers a turn's requests in order, through the worker's frames: exact 64-bit integers, whole numbers bound as integers", () =>
    Effect.gen(function* () {
      const workers = yield* SqliteWorkers
      const file = path.join(yield* tempDir, "order.db")
      expect(yield* workers.run({ op: "create", file })).toEqual({ type: "done" })
      yield* workers.run(statement(file, "CREATE TABLE t (n INTEGER, s TEXT)", [], "write"))
      // one turn: all sent before any is answered, each read sees exactly the writes before it
      const answers = yield* Effect.all(
        Array.from({ length: 30 }, (_, n) =>
          n % 3 === 0
            ? workers.run(statement(file, "INSERT INTO t (n, s) VALUES (?, ?)", [n, 1], "write"))
            : workers.run(statement(file, "SELECT ?, count(*) FROM t", [n]))
        ),
        { concurrency: "unbounded" }
      )
      answers.forEach((answer, n) => {
        if (n % 3 === 0) expect(json(answer)).toMatchObject({ rows_affected: 1 })
        else expect(json(answer)).toEqual({ columns: ["?", "count(*)"], rows: [[n, Math.ceil(n / 3)]] })
      })
      // a bigint crosses the request frame (v8 serialisation) and the answer keeps its digits
      const big = yield* workers.run(statement(file, "SELECT ? AS big, typeof(s) AS kind, s FROM t LIMIT 1", [9223372036854775807n]))
      expect(big.type === "json" ? big.json : big).toBe('{"columns":["big","kind","s"],"rows":[[9223372036854775807,"text","1"]]}')
    }).pipe(Effect.provide(SqliteWorkers.Test))
  )

  it.scoped("answers the worker's refusals: no such file, bad SQL, a batch's failing op (rolled back), a write on the read route, an answer too large", () =>
    Effect.gen(function* () {
      const workers = yield* SqliteWorkers
      const base = yield* tempDir
      const file = path.join(base, "refusals.db")
      const run = (request: WorkerRequest) => Effect.map(Effect.exit(workers.run(request)), failure)
      expect(yield* run(statement(path.join(base, "none.db"), "SELECT 1"))).toEqual({ kind: "missing", message: "no such database", index: undefined })
      yield* workers.run({ op: "create", file })
      expect(yield* run(statement(file, "SELEC 1"))).toMatchObject({ kind: "statement", message: 'near "SELEC": syntax error' })
      yield* workers.run(statement(file, "CREATE TABLE t (n INTEGER PRIMARY KEY)", [], "write"))
      const batch: WorkerRequest = {
        op: "batch",
        file,
        returnResults: true,
        ops: [
          { sql: "INSERT INTO t (n) VALUES (1)", params: [], kind: "write" },
          { sql: "INSERT INTO t (n) VALUES (1)", params: [], kind: "write" }
        ]
      }
      expect(yield* run(batch)).toMatchObject({ kind: "statement", index: 1 })
      expect(yield* run(statement(file, "SELECT count(*) FROM t"))).toEqual({ answered: { columns: ["count(*)"], rows: [[0]] } })
      expect(yield* run({ op: "statement", file, sql: "DELETE FROM t", params: [], kind: "read", shape: "table", readOnly: true })).toMatchObject({
        kind: "statement",
        message: "this route runs reads only, and the statement would change the database"
      })
      expect(yield* run(statement(file, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) SELECT printf('%050d', x) FROM c"))).toMatchObject({
        kind: "too_large"
      })
    }).pipe(Effect.provide(small))
  )

  it.scoped("holds the requests behind a backup until it is done, and inspects the copy", () =>
    Effect.gen(function* () {
      const workers = yield* SqliteWorkers
      const base = yield* tempDir
      const file = path.join(base, "source.db")
      const dest = path.join(base, "copy.db")
      yield* workers.run({ op: "create", file })
      yield* workers.run(statement(file, "CREATE TABLE t (n INTEGER)", [], "write"))
      yield* workers.run(statement(file, "INSERT INTO t (n) VALUES (1)", [], "write"))
      const [backup, after] = yield* Effect.all(
        [workers.run({ op: "backup", file, dest }), workers.run(statement(file, "INSERT INTO t (n) VALUES (2)", [], "write"))],
        { concurrency: "unbounded" }
      )
      expect(backup).toEqual({ type: "done" })
      expect(json(after)).toMatchObject({ rows_affected: 1 })
      const inspected = yield* workers.run({ op: "inspect", file: dest })
      expect(inspected).toMatchObject({ type: "inspected", integrity: ["ok"], objects: [{ type: "table", name: "t" }] })
      // the copy was taken before the write queued behind it
      expect(json(yield* workers.run(statement(dest, "SELECT count(*) FROM t")))).toEqual({ columns: ["count(*)"], rows: [[1]] })
    }).pipe(Effect.provide(SqliteWorkers.Test))
  )

  it.scoped("refuses past its queue bound with overloaded, and serves again once drained", () =>
    Effect.gen(function* () {
      const workers = yield* SqliteWorkers
      const file = path.join(yield* tempDir, "queue.db")
      yield* workers.run({ op: "create", file })
      const outcomes: Array<Either.Either<WorkerValue, SqliteFailure>> = []
      // sent in one turn: eight fit the bound, the rest are refused at once
      yield* Effect.async<void>((resume) => {
        let left = 12
        for (let i = 0; i < 12; i++) {
          workers.runNow(statement(file, "SELECT ?", [i]), true, (r) => {
            outcomes[i] = r
            if (--left === 0) resume(Effect.void)
          })
        }
      })
      expect(outcomes.map((r) => (Either.isLeft(r) ? r.left.kind : "ok"))).toEqual([...Array(8).fill("ok"), ...Array(4).fill("overloaded")])
      expect(json(yield* workers.run(statement(file, "SELECT 1")))).toEqual({ columns: ["1"], rows: [[1]] })
    }).pipe(Effect.provide(small))
  )
})
