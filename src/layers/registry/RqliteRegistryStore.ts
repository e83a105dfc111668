/**
 * The clustered engine: `RegistryStore` over rqlite's HTTP data API.
 *
 * Reads go to `/db/query`, writes to `/db/execute`, and a batch is one `/db/execute?transaction`
 * request, which rqlite applies as a single Raft entry inside one SQLite transaction: all or
 * nothing, the same guarantee the SQLite engine gives with `withTransaction`.
 */
import { Clock, Effect, Layer, Schema } from "effect"
import { migrations as registryMigrations } from "./migrations.js"
import type { Migration } from "./migrations.js"
import { RegistryStore, StoreError } from "./RegistryStore.js"
import { rqliteHttp, type RqliteHttpConfig } from "./RqliteHttp.js"
import type { ExecResult, RegistryStoreService, Row, SqlValue, Statement } from "./RegistryStore.js"

/** rqlite's read consistency levels (`?level=`). */
export type ReadConsistency = "none" | "weak" | "linearizable" | "strong"

export interface RqliteConfig extends RqliteHttpConfig {
  /** Default `weak`: see `defaultReadConsistency`. */
  readonly readConsistency?: ReadConsistency | undefined
}

/**
 * `weak` is rqlite's own default: the node answering checks locally that it is the leader and
 * reads its SQLite file, so a read costs one local query and no Raft round. Writes return only
 * once committed and applied on the leader, so a weak read after our own write sees it; the one
 * window where it can be stale is the sub-second overlap of a deposed leader that has not noticed
 * yet. That is acceptable for the registry (a revoked key may pass for that instant), and the API
 * key lookup on every request cannot afford `strong`, which sends each read through the Raft log.
 */
const defaultReadConsistency: ReadConsistency = "weak"

const Value = Schema.Union(Schema.String, Schema.Number, Schema.Null)
const ResultJson = Schema.Struct({
  error: Schema.optional(Schema.String),
  rows_affected: Schema.optional(Schema.Number),
  last_insert_id: Schema.optional(Schema.Number),
  rows: Schema.optional(Schema.Array(Schema.Record({ key: Schema.String, value: Value })))
})
type ResultJson = typeof ResultJson.Type
const ResponseJson = Schema.Struct({
  results: Schema.optional(Schema.Array(ResultJson)),
  error: Schema.optional(Schema.String)
})
type ResponseJson = typeof ResponseJson.Type
const decodeResponse = Schema.decodeUnknown(ResponseJson)

/** rqlite reports SQLite's message text only, so the class of error is read from it. */
const classifySqlError = (message: string): StoreError =>
  /constraint failed/i.test(message)
    ? new StoreError({ reason: "constraint", detail: message })
    : /database is locked|database table is locked|SQLITE_BUSY/i.test(message)
      ? new StoreError({ reason: "unavailable", detail: message })
      : new StoreError({ reason: "statement", detail: message })

const toRqliteStatement = (statement: Statement): ReadonlyArray<SqlValue> => [
  statement.sql,
  ...(statement.params ?? [])
]

const toExecResult = (result: ResultJson): ExecResult => ({
  // rqlite omits `rows_affected` when it is 0.
  rowsAffected: result.rows_affected ?? 0,
  lastInsertId: result.last_insert_id ?? 0
})

const make = (config: RqliteConfig): RegistryStoreService => {
  const level = config.readConsistency ?? defaultReadConsistency
  const http = rqliteHttp(config)

  /** One request with its deadline and bounded retries; `idempotent` lets ambiguous failures retry. */
  const post = (
    path: string,
    statements: ReadonlyArray<Statement>,
    idempotent: boolean
  ): Effect.Effect<ReadonlyArray<ResultJson>, StoreError> =>
    http.post(path, JSON.stringify(statements.map(toRqliteStatement)), idempotent).pipe(
      Effect.flatMap(decodeResponse),
      Effect.mapError((error) =>
        error._tag === "StoreError" ? error : new StoreError({ reason: "statement", detail: `unexpected rqlite answer: ${error.message}` })
      ),
      Effect.map((response) => response.results ?? [])
    )

  const single = (results: ReadonlyArray<ResultJson>): Effect.Effect<ResultJson, StoreError> => {
    const result = results[0]
    if (result === undefined) {
      return Effect.fail(new StoreError({ reason: "statement", detail: "rqlite returned no result" }))
    }
    return result.error === undefined ? Effect.succeed(result) : Effect.fail(classifySqlError(result.error))
  }

  const query = (statement: Statement): Effect.Effect<ReadonlyArray<Row>, StoreError> =>
    post(`/db/query?associative&level=${level}`, [statement], true).pipe(
      Effect.flatMap(single),
      Effect.map((result) => result.rows ?? [])
    )

  const exec = (statement: Statement): Effect.Effect<ExecResult, StoreError> =>
    post("/db/execute", [statement], false).pipe(Effect.flatMap(single), Effect.map(toExecResult))

  const batch = (statements: ReadonlyArray<Statement>): Effect.Effect<ReadonlyArray<ExecResult>, StoreError> => {
    if (statements.length === 0) return Effect.succeed([])
    return post("/db/execute?transaction", statements, false).pipe(
      Effect.flatMap((results) => {
        // With `transaction`, rqlite stops at the first failing statement, rolls back, and
        // returns the results up to it, so the earlier successes listed were undone.
        const failed = results.find((result) => result.error !== undefined)
        if (failed?.error !== undefined) return Effect.fail(classifySqlError(failed.error))
        if (results.length !== statements.length) {
          return Effect.fail(
            new StoreError({
              reason: "statement",
              detail: `rqlite returned ${results.length} results for ${statements.length} statements`
            })
          )
        }
        return Effect.succeed(results.map(toExecResult))
      })
    )
  }

  const appliedNames = query({ sql: "SELECT name FROM portico_migrations ORDER BY id" }).pipe(
    Effect.map((rows) => rows.flatMap((row) => (typeof row["name"] === "string" ? [row["name"]] : [])))
  )

  return { query, exec, batch, migrations: appliedNames, engine: "rqlite" }
}

/**
 * Applies one migration, racing safely against other gateways doing the same: the id's row is
 * inserted FIRST in the same transaction as the migration, so of two concurrent appliers Raft
 * orders one after the other and the second fails on `portico_migrations`' primary key before
 * running any statement, leaving nothing applied. That loser then only has to confirm the row is
 * there (it may have failed on a constraint of its own instead).
 */
const applyMigration = (store: RegistryStoreService, migration: Migration): Effect.Effect<void, StoreError> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    yield* store
      .batch([
        {
          sql: "INSERT INTO portico_migrations (id, name, applied_at) VALUES (?, ?, ?)",
          params: [migration.id, migration.name, now]
        },
        ...migration.statements.map((sql) => ({ sql }))
      ])
      .pipe(
        Effect.catchIf(
          (error) => error.reason === "constraint",
          (error) =>
            store.query({ sql: "SELECT id FROM portico_migrations WHERE id = ?", params: [migration.id] }).pipe(
              Effect.flatMap((rows) => (rows.length > 0 ? Effect.void : Effect.fail(error)))
            )
        )
      )
  })

const migrate = (store: RegistryStoreService): Effect.Effect<void, StoreError> =>
  Effect.gen(function* () {
    yield* store.exec({
      sql: `CREATE TABLE IF NOT EXISTS portico_migrations (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        applied_at INTEGER NOT NULL
      )`
    })
    const rows = yield* store.query({ sql: "SELECT id FROM portico_migrations" })
    const applied = new Set(rows.map((row) => row["id"]))
    const pending = [...registryMigrations].filter((m) => !applied.has(m.id)).sort((a, b) => a.id - b.id)
    yield* Effect.forEach(pending, (migration) => applyMigration(store, migration), { discard: true })
  })

export const RqliteRegistryStore = {
  /** The store over an rqlite cluster; building it applies pending migrations. */
  layer: (config: RqliteConfig): Layer.Layer<RegistryStore, StoreError> =>
    Layer.effect(
      RegistryStore,
      Effect.suspend(() => {
        const store = make(config)
        return Effect.as(migrate(store), store)
      })
    ),
  /** The service without migrating, for tools that only read. */
  make
}
