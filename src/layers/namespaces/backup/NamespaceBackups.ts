/**
 * Namespace backup and restore (spec §4.9, docs/namespaces.md "Backup and restore"). A backup is
 * the namespace's registry rows, node-local databases, cluster SQL store and pin list, written as
 * entries (ArchiveEntries.ts) and sealed to the caller's X25519 key as they stream out
 * (SealedStream.ts); nothing is held whole in memory. Restore (NamespaceRestore.ts) takes archives
 * sealed to this gateway's restore key, derived from its root secret. Both take the gateway's
 * transfer slot that database exports and imports take.
 */
import { Clock, Context, Duration, Effect, Layer, Stream, type Scope } from "effect"
import { createReadStream, statSync } from "node:fs"
import { Code } from "../../../domain/Errors.js"
import type { Principal } from "../../../domain/Principal.js"
import { Audit } from "../../audit/Audit.js"
import { Coordination } from "../../coordination/Coordination.js"
import { internalClient } from "../../coordination/InternalClient.js"
import { PorticoConfig } from "../../config/PorticoConfig.js"
import { RegistryStore } from "../../registry/RegistryStore.js"
import { refuse } from "../../Refused.js"
import { Sealer } from "../../secrets/Sealer.js"
import { ClusterSql } from "../../sql/ClusterSql.js"
import { ClusterSqlStore } from "../../sql/ClusterSqlStore.js"
import { SqliteWorkers } from "../../sql/SqliteWorkers.js"
import { localDatabaseFile } from "../../sql/LocalDatabases.js"
import { ContentEngine } from "../../storage/ContentEngine.js"
import { ContentIndex } from "../../storage/ContentIndex.js"
import { EmbeddedContentEngine } from "../../storage/EmbeddedContentEngine.js"
import { SqliteRegistryStore } from "../../registry/SqliteRegistryStore.js"
import { spoolFile } from "../../transfer/SpoolFile.js"
import { TransferSlot } from "../../transfer/TransferSlot.js"
import { ARCHIVE_FORMAT, ARCHIVE_VERSION, type Manifest, type Pin, type RegistryRows } from "./ArchiveContents.js"
import { archiveSize, type OutgoingEntry, writeEntries } from "./ArchiveEntries.js"
import { asBackupRefusal, type BackupRefused } from "./BackupRefused.js"
import { makeRestore, type RestoredNamespace } from "./NamespaceRestore.js"
import { makeRestoreJournal } from "./RestoreJournal.js"
import { parsePublicKey, publicKeyOf, seal, sealedSize } from "./SealedStream.js"
import { x25519 } from "@noble/curves/ed25519"

export type { RestoredNamespace }

export interface SealedBackup {
  /** Bytes of the sealed answer (its Content-Length). */
  readonly size: number
  /** The sealed archive; the transfer slot is given back as its last byte is read. */
  readonly body: Stream.Stream<Uint8Array, unknown>
}

export interface NamespaceBackupsService {
  /** The public key restores accept archives sealed to (32 bytes). */
  readonly restoreKey: Uint8Array
  /**
   * Takes the backup, sealed to `publicKey` (hex or base64), into files of the request's scope,
   * and answers the sealed stream of them, holding the transfer slot until it is read.
   */
  readonly backup: (caller: Principal, publicKey: string) => Effect.Effect<SealedBackup, BackupRefused, Scope.Scope>
  /** Restores an archive sealed to `restoreKey` into the caller's namespace, which must be empty. */
  readonly restore: (caller: Principal, body: Stream.Stream<Uint8Array, unknown>) => Effect.Effect<RestoredNamespace, BackupRefused>
  /**
   * The home node's half of a backup taken on another gateway (the internal route `sqliteCopy`): a consistent copy of
   * one of the owner's databases homed here, into a file of the request's scope.
   */
  readonly copyHere: (caller: Principal, name: string) => Effect.Effect<{ readonly file: string; readonly size: number }, BackupRefused, Scope.Scope>
}

/** Length of the end entry's body: the attestation, an HMAC-SHA-256 in base64url. */
export const ATTESTATION_BYTES = 43

export const registryDown = () => refuse(Code.UNAVAILABLE, "the registry is unavailable", "retry shortly", 2)

export class NamespaceBackups extends Context.Tag("portico/NamespaceBackups")<NamespaceBackups, NamespaceBackupsService>() {
  static readonly Live = Layer.effect(
    NamespaceBackups,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const config = yield* PorticoConfig
      const sealer = yield* Sealer
      const slot = yield* TransferSlot
      const workers = yield* SqliteWorkers
      const stores = yield* ClusterSqlStore
      const audit = yield* Audit
      const coordination = yield* Coordination
      const caps = config.backup
      // the restore key's secret half, derived for this purpose from the gateway's root secret:
      // every gateway sharing the root secret (a cluster) has the same restore key
      const restoreSecret = Buffer.from(sealer.hash("namespace-restore-key", "x25519/v1"), "base64url")
      const restoreKey = publicKeyOf(restoreSecret)
      const attest = (digest: string) => Buffer.from(sealer.hash("namespace-backup-attest", digest), "ascii")

      const query = (sql: string, params: ReadonlyArray<string | number>) => Effect.mapError(store.query({ sql, params }), registryDown)

      const fileEntry = (kind: "database" | "cluster-sql", name: string, file: string): OutgoingEntry => ({
        kind,
        name,
        size: statSync(file).size,
        bytes: () => createReadStream(file, { highWaterMark: 64 * 1024 }) as AsyncIterable<Uint8Array>
      })
      const jsonEntry = (kind: "manifest" | "registry" | "pins", value: unknown): OutgoingEntry => {
        const bytes = Buffer.from(JSON.stringify(value), "utf8")
        return {
          kind,
          name: "",
          size: bytes.length,
          bytes: async function* () {
            yield bytes
          }
        }
      }

      /** A consistent copy by SQLite's online backup. */
      const copyInto = (namespace: string, name: string, dest: string) =>
        workers.run({ op: "backup", file: localDatabaseFile(config.dataDir, namespace, name), dest }, config.sql.transferBudgetMs).pipe(
          Effect.mapError((f) => refuse(Code.UNAVAILABLE, `the database "${name}" could not be copied: ${f.message}`, "retry shortly", 5))
        )

      const homeUnreachable = (home: string, name: string) =>
        refuse(Code.HOME_NODE_UNREACHABLE, `the database "${name}" is homed on node ${home}, which did not give its copy`, "retry shortly", 30)

      /** The copy of a database homed on another gateway, asked of it over the overlay (MAC v2). */
      const copyFromHome = (home: string, caller: Principal, name: string, dest: string) =>
        internalClient(coordination).callToFile(home, "sqliteCopy", { principal: caller, database_name: name }, Duration.millis(config.sql.transferBudgetMs), dest, caps.maxBytes).pipe(
          Effect.mapError((e) =>
            e.tooLarge === true
              ? refuse(Code.PAYLOAD_TOO_LARGE, `the namespace's data is over the backup limit of ${caps.maxBytes} bytes`)
              : homeUnreachable(home, name)
          ),
          Effect.flatMap((answer): Effect.Effect<void, BackupRefused> => {
            if (answer.status === 200) return Effect.void
            if (answer.status === 413) return Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the namespace's data is over the backup limit of ${caps.maxBytes} bytes`))
            return Effect.zipRight(
              Effect.logWarning(`backup: node ${home} answered ${answer.status} for a copy of ${caller.namespace}/${name}: ${answer.text.slice(0, 300)}`),
              Effect.fail(homeUnreachable(home, name))
            )
          })
        )

      const copyHere = (caller: Principal, name: string) =>
        Effect.gen(function* () {
          // the caller was authorized by the gateway taking the backup; checked again here (a
          // caller who is not the owner is told no more than that there is nothing for it)
          const [row] = caller.role !== "owner" ? [undefined] : yield* query("SELECT 1 AS here FROM local_databases WHERE namespace = ? AND name = ? AND home_node = ?", [caller.namespace, name, config.nodeId])
          if (row === undefined) return yield* Effect.fail(refuse(Code.NOT_FOUND, `no database "${name}" of the caller's homed on this node`))
          const file = yield* spoolFile(config.dataDir, "nsbackup-copy")
          yield* copyInto(caller.namespace, name, file)
          const size = statSync(file).size
          if (size > caps.maxBytes) return yield* Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the database is over the backup limit of ${caps.maxBytes} bytes`))
          return { file, size }
        })

      const backup = (caller: Principal, publicKeyText: string) =>
        Effect.gen(function* () {
          const publicKey = parsePublicKey(publicKeyText)
          if (publicKey === undefined || !usablePublicKey(publicKey)) {
            return yield* Effect.fail(
              refuse(Code.VALIDATION_FAILED, "public_key: an X25519 public key, 64 hex characters or 32 bytes in base64")
            )
          }
          const release = yield* Effect.mapError(slot.hold("backup"), asBackupRefusal)
          const namespace = caller.namespace
          const [settingsRow] = yield* query("SELECT rate_limit_rps, rate_limit_burst, cors_origins FROM namespaces WHERE name = ?", [namespace])
          if (settingsRow === undefined) return yield* Effect.fail(refuse(Code.NOT_FOUND, "no such namespace"))
          const members = yield* query("SELECT wallet, role, added_at, added_by FROM members WHERE namespace = ? ORDER BY added_at, wallet", [namespace])
          const databases = yield* query("SELECT name, home_node, created_at FROM local_databases WHERE namespace = ? ORDER BY name", [namespace])
          const pins = yield* query(
            "SELECT cid, name, size, created_at FROM content_refs WHERE namespace = ? AND kind = 'pin' ORDER BY created_at, cid LIMIT ?",
            [namespace, caps.maxPins + 1]
          )
          if (pins.length > caps.maxPins) {
            return yield* Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the namespace pins over ${caps.maxPins} CIDs, more than a backup holds`))
          }
          const registry: RegistryRows = {
            settings: {
              rate_limit_rps: settingsRow["rate_limit_rps"] === null ? null : Number(settingsRow["rate_limit_rps"]),
              rate_limit_burst: settingsRow["rate_limit_burst"] === null ? null : Number(settingsRow["rate_limit_burst"]),
              cors_origins: JSON.parse(String(settingsRow["cors_origins"] ?? "[]")) as Array<string>
            },
            members: members.map((m) => ({
              wallet: String(m["wallet"]),
              role: String(m["role"]) as RegistryRows["members"][number]["role"],
              added_at: Number(m["added_at"]),
              added_by: String(m["added_by"])
            })),
            databases: databases.map((d) => ({ name: String(d["name"]), created_at: Number(d["created_at"]) }))
          }
          const pinList: Array<Pin> = pins.map((p) => ({
            cid: String(p["cid"]),
            name: String(p["name"]),
            size: Number(p["size"]),
            created_at: Number(p["created_at"])
          }))

          // consistent copies, each by SQLite's online backup, into files of the request's scope
          const files: Array<OutgoingEntry> = []
          let bytes = 0
          const within = (entry: OutgoingEntry) =>
            Effect.suspend(() => {
              bytes += entry.size
              files.push(entry)
              return bytes > caps.maxBytes
                ? Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the namespace's data is over the backup limit of ${caps.maxBytes} bytes`))
                : Effect.void
            })
          for (const d of databases) {
            const name = String(d["name"])
            const home = String(d["home_node"])
            const dest = yield* spoolFile(config.dataDir, "nsbackup-db")
            if (home === config.nodeId) yield* copyInto(namespace, name, dest)
            else yield* copyFromHome(home, caller, name, dest)
            yield* within(fileEntry("database", name, dest))
          }
          // an embedded store not made yet (no write since the namespace was created) has no
          // file: the archive then has no cluster-sql entry, which restore reads as an empty store
          const clusterFile = yield* spoolFile(config.dataDir, "nsbackup-sql")
          const exported = yield* stores.engineFor(namespace).exportTo(clusterFile).pipe(
            Effect.as(true),
            Effect.catchIf((r) => r.code === "NOT_FOUND", () => Effect.succeed(false)),
            Effect.mapError(asBackupRefusal)
          )
          if (exported) yield* within(fileEntry("cluster-sql", "", clusterFile))

          const createdAt = yield* Clock.currentTimeMillis
          const manifest: Manifest = {
            format: ARCHIVE_FORMAT,
            version: ARCHIVE_VERSION,
            namespace,
            created_at: createdAt,
            node: config.nodeId,
            databases: registry.databases.length,
            pins: pinList.length
          }
          const entries = [jsonEntry("manifest", manifest), jsonEntry("registry", registry), ...files, jsonEntry("pins", pinList)]
          const plainBytes = archiveSize(entries, ATTESTATION_BYTES)
          if (plainBytes > caps.maxBytes) {
            return yield* Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the namespace's data is over the backup limit of ${caps.maxBytes} bytes`))
          }
          yield* audit.record(namespace, "namespace.backup", caller.subject, "", {
            databases: registry.databases.length,
            pins: pinList.length,
            bytes: plainBytes
          })
          const sealed = Stream.fromAsyncIterable(seal(publicKey, writeEntries(entries, attest)), (e) => e)
          return { size: sealedSize(plainBytes), body: Stream.concat(sealed, Stream.execute(release)) }
        })

      // a restore this gateway was running when it stopped is taken back before any request
      const journal = makeRestoreJournal({ store, config, workers, stores })
      yield* journal.recover
      const restore = makeRestore({
        journal,
        pauseBeforeBatchMs: config.testPauses.restoreBatchMs,
        store,
        config,
        workers,
        stores,
        audit,
        slot,
        restoreSecret,
        attest,
        clusterSql: yield* ClusterSql,
        engine: yield* ContentEngine,
        index: yield* ContentIndex
      })

      return { restoreKey, backup, restore, copyHere } satisfies NamespaceBackupsService
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    NamespaceBackups.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          PorticoConfig.Test,
          Coordination.Test,
          Sealer.Test,
          TransferSlot.Test,
          SqliteWorkers.Test,
          ClusterSqlStore.Test,
          ClusterSql.Test,
          Audit.Test,
          EmbeddedContentEngine.Test,
          ContentIndex.Test
        )
      )
    )
  )
}

/** A public key a secret can be agreed with (not one of the low-order points). */
const usablePublicKey = (publicKey: Uint8Array): boolean => {
  try {
    x25519.getSharedSecret(x25519.utils.randomPrivateKey(), publicKey)
    return true
  } catch {
    return false
  }
}
