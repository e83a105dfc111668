/**
 * The platform registry's storage capability: the platform's own tables behind three verbs.
 *
 * rqlite has no interactive transactions, so the API has none either: a multi-statement write
 * is one atomic `batch`, and conditional writes are SQL predicates whose `rowsAffected` the
 * caller checks. The SQLite engine behaves the same way, so services written against this Tag
 * run unchanged on either engine.
 */
import { Context, Data, type Effect, type Either } from "effect"

/** A value that can be bound to a statement parameter or read from a column. */
export type SqlValue = string | number | null

/** One SQL statement with positional `?` parameters. */
export interface Statement {
  readonly sql: string
  readonly params?: ReadonlyArray<SqlValue>
}

/** Outcome of a write statement. */
export interface ExecResult {
  readonly rowsAffected: number
  readonly lastInsertId: number
}

export type Row = Readonly<Record<string, SqlValue>>

/**
 * The store could not answer: engine down, no leader, deadline passed (retryable, 503), the
 * statement itself failed (a constraint, a bug: not retryable), or its answer was over the
 * transport's bound (`too_large`). `detail` is for logs only.
 */
export class StoreError extends Data.TaggedError("StoreError")<{
  readonly reason: "unavailable" | "constraint" | "statement" | "too_large"
  readonly detail: string
}> {}

export interface RegistryStoreService {
  /** Runs a read statement and returns its rows as objects keyed by column name. */
  readonly query: (statement: Statement) => Effect.Effect<ReadonlyArray<Row>, StoreError>
  /**
   * `query` answered on the spot, on an engine that can (SQLite's read connection); absent where
   * a read must wait (rqlite). The listener's fast lane reads through it (src/api/FastLane.ts).
   */
  readonly queryNow?: ((statement: Statement) => Either.Either<ReadonlyArray<Row>, StoreError>) | undefined
  /**
   * Runs `f` with one check for commits since the kept answers were read standing for every
   * `queryNow` inside it, instead of one check each. Only for work whose every request was
   * received before the call (src/api/FastLane.ts, `turn`). Absent where `queryNow` is.
   */
  readonly holdNow?: (<A>(f: () => A) => A) | undefined
  /** Runs one write statement. */
  readonly exec: (statement: Statement) => Effect.Effect<ExecResult, StoreError>
  /** Runs write statements atomically, in order: all apply or none do. */
  readonly batch: (statements: ReadonlyArray<Statement>) => Effect.Effect<ReadonlyArray<ExecResult>, StoreError>
  /** Names of the migrations applied, in order (for `/v1/schema-status`). */
  readonly migrations: Effect.Effect<ReadonlyArray<string>, StoreError>
  /** A short description of the engine for health checks ("sqlite", "rqlite"). */
  readonly engine: "sqlite" | "rqlite"
}

export class RegistryStore extends Context.Tag("portico/RegistryStore")<RegistryStore, RegistryStoreService>() {}
