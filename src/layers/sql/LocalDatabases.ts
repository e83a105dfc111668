/**
 * Node-local databases (spec §2.2, §4.2): SQLite files of a namespace on its home node, WAL on.
 * The registry records each database and its home node; the file lives under
 * `<dataDir>/databases/<namespace>/<name>.db` and is only ever touched by the SQLite worker processes
 * (WorkerPool.ts: one at a time, except reads moved off a worker stalled by another file).
 */
import { Clock, Context, Effect, Either, Exit, Layer, Runtime } from "effect"
import { statSync } from "node:fs"
import * as path from "node:path"
import { Code } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { guardLocalSql } from "../../domain/SqlGuard.js"
import { Audit } from "../audit/Audit.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Coordination } from "../coordination/Coordination.js"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { forwardQueryNow, forwardToHome } from "./HomeNode.js"
import type { BindValue } from "./SqliteProtocol.js"
import { SqliteWorkers } from "./SqliteWorkers.js"
import { fromGuard, fromSqlite, refuse, registryDown, type SqlRefused } from "./SqlRefused.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export interface DatabaseRecord {
  readonly name: string
  readonly homeNode: string
  /** Unix milliseconds. */
  readonly createdAt: number
}

export interface DatabaseInfo extends DatabaseRecord {
  /** The file with its write-ahead log. */
  readonly sizeBytes: number
  /** The newest backup's CID (content storage records backups). */
  readonly backupCid: string | null
}

export interface LocalDatabasesService {
  readonly create: (caller: Principal, name: string) => Effect.Effect<DatabaseRecord, SqlRefused>
  /** One statement; the answer's JSON text: `{columns, rows}` for a read, the counts for a write. */
  readonly query: (
    caller: Principal,
    name: string,
    sql: string,
    params: ReadonlyArray<BindValue>
  ) => Effect.Effect<string, SqlRefused>
  /** One page of the namespace's databases, by name (key: name). */
  readonly list: (caller: Principal, page: PageRequest) => Effect.Effect<Page<DatabaseInfo>, SqlRefused>
  readonly delete: (caller: Principal, name: string) => Effect.Effect<void, SqlRefused>
  /** The file of a database homed on this node (backups read it). */
  readonly locate: (namespace: string, name: string) => Effect.Effect<string, SqlRefused>
  /** The node a database lives on. */
  readonly homeOf: (namespace: string, name: string) => Effect.Effect<string, SqlRefused>
  /**
   * `query` for a caller outside the Effect runtime (the fast lane): a database homed here whose
   * record is known goes straight to its worker, one homed elsewhere whose record is recent
   * straight to its home node (HomeNode.ts `forwardQueryNow`); anything else runs `query`. `done`
   * gets the outcome once.
   */
  readonly queryNow: (
    caller: Principal,
    name: string,
    sql: string,
    params: ReadonlyArray<BindValue>,
    done: (exit: Exit.Exit<string, SqlRefused>) => void
  ) => void
  /** `queryNow` as the home node runs it, never forwarding: anything but a known local record runs `queryHere`. */
  readonly queryHereNow: LocalDatabasesService["queryNow"]
  /** `query` and `delete` as the home node runs them, never forwarding (the internal routes). */
  readonly queryHere: LocalDatabasesService["query"]
  readonly deleteHere: LocalDatabasesService["delete"]
  /**
   * The database is being handed to another node (DatabaseMoves.ts): until `untilMs` (this
   * process's clock) its statements are refused with a retryable 503 and its record is read from
   * the registry each time, so once the registry names its new home, requests go there.
   */
  readonly fence: (namespace: string, name: string, untilMs: number) => void
  /** The hand-off failed: the database is served here again. */
  readonly unfence: (namespace: string, name: string) => void
  /** The database's home changed (it moved here): what this node kept of its record goes. */
  readonly forget: (namespace: string, name: string) => void
}

const isConstraint = (e: StoreError) => e.reason === "constraint"

/**
 * A node-local database's file (`<dataDir>/databases/<namespace>/<name>.db`), which a backup reads,
 * a restore stages into and a move (DatabaseMoves.ts) puts in place.
 */
export const localDatabaseFile = (dataDir: string, namespace: string, name: string): string =>
  path.join(dataDir, "databases", namespace, `${name}.db`)

/** How long a record of a database homed on another node is used without reading the registry again. */
const ELSEWHERE_MS = 2_000

const fileSize = (file: string): number => {
  let total = 0
  for (const suffix of ["", "-wal"]) {
    try {
      total += statSync(file + suffix).size
    } catch {
      // no WAL right after a checkpoint: nothing to add
    }
  }
  return total
}

export class LocalDatabases extends Context.Tag("portico/LocalDatabases")<LocalDatabases, LocalDatabasesService>() {
  static readonly Live = Layer.effect(
    LocalDatabases,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const audit = yield* Audit
      const workers = yield* SqliteWorkers
      const config = yield* PorticoConfig
      const coordination = yield* Coordination
      const runCallback = Runtime.runCallback(yield* Effect.runtime<never>())
      const forwardTimeoutMs = config.sql.timeoutMs + 5_000
      const fileOf = (namespace: string, name: string) => localDatabaseFile(config.dataDir, namespace, name)

      /**
       * Records of databases homed here, so a query costs no registry read. Safe to keep: only
       * the home node deletes a database (any other answers 503), and a name cannot be created
       * twice, so an entry changes only through this process, which updates it.
       */
      const known = new Map<string, DatabaseRecord>()
      const knownKey = (namespace: string, name: string) => `${namespace}/${name}`
      /** Databases being handed to another node, and until when (DatabaseMoves.ts). */
      const fences = new Map<string, number>()
      const fenced = (namespace: string, name: string) => {
        const until = fences.get(knownKey(namespace, name))
        if (until === undefined) return false
        if (Date.now() < until) return true
        fences.delete(knownKey(namespace, name))
        return false
      }
      /**
       * Records of databases homed on other nodes, kept `ELSEWHERE_MS`, so a forwarded query costs
       * no registry read either. A home that moved meanwhile (a node left) answers the forward with
       * a retryable 503 until the entry lapses.
       */
      const elsewhere = new Map<string, { readonly record: DatabaseRecord; readonly at: number }>()
      const remember = (namespace: string, r: DatabaseRecord) => {
        const key = knownKey(namespace, r.name)
        if (r.homeNode !== config.nodeId) {
          if (elsewhere.size >= 10_000) elsewhere.clear()
          elsewhere.set(key, { record: r, at: Date.now() })
          return
        }
        elsewhere.delete(key)
        if (fenced(namespace, r.name)) return
        if (known.size >= 10_000) known.clear()
        known.set(key, r)
      }
      const recentElsewhere = (key: string) => {
        const entry = elsewhere.get(key)
        if (entry === undefined || Date.now() - entry.at > ELSEWHERE_MS) return undefined
        return entry.record
      }

      const record = (namespace: string, name: string) =>
        Effect.suspend(() => {
          const key = knownKey(namespace, name)
          const cached = fenced(namespace, name) ? undefined : (known.get(key) ?? recentElsewhere(key))
          return cached === undefined ? lookup(namespace, name) : Effect.succeed(cached)
        })

      const lookup = (namespace: string, name: string) =>
        Effect.flatMap(
          Effect.mapError(
            store.query({
              sql: "SELECT name, home_node, created_at FROM local_databases WHERE namespace = ? AND name = ?",
              params: [namespace, name]
            }),
            registryDown
          ),
          (rows) => {
            const row = rows[0]
            return row === undefined
              ? Effect.fail(refuse(Code.NOT_FOUND, `no database "${name}" in this namespace`))
              : Effect.sync(() => {
                  const r: DatabaseRecord = {
                    name: String(row["name"]),
                    homeNode: String(row["home_node"]),
                    createdAt: Number(row["created_at"])
                  }
                  remember(namespace, r)
                  return r
                })
          }
        )

      /** The file of a database homed here; one homed elsewhere is the spec's retryable 503. */
      const locate = (namespace: string, name: string) =>
        Effect.flatMap(record(namespace, name), (r) =>
          r.homeNode === config.nodeId && fenced(namespace, name)
            ? Effect.fail(refuse(Code.HOME_NODE_UNREACHABLE, `the database "${name}" is moving to another node`, "retry in a few seconds", 5))
            : r.homeNode === config.nodeId
            ? Effect.succeed(fileOf(namespace, name))
            : Effect.fail(
                refuse(Code.HOME_NODE_UNREACHABLE, `the database's home node (${r.homeNode}) is not reachable from this gateway`, "send the request to the home node's gateway", 30)
              )
        )

      const queryHere = (caller: Principal, name: string, sql: string, params: ReadonlyArray<BindValue>) =>
        Effect.gen(function* () {
          const checked = guardLocalSql(sql)
          if (!checked.ok) return yield* Effect.fail(fromGuard(checked.refusal))
          const file = yield* locate(caller.namespace, name)
          const value = yield* Effect.mapError(
            workers.run({ op: "statement", file, sql, params, kind: checked.statement.kind, shape: "table" }, undefined, checked.statement.readOnly),
            fromSqlite
          )
          return value.type === "json" ? value.json : "{}"
        })

      const deleteHere = (caller: Principal, name: string) =>
        Effect.gen(function* () {
          const file = yield* locate(caller.namespace, name)
          const entry = yield* audit.entry(caller.namespace, "sqlite.delete", caller.subject, name, {}, { onlyIfChanged: true })
          const [removed] = yield* Effect.mapError(
            store.batch([
              { sql: "DELETE FROM local_databases WHERE namespace = ? AND name = ?", params: [caller.namespace, name] },
              entry
            ]),
            registryDown
          )
          known.delete(knownKey(caller.namespace, name))
          if (removed === undefined || removed.rowsAffected === 0) {
            return yield* Effect.fail(refuse(Code.NOT_FOUND, `no database "${name}" in this namespace`))
          }
          // the name is free from here; a leftover file is replaced by the next create
          yield* Effect.ignore(workers.run({ op: "drop", file }))
        })

      const query = (caller: Principal, name: string, sql: string, params: ReadonlyArray<BindValue>) =>
        Effect.gen(function* () {
          const checked = guardLocalSql(sql)
          if (!checked.ok) return yield* Effect.fail(fromGuard(checked.refusal))
          const home = (yield* record(caller.namespace, name)).homeNode
          if (home !== config.nodeId) return yield* Effect.async<string, SqlRefused>((resume) => forwardQuery(home, caller, name, sql, params, resume))
          return yield* queryHere(caller, name, sql, params)
        })

      const warn = (message: string) => runCallback(Effect.logWarning(message))
      /**
       * A query forwarded to the database's home node (HomeNode.ts), outside any fiber: the
       * forward is one call per client request, and the effect's timeout fiber, membership reads
       * and signing steps cost as much CPU as the call itself (bench/cluster).
       */
      const forwardQuery = (
        home: string,
        caller: Principal,
        name: string,
        sql: string,
        params: ReadonlyArray<BindValue>,
        done: (exit: Exit.Exit<string, SqlRefused>) => void
      ): void =>
        forwardQueryNow(coordination, home, caller, { database_name: name, query: sql, params }, forwardTimeoutMs, warn, (outcome) => {
          if (Either.isRight(outcome)) return done(Exit.succeed(outcome.right))
          // the home may have moved (a node left): the next request reads the registry again
          if (outcome.left.code === Code.HOME_NODE_UNREACHABLE) elsewhere.delete(knownKey(caller.namespace, name))
          done(Exit.fail(outcome.left))
        })
      /**
       * A statement on a database homed here whose record is known, straight to its worker;
       * anything else (a guard refusal, a record not read yet, a database elsewhere) through
       * `otherwise`'s effect.
       */
      const runNow = (
        otherwise: typeof query,
        caller: Principal,
        name: string,
        sql: string,
        params: ReadonlyArray<BindValue>,
        done: (exit: Exit.Exit<string, SqlRefused>) => void
      ): void => {
        const checked = guardLocalSql(sql)
        const cached = checked.ok ? known.get(knownKey(caller.namespace, name)) : undefined
        if (!checked.ok || cached === undefined || cached.homeNode !== config.nodeId) {
          runCallback(otherwise(caller, name, sql, params), { onExit: done })
          return
        }
        const request = { op: "statement", file: fileOf(caller.namespace, name), sql, params, kind: checked.statement.kind, shape: "table" } as const
        workers.runNow(request, checked.statement.readOnly, (result) =>
          done(
            Either.isRight(result)
              ? Exit.succeed(result.right.type === "json" ? result.right.json : "{}")
              : Exit.fail(fromSqlite(result.left))
          )
        )
      }

      return {
        create: (caller, name) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            // a node being drained takes no new database (docs/cluster.md, "Node administration")
            const [draining] = yield* Effect.mapError(
              store.query({ sql: "SELECT 1 AS yes FROM cluster_nodes WHERE id = ? AND draining_at IS NOT NULL", params: [config.nodeId] }),
              registryDown
            )
            if (draining !== undefined) {
              return yield* Effect.fail(
                refuse(Code.UNAVAILABLE, `this node (${config.nodeId}) is being drained: it takes no new database`, "create the database through another gateway of the cluster", 30)
              )
            }
            const entry = yield* audit.entry(caller.namespace, "sqlite.create", caller.subject, name, { home_node: config.nodeId })
            // the row claims the name; losing the race is the 409
            yield* store
              .batch([
                {
                  sql: "INSERT INTO local_databases (namespace, name, home_node, created_at) VALUES (?, ?, ?, ?)",
                  params: [caller.namespace, name, config.nodeId, now]
                },
                entry
              ])
              .pipe(
                Effect.catchIf(isConstraint, () =>
                  Effect.fail(refuse(Code.DATABASE_EXISTS, `database "${name}" exists`))
                ),
                Effect.mapError((e) => (e._tag === "StoreError" ? registryDown(e) : e))
              )
            yield* workers.run({ op: "create", file: fileOf(caller.namespace, name) }).pipe(
              Effect.mapError(fromSqlite),
              // no file, no database: give the name back
              Effect.tapError(() =>
                Effect.ignore(
                  store.exec({
                    sql: "DELETE FROM local_databases WHERE namespace = ? AND name = ?",
                    params: [caller.namespace, name]
                  })
                )
              )
            )
            const created = { name, homeNode: config.nodeId, createdAt: now }
            remember(caller.namespace, created)
            return created
          }),

        query,

        queryNow: (caller, name, sql, params, done) => {
          // a database homed elsewhere whose record is recent: forwarded without the effect
          const key = knownKey(caller.namespace, name)
          const away = known.has(key) || fenced(caller.namespace, name) ? undefined : recentElsewhere(key)
          if (away === undefined || away.homeNode === config.nodeId || !guardLocalSql(sql).ok) return runNow(query, caller, name, sql, params, done)
          forwardQuery(away.homeNode, caller, name, sql, params, done)
        },

        queryHereNow: (caller, name, sql, params, done) => runNow(queryHere, caller, name, sql, params, done),

        queryHere: (caller, name, sql, params) => queryHere(caller, name, sql, params),

        deleteHere: (caller, name) => deleteHere(caller, name),

        homeOf: (namespace, name) => Effect.map(record(namespace, name), (r) => r.homeNode),

        delete: (caller, name) =>
          Effect.gen(function* () {
            const home = (yield* record(caller.namespace, name)).homeNode
            if (home !== config.nodeId) {
              yield* forwardToHome(coordination, home, "delete", caller, { database_name: name }, forwardTimeoutMs)
              elsewhere.delete(knownKey(caller.namespace, name))
              return
            }
            return yield* deleteHere(caller, name)
          }),

        list: (caller, page) =>
          Effect.mapError(
            readPage(
              store,
              {
                select: `SELECT d.name, d.home_node, d.created_at,
                        (SELECT b.backup_cid FROM local_database_backups b
                          WHERE b.namespace = d.namespace AND b.database_name = d.name
                            -- a backup of an earlier database of the same name is not this one's
                            AND b.created_at >= d.created_at
                          ORDER BY b.created_at DESC, b.id DESC LIMIT 1) AS backup_cid
                      FROM local_databases d`,
                where: ["d.namespace = ?"],
                params: [caller.namespace],
                // the outer query's only table is d: `name` is d.name, and a row's key is read by it
                order: ["name"],
                direction: "asc"
              },
              page,
              (row): DatabaseInfo => {
                const name = String(row["name"])
                const homeNode = String(row["home_node"])
                return {
                  name,
                  homeNode,
                  createdAt: Number(row["created_at"]),
                  // the size is known only where the file is
                  sizeBytes: homeNode === config.nodeId ? fileSize(fileOf(caller.namespace, name)) : 0,
                  backupCid: row["backup_cid"] === null || row["backup_cid"] === undefined ? null : String(row["backup_cid"])
                }
              }
            ),
            registryDown
          ),

        locate,
        fence: (namespace, name, untilMs) => {
          fences.set(knownKey(namespace, name), untilMs)
          known.delete(knownKey(namespace, name))
        },
        unfence: (namespace, name) => void fences.delete(knownKey(namespace, name)),
        forget: (namespace, name) => {
          known.delete(knownKey(namespace, name))
          elsewhere.delete(knownKey(namespace, name))
        }
      } satisfies LocalDatabasesService
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    LocalDatabases.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Audit.Test,
          SqliteWorkers.Test,
          PorticoConfig.Test,
          Coordination.Test
        )
      )
    )
  )
}
