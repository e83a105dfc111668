/**
 * What a SQLite worker does with the requests it is sent: connections, prepared statements, each
 * request run to its answer, and the loop that runs them one after another in arrival order.
 *
 * Transport-free: the worker process (sqliteWorker.ts) feeds it the requests of its stdin frames
 * and writes its answers to fd 3; the in-process engine for tests (InProcessWorkers.ts) feeds it
 * the same frames in the gateway's own thread. Answers are built here as final JSON text, so
 * the gateway does not pay for encoding.
 */
import Database from "better-sqlite3"
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs"
import { dirname } from "node:path"
import { type AnswerShape, execAnswer, readAnswer, type SqlCell } from "../../domain/SqlAnswers.js"
import type { StatementOp, WorkerFailure, WorkerOptions, WorkerRequest, WorkerValue } from "./SqliteProtocol.js"
import type { Answer } from "./WorkerFrames.js"
/**
 * Prepared statements per connection, by SQL text: an app sends the same few statements over
 * and over, and preparing one costs more than running a point read. Bounded; dropped with the
 * connection, and whenever the schema changed (through any connection): SQLite re-prepares a
 * stale statement when it runs, but better-sqlite3 reads its columns before that (`SELECT *`
 * after a column is renamed or added would answer the old names), and a connection learns of
 * another's change only when it runs a statement.
 */
interface Prepared {
  readonly statements: Map<string, Database.Statement>
  readonly schemaVersion: Database.Statement
  /** A statement whose run makes the connection load the schema anew when it is stale. */
  readonly reload: Database.Statement
  version: number
}
const prepared = new WeakMap<Database.Database, Prepared>()
const MAX_PREPARED = 256

const prepare = (db: Database.Database, sql: string): Database.Statement => {
  let cache = prepared.get(db)
  if (cache === undefined) {
    const schemaVersion = db.prepare("PRAGMA schema_version").pluck(true)
    cache = { statements: new Map(), schemaVersion, reload: db.prepare("SELECT count(*) FROM sqlite_schema"), version: schemaVersion.get() as number }
    prepared.set(db, cache)
  } else {
    const version = cache.schemaVersion.get() as number
    if (version !== cache.version) {
      // another connection's change: even a fresh prepare would see the old schema until a run
      // of some statement reloads it
      cache.reload.get()
      cache.statements.clear()
      cache.version = version
    }
  }
  const cached = cache.statements.get(sql)
  if (cached !== undefined) return cached
  const stmt = db.prepare(sql)
  if (cache.statements.size >= MAX_PREPARED) cache.statements.clear()
  cache.statements.set(sql, stmt)
  return stmt
}

class Failure {
  constructor(readonly failure: WorkerFailure) {}
}

const fail = (kind: WorkerFailure["kind"], message: string, index?: number): Failure =>
  new Failure(index === undefined ? { kind, message } : { kind, message, index })

/** SQLite's message, never a path or stack: it goes back to the tenant. */
const fromError = (e: unknown, index?: number): Failure => {
  if (e instanceof Failure) return index === undefined || e.failure.index !== undefined ? e : fail(e.failure.kind, e.failure.message, index)
  const code = typeof e === "object" && e !== null && "code" in e ? String(e.code) : ""
  const message = e instanceof Error ? e.message : String(e)
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return fail("busy", "the database is locked", index)
  if (code.startsWith("SQLITE_CANTOPEN")) return fail("missing", "no such database", index)
  if (code.startsWith("SQLITE_") || e instanceof RangeError || e instanceof TypeError) return fail("statement", message, index)
  return fail("io", message, index)
}

const changes = (db: Database.Database) => {
  const row = prepare(db, "SELECT changes(), last_insert_rowid()").raw(true).safeIntegers(true).get() as [bigint, bigint]
  return { changes: row[0], lastInsertRowid: row[1] }
}

/**
 * Whole numbers bind as SQLite integers, as rqlite binds them: better-sqlite3 binds every JS
 * number as a double, so `true` (sent as 1) landed in a TEXT column as "1.0".
 */
const bindable = (params: ReadonlyArray<unknown>): Array<unknown> =>
  params.map((p) => (typeof p === "number" && Number.isSafeInteger(p) ? BigInt(p) : p))

/** Where the runner's answers go, and when a turn of requests starts and ends. */
export interface RunnerOutput {
  /** Each answer, in request order. */
  readonly send: (answer: Answer) => void
  /** The runner starts running requests. */
  readonly busy: () => void
  /** The runner has nothing it can run now (done, or waiting on a backup). */
  readonly idle: () => void
}

export interface SqliteRunner {
  /** Queues a request behind those already queued; `drain` runs them. */
  readonly enqueue: (request: WorkerRequest) => void
  /** Runs the queued requests in order, each answered before the next starts. */
  readonly drain: () => void
  /** Closes every open connection (the in-process engine's end; a worker process just exits). */
  readonly close: () => void
}

export const makeSqliteRunner = (options: WorkerOptions, output: RunnerOutput): SqliteRunner => {
  const open = new Map<string, Database.Database>()
  const send = output.send

  const connection = (file: string): Database.Database => {
    const cached = open.get(file)
    if (cached !== undefined) {
      // most recently used last, so the first entry is the one to close when full
      open.delete(file)
      open.set(file, cached)
      return cached
    }
    if (!existsSync(file)) throw fail("missing", "no such database")
    const db = new Database(file, { fileMustExist: true, timeout: options.busyTimeoutMs })
    open.set(file, db)
    if (open.size > options.maxOpen) {
      const [oldest, oldDb] = open.entries().next().value ?? []
      if (oldest !== undefined && oldDb !== undefined) {
        open.delete(oldest)
        oldDb.close()
      }
    }
    return db
  }

  /** Closes the file's connection and removes it with its WAL and shared-memory files. */
  const removeFiles = (file: string): void => {
    const db = open.get(file)
    if (db !== undefined) {
      open.delete(file)
      db.close()
    }
    for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(file + suffix, { force: true })
  }

  /** Reads rows as arrays with exact integers, refusing an answer past the byte cap. */
  const readRows = (stmt: Database.Statement, params: ReadonlyArray<unknown>) => {
    stmt.raw(true).safeIntegers(true)
    const columns = stmt.columns().map((c) => c.name)
    const rows: Array<ReadonlyArray<SqlCell>> = []
    let bytes = 0
    for (const row of stmt.iterate(...params) as Iterable<ReadonlyArray<SqlCell>>) {
      rows.push(row)
      // a cheap estimate: the JSON is at least this long, so the cap is never passed by much
      for (const cell of row) bytes += typeof cell === "string" ? cell.length + 3 : cell instanceof Uint8Array ? cell.byteLength * 1.34 + 3 : 8
      if (bytes > options.maxResultBytes) throw fail("too_large", `the answer is over ${options.maxResultBytes} bytes; narrow the query or page it with LIMIT/OFFSET`)
    }
    return { columns, rows }
  }
  /** One statement, answered by its kind: a read answers rows, a write answers the change counts. */
  const runOp = (db: Database.Database, raw: StatementOp, shape: AnswerShape): string => {
    const op = { ...raw, params: bindable(raw.params) }
    const stmt = prepare(db, op.sql)
    // the guard's allow-list decided first; this is SQLite's own word on the prepared statement
    if (op.readOnly === true && !stmt.readonly) throw fail("statement", "this route runs reads only, and the statement would change the database")
    if (op.kind === "read") {
      if (!stmt.reader) {
        stmt.run(...op.params)
        return readAnswer(shape, [], [])
      }
      const { columns, rows } = readRows(stmt, op.params)
      return readAnswer(shape, columns, rows)
    }
    if (stmt.reader) {
      // INSERT ... RETURNING: a write all the same, answered with its counts
      stmt.all(...op.params)
      const c = changes(db)
      return execAnswer(c.changes, c.lastInsertRowid)
    }
    stmt.safeIntegers(true)
    const result = stmt.run(...op.params)
    return execAnswer(result.changes, result.lastInsertRowid)
  }

  const handle = (request: WorkerRequest): WorkerValue | Promise<WorkerValue> => {
    switch (request.op) {
      case "statement":
        return { type: "json", json: runOp(connection(request.file), request, request.shape) }
      case "batch": {
        const db = connection(request.file)
        const results: Array<string> = []
        let index = 0
        const run = db.transaction(() => {
          for (const op of request.ops) {
            try {
              results.push(runOp(db, op, "counted"))
            } catch (e) {
              throw fromError(e, index)
            }
            index++
          }
        })
        run()
        return {
          type: "json",
          json: request.returnResults ? `{"results":[${results.join(",")}],"count":${results.length}}` : `{"status":"ok","count":${results.length}}`
        }
      }
      case "create": {
        if (request.ifMissing === true && existsSync(request.file)) return { type: "done" }
        removeFiles(request.file)
        mkdirSync(dirname(request.file), { recursive: true })
        const db = new Database(request.file, { timeout: options.busyTimeoutMs })
        db.pragma("journal_mode = WAL")
        open.set(request.file, db)
        return { type: "done" }
      }
      case "backup":
        // SQLite's online backup API: a consistent copy while the database stays in use. The
        // requests behind it wait for it (see the loop below), so nothing else runs between its steps.
        return connection(request.file)
          .backup(request.dest)
          .then((): WorkerValue => ({ type: "done" }))
      case "inspect": {
        if (!existsSync(request.file)) throw fail("missing", "no such file")
        const db = new Database(request.file, { readonly: true, fileMustExist: true })
        try {
          const integrity = (db.prepare("PRAGMA quick_check").raw(true).all() as Array<[string]>).map((r) => r[0])
          const objects = db.prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema").all() as Array<{
            type: string
            name: string
            tbl_name: string
            sql: string | null
          }>
          return { type: "inspected", integrity, objects }
        } finally {
          db.close()
        }
      }
      case "drop":
        removeFiles(request.file)
        return { type: "done" }
      case "replace":
        removeFiles(request.file)
        // a store never used before has no directory yet (an import into a new namespace)
        mkdirSync(dirname(request.file), { recursive: true })
        renameSync(request.from, request.file)
        return { type: "done" }
    }
  }

  const failedWith = (e: unknown): Answer => ({ ok: false, failure: fromError(e).failure })

  /**
   * Requests run one after another in arrival order; a backup's promise holds the ones behind it.
   * Answers leave in order, each before its successor could run long (WorkerOutbox.ts): the
   * gateway reads an unanswered request at the head of its list as the one running, which is how
   * it knows which statement ran past the timeout, and that every request behind it has not run.
   */
  const queue: Array<WorkerRequest> = []
  let waiting = false

  const drain = (): void => {
    output.busy()
    while (!waiting) {
      const request = queue.shift()
      if (request === undefined) break
      let value: WorkerValue | Promise<WorkerValue>
      try {
        value = handle(request)
      } catch (e) {
        send(failedWith(e))
        continue
      }
      if (value instanceof Promise) {
        waiting = true
        value.then(
          (v) => send({ ok: true, value: v }),
          (e: unknown) => send(failedWith(e))
        ).finally(() => {
          waiting = false
          drain()
        })
        break
      }
      send({ ok: true, value })
    }
    output.idle()
  }

  return {
    enqueue: (request) => {
      queue.push(request)
    },
    drain,
    close: () => {
      for (const db of open.values()) db.close()
      open.clear()
    }
  }
}
