/**
 * Backups of node-local databases into content storage (`/v1/db/sqlite/backup(s)`). A backup is
 * SQLite's online backup API run by a SQL worker (a consistent copy while the database stays in
 * use, never a file copy), stored as content of the namespace, and kept by a reference of kind
 * `backup`, so unpinning the same CID does not lose it. Backups share the gateway's transfer slot
 * with imports and exports.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { createReadStream, statSync } from "node:fs"
import { Code } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { Audit } from "../audit/Audit.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Coordination } from "../coordination/Coordination.js"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { Storage } from "../storage/Storage.js"
import { spoolFile } from "../transfer/SpoolFile.js"
import { TransferSlot } from "../transfer/TransferSlot.js"
import { forwardToHome } from "./HomeNode.js"
import { LocalDatabases } from "./LocalDatabases.js"
import { SqliteWorkers } from "./SqliteWorkers.js"
import { fromSqlite, refuse, registryDown, type SqlRefused } from "./SqlRefused.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export interface Backup {
  readonly id: string
  readonly databaseName: string
  readonly backupCid: string
  readonly sizeBytes: number
  /** Unix milliseconds. */
  readonly createdAt: number
}

export interface DatabaseBackupsService {
  /** Takes the backup on the database's home node, forwarding there when it is another. */
  readonly backup: (caller: Principal, name: string) => Effect.Effect<Backup, SqlRefused>
  /** The backup as the home node takes it (the internal route). */
  readonly backupHere: (caller: Principal, name: string) => Effect.Effect<Backup, SqlRefused>
  /** One page of a database's backups, newest first (key: created_at, id, descending). */
  readonly list: (caller: Principal, name: string, page: PageRequest) => Effect.Effect<Page<Backup>, SqlRefused>
}

/** A backup record as the home node's route answers it (snake case, Unix seconds). */
const decodeBackup = (text: string) =>
  Effect.map(
    Schema.decodeUnknown(
      Schema.parseJson(
        Schema.Struct({
          id: Schema.String,
          database_name: Schema.String,
          backup_cid: Schema.String,
          size_bytes: Schema.Number,
          created_at: Schema.Number
        })
      )
    )(text),
    (b): Backup => ({ id: b.id, databaseName: b.database_name, backupCid: b.backup_cid, sizeBytes: b.size_bytes, createdAt: b.created_at * 1000 })
  )

export class DatabaseBackups extends Context.Tag("portico/DatabaseBackups")<DatabaseBackups, DatabaseBackupsService>() {
  static readonly Live = Layer.effect(
    DatabaseBackups,
    Effect.gen(function* () {
      const databases = yield* LocalDatabases
      const workers = yield* SqliteWorkers
      const slot = yield* TransferSlot
      const storage = yield* Storage
      const audit = yield* Audit
      const registry = yield* RegistryStore
      const config = yield* PorticoConfig
      const coordination = yield* Coordination
      const cap = config.sql.importMaxBytes

      const tempFile = spoolFile(config.dataDir, "backup")

      const backupHere = (caller: Principal, name: string) =>
          Effect.scoped(
            Effect.gen(function* () {
              const file = yield* databases.locate(caller.namespace, name)
              return yield* slot.run(
                "backup",
                Effect.gen(function* () {
                  const dest = yield* tempFile
                  yield* Effect.mapError(workers.run({ op: "backup", file, dest }, config.sql.transferBudgetMs), fromSqlite)
                  const size = statSync(dest).size
                  if (size > cap) {
                    return yield* Effect.fail(
                      refuse(Code.PAYLOAD_TOO_LARGE, `the database is over the backup limit of ${cap} bytes`, "export what you need with queries")
                    )
                  }
                  const id = randomBytes(12).toString("hex")
                  const createdAt = yield* Clock.currentTimeMillis
                  const stored = yield* storage.store(caller.namespace, "backup", id, `${name}.sqlite`, createReadStream(dest), (cid, bytes) => [
                    {
                      // lands only with its reference row (the quota may refuse that)
                      sql: `INSERT INTO local_database_backups (namespace, id, database_name, backup_cid, size_bytes, created_at)
                            SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS
                              (SELECT 1 FROM content_refs WHERE cid = ? AND namespace = ? AND kind = 'backup' AND ref = ?)`,
                      params: [caller.namespace, id, name, cid, bytes, createdAt, cid, caller.namespace, id]
                    }
                  ])
                  yield* audit.record(caller.namespace, "sqlite.backup", caller.subject, name, { cid: stored.cid, size_bytes: stored.size })
                  return { id, databaseName: name, backupCid: stored.cid, sizeBytes: stored.size, createdAt }
                })
              )
            })
          )

      return {
        backupHere,

        backup: (caller, name) =>
          Effect.gen(function* () {
            const home = yield* databases.homeOf(caller.namespace, name)
            if (home === config.nodeId) return yield* backupHere(caller, name)
            const text = yield* forwardToHome(coordination, home, "backup", caller, { database_name: name }, config.sql.transferBudgetMs + 10_000)
            return yield* Effect.mapError(decodeBackup(text), () =>
              refuse(Code.HOME_NODE_UNREACHABLE, "the home node answered unexpectedly", "retry shortly", 30)
            )
          }),

        list: (caller, name, page) =>
          Effect.mapError(
            readPage(
              registry,
              {
                select: "SELECT id, database_name, backup_cid, size_bytes, created_at FROM local_database_backups",
                where: ["namespace = ?", "database_name = ?"],
                params: [caller.namespace, name],
                order: ["created_at", "id"],
                direction: "desc"
              },
              page,
              (r) => ({
                id: String(r["id"]),
                databaseName: String(r["database_name"]),
                backupCid: String(r["backup_cid"]),
                sizeBytes: Number(r["size_bytes"]),
                createdAt: Number(r["created_at"])
              })
            ),
            registryDown
          )
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    DatabaseBackups.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          LocalDatabases.Test,
          SqliteWorkers.Test,
          TransferSlot.Test,
          Storage.Test,
          Audit.Test,
          SqliteRegistryStore.Test,
          PorticoConfig.Test,
          Coordination.Test
        )
      )
    )
  )
}
