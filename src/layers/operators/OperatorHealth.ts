/**
 * What operators see of the gateway's health (docs/operators.md): each check with its latency
 * and its error text, how many namespaces it hosts, a page of them, and the ports this node holds
 * — the detail the open health routes hide (spec §4.9: "latencies, errors, hosted namespaces and
 * ports"), and every node of the cluster with the namespaces and app ports homed there. The
 * telemetry stream's snapshot is the cluster's: this node's report (counts only, no
 * lists) with the process's figures, and each live peer's (the membership), asked over the overlay
 * (`/v1/internal/telemetry`, coordination MAC) or named unreachable. Metadata only: no
 * namespace's data is read.
 */
import { Clock, Context, Duration, Effect, Layer, Option, Ref, Schema } from "effect"
import type { Page, PageRequest } from "../../domain/Page.js"
import { Cache } from "../cache/Cache.js"
import { type ClusterNode, Membership } from "../cluster/Membership.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Health } from "../health/Health.js"
import { readPage } from "../registry/Keyset.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { type RequestFigures, RequestStats } from "./RequestStats.js"

/** A check answers within this or fails as timed out. */
const CHECK_TIMEOUT = Duration.seconds(2)
/** A peer's snapshot arrives within this or the peer is named unreachable. */
const PEER_TIMEOUT = Duration.seconds(3)

/** The most rows the per-node listing reads of each kind (homed namespaces, app ports). */
const NODE_LISTING_MAX_ROWS = 10_000

/** A peer's snapshot is relayed as it came; only what identifies it is checked. */
const PeerSnapshotAnswer = Schema.parseJson(
  Schema.Struct({ node: Schema.String, status: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
)
const decodePeerSnapshot = Schema.decodeUnknownOption(PeerSnapshotAnswer)

export interface CheckResult {
  readonly ok: boolean
  readonly latency_ms: number
  readonly error?: string | undefined
}

export interface OperatorHealthReport {
  readonly status: "ok" | "degraded"
  readonly node: string
  readonly version: string
  readonly uptime_seconds: number
  readonly registry_engine: string
  /** undefined when the registry could not be read. */
  readonly namespaces: number | undefined
  readonly checks: Readonly<Record<string, CheckResult>>
}

/** A namespace of the registry this gateway serves (every node serves every namespace). */
export interface HostedNamespace {
  readonly name: string
  readonly owner: string | undefined
  /** Unix milliseconds. */
  readonly createdAt: number
}

/** A deployed app's port on this node: its deployment record's, homed here. */
export interface AppPort {
  readonly port: number
  readonly namespace: string
  readonly deployment: string
  readonly deploymentId: string
  readonly status: string
}

export interface NodePorts {
  /** The gateway's own listening socket; undefined until it listens. */
  readonly gateway: { readonly host: string; readonly port: number } | undefined
  /** Where this node's app ports are drawn from (PORTICO_APP_PORTS). */
  readonly appRange: { readonly first: number; readonly last: number }
  /** undefined when the registry could not be read. */
  readonly apps: ReadonlyArray<AppPort> | undefined
}

/** What one node of the cluster holds: the namespaces with something homed there, and its app ports. */
export interface NodeHolding {
  readonly node: string
  /** As `/v1/network/peers` says; `unregistered` also for a home node the membership does not know. */
  readonly status: ClusterNode["status"]
  readonly internalUrl: string
  readonly self: boolean
  /** Namespaces with a node-local database or a deployment homed on the node, by name. */
  readonly namespaces: ReadonlyArray<string>
  /** The app ports of the deployment records homed on the node, by port. */
  readonly apps: ReadonlyArray<AppPort>
}

/** The health report with what the node holds: a page of its namespaces, and its ports. */
export interface OperatorHealthDetail extends OperatorHealthReport {
  /** undefined when the registry could not be read. */
  readonly hosted: Page<HostedNamespace> | undefined
  readonly ports: NodePorts
  /** Every node of the cluster with what it holds; undefined when the registry could not be read. */
  readonly nodes: ReadonlyArray<NodeHolding> | undefined
}

export interface TelemetrySnapshot extends OperatorHealthReport {
  readonly at: number
  readonly memory_rss_bytes: number
  readonly heap_used_bytes: number
  /** The API's requests this node answered, and their latency (RequestStats.ts). */
  readonly requests: RequestFigures
}

/** A peer's own snapshot, or why it is missing. */
export type PeerSnapshot =
  | ({ readonly reachable: true; readonly node: string } & Readonly<Record<string, unknown>>)
  | { readonly reachable: false; readonly node: string; readonly error: string }

/** This node's snapshot (`namespaces` null when unread, as the wire has it) and its peers'. */
export interface ClusterSnapshot extends Omit<TelemetrySnapshot, "namespaces"> {
  readonly namespaces: number | null
  readonly peers: ReadonlyArray<PeerSnapshot>
}

export interface OperatorHealthService {
  readonly report: Effect.Effect<OperatorHealthReport>
  /** The report with one page of the hosted namespaces (by name) and the ports this node holds. */
  readonly detail: (page: PageRequest) => Effect.Effect<OperatorHealthDetail>
  /** The gateway listens on `port` (known only once it does: the setting may be 0). */
  readonly listening: (port: number) => Effect.Effect<void>
  /** This node's snapshot (what a peer answers); fails when no check answered. */
  readonly here: Effect.Effect<TelemetrySnapshot, Error>
  /** Node `node`'s snapshot as it answered (this node's own when it is this one), or why it is missing. */
  readonly snapshotOf: (node: string) => Effect.Effect<PeerSnapshot>
  /** The cluster's (the stream's); fails when nothing could be assembled (`event: error`). */
  readonly snapshot: Effect.Effect<ClusterSnapshot, Error>
}

const detailOf = (e: unknown): string =>
  typeof e === "object" && e !== null && "detail" in e && typeof e.detail === "string"
    ? e.detail
    : e instanceof Error
      ? e.message
      : String(e)

export class OperatorHealth extends Context.Tag("portico/OperatorHealth")<OperatorHealth, OperatorHealthService>() {
  static readonly Live = Layer.effect(
    OperatorHealth,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const cache = yield* Cache
      const health = yield* Health
      const settings = yield* PorticoConfig
      const coordination = yield* Coordination
      const membership = yield* Membership
      const requests = yield* RequestStats
      const appRange = settings.deployments.appPorts
      const gatewayPort = yield* Ref.make<number | undefined>(undefined)

      const timed = <A, E>(check: Effect.Effect<A, E>): Effect.Effect<CheckResult & { readonly value?: A }> =>
        Effect.gen(function* () {
          const started = yield* Clock.currentTimeMillis
          const outcome = yield* Effect.either(Effect.timeoutFail(check, { duration: CHECK_TIMEOUT, onTimeout: () => new Error("timed out after 2 s") }))
          const latency_ms = (yield* Clock.currentTimeMillis) - started
          return outcome._tag === "Right" ? { ok: true, latency_ms, value: outcome.right } : { ok: false, latency_ms, error: detailOf(outcome.left) }
        })

      const report = Effect.gen(function* () {
        const [registry, cached] = yield* Effect.all(
          [timed(Effect.map(store.query({ sql: "SELECT COUNT(*) AS n FROM namespaces" }), (rows) => Number(rows[0]?.n ?? 0))), timed(cache.ping)],
          { concurrency: "unbounded" }
        )
        const now = yield* Clock.currentTimeMillis
        const { value: namespaces, ...registryCheck } = registry
        const { value: _, ...cacheCheck } = cached
        return {
          status: registry.ok && cached.ok ? ("ok" as const) : ("degraded" as const),
          node: settings.nodeId,
          version: health.version,
          uptime_seconds: Math.floor((now - health.startedAt) / 1000),
          registry_engine: store.engine,
          namespaces,
          checks: { registry: registryCheck, cache: cacheCheck }
        }
      })

      /** A registry read for the detail, bounded as a check is; undefined when it did not answer. */
      const optional = <A, E>(read: Effect.Effect<A, E>): Effect.Effect<A | undefined> =>
        Effect.orElseSucceed(Effect.timeout(read, CHECK_TIMEOUT), () => undefined)

      const hosted = (page: PageRequest) =>
        readPage(
          store,
          { select: "SELECT name, owner, created_at FROM namespaces", where: ["name IS NOT NULL"], params: [], order: ["name"], direction: "asc" },
          page,
          (row): HostedNamespace => ({
            name: String(row.name),
            owner: row.owner === null || row.owner === undefined ? undefined : String(row.owner),
            createdAt: Number(row.created_at)
          })
        )

      const appOf = (row: Readonly<Record<string, unknown>>): AppPort => ({
        port: Number(row.port),
        namespace: String(row.namespace),
        deployment: String(row.name),
        deploymentId: String(row.id),
        status: String(row.status)
      })

      // Ports are unique per node (homes' and replicas' together, the `app_ports` view), so the rows
      // are bounded by the port space whatever the registry holds; the range bounds them in practice.
      // A replica's row carries its own status (docs/deployments.md, "Replicas").
      const appPorts = Effect.map(
        store.query({
          sql: `SELECT port, namespace, name, id, status FROM deployments WHERE home_node = ? AND port IS NOT NULL
                UNION ALL SELECT r.port, d.namespace, d.name, d.id, r.status FROM deployment_replicas r JOIN deployments d ON d.id = r.deployment_id
                WHERE r.node_id = ? AND r.port IS NOT NULL ORDER BY port`,
          params: [settings.nodeId, settings.nodeId]
        }),
        (rows) => rows.map(appOf)
      )

      /** Every node of the membership, and every home node it does not know, with what is homed there. */
      const holdings = Effect.gen(function* () {
        const [nodes, homed, ports] = yield* Effect.all(
          [
            membership.nodes,
            store.query({
              sql: `SELECT home_node, namespace FROM local_databases UNION SELECT home_node, namespace FROM deployments
                    UNION SELECT r.node_id, d.namespace FROM deployment_replicas r JOIN deployments d ON d.id = r.deployment_id
                    ORDER BY home_node, namespace LIMIT ?`,
              params: [NODE_LISTING_MAX_ROWS]
            }),
            store.query({
              sql: `SELECT home_node, port, namespace, name, id, status FROM deployments WHERE port IS NOT NULL
                    UNION ALL SELECT r.node_id, r.port, d.namespace, d.name, d.id, r.status FROM deployment_replicas r JOIN deployments d ON d.id = r.deployment_id
                    WHERE r.port IS NOT NULL ORDER BY home_node, port LIMIT ?`,
              params: [NODE_LISTING_MAX_ROWS]
            })
          ],
          { concurrency: "unbounded" }
        )
        const known = new Set(nodes.map((n) => n.id))
        const homes = [...new Set([...homed, ...ports].map((row) => String(row.home_node)))].filter((id) => !known.has(id)).sort()
        const listed: ReadonlyArray<Pick<NodeHolding, "node" | "status" | "internalUrl" | "self">> = [
          ...nodes.map((n) => ({ node: n.id, status: n.status, internalUrl: n.internalUrl, self: n.self })),
          ...homes.map((id) => ({ node: id, status: "unregistered" as const, internalUrl: "", self: id === settings.nodeId }))
        ]
        return listed.map(
          (n): NodeHolding => ({
            ...n,
            namespaces: homed.filter((row) => row.home_node === n.node).map((row) => String(row.namespace)),
            apps: ports.filter((row) => row.home_node === n.node).map(appOf)
          })
        )
      })

      const detail = (page: PageRequest) =>
        Effect.gen(function* () {
          const [r, namespaces, apps, port, nodes] = yield* Effect.all(
            [report, optional(hosted(page)), optional(appPorts), Ref.get(gatewayPort), optional(holdings)],
            { concurrency: "unbounded" }
          )
          return {
            ...r,
            hosted: namespaces,
            ports: { gateway: port === undefined ? undefined : { host: settings.host, port }, appRange, apps },
            nodes
          }
        })

      const here = Effect.gen(function* () {
        const r = yield* report
        // nothing of the node could be read: no snapshot to send
        if (!r.checks["registry"]!.ok && !r.checks["cache"]!.ok) return yield* Effect.fail(new Error("no check answered"))
        const memory = process.memoryUsage()
        return { ...r, at: yield* Clock.currentTimeMillis, memory_rss_bytes: memory.rss, heap_used_bytes: memory.heapUsed, requests: yield* Effect.sync(requests.read) }
      })

      const peer = (node: string): Effect.Effect<PeerSnapshot> =>
        internalClient(coordination).call(node, "telemetry", {}, PEER_TIMEOUT).pipe(
          Effect.map((answer): PeerSnapshot => {
            if (answer.status !== 200) return { node, reachable: false, error: `answered ${answer.status}` }
            return Option.match(decodePeerSnapshot(answer.text), {
              onNone: (): PeerSnapshot => ({ node, reachable: false, error: "answered no snapshot" }),
              // a peer answers for the node it is: another id is a wrong PORTICO_PEERS entry
              onSome: (s): PeerSnapshot => (s.node === node ? { ...s, node, reachable: true } : { node, reachable: false, error: `answered as ${s.node}` })
            })
          }),
          Effect.catchAll((e) => Effect.succeed<PeerSnapshot>({ node, reachable: false, error: e.detail }))
        )

      return {
        report,
        detail,
        listening: (port) => Ref.set(gatewayPort, port),
        here,
        snapshotOf: (node) =>
          node === settings.nodeId
            ? here.pipe(
                Effect.map((s): PeerSnapshot => ({ ...s, namespaces: s.namespaces ?? null, reachable: true })),
                Effect.catchAll((e) => Effect.succeed<PeerSnapshot>({ node, reachable: false, error: e.message }))
              )
            : peer(node),
        snapshot: Effect.map(
          // every live node of the membership
          Effect.all([here, Effect.flatMap(membership.peers, (peers) => Effect.forEach(peers, (p) => peer(p.id), { concurrency: 8 }))], {
            concurrency: "unbounded"
          }),
          ([local, peers]) => ({ ...local, namespaces: local.namespaces ?? null, peers })
        )
      }
    })
  ).pipe(Layer.provideMerge(RequestStats.Live))

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    OperatorHealth.Live.pipe(
      Layer.provide(Layer.mergeAll(Cache.Test, Coordination.Test, Health.Test, Membership.Test, PorticoConfig.Test, SqliteRegistryStore.Test))
    )
  )
}
