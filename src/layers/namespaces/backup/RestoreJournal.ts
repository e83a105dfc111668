/**
 * A restore's writes, journalled so a restore is all or nothing even across a crash
 * (docs/namespaces.md, "Restore"). The record (registry table `portico_restores`) is written
 * before the first write: which databases are being placed, whether the cluster SQL store is being
 * loaded, and where its state before is kept. The batch that writes the registry rows removes the
 * record, so a record still there means the restore stopped half way: a failed batch takes its
 * writes back at once, and a gateway's start takes back every record it was the runner of.
 *
 * Taking back: each placed database file that no registry row claims is dropped (a row means the
 * name was created since, and its file is not ours to drop); a loaded store gets its state before
 * back (an embedded store that had no file loses it again); then the record and the undo file go.
 */
import { Effect } from "effect"
import { mkdirSync, rmSync } from "node:fs"
import * as path from "node:path"
import type { PorticoSettings } from "../../config/PorticoConfig.js"
import { type RegistryStoreService, type Statement, StoreError } from "../../registry/RegistryStore.js"
import type { ClusterSqlStoreService } from "../../sql/ClusterSqlStore.js"
import type { SqliteWorkersService } from "../../sql/SqliteWorkers.js"

export interface RestoreWrites {
  readonly namespace: string
  /** The cluster SQL store is (being) loaded from the archive. */
  readonly storeLoaded: boolean
  /** The store's state before, to import back; undefined: the store had no file, drop it. */
  readonly undoFile: string | undefined
  /** Databases whose files are (being) placed. */
  readonly databases: ReadonlyArray<string>
}

export interface RestoreJournalDeps {
  readonly store: RegistryStoreService
  readonly config: PorticoSettings
  readonly workers: SqliteWorkersService
  readonly stores: ClusterSqlStoreService
}

export const makeRestoreJournal = ({ store, config, workers, stores }: RestoreJournalDeps) => {
  /** Where a restore keeps the store's state before: beside the data, not in a request's scope. */
  const undoFileFor = (namespace: string) => {
    const dir = path.join(config.dataDir, "restores")
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, `${namespace}.undo`)
    rmSync(file, { force: true })
    return file
  }

  const insert = (writes: RestoreWrites, now: number) =>
    store.exec({
      sql: "INSERT INTO portico_restores (namespace, runner, started_at, store_loaded, undo_file, databases) VALUES (?, ?, ?, ?, ?, ?)",
      params: [writes.namespace, config.nodeId, now, writes.storeLoaded ? 1 : 0, writes.undoFile ?? "", JSON.stringify(writes.databases)]
    })

  const rowOf = (row: Readonly<Record<string, unknown>>): RestoreWrites => ({
    namespace: String(row["namespace"]),
    storeLoaded: Number(row["store_loaded"]) === 1,
    undoFile: String(row["undo_file"]) === "" ? undefined : String(row["undo_file"]),
    databases: JSON.parse(String(row["databases"])) as Array<string>
  })

  /**
   * Before a restore's checks: true when no restore of the namespace is recorded, after taking back
   * one of this gateway's own (a gateway runs one restore at a time, the transfer slot); false when
   * another gateway's is (running, or stopped and owed to that gateway's next start).
   */
  const settle = (namespace: string): Effect.Effect<boolean, StoreError> =>
    Effect.gen(function* () {
      const [left] = yield* store.query({
        sql: "SELECT namespace, runner, store_loaded, undo_file, databases FROM portico_restores WHERE namespace = ?",
        params: [namespace]
      })
      if (left === undefined) return true
      if (String(left["runner"]) !== config.nodeId) return false
      yield* takeBack(rowOf(left))
      return true
    })

  /** Records the writes about to be made; false when another restore recorded its own meanwhile. */
  const begin = (writes: RestoreWrites, now: number): Effect.Effect<boolean, StoreError> =>
    insert(writes, now).pipe(
      Effect.as(true),
      Effect.catchIf((e) => e.reason === "constraint", () => Effect.succeed(false))
    )

  /** The statement the registry rows' batch ends the record with. */
  const end = (namespace: string): Statement => ({ sql: "DELETE FROM portico_restores WHERE namespace = ?", params: [namespace] })

  const takeBack = (writes: RestoreWrites): Effect.Effect<void, StoreError> =>
    Effect.gen(function* () {
      const { namespace } = writes
      for (const name of writes.databases) {
        const claimed = yield* store.query({ sql: "SELECT 1 AS here FROM local_databases WHERE namespace = ? AND name = ?", params: [namespace, name] })
        if (claimed.length > 0) continue
        yield* Effect.ignore(workers.run({ op: "drop", file: path.join(config.dataDir, "databases", namespace, `${name}.db`) }))
      }
      if (writes.storeLoaded) {
        if (writes.undoFile !== undefined) {
          yield* Effect.mapError(
            stores.engineFor(namespace).importFrom(writes.undoFile),
            (e) => new StoreError({ reason: "unavailable", detail: `the cluster SQL store's state before: ${e.reason}` })
          )
        } else {
          yield* Effect.ignore(workers.run({ op: "drop", file: path.join(config.dataDir, "sql", `${namespace}.db`) }))
        }
      }
      yield* store.exec(end(namespace))
      if (writes.undoFile !== undefined) rmSync(writes.undoFile, { force: true })
    })

  /** At start: every restore this gateway was running when it stopped, taken back. */
  const recover = Effect.gen(function* () {
    const rows = yield* store.query({
      sql: "SELECT namespace, store_loaded, undo_file, databases FROM portico_restores WHERE runner = ?",
      params: [config.nodeId]
    })
    for (const row of rows) {
      const writes = rowOf(row)
      const namespace = writes.namespace
      yield* takeBack(writes).pipe(
        Effect.zipRight(Effect.logWarning(`namespace ${namespace}: a restore stopped half way was taken back`)),
        Effect.catchAll((e) => Effect.logWarning(`namespace ${namespace}: a restore stopped half way is not taken back yet: ${e.detail}`))
      )
    }
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`restores stopped half way not read: ${e.detail}`)))

  return { undoFileFor, settle, begin, end, takeBack, recover }
}

export type RestoreJournal = ReturnType<typeof makeRestoreJournal>
