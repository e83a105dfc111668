/**
 * Where each namespace's cluster SQL store lives (spec §2.3, §4.3): its own database, apart from
 * the platform registry. Embedded: one SQLite file per namespace under `<dataDir>/sql/`, run by
 * the SQLite worker processes. Cluster: an rqlite cluster per namespace (rqlite holds one database
 * per cluster), for the namespaces the configuration names.
 *
 * The engines (`SqlEngine.ts`) only execute: the SQL guard, the ORM builders and the transfer
 * slot are the `ClusterSql` service's.
 */
import { Context, Effect, Layer } from "effect"
import * as path from "node:path"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { RqliteSqlEngine } from "./RqliteSqlEngine.js"
import type { SqlEngine } from "./SqlEngine.js"
import { SqliteSqlEngine } from "./SqliteSqlEngine.js"
import { SqliteWorkers } from "./SqliteWorkers.js"

export interface ClusterSqlStoreService {
  readonly engineFor: (namespace: string) => SqlEngine
  /**
   * The embedded file's path, and the store forgetting it was made: after a namespace's deletion
   * removed the file, a namespace re-created under the name gets a fresh one on its first write.
   */
  readonly embeddedFile: (namespace: string) => string
  readonly forget: (namespace: string) => void
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

      const embeddedFile = (namespace: string) => path.join(root, `${namespace}.db`)
      const embedded = (namespace: string): SqlEngine =>
        SqliteSqlEngine.make({ workers, file: embeddedFile(namespace), transferBudgetMs: config.sql.transferBudgetMs, ensured })

      return {
        embeddedFile,
        forget: (namespace) => void ensured.delete(embeddedFile(namespace)),
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

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    ClusterSqlStore.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          PorticoConfig.Test,
          SqliteWorkers.Test
        )
      )
    )
  )
}
