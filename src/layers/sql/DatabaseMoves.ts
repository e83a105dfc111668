/**
 * A node-local database handed from its home node to another (docs/cluster.md, "Leaving"), so a
 * node leaves the cluster without losing its databases. The receiver pulls; the registry decides.
 *
 * 1. The receiver asks the home node for the database (`/v1/internal/sqlite/handoff`). The home
 *    node writes in the registry that the database is moving to the receiver until a deadline (the
 *    registry's clock), fences it (its statements are refused with a retryable 503 from then on:
 *    those already queued run first, as a file's requests run in arrival order), and sends a
 *    consistent copy (SQLite's online backup).
 * 2. The receiver puts the copy in place and takes the home role with one conditional UPDATE: only
 *    while the registry still says the database is moving to it, before the deadline.
 * 3. A hand-off that fails is aborted (`/v1/internal/sqlite/handoff/abort`): the registry's mark is
 *    cleared if the home did not move, and the home node serves the database again. A home node
 *    that never hears the abort serves it again once its fence lapses, which is after the
 *    registry's deadline (the fence starts after the mark is written and lasts longer), so a
 *    receiver can no longer take the home role by then: no write is ever made on both.
 */
import { Clock, Context, Duration, Effect, Layer, type Scope } from "effect"
import { readFileSync, statSync } from "node:fs"
import { Code } from "../../domain/Errors.js"
import type { NamespaceName } from "../../domain/Names.js"
import { REGISTRY_NOW } from "../cluster/Membership.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { spoolFile } from "../transfer/SpoolFile.js"
import { LocalDatabases, localDatabaseFile } from "./LocalDatabases.js"
import { SqliteWorkers } from "./SqliteWorkers.js"
import { refuse, registryDown, type SqlRefused } from "./SqlRefused.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** How long the receiver has, from the home node's mark, to take the home role (registry clock). */
const MOVE_WINDOW_MS = 10 * 60_000
/** How long the home node refuses the database's statements: longer than the window, by its own clock. */
const FENCE_MS = MOVE_WINDOW_MS + 60_000
/** What a SQLite database file starts with: anything else is not put in place. */
const SQLITE_MAGIC = Buffer.from("SQLite format 3\0", "latin1")

const readHead = (file: string): Buffer => {
  try {
    return readFileSync(file).subarray(0, SQLITE_MAGIC.length)
  } catch {
    return Buffer.alloc(0)
  }
}

export interface DatabaseMovesService {
  /** Home node: marks, fences and copies the database for `to`; the copy's file lives in the scope. */
  readonly handOff: (namespace: string, name: string, to: string) => Effect.Effect<{ readonly file: string; readonly size: number }, SqlRefused, Scope.Scope>
  /** Home node: the hand-off to `to` failed; serve the database again unless its home moved. */
  readonly abort: (namespace: string, name: string, to: string) => Effect.Effect<void, SqlRefused>
  /** Receiver: takes the database homed on `from` and its home role. */
  readonly moveHere: (from: string, namespace: string, name: string) => Effect.Effect<void, SqlRefused>
}

export class DatabaseMoves extends Context.Tag("portico/DatabaseMoves")<DatabaseMoves, DatabaseMovesService>() {
  static readonly Live = Layer.effect(
    DatabaseMoves,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const databases = yield* LocalDatabases
      const workers = yield* SqliteWorkers
      const coordination = yield* Coordination
      const self = config.nodeId
      const exec = (sql: string, params: ReadonlyArray<string | number>) => Effect.mapError(store.exec({ sql, params }), registryDown)

      const handOff: DatabaseMovesService["handOff"] = (namespace, name, to) =>
        Effect.gen(function* () {
          const marked = yield* exec(
            `UPDATE local_databases SET moving_to = ?, moving_until = ${REGISTRY_NOW} + ? WHERE namespace = ? AND name = ? AND home_node = ?`,
            [to, MOVE_WINDOW_MS, namespace, name, self]
          )
          if (marked.rowsAffected === 0) return yield* Effect.fail(refuse(Code.NOT_FOUND, `no database "${name}" of ${namespace} homed on ${self}`))
          databases.fence(namespace, name, (yield* Clock.currentTimeMillis) + FENCE_MS)
          const file = yield* spoolFile(config.dataDir, "handoff")
          yield* workers.run({ op: "backup", file: localDatabaseFile(config.dataDir, namespace, name), dest: file }, config.sql.transferBudgetMs).pipe(
            Effect.mapError((f) => refuse(Code.UNAVAILABLE, `the database "${name}" could not be copied: ${f.message}`, "retry shortly", 5)),
            Effect.tapError(() => abort(namespace, name, to))
          )
          return { file, size: statSync(file).size }
        })

      const abort: DatabaseMovesService["abort"] = (namespace, name, to) =>
        Effect.gen(function* () {
          const cleared = yield* exec(
            "UPDATE local_databases SET moving_to = NULL, moving_until = NULL WHERE namespace = ? AND name = ? AND home_node = ? AND moving_to = ?",
            [namespace, name, self, to]
          )
          // a home that moved stays moved: the fence keeps this node off the database until it lapses
          if (cleared.rowsAffected > 0) databases.unfence(namespace, name)
        })

      const moveHere: DatabaseMovesService["moveHere"] = (from, namespace, name) =>
        Effect.scoped(
          Effect.gen(function* () {
            const unreachable = (detail: string) =>
              refuse(Code.HOME_NODE_UNREACHABLE, `the database "${name}" could not be taken from ${from}: ${detail}`, "retry the leave; nothing moved", 5)
            const file = yield* spoolFile(config.dataDir, "arriving")
            // the namespace is a registry row's: a name the registry admitted
            const payload = { namespace: namespace as NamespaceName, database_name: name, to: self }
            const answer = yield* internalClient(coordination)
              .callToFile(from, "sqliteHandoff", payload, Duration.millis(config.sql.transferBudgetMs), file, config.sql.importMaxBytes)
              .pipe(Effect.mapError((e) => unreachable(e.detail)))
            const failed = (reason: SqlRefused) =>
              Effect.zipRight(Effect.ignore(internalClient(coordination).call(from, "sqliteHandoffAbort", payload, Duration.seconds(10))), Effect.fail(reason))
            if (answer.status !== 200) return yield* failed(unreachable(`it answered ${answer.status}`))
            const head = readHead(file)
            if (!head.equals(SQLITE_MAGIC)) return yield* failed(unreachable("its copy is not a SQLite database"))
            const dest = localDatabaseFile(config.dataDir, namespace, name)
            yield* workers.run({ op: "replace", file: dest, from: file }).pipe(
              Effect.catchAll((f) => failed(refuse(Code.UNAVAILABLE, `the database "${name}" could not be put in place: ${f.message}`, "retry the leave", 5)))
            )
            const taken = yield* exec(
              `UPDATE local_databases SET home_node = ?, moving_to = NULL, moving_until = NULL
               WHERE namespace = ? AND name = ? AND home_node = ? AND moving_to = ? AND moving_until > ${REGISTRY_NOW}`,
              [self, namespace, name, from, self]
            )
            databases.forget(namespace, name)
            if (taken.rowsAffected === 0) {
              // the window closed, or the database went: this copy is nobody's
              yield* Effect.ignore(workers.run({ op: "drop", file: dest }))
              return yield* failed(unreachable("the hand-off's window closed before it completed"))
            }
          })
        )

      return DatabaseMoves.of({ handOff, abort, moveHere })
    })
  )

  /** Over its collaborators' test doubles. */
  static readonly Test = Layer.suspend(() =>
    DatabaseMoves.Live.pipe(
      Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test, LocalDatabases.Test, SqliteWorkers.Test, Coordination.Test))
    )
  )
}
