/**
 * The engine of a namespace's cluster SQL store (spec §2.3, §4.3): it only executes. The SQL
 * guard, the ORM builders and the transfer slot are the `ClusterSql` service's; which engine a
 * namespace gets is `ClusterSqlStore`'s. Engines: `SqliteSqlEngine` (embedded, the SQLite
 * workers) and `RqliteSqlEngine` (an rqlite cluster).
 */
import type { Effect, Exit } from "effect"
import type { AnswerShape } from "../../domain/SqlAnswers.js"
import type { StatementOp } from "./SqliteProtocol.js"
import type { SqlRefused } from "./SqlRefused.js"

export interface SqlEngine {
  readonly kind: "sqlite" | "rqlite"
  /** One statement; the answer's JSON text in `shape` for a read, the counts for a write. */
  readonly statement: (op: StatementOp, shape: AnswerShape) => Effect.Effect<string, SqlRefused>
  /**
   * `statement` for a caller outside a fiber, where the engine can run it without one (on
   * rqlite, a known fast statement that joins a batch): true, and `done` gets the outcome once,
   * after this returns. False: nothing was done, `statement` is the way.
   */
  readonly statementNow?: (op: StatementOp, shape: AnswerShape, done: (exit: Exit.Exit<string, SqlRefused>) => void) => boolean
  /** All ops atomically; `{results, count}` or `{status, count}`; a failure names the op index. */
  readonly batch: (ops: ReadonlyArray<StatementOp>, returnResults: boolean) => Effect.Effect<string, SqlRefused>
  /** A consistent copy of the whole database written to `dest`. */
  readonly exportTo: (dest: string) => Effect.Effect<void, SqlRefused>
  /** Replaces the whole database with the (already checked) file at `source`. */
  readonly importFrom: (source: string) => Effect.Effect<void, SqlRefused>
}
