/**
 * Functions' rows in the registry (migration 16): the function with its settings and live
 * version, its versions (each a content reference of kind `function`), its sealed secrets and its
 * log lines. Every multi-row change is one batch, conditional by SQL predicate, so it holds on
 * rqlite as on SQLite.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { RegistryStore, type Statement, type StoreError } from "../registry/RegistryStore.js"
import { decodeRows } from "../registry/RegistryRows.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

const FunctionRow = Schema.Struct({
  namespace: Schema.String,
  name: Schema.String,
  version: Schema.Number,
  memory_mb: Schema.Number,
  timeout_ms: Schema.Number,
  public: Schema.Number,
  env_sealed: Schema.String,
  created_at: Schema.Number,
  updated_at: Schema.Number,
  schedules: Schema.parseJson(Schema.Array(Schema.String)),
  topics: Schema.parseJson(Schema.Array(Schema.String)),
  cid: Schema.String,
  size: Schema.Number
})
const VersionRow = Schema.Struct({ version: Schema.Number, cid: Schema.String, size: Schema.Number, ref: Schema.String, created_at: Schema.Number })
const LogRow = Schema.Struct({ seq: Schema.Number, at: Schema.Number, request_id: Schema.String, level: Schema.String, message: Schema.String })

export type FunctionRow = typeof FunctionRow.Type
export type VersionRow = typeof VersionRow.Type
export type LogRow = typeof LogRow.Type

const decodeFunctions = decodeRows("function", FunctionRow)
const decodeVersions = decodeRows("function version", VersionRow)
const decodeLogs = decodeRows("function log", LogRow)
const decodeTopical = decodeRows(
  "function topic",
  Schema.Struct({ namespace: Schema.String, name: Schema.String, topics: Schema.parseJson(Schema.Array(Schema.String)) })
)
const decodeScheduled = decodeRows(
  "function schedule",
  Schema.Struct({ namespace: Schema.String, name: Schema.String, schedules: Schema.parseJson(Schema.Array(Schema.String)) })
)

/** The live version's artifact joined to the function row. */
const SELECT_FUNCTION = `SELECT f.namespace, f.name, f.version, f.memory_mb, f.timeout_ms, f.public, f.env_sealed, f.created_at,
  f.updated_at, f.schedules, f.topics, v.cid, v.size FROM functions f JOIN function_versions v
  ON v.namespace = f.namespace AND v.name = f.name AND v.version = f.version`

/** Statements removing one function's rows, or every function's of the namespace (its deletion). */
export const functionRowDeletes = (namespace: string, name?: string): ReadonlyArray<Statement> =>
  ["functions", "function_versions", "function_secrets", "function_logs", "function_schedule_runs", "function_topic_claims"].map((table) =>
    name === undefined
      ? { sql: `DELETE FROM ${table} WHERE namespace = ?`, params: [namespace] }
      : { sql: `DELETE FROM ${table} WHERE namespace = ? AND name = ?`, params: [namespace, name] }
  )

export interface Schedule {
  readonly namespace: string
  readonly name: string
  readonly expression: string
}

export interface Settings {
  readonly memoryMb: number
  readonly timeoutMs: number
  readonly isPublic: boolean
  readonly envSealed: string
  /** Cron expressions, checked. */
  readonly schedules: ReadonlyArray<string>
  /** Topics whose messages run the function, checked. */
  readonly topics: ReadonlyArray<string>
}

/** A function run by a topic's messages. */
export interface TopicTrigger {
  readonly namespace: string
  readonly name: string
  readonly topic: string
}

export interface FunctionStoreService {
  readonly get: (namespace: string, name: string) => Effect.Effect<FunctionRow | undefined, StoreError>
  readonly list: (namespace: string, after: string | undefined, limit: number) => Effect.Effect<ReadonlyArray<FunctionRow>, StoreError>
  readonly version: (namespace: string, name: string, version: number) => Effect.Effect<VersionRow | undefined, StoreError>
  readonly versions: (namespace: string, name: string) => Effect.Effect<ReadonlyArray<VersionRow>, StoreError>
  /**
   * Statements that add the next version of a function (the artifact under `ref`), make it live,
   * and write `settings`; run in the batch that records the content reference, and conditional on
   * it: when the quota refused the reference, they write nothing.
   */
  readonly addVersionStatements: (namespace: string, name: string, cid: string, size: number, ref: string, settings: Settings, now: number) => ReadonlyArray<Statement>
  /** Changes the settings of an existing function; false when there is none. */
  readonly updateSettings: (namespace: string, name: string, settings: Settings, now: number) => Effect.Effect<boolean, StoreError>
  /** Every schedule of every function (the scheduler's list). */
  readonly allSchedules: Effect.Effect<ReadonlyArray<Schedule>, StoreError>
  /** Claims one slot of a schedule for `node`: true for the one gateway whose claim made the row. */
  readonly claimSlot: (schedule: Schedule, slot: number, node: string) => Effect.Effect<boolean, StoreError>
  /** Every topic trigger of every function (the dispatcher's list). */
  readonly allTopicTriggers: Effect.Effect<ReadonlyArray<TopicTrigger>, StoreError>
  /** Claims one message for one function: true for the one gateway whose claim made the row. */
  readonly claimMessage: (trigger: TopicTrigger, epoch: string, seq: number, now: number) => Effect.Effect<boolean, StoreError>
  /** Forgets the claims of slots before `slot`, and of messages claimed before `before` (Unix ms). */
  readonly pruneClaims: (slot: number, before: number) => Effect.Effect<void, StoreError>
  /** Removes the function's rows (versions, secrets, logs too); the versions' refs, for their release. */
  readonly remove: (namespace: string, name: string) => Effect.Effect<ReadonlyArray<VersionRow>, StoreError>
  /** Removes versions past the newest `keep`, never the live one; the removed, for their release. */
  readonly prune: (namespace: string, name: string, keep: number) => Effect.Effect<ReadonlyArray<VersionRow>, StoreError>
  readonly secret: (namespace: string, name: string, key: string) => Effect.Effect<string | undefined, StoreError>
  readonly secretNames: (namespace: string, name: string) => Effect.Effect<ReadonlyArray<{ key: string; updated_at: number }>, StoreError>
  /** Writes a secret unless the function has `max` others; false when it has. */
  readonly putSecret: (namespace: string, name: string, key: string, sealed: string, now: number, max: number) => Effect.Effect<boolean, StoreError>
  readonly deleteSecret: (namespace: string, name: string, key: string) => Effect.Effect<boolean, StoreError>
  readonly appendLogs: (
    lines: ReadonlyArray<{ namespace: string; name: string; at: number; requestId: string; level: string; message: string }>,
    keep: number
  ) => Effect.Effect<void, StoreError>
  readonly logs: (namespace: string, name: string, limit: number, before: number | undefined) => Effect.Effect<ReadonlyArray<LogRow>, StoreError>
}

export class FunctionStore extends Context.Tag("portico/FunctionStore")<FunctionStore, FunctionStoreService>() {
  static readonly Live = Layer.suspend(() => Layer.effect(FunctionStore, makeFunctionStore))
  /** Over the registry's test double (a fresh SQLite file). */
  static readonly Test = Layer.suspend(() => FunctionStore.Live.pipe(Layer.provide(SqliteRegistryStore.Test)))
}

export const makeFunctionStore = Effect.gen(function* () {
  const store = yield* RegistryStore
  const first = <A>(rows: ReadonlyArray<A>): A | undefined => rows[0]

  const service: FunctionStoreService = {
    get: (namespace, name) =>
      store.query({ sql: `${SELECT_FUNCTION} WHERE f.namespace = ? AND f.name = ?`, params: [namespace, name] }).pipe(
        Effect.flatMap(decodeFunctions),
        Effect.map(first)
      ),
    list: (namespace, after, limit) =>
      store
        .query({ sql: `${SELECT_FUNCTION} WHERE f.namespace = ? AND f.name > ? ORDER BY f.name LIMIT ?`, params: [namespace, after ?? "", limit] })
        .pipe(Effect.flatMap(decodeFunctions)),
    version: (namespace, name, version) =>
      store
        .query({ sql: "SELECT version, cid, size, ref, created_at FROM function_versions WHERE namespace = ? AND name = ? AND version = ?", params: [namespace, name, version] })
        .pipe(Effect.flatMap(decodeVersions), Effect.map(first)),
    versions: (namespace, name) =>
      store
        .query({ sql: "SELECT version, cid, size, ref, created_at FROM function_versions WHERE namespace = ? AND name = ? ORDER BY version DESC", params: [namespace, name] })
        .pipe(Effect.flatMap(decodeVersions)),
    addVersionStatements: (namespace, name, cid, size, ref, s, now) => [
      {
        sql: `INSERT INTO function_versions (namespace, name, version, cid, size, ref, created_at)
          SELECT ?, ?, next, ?, ?, ?, ? FROM (SELECT COALESCE(MAX(version), 0) + 1 AS next FROM function_versions WHERE namespace = ? AND name = ?)
          WHERE EXISTS (SELECT 1 FROM content_refs WHERE cid = ? AND namespace = ? AND kind = 'function' AND ref = ?)`,
        params: [namespace, name, cid, size, ref, now, namespace, name, cid, namespace, ref]
      },
      {
        sql: `INSERT INTO functions (namespace, name, version, memory_mb, timeout_ms, public, env_sealed, schedules, topics, created_at, updated_at)
          SELECT ?, ?, version, ?, ?, ?, ?, ?, ?, ?, ? FROM function_versions WHERE namespace = ? AND name = ? AND ref = ?
          ON CONFLICT (namespace, name) DO UPDATE SET version = excluded.version, memory_mb = excluded.memory_mb,
            timeout_ms = excluded.timeout_ms, public = excluded.public, env_sealed = excluded.env_sealed,
            schedules = excluded.schedules, topics = excluded.topics, updated_at = excluded.updated_at`,
        params: [
          namespace,
          name,
          s.memoryMb,
          s.timeoutMs,
          s.isPublic ? 1 : 0,
          s.envSealed,
          JSON.stringify(s.schedules),
          JSON.stringify(s.topics),
          now,
          now,
          namespace,
          name,
          ref
        ]
      }
    ],
    updateSettings: (namespace, name, s, now) =>
      Effect.map(
        store.exec({
          sql: `UPDATE functions SET memory_mb = ?, timeout_ms = ?, public = ?, env_sealed = ?, schedules = ?, topics = ?, updated_at = ?
            WHERE namespace = ? AND name = ?`,
          params: [s.memoryMb, s.timeoutMs, s.isPublic ? 1 : 0, s.envSealed, JSON.stringify(s.schedules), JSON.stringify(s.topics), now, namespace, name]
        }),
        (r) => r.rowsAffected > 0
      ),
    allSchedules: Effect.flatMap(store.query({ sql: "SELECT namespace, name, schedules FROM functions WHERE schedules <> '[]'" }), (rows) =>
      Effect.map(decodeScheduled(rows), (scheduled) =>
        scheduled.flatMap((f) => f.schedules.map((expression) => ({ namespace: f.namespace, name: f.name, expression })))
      )
    ),
    claimSlot: (s, slot, node) =>
      Effect.map(
        store.exec({
          sql: `INSERT INTO function_schedule_runs (namespace, name, expression, slot, node) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (namespace, name, expression, slot) DO NOTHING`,
          params: [s.namespace, s.name, s.expression, slot, node]
        }),
        (r) => r.rowsAffected > 0
      ),
    allTopicTriggers: Effect.flatMap(store.query({ sql: "SELECT namespace, name, topics FROM functions WHERE topics <> '[]'" }), (rows) =>
      Effect.map(decodeTopical(rows), (functions) => functions.flatMap((f) => f.topics.map((topic) => ({ namespace: f.namespace, name: f.name, topic }))))
    ),
    claimMessage: (t, epoch, seq, now) =>
      Effect.map(
        store.exec({
          sql: `INSERT INTO function_topic_claims (namespace, name, topic, epoch, seq, claimed_at) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (namespace, name, topic, epoch, seq) DO NOTHING`,
          params: [t.namespace, t.name, t.topic, epoch, seq, now]
        }),
        (r) => r.rowsAffected > 0
      ),
    pruneClaims: (slot, before) =>
      Effect.asVoid(
        store.batch([
          { sql: "DELETE FROM function_schedule_runs WHERE slot < ?", params: [slot] },
          { sql: "DELETE FROM function_topic_claims WHERE claimed_at < ?", params: [before] }
        ])
      ),
    remove: (namespace, name) =>
      Effect.gen(function* () {
        const versions = yield* service.versions(namespace, name)
        yield* store.batch(functionRowDeletes(namespace, name))
        return versions
      }),
    prune: (namespace, name, keep) =>
      Effect.gen(function* () {
        const versions = yield* service.versions(namespace, name)
        const live = (yield* service.get(namespace, name))?.version
        const doomed = versions.slice(keep).filter((v) => v.version !== live)
        if (doomed.length === 0) return []
        yield* store.batch(
          doomed.map((v) => ({ sql: "DELETE FROM function_versions WHERE namespace = ? AND name = ? AND version = ?", params: [namespace, name, v.version] }))
        )
        return doomed
      }),
    secret: (namespace, name, key) =>
      Effect.map(
        store.query({ sql: "SELECT sealed FROM function_secrets WHERE namespace = ? AND name = ? AND key = ?", params: [namespace, name, key] }),
        (rows) => (typeof rows[0]?.["sealed"] === "string" ? (rows[0]["sealed"] as string) : undefined)
      ),
    secretNames: (namespace, name) =>
      Effect.map(
        store.query({ sql: "SELECT key, updated_at FROM function_secrets WHERE namespace = ? AND name = ? ORDER BY key", params: [namespace, name] }),
        (rows) => rows.map((r) => ({ key: String(r["key"]), updated_at: Number(r["updated_at"]) }))
      ),
    putSecret: (namespace, name, key, sealed, now, max) =>
      Effect.map(
        store.exec({
          sql: `INSERT INTO function_secrets (namespace, name, key, sealed, updated_at)
            SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM function_secrets WHERE namespace = ? AND name = ? AND key = ?)
              OR (SELECT COUNT(*) FROM function_secrets WHERE namespace = ? AND name = ?) < ?
            ON CONFLICT (namespace, name, key) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
          params: [namespace, name, key, sealed, now, namespace, name, key, namespace, name, max]
        }),
        (r) => r.rowsAffected > 0
      ),
    deleteSecret: (namespace, name, key) =>
      Effect.map(
        store.exec({ sql: "DELETE FROM function_secrets WHERE namespace = ? AND name = ? AND key = ?", params: [namespace, name, key] }),
        (r) => r.rowsAffected > 0
      ),
    appendLogs: (lines, keep) => {
      if (lines.length === 0) return Effect.void
      const statements: Array<Statement> = lines.map((l) => ({
        sql: "INSERT INTO function_logs (namespace, name, at, request_id, level, message) VALUES (?, ?, ?, ?, ?, ?)",
        params: [l.namespace, l.name, l.at, l.requestId, l.level, l.message]
      }))
      const functions = new Map(lines.map((l) => [`${l.namespace}/${l.name}`, l] as const))
      for (const l of functions.values()) {
        statements.push({
          sql: `DELETE FROM function_logs WHERE namespace = ? AND name = ? AND seq <= COALESCE(
            (SELECT seq FROM function_logs WHERE namespace = ? AND name = ? ORDER BY seq DESC LIMIT 1 OFFSET ?), -1)`,
          params: [l.namespace, l.name, l.namespace, l.name, keep]
        })
      }
      return Effect.asVoid(store.batch(statements))
    },
    logs: (namespace, name, limit, before) =>
      store
        .query({
          sql: "SELECT seq, at, request_id, level, message FROM function_logs WHERE namespace = ? AND name = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
          params: [namespace, name, before ?? Number.MAX_SAFE_INTEGER, limit]
        })
        .pipe(Effect.flatMap(decodeLogs))
  }
  return service
})

