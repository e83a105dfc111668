/**
 * The clustered engine: `RegistryStore` over rqlite's HTTP data API.
 *
 * Reads go to `/db/query`, writes to `/db/execute`, and a batch is one `/db/execute?transaction`
 * request, which rqlite applies as a single Raft entry inside one SQLite transaction: all or
 * nothing, the same guarantee the SQLite engine gives with `withTransaction`.
 */
import { Clock, Data, Duration, Effect, Layer, Redacted, Schedule, Schema } from "effect"
import { migrations as registryMigrations } from "./migrations.js"
import type { Migration } from "./migrations.js"
import { RegistryStore, StoreError } from "./RegistryStore.js"
import type { ExecResult, RegistryStoreService, Row, SqlValue, Statement } from "./RegistryStore.js"

/** rqlite's read consistency levels (`?level=`). */
export type ReadConsistency = "none" | "weak" | "linearizable" | "strong"

export interface RqliteConfig {
  /** Base URL of any node (`http://host:4001`); a follower forwards to the leader itself. */
  readonly url: string
  readonly user?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  /** Deadline of one HTTP attempt. Default 10 s. */
  readonly timeout?: Duration.DurationInput | undefined
  /** Default `weak`: see `defaultReadConsistency`. */
  readonly readConsistency?: ReadConsistency | undefined
  /** How many times a retry-safe `unavailable` failure is tried again. Default 3. */
  readonly retries?: number | undefined
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
const defaultTimeout = Duration.seconds(10)
const defaultRetries = 3
/** A misconfigured cluster could bounce requests between nodes forever. */
const maxRedirects = 3

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
const decodeResponse = Schema.decodeUnknown(Schema.parseJson(ResponseJson))

/**
 * A failure that says nothing about the data, only that the cluster did not answer. `unsent`
 * means the request certainly never reached rqlite (connection refused, or rqlite refused it
 * before doing anything: no leader), so even a write can be sent again; otherwise only reads are.
 */
class Transient extends Data.TaggedError("Transient")<{ readonly detail: string; readonly unsent: boolean }> {}

/** Socket errors raised before a byte of the request left: retrying cannot apply a write twice. */
const unsentCodes = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT"
])

const errorCode = (error: unknown, depth = 0): string | undefined => {
  if (typeof error !== "object" || error === null || depth > 4) return undefined
  if ("code" in error && typeof error.code === "string") return error.code
  if ("errors" in error && Array.isArray(error.errors)) {
    for (const inner of error.errors) {
      const code = errorCode(inner, depth + 1)
      if (code !== undefined) return code
    }
  }
  return "cause" in error ? errorCode(error.cause, depth + 1) : undefined
}

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

interface HttpAnswer {
  readonly status: number
  readonly location: string | null
  readonly body: string
}

const make = (config: RqliteConfig): RegistryStoreService => {
  const base = config.url.replace(/\/+$/, "")
  const timeout = config.timeout ?? defaultTimeout
  const level = config.readConsistency ?? defaultReadConsistency
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (config.user !== undefined) {
    const secret = config.password === undefined ? "" : Redacted.value(config.password)
    headers["authorization"] = `Basic ${Buffer.from(`${config.user}:${secret}`).toString("base64")}`
  }
  const retrySchedule = Schedule.exponential(Duration.millis(100), 2).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(config.retries ?? defaultRetries))
  )

  const sendOnce = (url: string, body: string): Effect.Effect<HttpAnswer, Transient> =>
    Effect.tryPromise({
      try: async (signal) => {
        // Redirects are followed by hand: fetch would turn a 301'd POST into a body-less GET.
        const response = await fetch(url, { method: "POST", headers, body, redirect: "manual", signal })
        return { status: response.status, location: response.headers.get("location"), body: await response.text() }
      },
      catch: (error) => {
        const code = errorCode(error)
        return new Transient({
          detail: `rqlite request failed: ${code ?? String(error)}`,
          unsent: code !== undefined && unsentCodes.has(code)
        })
      }
    }).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () => new Transient({ detail: `rqlite did not answer within ${Duration.format(timeout)}`, unsent: false })
      })
    )

  const send = (url: string, body: string, hops: number): Effect.Effect<ResponseJson, Transient | StoreError> =>
    Effect.flatMap(sendOnce(url, body), (answer) => {
      const { status } = answer
      if (status >= 300 && status < 400 && answer.location !== null && hops < maxRedirects) {
        return send(new URL(answer.location, url).toString(), body, hops + 1)
      }
      if (status === 503) {
        // rqlite answers 503 before touching the log: no leader, or the node is not ready.
        return Effect.fail(new Transient({ detail: `rqlite unavailable: ${answer.body.trim()}`, unsent: true }))
      }
      if (status === 400 || (status === 500 && answer.body.startsWith("SQL rewrite"))) {
        return Effect.fail(new StoreError({ reason: "statement", detail: `rqlite rejected the request: ${answer.body.trim()}` }))
      }
      if (status !== 200) {
        // 401/403 (bad credentials), 408 (queue timeout), other 5xx: the store cannot answer.
        return Effect.fail(
          new StoreError({ reason: "unavailable", detail: `rqlite answered ${status}: ${answer.body.trim()}` })
        )
      }
      return decodeResponse(answer.body).pipe(
        Effect.mapError((error) => new StoreError({ reason: "statement", detail: `unexpected rqlite answer: ${error.message}` })),
        Effect.flatMap((response) =>
          // A top-level error is the cluster's, not the statement's: Raft apply timed out,
          // leadership moved mid-commit, forwarding to the leader failed.
          response.error === undefined
            ? Effect.succeed(response)
            : Effect.fail(new Transient({ detail: `rqlite: ${response.error}`, unsent: false }))
        )
      )
    })

  /** One request with its deadline and bounded retries; `idempotent` lets ambiguous failures retry. */
  const post = (
    path: string,
    statements: ReadonlyArray<Statement>,
    idempotent: boolean
  ): Effect.Effect<ReadonlyArray<ResultJson>, StoreError> =>
    Effect.suspend(() => send(`${base}${path}`, JSON.stringify(statements.map(toRqliteStatement)), 0)).pipe(
      Effect.retry({
        schedule: retrySchedule,
        while: (error) => error._tag === "Transient" && (error.unsent || idempotent)
      }),
      Effect.catchTag("Transient", (error) => Effect.fail(new StoreError({ reason: "unavailable", detail: error.detail }))),
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
