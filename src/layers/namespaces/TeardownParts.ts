/**
 * What removing each part of a namespace does (docs/namespaces.md, "Deleting a namespace"). Every
 * part is idempotent: it removes what is left of it and succeeds when nothing is, so a deletion
 * rerun after a crash or a failure only finishes the job. A part that cannot finish fails, and
 * the deletion keeps it owed.
 *
 * The namespace's access (keys, members, sessions, devices, offers, fetch capabilities) is the
 * first part, and its remaining registry rows go with the namespace row in the last batch
 * (`finalStatements`).
 */
import type { KeptReadsService } from "../registry/KeptReads.js"
import { Effect, Exit } from "effect"
import type { Principal } from "../../domain/Principal.js"
import { Duration } from "effect"
import type { CacheService } from "../cache/Cache.js"
import type { PubSubService } from "../pubsub/PubSub.js"
import type { PorticoSettings } from "../config/PorticoConfig.js"
import type { MembershipService } from "../cluster/Membership.js"
import type { CoordinationService } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import type { NamespaceName } from "../../domain/Names.js"
import type { DeploymentsService } from "../deployments/Deployments.js"
import type { RegistryStoreService, Statement } from "../registry/RegistryStore.js"
import type { ClusterSqlStoreService } from "../sql/ClusterSqlStore.js"
import type { LocalDatabasesService } from "../sql/LocalDatabases.js"
import type { SqliteWorkersService } from "../sql/SqliteWorkers.js"
import type { ContentEngineService } from "../storage/ContentEngine.js"
import type { ContentIndexService } from "../storage/ContentIndex.js"
import type { EvictorService } from "../storage/Evictor.js"
import type { TeardownPart } from "./TeardownLedger.js"
import { functionRowDeletes } from "../functions/FunctionStore.js"
import type { VaultService } from "../vault/Vault.js"

/** A part could not be removed now; `detail` goes to the ledger and the log. */
export class PartFailed {
  readonly _tag = "PartFailed"
  constructor(readonly detail: string) {}
}

export interface PartTools {
  readonly config: PorticoSettings
  readonly registry: RegistryStoreService
  readonly deployments: DeploymentsService
  readonly databases: LocalDatabasesService
  readonly clusterSql: ClusterSqlStoreService
  readonly workers: SqliteWorkersService
  readonly cache: CacheService
  readonly pubsub: PubSubService
  readonly index: ContentIndexService
  readonly engine: ContentEngineService
  readonly evictor: EvictorService
  readonly coordination: CoordinationService
  readonly membership: MembershipService
  readonly vault: VaultService
  readonly kept: KeptReadsService
}

const PEER_TIMEOUT = Duration.seconds(10)

const describe = (e: unknown): string =>
  typeof e === "object" && e !== null && "detail" in e ? String(e.detail) : typeof e === "object" && e !== null && "reason" in e ? String(e.reason) : String(e)

const orFail = <A, E>(what: string, effect: Effect.Effect<A, E>): Effect.Effect<A, PartFailed> =>
  Effect.mapError(effect, (e) => new PartFailed(`${what}: ${describe(e)}`))

/** Removes what is left of the part. */
export const removePart = (tools: PartTools, namespace: string, part: TeardownPart): Effect.Effect<void, PartFailed> => {
  switch (part) {
    case "access":
      // what this gateway kept of keys and sessions goes at once (docs/auth.md, "Credentials in a cluster")
      return orFail("access", tools.registry.batch(accessStatements(namespace))).pipe(Effect.zipRight(Effect.sync(() => tools.kept.forget())))
    case "deployments":
      return removeDeployments(tools, namespace)
    case "databases":
      return removeDatabases(tools, namespace)
    case "cluster_sql":
      return removeClusterSql(tools, namespace)
    case "storage":
      return removeStorage(tools, namespace)
    case "cache":
      return removeCache(tools, namespace)
    // history, sequences and presence; its sockets close as its keys and sessions (the access part) stop standing
    // the functions' rows (their modules' content references go with the storage part)
    // the functions' rows; their modules' content references go with the storage part
    case "functions":
      return Effect.asVoid(orFail("functions", tools.registry.batch(functionRowDeletes(namespace))))
    case "pubsub":
      return orFail("pubsub", tools.pubsub.withinDeadline(tools.pubsub.engine.dropNamespace(namespace)))
    // each node's guardian holds its shares in its own store: every node that may hold one must confirm
    case "vault":
      return Effect.mapError(tools.vault.dropNamespace(namespace), (detail) => new PartFailed(detail))
    case "push":
      return Effect.asVoid(
        orFail(
          "push",
          tools.registry.batch([
            { sql: "DELETE FROM push_credentials WHERE namespace = ?", params: [namespace] },
            { sql: "DELETE FROM push_devices WHERE namespace = ?", params: [namespace] },
            { sql: "DELETE FROM push_topics WHERE namespace = ?", params: [namespace] }
          ])
        )
      )
  }
}

/**
 * The cache: on Redis one drop reaches every gateway. An embedded cache is each gateway's own, so
 * node of the membership that has not stopped cleanly is asked to drop its entries too (a clean
 * stop took its memory with it), and one that does not confirm keeps
 * the part owed: a name created again must not meet the old namespace's entries on any gateway.
 */
const removeCache = (tools: PartTools, namespace: string): Effect.Effect<void, PartFailed> =>
  Effect.gen(function* () {
    yield* orFail("cache", tools.cache.dropNamespace(namespace))
    if (tools.cache.engine !== "memory") return
    const unconfirmed: Array<string> = []
    // every node that did not stop cleanly: one that is only silent may come back with its cache
    const peers = yield* tools.membership.unstopped
    yield* Effect.forEach(
      peers.map((p) => p.id),
      (node) =>
        // a namespace being torn down was a valid name when it was made
        internalClient(tools.coordination).call(node, "cacheDropNamespace", { namespace: namespace as NamespaceName }, PEER_TIMEOUT).pipe(
          Effect.map((answer) => (answer.status === 200 ? undefined : `${node} answered ${answer.status}`)),
          Effect.catchAll((e) => Effect.succeed(`${node}: ${e.detail}`)),
          Effect.map((why) => void (why !== undefined && unconfirmed.push(why)))
        ),
      { concurrency: 8, discard: true }
    )
    if (unconfirmed.length > 0) return yield* Effect.fail(new PartFailed(`cache on peers: ${unconfirmed.join("; ")}`))
  })

const names = (tools: PartTools, sql: string, namespace: string) =>
  Effect.map(tools.registry.query({ sql, params: [namespace] }), (rows) => rows.map((r) => String(r["name"])))

/** Each deployment as its own delete route does it: app stopped, directory released, content refs released, record gone, host table refreshed. */
const removeDeployments = (tools: PartTools, namespace: string) =>
  Effect.gen(function* () {
    const all = yield* orFail("deployments", names(tools, "SELECT name FROM deployments WHERE namespace = ? ORDER BY name", namespace))
    for (const name of all) {
      yield* tools.deployments.remove(namespace, name).pipe(
        // gone meanwhile (a concurrent delete, or a rerun): nothing left of it
        Effect.catchIf((e) => e._tag === "Refused" && e.code === "NOT_FOUND", () => Effect.void),
        (effect) => orFail(`deployment ${name}`, effect)
      )
    }
  })

/** The principal the namespace's own services see for its deletion: the owner level, nothing more. */
const teardownPrincipal = (namespace: string): Principal => ({
  namespace,
  subject: "teardown",
  method: "api_key",
  role: "owner",
  grants: [],
  keyId: undefined,
  sessionId: undefined,
  deviceId: undefined
})

/** Node-local databases, each removed on its home node (forwarded there like any delete). */
const removeDatabases = (tools: PartTools, namespace: string) =>
  Effect.gen(function* () {
    const all = yield* orFail("databases", names(tools, "SELECT name FROM local_databases WHERE namespace = ? ORDER BY name", namespace))
    const caller = teardownPrincipal(namespace)
    for (const name of all) {
      yield* tools.databases.delete(caller, name).pipe(
        Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.void),
        (effect) => orFail(`database ${name}`, effect)
      )
    }
  })

/**
 * The cluster SQL store: the embedded file removed (with its WAL); on a namespace's own rqlite
 * cluster every table and view dropped (rqlite holds one database per cluster, and the cluster
 * is the operator's to retire).
 */
const removeClusterSql = (tools: PartTools, namespace: string) =>
  Effect.gen(function* () {
    const engine = tools.clusterSql.engineFor(namespace)
    if (engine.kind === "sqlite") {
      yield* orFail("cluster sql file", tools.workers.run({ op: "drop", file: tools.clusterSql.embeddedFile(namespace) }))
      tools.clusterSql.forget(namespace)
      return
    }
    // views first (a view may name a table), then tables, indexes and triggers going with them
    for (const type of ["view", "table"] as const) {
      const answer = yield* orFail(
        "cluster sql schema",
        engine.statement(
          { sql: "SELECT name FROM sqlite_master WHERE type = ? AND name NOT LIKE 'sqlite_%'", params: [type], kind: "read" },
          "table"
        )
      )
      const rows = (JSON.parse(answer) as { readonly rows?: ReadonlyArray<ReadonlyArray<unknown>> }).rows ?? []
      const drops = rows.map((row) => ({
        sql: `DROP ${type === "view" ? "VIEW" : "TABLE"} IF EXISTS "${String(row[0]).replaceAll('"', '""')}"`,
        params: [],
        kind: "write" as const
      }))
      if (drops.length > 0) yield* orFail("cluster sql drop", engine.batch(drops, false))
    }
  })

/**
 * Every content reference of the namespace released (pins, backups, deployments' content); a CID
 * nobody else holds loses its pin, is unpinned from the engine and evicted on every node. Content
 * another namespace holds stays as it is.
 */
const removeStorage = (tools: PartTools, namespace: string) =>
  Effect.gen(function* () {
    const cids = yield* orFail(
      "content refs",
      Effect.map(tools.registry.query({ sql: "SELECT DISTINCT cid FROM content_refs WHERE namespace = ?", params: [namespace] }), (rows) =>
        rows.map((r) => String(r["cid"]))
      )
    )
    yield* orFail("content refs", tools.registry.exec({ sql: "DELETE FROM content_refs WHERE namespace = ?", params: [namespace] }))
    // a crash after the refs went leaves their pins orphaned: the rerun finds them by the
    // namespace no more, so orphans of anyone are dropped too (what the storage sweep does)
    const orphans = yield* orFail("content pins", tools.index.orphans)
    for (const cid of new Set([...cids, ...orphans])) {
      const dropped = yield* orFail("content pin", tools.index.dropPinIfUnreferenced(cid))
      if (!dropped) continue
      const unpinned = yield* Effect.exit(tools.engine.unpin(cid))
      // the pin row is gone: the storage sweep unpins and reclaims what stayed
      if (Exit.isFailure(unpinned)) yield* Effect.logWarning(`namespace ${namespace} teardown: unpin of ${cid} failed; the sweep retries`)
      yield* tools.evictor.evictEverywhere(cid, (keep) => tools.engine.evict(cid, keep))
    }
  })

/** The namespace's access: no key, session, member, device or fetch capability of it works once these ran. */
export const accessStatements = (namespace: string): ReadonlyArray<Statement> => [
  { sql: "DELETE FROM api_keys WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM refresh_tokens WHERE session_id IN (SELECT id FROM sessions WHERE namespace = ?)", params: [namespace] },
  { sql: "DELETE FROM sessions WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM auth_challenges WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM device_requests WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM devices WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM members WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM ownership_offers WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM fetch_caps WHERE namespace = ?", params: [namespace] }
]

/**
 * The last batch: what is left of the namespace in the registry (its audit trail, backup rows,
 * the namespace row with its rate limit and CORS origins), with the deletion's own record.
 */
export const finalStatements = (namespace: string): ReadonlyArray<Statement> => [
  { sql: "DELETE FROM local_database_backups WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM audit WHERE namespace = ?", params: [namespace] },
  // its settings go with the namespace row: real-time media's (with its relay secret) and its rooms' admissions
  { sql: "DELETE FROM webrtc_settings WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM webrtc_admissions WHERE namespace = ?", params: [namespace] },
  { sql: "DELETE FROM namespaces WHERE name = ?", params: [namespace] }
]
