/**
 * A namespace's cluster SQL store on the embedded engine: one SQLite file, run by the SQLite
 * worker processes like the node-local databases.
 */
import { Effect } from "effect"
import { existsSync } from "node:fs"
import type { SqlEngine } from "./SqlEngine.js"
import type { SqliteWorkersService } from "./SqliteWorkers.js"
import { fromSqlite, type SqlRefused } from "./SqlRefused.js"

export interface SqliteSqlEngineConfig {
  readonly workers: SqliteWorkersService
  /** The store's SQLite file, made on first use. */
  readonly file: string
  /** The deadline of a whole-database export or import, in milliseconds. */
  readonly transferBudgetMs: number
  /** Files known to exist, shared by the engines of one `ClusterSqlStore`. */
  readonly ensured: Set<string>
}

export const SqliteSqlEngine = {
  make: ({ ensured, file, transferBudgetMs, workers }: SqliteSqlEngineConfig): SqlEngine => {
    // the file is made on first use; the worker serialises this with every other use of it
    const ensure = Effect.suspend(() =>
      ensured.has(file) || existsSync(file)
        ? Effect.void
        : Effect.tap(Effect.mapError(workers.run({ op: "create", file, ifMissing: true }), fromSqlite), () => ensured.add(file))
    )
    const run = <A>(effect: Effect.Effect<A, SqlRefused>) => Effect.zipRight(ensure, effect)
    const json = (value: { readonly type: string; readonly json?: string }) => value.json ?? "{}"
    return {
      kind: "sqlite",
      statement: (op, shape) => run(Effect.map(Effect.mapError(workers.run({ op: "statement", file, shape, ...op }), fromSqlite), json)),
      batch: (ops, returnResults) => run(Effect.map(Effect.mapError(workers.run({ op: "batch", file, ops, returnResults }), fromSqlite), json)),
      exportTo: (dest) => run(Effect.asVoid(Effect.mapError(workers.run({ op: "backup", file, dest }, transferBudgetMs), fromSqlite))),
      importFrom: (source) => Effect.asVoid(Effect.mapError(workers.run({ op: "replace", file, from: source }, transferBudgetMs), fromSqlite))
    }
  }
}
