/**
 * Where each namespace's cluster SQL store lives (spec §2.3, §4.3): its own database, apart from
 * the platform registry. Embedded: one SQLite file per namespace under `<dataDir>/sql/`, run by
 * the SQLite worker processes. Cluster: an rqlite cluster per namespace (rqlite holds one database
 * per cluster), for the namespaces the configuration names.
 *
 * The engine only executes: the SQL guard, the ORM builders and the transfer slot are the
 * `ClusterSql` service's.
 */
import { Context, Effect, type Exit, Layer } from "effect"
import { existsSync } from "node:fs"
import * as path from "node:path"
import type { AnswerShape } from "../../domain/SqlAnswers.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { StatementOp } from "./SqliteProtocol.js"
import { SqliteWorkers } from "./SqliteWorkers.js"
import { fromSqlite, type SqlRefused } from "./SqlRefused.js"
import { RqliteSqlEngine } from "./RqliteSqlEngine.js"

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

export interface ClusterSqlStoreService {
  readonly engineFor: (namespace: string) => SqlEngine
}

export class ClusterSqlStore extends Context.Tag("portico/ClusterSqlStore")<ClusterSqlStore, ClusterSqlStoreService>() {
  static readonly Live = Layer.effect(
    ClusterSqlStore,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const workers = yield* SqliteWorkers
      const root = path.join(config.dataDir, "sql")
      const ensured = new Set<string>()
      const rqlite = new Map<string, SqlEngine>()

      const embedded = (namespace: string): SqlEngine => {
        const file = path.join(root, `${namespace}.db`)
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
          statement: (op, shape) =>
            run(Effect.map(Effect.mapError(workers.run({ op: "statement", file, shape, ...op }), fromSqlite), json)),
          batch: (ops, returnResults) =>
            run(Effect.map(Effect.mapError(workers.run({ op: "batch", file, ops, returnResults }), fromSqlite), json)),
          exportTo: (dest) =>
            run(Effect.asVoid(Effect.mapError(workers.run({ op: "backup", file, dest }, config.sql.transferBudgetMs), fromSqlite))),
          importFrom: (source) =>
            Effect.asVoid(Effect.mapError(workers.run({ op: "replace", file, from: source }, config.sql.transferBudgetMs), fromSqlite))
        }
      }

      return {
        engineFor: (namespace) => {
          const url = config.sql.rqlite.get(namespace)
          if (url === undefined) return embedded(namespace)
          const cached = rqlite.get(namespace)
          if (cached !== undefined) return cached
          const engine = RqliteSqlEngine.make({ url, timeout: config.sql.timeoutMs, maxResponseBytes: config.sql.maxResultBytes })
          rqlite.set(namespace, engine)
          return engine
        }
      }
    })
  )
}
