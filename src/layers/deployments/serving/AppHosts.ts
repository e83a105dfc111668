/**
 * Which requests are a deployed app's (spec §2.7, §4.8 "Serving"): the `Host` header, lowercased
 * and without its port, looked up in a table of every deployment's domain and every verified
 * custom domain. The table is read whole from the registry at start, every few seconds after, and
 * at once when this gateway changes a deployment (`refresh`), so answering a request never waits
 * for the registry and a flood of made-up hosts costs one map lookup each, never a query.
 *
 * The API keeps every other host: the base domain itself, the platform's own labels under it
 * (`api.`, the reserved subdomains, the namespace gateways `ns-<namespace>.`), IP literals,
 * `localhost` and any name outside the base domain that is not a verified custom domain. Platform
 * hosts are the API's even if a record named one (the deployment rules refuse such a domain;
 * this does not rely on it). A name under the base domain that is no deployment's is a 404.
 */
import { Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import { reservedSubdomains } from "../../../domain/DeploymentRules.js"
import { PorticoConfig } from "../../config/PorticoConfig.js"
import { RegistryStore, type RegistryStoreService, StoreError } from "../../registry/RegistryStore.js"
import { DeploymentStatus, DeploymentType } from "../DeploymentRecord.js"
import { SqliteRegistryStore } from "../../registry/SqliteRegistryStore.js"

/** What serving needs of a deployment: no environment, limits or grants. */
const AppRow = Schema.Struct({
  host: Schema.String,
  id: Schema.String,
  namespace: Schema.String,
  name: Schema.String,
  type: DeploymentType,
  status: DeploymentStatus,
  home_node: Schema.String,
  port: Schema.NullOr(Schema.Number),
  artifact: Schema.String
})
type AppRow = typeof AppRow.Type

export interface AppTarget {
  readonly id: string
  readonly namespace: string
  readonly name: string
  readonly type: DeploymentType
  readonly status: DeploymentStatus
  readonly homeNode: string
  readonly port: number | undefined
  /** Static sites: the manifest's CID (SiteManifest.ts). */
  readonly artifact: string
  /** Dynamic apps: the nodes besides the home running it now (active replica rows), each with its port there. */
  readonly replicas: ReadonlyArray<{ readonly node: string; readonly port: number }>
}

export type HostRoute =
  | { readonly kind: "api" }
  | { readonly kind: "app"; readonly app: AppTarget }
  /** Under the base domain, but no deployment's: 404. */
  | { readonly kind: "unknown"; readonly host: string }

export interface AppHostsService {
  /** Where a request with this `Host` header goes; synchronous, from the table. */
  readonly route: (hostHeader: string | undefined) => HostRoute
  /** Reads the table again now: after this gateway created, changed or deleted a deployment. */
  readonly refresh: Effect.Effect<void, StoreError>
}

/** How often the table is read again, so other gateways' deploys and deletes arrive. */
export const HOST_TABLE_REFRESH = Duration.seconds(5)

/**
 * Every host once: deployments' own domains are unique (their index), so are verified custom
 * domains (`deployment_domains_verified`, over verified rows only: pending claims never reach
 * this), and a custom domain that is some deployment's own domain is left out (the store refuses
 * to add or verify one; this does not rely on it).
 */
const TABLE_SQL = `SELECT d.domain AS host, d.id, d.namespace, d.name, d.type, d.status, d.home_node, d.port, d.artifact
    FROM deployments d
  UNION ALL
  SELECT c.domain AS host, d.id, d.namespace, d.name, d.type, d.status, d.home_node, d.port, d.artifact
    FROM deployment_domains c JOIN deployments d ON d.id = c.deployment_id
    WHERE c.verified_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM deployments o WHERE o.domain = c.domain)`

/** The host a `Host` header names: lowercase, no port, no trailing dot; undefined when absent or empty. */
export const hostOf = (header: string | undefined): string | undefined => {
  if (header === undefined || header === "") return undefined
  let host = header.trim().toLowerCase()
  if (host.startsWith("[")) {
    // an IPv6 literal, `[::1]:8080`
    const end = host.indexOf("]")
    return end < 0 ? undefined : host.slice(0, end + 1)
  }
  const colon = host.indexOf(":")
  if (colon >= 0) host = host.slice(0, colon)
  if (host.endsWith(".")) host = host.slice(0, -1)
  return host === "" ? undefined : host
}

/** The API's own hosts under the base domain: the domain, `api.`, reserved labels, `ns-*`. */
export const isPlatformHost = (host: string, baseDomain: string): boolean => {
  if (host === baseDomain) return true
  if (!host.endsWith("." + baseDomain)) return false
  const label = host.slice(0, host.length - baseDomain.length - 1)
  return label === "api" || reservedSubdomains.has(label) || label.startsWith("ns-")
}

/** Active replicas with their ports (migration 25): where else an app answers. */
const REPLICAS_SQL = "SELECT deployment_id, node_id, port FROM deployment_replicas WHERE status = 'active' AND port IS NOT NULL ORDER BY node_id"
const ReplicaRow = Schema.Struct({ deployment_id: Schema.String, node_id: Schema.String, port: Schema.Number })

const toTarget = (row: AppRow, replicas: ReadonlyArray<{ readonly node: string; readonly port: number }>): AppTarget => ({
  id: row.id,
  namespace: row.namespace,
  name: row.name,
  type: row.type,
  status: row.status,
  homeNode: row.home_node,
  port: row.port ?? undefined,
  artifact: row.artifact,
  replicas
})

const API: HostRoute = { kind: "api" }

/** `Host` headers whose routes are kept between table reads. */
const ROUTES_KEPT = 4096

/** The routing over a table, without the registry: the rule on its own. */
export const routeIn = (table: ReadonlyMap<string, HostRoute>, baseDomain: string, hostHeader: string | undefined): HostRoute => {
  const host = hostOf(hostHeader)
  if (host === undefined || isPlatformHost(host, baseDomain)) return API
  const found = table.get(host)
  if (found !== undefined) return found
  return host.endsWith("." + baseDomain) ? { kind: "unknown", host } : API
}

const readTable = (store: RegistryStoreService) =>
  Effect.gen(function* () {
    const rows = yield* store.query({ sql: TABLE_SQL, params: [] })
    const decoded = yield* Schema.decodeUnknown(Schema.Array(AppRow))(rows).pipe(
      Effect.mapError((e) => new StoreError({ reason: "statement", detail: `a deployment row is not of its shape: ${e.message}` }))
    )
    const replicaRows = yield* Schema.decodeUnknown(Schema.Array(ReplicaRow))(yield* store.query({ sql: REPLICAS_SQL, params: [] })).pipe(
      Effect.mapError((e) => new StoreError({ reason: "statement", detail: `a replica row is not of its shape: ${e.message}` }))
    )
    const replicas = new Map<string, Array<{ readonly node: string; readonly port: number }>>()
    for (const r of replicaRows) {
      const held = replicas.get(r.deployment_id) ?? []
      held.push({ node: r.node_id, port: r.port })
      replicas.set(r.deployment_id, held)
    }
    const table = new Map<string, HostRoute>()
    for (const row of decoded) table.set(row.host.toLowerCase(), { kind: "app", app: toTarget(row, replicas.get(row.id) ?? []) })
    return table
  })

export const makeAppHosts = (store: RegistryStoreService, baseDomain: string) =>
  Effect.gen(function* () {
    const base = baseDomain.toLowerCase()
    let table: ReadonlyMap<string, HostRoute> = new Map()
    /**
     * Each `Host` header's route, as written, for as long as the table it was read from: every
     * request is routed (an app connection's every request too), and a kept-alive client sends one
     * header again and again. At most `ROUTES_KEPT` headers, so random hosts cannot grow it.
     */
    let routes = new Map<string | undefined, HostRoute>()
    const refresh = Effect.map(readTable(store), (next) => {
      table = next
      routes = new Map()
    })
    const route = (header: string | undefined): HostRoute => {
      let found = routes.get(header)
      if (found === undefined) {
        found = routeIn(table, base, header)
        if (routes.size < ROUTES_KEPT) routes.set(header, found)
      }
      return found
    }
    const service: AppHostsService = { route, refresh }
    return { service, refresh }
  })

export class AppHosts extends Context.Tag("portico/AppHosts")<AppHosts, AppHostsService>() {
  static readonly Live = Layer.scoped(
    AppHosts,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const { service, refresh } = yield* makeAppHosts(yield* RegistryStore, config.baseDomain)
      // a registry that does not answer at start leaves the table empty until it does: the API
      // still starts, and apps are served from the first good read
      const logged = refresh.pipe(Effect.catchAll((e) => Effect.logWarning(`deployment host table not read: ${e.detail}`)))
      yield* logged
      yield* logged.pipe(Effect.schedule(Schedule.spaced(HOST_TABLE_REFRESH)), Effect.forkScoped)
      return service
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => AppHosts.Live.pipe(Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test))))
}
