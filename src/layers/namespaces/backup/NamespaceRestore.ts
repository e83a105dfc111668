/**
 * Restoring a namespace backup (docs/namespaces.md "Backup and restore"): the sealed body is
 * opened as it arrives into a staging directory, and nothing of the namespace is touched until the
 * whole archive has opened (every chunk's tag, the last-chunk flag) and been checked: its entries
 * decoded, each database file intact, the cluster SQL store passing import's check, the namespace
 * empty, every pinned CID still retrievable. Then, journalled (RestoreJournal.ts), the cluster SQL
 * store is loaded, the database files renamed into place, and the registry rows written in one
 * batch with the journal's end; a failed batch takes the files and the store back out, and so
 * does the next start after a crash.
 */
import { Clock, Duration, Effect, type Schema, Stream } from "effect"
import { timingSafeEqual } from "node:crypto"
import { createWriteStream, mkdirSync, rmSync } from "node:fs"
import { mkdtemp } from "node:fs/promises"
import * as path from "node:path"
import { pipeline } from "node:stream/promises"
import { Readable } from "node:stream"
import { canonicalCid } from "../../../domain/ContentId.js"
import { Code } from "../../../domain/Errors.js"
import type { Principal } from "../../../domain/Principal.js"
import type { AuditService } from "../../audit/Audit.js"
import type { PorticoSettings } from "../../config/PorticoConfig.js"
import type { RegistryStoreService, Statement } from "../../registry/RegistryStore.js"
import { refuse } from "../../Refused.js"
import type { ClusterSqlService } from "../../sql/ClusterSql.js"
import type { ClusterSqlStoreService } from "../../sql/ClusterSqlStore.js"
import type { SqliteWorkersService } from "../../sql/SqliteWorkers.js"
import type { ContentEngineService } from "../../storage/ContentEngine.js"
import type { ContentIndexService } from "../../storage/ContentIndex.js"
import type { TransferSlotService } from "../../transfer/TransferSlot.js"
import { spoolFile } from "../../transfer/SpoolFile.js"
import { decodeEntry, Manifest, type Pin, Pins, RegistryRows } from "./ArchiveContents.js"
import { ArchiveFormatError, readEntries, readSmall } from "./ArchiveEntries.js"
import { asBackupRefusal, type BackupRefused } from "./BackupRefused.js"
import type { RestoreJournal, RestoreWrites } from "./RestoreJournal.js"
import { open, SealedStreamError } from "./SealedStream.js"

/** What a restore brought back: counts for the answer. */
export interface RestoredNamespace {
  readonly databases: number
  readonly members: number
  readonly pins: number
  readonly clusterTables: number
}

export interface RestoreDeps {
  readonly store: RegistryStoreService
  readonly config: PorticoSettings
  readonly workers: SqliteWorkersService
  readonly stores: ClusterSqlStoreService
  readonly clusterSql: ClusterSqlService
  readonly audit: AuditService
  readonly slot: TransferSlotService
  readonly engine: ContentEngineService
  readonly index: ContentIndexService
  readonly restoreSecret: Uint8Array
  readonly attest: (digest: string) => Buffer
  readonly journal: RestoreJournal
  /** Test only (PORTICO_RESTORE_PAUSE_MS): a pause before the registry batch, to crash a restore in. */
  readonly pauseBeforeBatchMs: number
}

/** What the archive held, staged on disk and decoded. */
interface Staged {
  manifest: Manifest | undefined
  registry: RegistryRows | undefined
  pins: ReadonlyArray<Pin> | undefined
  /** database name → staged file */
  databases: Map<string, string>
  cluster: string | undefined
  attested: boolean
}

const sealedRefusal = () =>
  refuse(
    Code.BAD_REQUEST,
    "the archive is not sealed to this gateway's restore key, was changed, or is not a namespace backup",
    "seal the backup to the key GET /v1/namespace/restore-key answers, and send its bytes unchanged"
  )

const JSON_MAX = 64 * 1024 * 1024
/** Rows per multi-row INSERT, well under SQLite's 32,766 bound parameters. */
const ROWS_PER_INSERT = 200

const underWay = () => refuse(Code.CONFLICT, "a restore of this namespace is under way on another gateway", "retry once it has finished")

const down = (what: string) => refuse(Code.UNAVAILABLE, `${what} is unavailable`, "retry shortly", 5)

export const makeRestore = (deps: RestoreDeps) => {
  const { store, config, workers, stores, clusterSql, audit, slot, engine, index, journal } = deps
  const query = (sql: string, params: ReadonlyArray<string | number>) =>
    Effect.mapError(store.query({ sql, params }), () => down("the registry"))

  /** Opens and unpacks the body into `dir`; fails with the 400 on anything not as a backup writes it. */
  const unpack = (dir: string, body: Stream.Stream<Uint8Array, unknown>) =>
    Effect.tryPromise({
      try: async (): Promise<Staged> => {
        const staged: Staged = { manifest: undefined, registry: undefined, pins: undefined, databases: new Map(), cluster: undefined, attested: false }
        let files = 0
        const { end, digest } = await readEntries(open(deps.restoreSecret, Stream.toAsyncIterable(body)), async (head, bytes) => {
          const json = async <A, I>(schema: Schema.Schema<A, I>) => {
            const decoded = decodeEntry(schema, await readSmall(head, bytes, JSON_MAX))
            if (decoded._tag === "Left") throw new ArchiveFormatError(`the ${head.kind} entry: ${decoded.left}`)
            return decoded.right
          }
          const toFile = async () => {
            const file = path.join(dir, `${++files}.db`)
            await pipeline(Readable.from(bytes), createWriteStream(file, { flags: "wx", mode: 0o600 }))
            return file
          }
          switch (head.kind) {
            case "manifest":
              if (staged.manifest !== undefined) throw new ArchiveFormatError("two manifests")
              staged.manifest = await json(Manifest)
              return
            case "registry":
              if (staged.manifest === undefined || staged.registry !== undefined) throw new ArchiveFormatError("registry rows out of place")
              staged.registry = await json(RegistryRows)
              return
            case "pins":
              if (staged.manifest === undefined || staged.pins !== undefined) throw new ArchiveFormatError("pin list out of place")
              staged.pins = await json(Pins)
              return
            case "database":
              if (staged.registry === undefined || staged.databases.has(head.name)) throw new ArchiveFormatError("a database entry out of place")
              if (!staged.registry.databases.some((d) => d.name === head.name)) throw new ArchiveFormatError("a database the registry rows do not name")
              staged.databases.set(head.name, await toFile())
              return
            case "cluster-sql":
              if (staged.manifest === undefined || staged.cluster !== undefined) throw new ArchiveFormatError("cluster SQL entry out of place")
              staged.cluster = await toFile()
              return
            default:
              throw new ArchiveFormatError(`unexpected ${head.kind} entry`)
          }
        })
        const expected = deps.attest(digest)
        staged.attested = end.length === expected.length && timingSafeEqual(end, expected)
        return staged
      },
      catch: (e) => (e instanceof SealedStreamError || e instanceof ArchiveFormatError ? sealedRefusal() : down(`reading the archive (${String(e)})`))
    })

  /** Every way the archive or the namespace can refuse, checked before anything is written. */
  const check = (caller: Principal, staged: Staged, owner: string | undefined) =>
    Effect.gen(function* () {
      const { manifest, registry, pins } = staged
      if (manifest === undefined || registry === undefined || pins === undefined) {
        return yield* Effect.fail(sealedRefusal())
      }
      if (staged.databases.size !== registry.databases.length) return yield* Effect.fail(sealedRefusal())
      if (pins.length > config.backup.maxPins) {
        return yield* Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the archive pins over ${config.backup.maxPins} CIDs`))
      }
      for (const [name, file] of staged.databases) {
        const inspected = yield* Effect.either(workers.run({ op: "inspect", file }, config.sql.transferBudgetMs))
        const ok = inspected._tag === "Right" && inspected.right.type === "inspected" && inspected.right.integrity.join() === "ok"
        if (!ok) return yield* Effect.fail(refuse(Code.BAD_REQUEST, `the archive's database "${name}" is damaged`))
      }
      const clusterTables =
        staged.cluster === undefined
          ? 0
          : yield* clusterSql.checkFile(staged.cluster).pipe(
              Effect.mapError((r) => (r.code === "VALIDATION_FAILED" ? refuse(Code.BAD_REQUEST, `the archive's cluster SQL store: ${r.reason}`) : down("the SQL workers")))
            )

      // empty: no database, no pin or other content reference, no member but the owner, no table
      const [held] = yield* query(
        `SELECT (SELECT COUNT(*) FROM local_databases WHERE namespace = ?) AS dbs,
                (SELECT COUNT(*) FROM content_refs WHERE namespace = ?) AS refs,
                (SELECT COUNT(*) FROM members WHERE namespace = ? AND wallet <> ?) AS members`,
        [caller.namespace, caller.namespace, caller.namespace, owner ?? ""]
      )
      // an embedded store with no file yet (NOT_FOUND) holds no table
      const tables = yield* clusterSql.schema(caller).pipe(
        Effect.catchIf((r) => r.code === "NOT_FOUND", () => Effect.succeed([])),
        Effect.mapError(() => down("the cluster SQL store"))
      )
      const notEmpty = [
        Number(held?.["dbs"] ?? 0) > 0 ? "databases" : "",
        Number(held?.["refs"] ?? 0) > 0 ? "stored content" : "",
        Number(held?.["members"] ?? 0) > 0 ? "members besides the owner" : "",
        tables.length > 0 ? "cluster SQL tables" : ""
      ].filter((w) => w !== "")
      if (notEmpty.length > 0) {
        return yield* Effect.fail(
          refuse(Code.NAMESPACE_NOT_EMPTY, `a backup restores only into an empty namespace, and this one holds ${notEmpty.join(", ")}`, "restore into a new namespace, or delete this one and create it again")
        )
      }

      // every pin still retrievable, and content another namespace holds only from this
      // gateway's own backup (knowing a CID does not hand its content over)
      let total = 0
      const seen = new Set<string>()
      for (const pin of pins) {
        const cid = canonicalCid(pin.cid)
        if (cid === undefined || cid !== pin.cid || seen.has(cid)) return yield* Effect.fail(sealedRefusal())
        seen.add(cid)
        const othersHold = yield* Effect.mapError(index.heldByAnyone(cid), () => down("the registry"))
        const size = othersHold && !staged.attested ? undefined : yield* engine.size(cid).pipe(
                Effect.catchIf((e) => e.reason === "missing", () => Effect.succeed(undefined)),
                Effect.mapError(() => down("the content store"))
              )
        if (size === undefined) {
          return yield* Effect.fail(
            refuse(Code.CONFLICT, `the archive pins ${cid}, whose content is no longer retrievable here`, "upload that content again to a namespace, then retry the restore")
          )
        }
        total += size
      }
      if (total > config.storage.quotaBytes) {
        return yield* Effect.fail(refuse(Code.PAYLOAD_TOO_LARGE, `the archive's pinned content is over the storage quota of ${config.storage.quotaBytes} bytes`))
      }
      return { clusterTables }
    })

  const registryRows = (caller: Principal, staged: Staged, owner: string | undefined, now: number): Array<Statement> => {
    const ns = caller.namespace
    const registry = staged.registry!
    const statements: Array<Statement> = [
      {
        sql: "UPDATE namespaces SET rate_limit_rps = ?, rate_limit_burst = ?, cors_origins = ? WHERE name = ?",
        params: [registry.settings.rate_limit_rps, registry.settings.rate_limit_burst, JSON.stringify(registry.settings.cors_origins), ns]
      }
    ]
    const insert = <R>(rows: ReadonlyArray<R>, head: string, columns: number, values: (r: R) => ReadonlyArray<string | number>) => {
      for (let at = 0; at < rows.length; at += ROWS_PER_INSERT) {
        const part = rows.slice(at, at + ROWS_PER_INSERT)
        statements.push({
          sql: `${head} VALUES ${part.map(() => `(${Array(columns).fill("?").join(", ")})`).join(", ")}`,
          params: part.flatMap(values)
        })
      }
    }
    // the namespace's owner stays its owner, its row dated as archived (members list in the order
    // they were added); an archived owner of another wallet comes back an admin
    const members = registry.members.filter((m) => m.wallet !== owner)
    const ownerRow = registry.members.find((m) => m.wallet === owner)
    if (ownerRow !== undefined) {
      statements.push({
        sql: "UPDATE members SET added_at = ?, added_by = ? WHERE namespace = ? AND wallet = ?",
        params: [ownerRow.added_at, ownerRow.added_by, ns, ownerRow.wallet]
      })
    }
    insert(members, "INSERT INTO members (namespace, wallet, role, added_at, added_by)", 5, (m) => [
      ns, m.wallet, m.role === "owner" ? "admin" : m.role, m.added_at, m.added_by
    ])
    insert(registry.databases, "INSERT INTO local_databases (namespace, name, home_node, created_at)", 4, (d) => [ns, d.name, config.nodeId, d.created_at])
    insert(staged.pins!, "INSERT INTO content_refs (cid, namespace, kind, ref, name, size, created_at)", 7, (p) => [p.cid, ns, "pin", "", p.name, p.size, p.created_at])
    insert(staged.pins!, "INSERT INTO content_pins (cid, size, created_at)", 3, (p) => [p.cid, p.size, now])
    // content another namespace pins already has its pin row
    for (let i = statements.length - 1; i >= 0; i--) {
      const s = statements[i]!
      if (s.sql.startsWith("INSERT INTO content_pins")) statements[i] = { ...s, sql: s.sql + " ON CONFLICT (cid) DO NOTHING" }
    }
    return statements
  }

  return (caller: Principal, body: Stream.Stream<Uint8Array, unknown>): Effect.Effect<RestoredNamespace, BackupRefused> =>
    Effect.scoped(
      Effect.mapError(
        slot.run(
          "restore",
          Effect.gen(function* () {
            const [record] = yield* query("SELECT owner FROM namespaces WHERE name = ?", [caller.namespace])
            if (record === undefined) return yield* Effect.fail(refuse(Code.NOT_FOUND, "no such namespace"))
            const owner = record["owner"] === null ? undefined : String(record["owner"])
            const dir = yield* Effect.acquireRelease(
              Effect.promise(() => {
                mkdirSync(path.join(config.dataDir, "tmp"), { recursive: true })
                return mkdtemp(path.join(config.dataDir, "tmp", "nsrestore-"))
              }),
              (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
            )
            const staged = yield* unpack(dir, body)
            // a restore of this namespace stopped half way here is taken back before the checks
            const free = yield* Effect.mapError(journal.settle(caller.namespace), () => down("the registry"))
            if (!free) return yield* Effect.fail(underWay())
            const { clusterTables } = yield* check(caller, staged, owner)
            const now = yield* Clock.currentTimeMillis
            const entry = yield* audit.entry(caller.namespace, "namespace.restore", caller.subject, "", {
              from: staged.manifest!.namespace,
              databases: staged.databases.size,
              pins: staged.pins!.length
            })

            // the cluster SQL store's state before (an empty store) kept to put back; an embedded
            // store with no file yet is put back by removing the file again
            const sqlEngine = stores.engineFor(caller.namespace)
            const loaded = clusterTables > 0 && staged.cluster !== undefined
            let undoFile: string | undefined
            if (loaded) {
              const file = journal.undoFileFor(caller.namespace)
              const kept = yield* sqlEngine.exportTo(file).pipe(
                Effect.as(true),
                Effect.catchIf((r) => r.code === "NOT_FOUND" && sqlEngine.kind === "sqlite", () => Effect.succeed(false)),
                Effect.mapError(() => down("the cluster SQL store"))
              )
              undoFile = kept ? file : undefined
            }
            // journalled before the first write: a crash from here on is taken back at the next start
            const writes: RestoreWrites = { namespace: caller.namespace, storeLoaded: loaded, undoFile, databases: [...staged.databases.keys()] }
            const begun = yield* Effect.mapError(journal.begin(writes, now), () => down("the registry"))
            if (!begun) {
              if (undoFile !== undefined) rmSync(undoFile, { force: true })
              return yield* Effect.fail(underWay())
            }
            const place = Effect.gen(function* () {
              if (loaded) yield* Effect.mapError(sqlEngine.importFrom(staged.cluster!), () => down("the cluster SQL store"))
              for (const [name, from] of staged.databases) {
                const file = path.join(config.dataDir, "databases", caller.namespace, `${name}.db`)
                mkdirSync(path.dirname(file), { recursive: true })
                yield* Effect.mapError(workers.run({ op: "replace", file, from }), () => down("the database worker"))
              }
              if (deps.pauseBeforeBatchMs > 0) yield* Effect.sleep(Duration.millis(deps.pauseBeforeBatchMs))
              // the registry rows and the record's end in one batch: the restore happened, or not
              yield* Effect.mapError(store.batch([...registryRows(caller, staged, owner, now), entry, journal.end(caller.namespace)]), () => down("the registry"))
            })
            yield* place.pipe(
              Effect.tapError(() =>
                journal.takeBack(writes).pipe(Effect.catchAll((e) => Effect.logWarning(`restore of ${caller.namespace} not taken back yet: ${e.detail}`)))
              )
            )
            if (undoFile !== undefined) rmSync(undoFile, { force: true })
            // the engine's pins follow the registry's; one refused is reported by the pin's status
            for (const pin of staged.pins!) {
              yield* Effect.ignore(engine.pin(pin.cid, pin.name).pipe(Effect.tapError((e) => Effect.logWarning(`restore: pinning ${pin.cid}: ${e.detail}`))))
            }
            return {
              databases: staged.databases.size,
              members: staged.registry!.members.filter((m) => m.wallet !== owner).length,
              pins: staged.pins!.length,
              clusterTables
            }
          })
        ),
        asBackupRefusal
      )
    )
}
