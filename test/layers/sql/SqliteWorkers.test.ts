/**
 * The SQLite worker pool on real worker processes and files: pipelined requests answered in
 * order, a runaway statement stopped at the timeout while the requests queued behind it are
 * answered, other files' reads moved off a stalled worker, and a full queue refused.
 */
import { afterAll, describe, expect, it } from "vitest"
import { Effect, Either, Exit, Layer, ManagedRuntime } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import type { WorkerRequest, WorkerValue } from "../../../src/layers/sql/SqliteProtocol.js"
import { type SqliteFailure, SqliteWorkers, type SqliteWorkersSettings } from "../../../src/layers/sql/SqliteWorkers.js"
import { hashOf } from "../../../src/layers/sql/WorkerPool.js"

const dir = mkdtempSync(path.join(tmpdir(), "portico-workers-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"

const pool = (overrides: Partial<SqliteWorkersSettings> = {}) => {
  const runtime = ManagedRuntime.make(
    SqliteWorkers.layer({
      workers: 1,
      timeoutMs: 1500,
      maxQueue: 1024,
      worker: { maxResultBytes: 1 << 20, busyTimeoutMs: 1000, maxOpen: 16 },
      ...overrides
    }) as Layer.Layer<SqliteWorkers>
  )
  const workers = () => runtime.runPromise(SqliteWorkers)
  /** Resolves with the outcome, never rejects; `order` records answers as they come. */
  const now = async (request: WorkerRequest, rerunnable = false) => {
    const w = await workers()
    return new Promise<Either.Either<WorkerValue, SqliteFailure>>((resolve) => w.runNow(request, rerunnable, resolve))
  }
  const run = async (request: WorkerRequest) => runtime.runPromiseExit(Effect.flatMap(SqliteWorkers, (w) => w.run(request)))
  return { runtime, workers, now, run }
}

const file = (name: string) => path.join(dir, `${name}.db`)
const statement = (f: string, sql: string, params: ReadonlyArray<string | number | null> = [], kind: "read" | "write" = "read"): WorkerRequest => ({
  op: "statement",
  file: f,
  sql,
  params,
  kind,
  shape: "table"
})
const json = (r: Either.Either<WorkerValue, SqliteFailure>): unknown => {
  if (Either.isLeft(r)) throw new Error(`failed: ${r.left.kind} ${r.left.message}`)
  return r.right.type === "json" ? JSON.parse(r.right.json) : r.right
}

/** Two file names the two-worker pool puts on the same worker by hash. */
const sameLane = (prefix: string): [string, string] => {
  const a = file(`${prefix}-a`)
  for (let i = 0; ; i++) {
    const b = file(`${prefix}-b${i}`)
    if (hashOf(a) % 2 === hashOf(b) % 2) return [a, b]
  }
}

describe("SQLite workers", () => {
  it("answers many in-flight statements on one file in order, and runs the writes in order", async () => {
    const p = pool()
    try {
      const f = file("order")
      await p.now({ op: "create", file: f })
      json(await p.now(statement(f, "CREATE TABLE t (n INTEGER)", [], "write")))
      const answered: Array<number> = []
      const all = Array.from({ length: 300 }, (_, n) =>
        n % 3 === 0
          ? p.now(statement(f, "INSERT INTO t (n) VALUES (?)", [n], "write")).then((r) => (answered.push(n), r))
          : p.now(statement(f, "SELECT ?, count(*) FROM t", [n]), true).then((r) => (answered.push(n), r))
      )
      const results = await Promise.all(all)
      expect(answered).toEqual(Array.from({ length: 300 }, (_, n) => n))
      // each read saw exactly the inserts sent before it
      results.forEach((r, n) => {
        if (n % 3 !== 0) expect(json(r)).toEqual({ columns: ["?", "count(*)"], rows: [[n, Math.ceil(n / 3)]] })
        else expect(json(r)).toMatchObject({ rows_affected: 1 })
      })
      const rows = json(await p.now(statement(f, "SELECT group_concat(n) FROM t ORDER BY rowid"))) as { rows: Array<[string]> }
      expect(rows.rows[0]![0]).toBe(Array.from({ length: 100 }, (_, i) => i * 3).join(","))
    } finally {
      await p.runtime.dispose()
    }
  }, 60_000)

  it("answers a cached statement with the schema as it is now: columns renamed or added by any connection", async () => {
    const p = pool({ workers: 2 })
    try {
      const f = file("schema")
      await p.now({ op: "create", file: f })
      json(await p.now(statement(f, "CREATE TABLE t (a INTEGER)", [], "write")))
      json(await p.now(statement(f, "INSERT INTO t (a) VALUES (1)", [], "write")))
      expect(json(await p.now(statement(f, "SELECT * FROM t")))).toEqual({ columns: ["a"], rows: [[1]] })
      json(await p.now(statement(f, "ALTER TABLE t RENAME COLUMN a TO b", [], "write")))
      expect(json(await p.now(statement(f, "SELECT * FROM t")))).toEqual({ columns: ["b"], rows: [[1]] })
      // another process's connection (a second pool on the same file) changes it
      const other = pool()
      try {
        json(await other.now(statement(f, "ALTER TABLE t ADD COLUMN c TEXT", [], "write")))
      } finally {
        await other.runtime.dispose()
      }
      expect(json(await p.now(statement(f, "SELECT * FROM t")))).toEqual({ columns: ["b", "c"], rows: [[1, null]] })
    } finally {
      await p.runtime.dispose()
    }
  }, 60_000)

  it("stops a runaway statement at the timeout; the requests queued behind it on its worker are answered, each once", async () => {
    const p = pool({ workers: 1, timeoutMs: 1500 })
    try {
      const a = file("runaway-a")
      const b = file("runaway-b")
      for (const f of [a, b]) {
        await p.now({ op: "create", file: f })
        json(await p.now(statement(f, "CREATE TABLE t (n INTEGER)", [], "write")))
      }
      const started = Date.now()
      const slow = p.now(statement(a, RUNAWAY))
      // sent in the same turn, behind the runaway on the only worker
      const sameFile = p.now(statement(a, "INSERT INTO t (n) VALUES (1)", [], "write"))
      const otherWrite = p.now(statement(b, "INSERT INTO t (n) VALUES (2)", [], "write"))
      const otherRead = p.now(statement(b, "SELECT count(*) FROM t"), true)
      const stopped = await slow
      expect(Either.isLeft(stopped) && stopped.left.kind).toBe("timeout")
      expect(Date.now() - started).toBeGreaterThanOrEqual(1400)
      expect(Date.now() - started).toBeLessThan(8000)
      expect(json(await sameFile)).toMatchObject({ rows_affected: 1 })
      expect(json(await otherWrite)).toMatchObject({ rows_affected: 1 })
      expect(json(await otherRead)).toEqual({ columns: ["count(*)"], rows: [[1]] })
      // nothing ran twice, and the files are usable on the new worker
      expect(json(await p.now(statement(a, "SELECT count(*) FROM t")))).toEqual({ columns: ["count(*)"], rows: [[1]] })
      expect(json(await p.now(statement(b, "SELECT count(*) FROM t")))).toEqual({ columns: ["count(*)"], rows: [[1]] })
    } finally {
      await p.runtime.dispose()
    }
  }, 60_000)

  it("answers the statements done before a runaway in the same turn at once, and blames only the runaway", async () => {
    const p = pool({ workers: 1, timeoutMs: 1500 })
    try {
      const f = file("turn")
      await p.now({ op: "create", file: f })
      json(await p.now(statement(f, "CREATE TABLE t (n INTEGER)", [], "write")))
      const started = Date.now()
      const at: Record<string, number> = {}
      const timed = <A>(name: string, promise: Promise<A>) => promise.then((r) => ((at[name] = Date.now() - started), r))
      // one turn, so one frame: two quick statements, then the runaway, then one more
      const read = timed("read", p.now(statement(f, "SELECT 5")))
      const write = timed("write", p.now(statement(f, "INSERT INTO t (n) VALUES (1)", [], "write")))
      const slow = timed("slow", p.now(statement(f, RUNAWAY)))
      const after = timed("after", p.now(statement(f, "SELECT count(*) FROM t")))
      expect(json(await read)).toEqual({ columns: ["5"], rows: [[5]] })
      expect(json(await write)).toMatchObject({ rows_affected: 1 })
      expect(at["read"]).toBeLessThan(1000)
      expect(at["write"]).toBeLessThan(1000)
      const stopped = await slow
      expect(Either.isLeft(stopped) && stopped.left.kind).toBe("timeout")
      expect(json(await after)).toEqual({ columns: ["count(*)"], rows: [[1]] })
    } finally {
      await p.runtime.dispose()
    }
  }, 60_000)

  it("moves another file's reads off a worker stalled by a runaway: they are answered long before the timeout", async () => {
    const p = pool({ workers: 2, timeoutMs: 4000, stallMs: 100 })
    try {
      const [a, b] = sameLane("stall")
      for (const f of [a, b]) {
        await p.now({ op: "create", file: f })
        json(await p.now(statement(f, "CREATE TABLE t (n INTEGER)", [], "write")))
        json(await p.now(statement(f, "INSERT INTO t (n) VALUES (7)", [], "write")))
      }
      const started = Date.now()
      const slow = p.now(statement(a, RUNAWAY))
      // sent behind the runaway on the same worker, before it counts as stalled
      const early = Array.from({ length: 20 }, () => p.now(statement(b, "SELECT n FROM t"), true))
      for (const r of await Promise.all(early)) expect(json(r)).toEqual({ columns: ["n"], rows: [[7]] })
      expect(Date.now() - started).toBeLessThan(2000)
      // the runaway's worker runs at a lowered CPU priority, the others as they were
      const nices = execFileSync("ps", ["-o", "ni=,args=", "--ppid", String(process.pid)], { encoding: "utf8" })
        .split("\n")
        .filter((line) => line.includes("sqliteWorker"))
        .map((line) => Number(line.trim().split(/\s+/)[0]))
      expect(nices).toContain(10)
      expect(nices).toContain(0)
      // and the file keeps being served, writes too, while the runaway still runs
      json(await p.now(statement(b, "INSERT INTO t (n) VALUES (8)", [], "write")))
      expect(json(await p.now(statement(b, "SELECT count(*) FROM t"), true))).toEqual({ columns: ["count(*)"], rows: [[2]] })
      expect(Date.now() - started).toBeLessThan(3000)
      const stopped = await slow
      expect(Either.isLeft(stopped) && stopped.left.kind).toBe("timeout")
      expect(json(await p.now(statement(b, "SELECT count(*) FROM t"), true))).toEqual({ columns: ["count(*)"], rows: [[2]] })
    } finally {
      await p.runtime.dispose()
    }
  }, 60_000)

  it("replaces a file whose directory does not exist yet with another, which then answers", async () => {
    const { runtime, now } = pool()
    try {
      const source = file("replace-source")
      json(await now({ op: "create", file: source }))
      json(await now(statement(source, "CREATE TABLE t (x)", [], "write")))
      json(await now(statement(source, "INSERT INTO t VALUES (42)", [], "write")))
      // the source must be closed before it moves: a checkpointed copy, as import stages one
      const staged = path.join(dir, "replace-staged.db")
      json(await now({ op: "backup", file: source, dest: staged }))
      const target = path.join(dir, "never", "made", "store.db")
      expect(json(await now({ op: "replace", file: target, from: staged }))).toEqual({ type: "done" })
      expect(json(await now(statement(target, "SELECT x FROM t")))).toMatchObject({ rows: [[42]] })
    } finally {
      await runtime.dispose()
    }
  })

  it("refuses requests past the queue bound with a clear overload, and serves again once it drains", async () => {
    const p = pool({ workers: 1, timeoutMs: 1500, maxQueue: 8 })
    try {
      const f = file("overload")
      await p.now({ op: "create", file: f })
      const slow = p.run(statement(f, RUNAWAY))
      const queued = Array.from({ length: 7 }, () => p.run(statement(f, "SELECT 1")))
      const refused = await p.run(statement(f, "SELECT 1"))
      expect(Exit.isFailure(refused)).toBe(true)
      expect(JSON.stringify(refused)).toContain("overloaded")
      expect(JSON.stringify(refused)).toContain("too many statements waiting")
      expect(Exit.isFailure(await slow)).toBe(true)
      for (const q of await Promise.all(queued)) expect(Exit.isSuccess(q)).toBe(true)
      expect(Exit.isSuccess(await p.run(statement(f, "SELECT 1")))).toBe(true)
    } finally {
      await p.runtime.dispose()
    }
  }, 60_000)
})
