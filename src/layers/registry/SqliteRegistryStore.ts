/**
 * The embedded engine: `RegistryStore` over one SQLite file (`<dataDir>/registry.db`) through
 * `@effect/sql-sqlite-node` (better-sqlite3, WAL). The gateway and the CLI may open the same file
 * at once; SQLite's own locking plus a busy timeout serialise their writes.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
// the modules themselves, not the packages' indexes, which load every other module of theirs at
// start (Model, SqlSchema, SqlResolver, ...: about 0.1 s of a gateway's start)
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import Database from "better-sqlite3"
import { Duration, Effect, Either, Exit, Layer, Schedule } from "effect"
import { mkdirSync } from "node:fs"
import * as path from "node:path"
import { testDirectory } from "../TestLayer.js"
import { migrations as registryMigrations } from "./migrations.js"
import { RegistryStore, StoreError } from "./RegistryStore.js"
import { openWalGeneration } from "./WalGeneration.js"
import type { ExecResult, RegistryStoreService, Row, Statement } from "./RegistryStore.js"

export interface SqliteRegistryConfig {
  /** The database file; created (with its directory) when missing. */
  readonly filename: string
  /** How long a write waits for another process's write lock before `unavailable`. Default 5 s. */
  readonly busyTimeout?: Duration.DurationInput | undefined
}

/** Where the registry lives inside a gateway data directory. */
export const registryDbPath = (dataDir: string): string => path.join(dataDir, "registry.db")

/** The `@effect/sql` Migrator's bookkeeping table (its own schema: migration_id, name, created_at). */
const migrationsTable = "effect_sql_migrations"
/** Registry answers kept between commits: how many, and the most rows one may hold. */
const KEPT_ANSWERS_MAX = 4096
const KEPT_ROWS_MAX = 4
const defaultBusyTimeout = Duration.seconds(5)

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** better-sqlite3 puts SQLite's extended result code (`SQLITE_CONSTRAINT_UNIQUE`, ...) in `code`. */
const fromSqlError = (error: SqlError): StoreError => {
  const code = errorCode(error.cause) ?? ""
  const detail = `${error.message}: ${errorMessage(error.cause)}`
  if (code.startsWith("SQLITE_CONSTRAINT")) return new StoreError({ reason: "constraint", detail })
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new StoreError({ reason: "unavailable", detail })
  }
  return new StoreError({ reason: "statement", detail })
}

/** An error thrown by better-sqlite3 itself (the read connection), classified as `fromSqlError` does. */
const fromDriverError = (error: unknown): StoreError => {
  const code = errorCode(error) ?? ""
  const detail = errorMessage(error)
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return new StoreError({ reason: "unavailable", detail })
  return new StoreError({ reason: "statement", detail })
}

/** `executeRaw` hands back better-sqlite3's RunResult for a write; a `RETURNING` write reads rows. */
const toExecResult = (raw: unknown): ExecResult => {
  if (Array.isArray(raw)) return { rowsAffected: raw.length, lastInsertId: 0 }
  if (typeof raw === "object" && raw !== null && "changes" in raw && "lastInsertRowid" in raw) {
    return { rowsAffected: Number(raw.changes), lastInsertId: Number(raw.lastInsertRowid) }
  }
  return { rowsAffected: 0, lastInsertId: 0 }
}

const migrationRecord = (): Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> =>
  Object.fromEntries(
    registryMigrations.map((migration) => [
      `${migration.id}_${migration.name}`,
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.forEach(migration.statements, (statement) => sql.unsafe(statement), { discard: true })
      )
    ])
  )

const make = (config: SqliteRegistryConfig) =>
  Effect.gen(function* () {
    yield* Effect.try({
      try: () => mkdirSync(path.dirname(config.filename), { recursive: true }),
      catch: (error) => new StoreError({ reason: "unavailable", detail: `registry directory: ${errorMessage(error)}` })
    })
    // The client opens the file synchronously and lets a failure escape as a defect.
    const sql = yield* SqliteClient.make({ filename: config.filename }).pipe(
      Effect.catchAllDefect((defect) =>
        Effect.fail(new StoreError({ reason: "unavailable", detail: `open ${config.filename}: ${errorMessage(defect)}` }))
      )
    )
    const busyMillis = Math.round(Duration.toMillis(config.busyTimeout ?? defaultBusyTimeout))
    yield* sql.unsafe(`PRAGMA busy_timeout = ${busyMillis}`).pipe(Effect.mapError(fromSqlError))

    const migrationRows = sql
      .unsafe<Row>(`SELECT migration_id, name FROM ${migrationsTable} ORDER BY migration_id`)
      .withoutTransform.pipe(Effect.mapError(fromSqlError))

    // The Migrator records pending ids first and quietly does nothing when that insert fails,
    // which here means another process (the CLI) held the write lock past the busy timeout.
    // Checking afterwards turns that into a retry, then a clear `unavailable`.
    const verify = Effect.flatMap(migrationRows, (rows) => {
      const applied = new Set(rows.map((row) => row["migration_id"]))
      const missing = registryMigrations.filter((migration) => !applied.has(migration.id))
      return missing.length === 0
        ? Effect.void
        : Effect.fail(
            new StoreError({
              reason: "unavailable",
              detail: `migrations not applied yet: ${missing.map((m) => m.name).join(", ")}`
            })
          )
    })

    yield* Migrator.make({})({ loader: Migrator.fromRecord(migrationRecord()), table: migrationsTable }).pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.catchTags({
        SqlError: (error) => Effect.fail(fromSqlError(error)),
        MigrationError: (error) => Effect.fail(new StoreError({ reason: "statement", detail: error.message }))
      }),
      // A failing migration statement reaches us as a defect (the Migrator dies with it).
      Effect.catchAllDefect((defect) =>
        Effect.fail(new StoreError({ reason: "statement", detail: `migration failed: ${errorMessage(defect)}` }))
      ),
      Effect.zipRight(verify),
      Effect.retry({
        schedule: Schedule.spaced(Duration.millis(200)).pipe(Schedule.intersect(Schedule.recurs(10))),
        while: (error) => error.reason === "unavailable"
      })
    )

    // Hot path. A statement through the client's API pays for a span, a compile, a scope and the
    // client's semaphore: ~39 µs for a point lookup against ~7 µs in better-sqlite3 itself. The
    // gateway runs one per API-key request, so the store reserves the single connection for its
    // lifetime (nothing else uses this client) and calls it directly, still through the client's
    // prepared-statement cache: ~15 µs. Our own lock then does what the client's did: keeps
    // every other statement out of a batch's open transaction.
    const connection = yield* sql.reserve.pipe(Effect.mapError(fromSqlError))
    const lock = yield* Effect.makeSemaphore(1)

    // Reads take a second, read-only connection, called synchronously: in WAL mode it sees every
    // committed write of the writer (this process's or the CLI's) and never waits for a write in
    // progress, so reads need neither the lock nor the client's per-statement machinery (a span,
    // a scope, a semaphore). A point lookup, which every API-key request makes, is then a few
    // microseconds of better-sqlite3 instead of ~15 µs through the client.
    const reader = yield* Effect.acquireRelease(
      Effect.try({
        try: () => new Database(config.filename, { readonly: true, fileMustExist: true, timeout: busyMillis }),
        catch: (error) => new StoreError({ reason: "unavailable", detail: `open ${config.filename} for reading: ${errorMessage(error)}` })
      }),
      (db) => Effect.sync(() => db.close())
    )
    const prepared = new Map<string, Database.Statement>()
    const read = (statement: Statement): Either.Either<ReadonlyArray<Row>, StoreError> => {
      try {
        let stmt = prepared.get(statement.sql)
        if (stmt === undefined) {
          stmt = reader.prepare(statement.sql)
          // the registry's statements are a fixed set; a bound keeps a bug from growing it forever
          if (prepared.size >= 512) prepared.clear()
          prepared.set(statement.sql, stmt)
        }
        // The registry schema has no BLOB columns and integers stay below 2^53, so the rows
        // hold only strings, numbers and nulls.
        return Either.right(stmt.all(...(statement.params ?? [])) as ReadonlyArray<Row>)
      } catch (error) {
        return Either.left(fromDriverError(error))
      }
    }

    // Small answers are kept while nothing has been committed to the registry since they were read,
    // by this process or any other (the CLI, a second gateway on the same file): the answer to the
    // same statement is then the same, and telling so costs one pread of the WAL generation
    // instead of a read transaction. Every request with a credential reads its key or session
    // row, so this is most of what a hot route pays for its credential check; a revocation is
    // still seen by the very next request, on every gateway (docs/performance.md).
    const generation = yield* Effect.acquireRelease(
      Effect.sync(() => openWalGeneration(config.filename)),
      (g) => Effect.sync(() => g?.close())
    )
    // by statement text, then by its parameters: the texts are a fixed set of constants, so a
    // lookup hashes the short parameter key only
    const answers = new Map<string, Map<string, { readonly generation: string; readonly rows: ReadonlyArray<Row> }>>()
    let keptCount = 0
    const queryNow = (statement: Statement): Either.Either<ReadonlyArray<Row>, StoreError> => {
      // read before the statement runs: a commit in between leaves the answer kept under the older
      // generation, so the next caller reads again
      const current = generation?.read()
      if (current === undefined) return read(statement)
      const params = statement.params ?? []
      // one string parameter (a key or session id) as itself, marked so it never meets a JSON key
      const key = params.length === 1 && typeof params[0] === "string" ? "\u0001" + params[0] : JSON.stringify(params)
      const kept = answers.get(statement.sql)?.get(key)
      if (kept !== undefined && kept.generation === current) return Either.right(kept.rows)
      const result = read(statement)
      if (Either.isRight(result) && result.right.length <= KEPT_ROWS_MAX) {
        if (keptCount >= KEPT_ANSWERS_MAX) {
          answers.clear()
          keptCount = 0
        }
        let map = answers.get(statement.sql)
        if (map === undefined) {
          map = new Map()
          answers.set(statement.sql, map)
        }
        // shared by every caller that reads it until the next commit: nobody may change it
        for (const row of result.right) Object.freeze(row)
        if (!map.has(key)) keptCount++
        map.set(key, { generation: current, rows: Object.freeze(result.right) })
      }
      return result
    }

    const query = (statement: Statement): Effect.Effect<ReadonlyArray<Row>, StoreError> => Effect.suspend(() => queryNow(statement))

    const execUnlocked = (statement: Statement): Effect.Effect<ExecResult, StoreError> =>
      connection
        .executeRaw(statement.sql, statement.params ?? [])
        .pipe(Effect.map(toExecResult), Effect.mapError(fromSqlError))

    const control = (sqlText: string) => Effect.mapError(connection.executeRaw(sqlText, []), fromSqlError)

    const exec = (statement: Statement) => lock.withPermits(1)(execUnlocked(statement))

    const batch = (statements: ReadonlyArray<Statement>): Effect.Effect<ReadonlyArray<ExecResult>, StoreError> =>
      statements.length === 0
        ? Effect.succeed([])
        : lock.withPermits(1)(
            Effect.acquireUseRelease(
              // IMMEDIATE takes the write lock up front, waiting out another process's writer via
              // busy_timeout, instead of failing later when a read lock cannot be upgraded.
              control("BEGIN IMMEDIATE"),
              () => Effect.tap(Effect.forEach(statements, execUnlocked), () => control("COMMIT")),
              (_, exit) => (Exit.isSuccess(exit) ? Effect.void : Effect.ignore(control("ROLLBACK")))
            )
          )

    const migrations = Effect.map(
      query({ sql: `SELECT name FROM ${migrationsTable} ORDER BY migration_id` }),
      (rows) => rows.flatMap((row) => (typeof row["name"] === "string" ? [row["name"]] : []))
    )

    const holdNow = <A>(f: () => A): A => (generation === undefined ? f() : generation.hold(f))

    const service: RegistryStoreService = { query, queryNow, holdNow, exec, batch, migrations, engine: "sqlite" }
    return service
  })

export const SqliteRegistryStore = {
  /** The store over a SQLite file; building it applies pending migrations. */
  layer: (config: SqliteRegistryConfig): Layer.Layer<RegistryStore, StoreError> =>
    Layer.scoped(RegistryStore, make(config)).pipe(Layer.provide(Reactivity.layer)),
  /** The store on a file in a directory of its own, removed with the layer (test double). */
  Test: Layer.scoped(
    RegistryStore,
    Effect.flatMap(testDirectory("registry"), (dir) => make({ filename: path.join(dir, "registry.db") }))
  ).pipe(Layer.provide(Reactivity.layer))
}
