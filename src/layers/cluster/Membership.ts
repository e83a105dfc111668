/**
 * The cluster's membership (docs/cluster.md, "Membership"). Every running gateway keeps a row of
 * its own in the registry's `cluster_nodes` (id, public key, internal URL, version), refreshed by
 * its heartbeat (NodeHeartbeat.ts). `last_seen` is written, and each row's age read, with the
 * registry's clock, never a gateway's, so gateways on different machines compare nothing of their
 * own. A node is active while its heartbeat is within `PORTICO_NODE_TTL_MS` of the freshest one.
 *
 * `PORTICO_PEERS` is a seed list: a seed is a peer until the registry shows its row stale, and its
 * URL is the one given there. A node connected by an operator (`/v1/network/connect`,
 * src/layers/network/Network.ts) is held as a seed by this node (kept in its data directory, ConnectedPeers.ts) until it is disconnected,
 * its URL the one dialled, winning over its seed and registered ones. What fans out (evictions, cache drops,
 * telemetry, function sockets, the platform relay) asks `peers` for the live set; the internal
 * client finds any node through `urlOf`.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { decodeRows } from "../registry/RegistryRows.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { loadNodeKey } from "../config/NodeKey.js"
import { connectedPeers } from "./ConnectedPeers.js"

/**
 * Now in Unix milliseconds by the registry's clock: SQLite's, or the rqlite node's that takes the
 * statement (rqlite rewrites `'now'` before the statement enters its log, so every voter stores
 * the same value).
 */
export const REGISTRY_NOW = "CAST(unixepoch('now', 'subsec') * 1000 AS INTEGER)"

const NodeRow = Schema.Struct({
  id: Schema.String,
  public_key: Schema.String,
  internal_url: Schema.String,
  public_url: Schema.String,
  version: Schema.String,
  joined_at: Schema.Number,
  last_seen: Schema.Number,
  left_at: Schema.NullOr(Schema.Number),
  retired_at: Schema.NullOr(Schema.Number),
  draining_at: Schema.NullOr(Schema.Number),
  age_ms: Schema.Number,
  lag_ms: Schema.Number
})

/** A node as the network routes show it. */
export interface ClusterNode {
  readonly id: string
  /**
   * `stopped`: it stopped cleanly (its memory went with it); `inactive`: silent past the TTL without
   * a clean stop (dead, hung or cut off: it may come back with what it held); `unregistered`: a seed
   * with no row (a node of a release before membership, or not started yet); `retired`: it left the
   * cluster (`POST /v1/node/leave`) and its key is no longer accepted.
   */
  readonly status: "active" | "inactive" | "stopped" | "unregistered" | "retired"
  /** An operator asked it to drain (`POST /v1/node/command`). */
  readonly draining: boolean
  readonly internalUrl: string
  /** Where its clients reach it (its `PORTICO_PUBLIC_URL`); empty when it set none. */
  readonly publicUrl: string
  readonly version: string | undefined
  readonly joinedAt: number | undefined
  readonly lastSeen: number | undefined
  /** How long since its last heartbeat, by the registry's clock. */
  readonly ageMs: number | undefined
  readonly self: boolean
  readonly seed: boolean
  /** Connected by `/v1/network/connect` on this node: its URL is the one dialled there. */
  readonly connected: boolean
}

/** A peer to call: its id and base URL. */
export interface Peer {
  readonly id: string
  readonly url: string
}

export interface MembershipService {
  /** This node: its id and its key's public half. */
  readonly self: { readonly id: string; readonly publicKey: string }
  /** Every registered node and every seed, by id. */
  readonly nodes: Effect.Effect<ReadonlyArray<ClusterNode>, StoreError>
  /** The live peers (not this node): active registered nodes and seeds not known stale. */
  readonly peers: Effect.Effect<ReadonlyArray<Peer>>
  /**
   * Every other node that may hold something of this cluster, live or not (registered with an
   * internal URL, and the seeds): what must confirm a removal (evictions), where a dead node's
   * silence is an unconfirmed part, not a done one.
   */
  readonly known: Effect.Effect<ReadonlyArray<Peer>>
  /**
   * Every other node that has not stopped cleanly (live, or silent without a clean stop): what
   * must drop state it may hold in memory (a deleted namespace's embedded cache). A node that
   * stopped cleanly lost its memory; one that is only silent may come back with it.
   */
  readonly unstopped: Effect.Effect<ReadonlyArray<Peer>>
  /**
   * Where node `id` answers: the URL it was connected at, else its seed URL, else its registered
   * one; undefined when it has none.
   */
  readonly urlOf: (id: string) => Effect.Effect<string | undefined>
  /**
   * `inactive` or `stopped` when the registry says node `id` is down (read through the same cache
   * as `urlOf`); undefined when it is live, unknown, or connected by an operator. A call to a node
   * known down fails at once rather than waiting out its deadline.
   */
  readonly downOf: (id: string) => Effect.Effect<"inactive" | "stopped" | undefined>
  /**
   * `urlOf` and `downOf` together from what this node holds now, for a caller outside the Effect
   * runtime (a forwarded query in the fast lane); undefined when the registry must be read first.
   */
  readonly addressNow: (id: string) => { readonly url: string | undefined; readonly down: "inactive" | "stopped" | undefined } | undefined
  /** Holds node `id` at `url` as a peer of this node, in memory, until `disconnect`. */
  readonly connect: (id: string, url: string) => Effect.Effect<void>
  /** Forgets a connected node: whether it was connected. */
  readonly disconnect: (id: string) => Effect.Effect<boolean>
}

/** How long `peers` and `urlOf` keep what they read, at most. */
const READ_CACHE_MS = 2_000

export class Membership extends Context.Tag("portico/Membership")<Membership, MembershipService>() {
  static readonly Live = Layer.effect(
    Membership,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const ttl = config.membership.nodeTtlMs
      const self = { id: config.nodeId, publicKey: loadNodeKey(config.dataDir).publicKey }
      /** Nodes connected by an operator on this node (`/v1/network/connect`): id → the URL dialled. */
      const connected = connectedPeers(config.dataDir)
      /** The seeds and the connected nodes, by id: a connected node's URL wins. */
      const seedUrls = (): ReadonlyMap<string, string> => new Map([...config.peers, ...connected.entries()].filter(([id]) => id !== self.id))
      const seedList = (): ReadonlyArray<Peer> => [...seedUrls()].map(([id, url]) => ({ id, url }))

      const readRows = Effect.flatMap(
        store.query({
          sql: `SELECT id, public_key, internal_url, public_url, version, joined_at, last_seen, left_at, retired_at, draining_at, ${REGISTRY_NOW} - last_seen AS age_ms,
                (SELECT MAX(last_seen) FROM cluster_nodes) - last_seen AS lag_ms FROM cluster_nodes ORDER BY id`
        }),
        decodeRows("cluster node", NodeRow)
      )
      /** The rows of nodes still in the cluster: a retired node is called by nothing. */
      const readMembers = Effect.map(readRows, (rows) => rows.filter((r) => r.retired_at === null))
      let cached: { readonly at: number; readonly rows: ReadonlyArray<typeof NodeRow.Type> } | undefined
      /** The rows, read again when older than READ_CACHE_MS; none when the registry is away. */
      const recentRows = Effect.suspend(() =>
        cached !== undefined && Date.now() - cached.at < READ_CACHE_MS
          ? Effect.succeed(cached.rows)
          : readMembers.pipe(
              Effect.tap((rows) => Effect.sync(() => (cached = { at: Date.now(), rows }))),
              Effect.orElseSucceed(() => cached?.rows ?? [])
            )
      )

      /**
       * A row is stale when its heartbeat is more than the TTL behind the freshest one the registry
       * holds, not behind the registry's clock: while the registry elects a leader no heartbeat
       * lands, and once it has one every row is equally old. Measured against the clock, every
       * other node would read inactive until its next heartbeat, and a vault pull or a forward made
       * in that moment would find no one to call.
       */
      const statusOf = (row: typeof NodeRow.Type): "active" | "inactive" | "stopped" | "retired" =>
        row.retired_at !== null ? "retired" : row.left_at !== null ? "stopped" : row.lag_ms <= ttl ? "active" : "inactive"

      // a fresh read is the one `addressNow`, `urlOf` and `downOf` use from then on, so a caller
      // that found a node active here does not find it down in an older read
      const nodes = Effect.map(readRows, (rows): ReadonlyArray<ClusterNode> => {
        cached = { at: Date.now(), rows: rows.filter((r) => r.retired_at === null) }
        const seedUrl = seedUrls()
        const registered = rows.map(
          (row): ClusterNode => ({
            id: row.id,
            status: statusOf(row),
            internalUrl: seedUrl.get(row.id) ?? row.internal_url,
            publicUrl: row.public_url,
            version: row.version,
            joinedAt: row.joined_at,
            lastSeen: row.last_seen,
            ageMs: Math.max(0, row.age_ms),
            self: row.id === self.id,
            seed: config.peers.has(row.id),
            draining: row.draining_at !== null,
            connected: connected.has(row.id)
          })
        )
        const unregistered = seedList()
          .filter((s) => !rows.some((r) => r.id === s.id))
          .map(
            (s): ClusterNode => ({
              id: s.id,
              status: "unregistered",
              internalUrl: s.url,
              publicUrl: "",
              version: undefined,
              joinedAt: undefined,
              lastSeen: undefined,
              ageMs: undefined,
              self: false,
              seed: config.peers.has(s.id),
              draining: false,
              connected: connected.has(s.id)
            })
          )
        return [...registered, ...unregistered].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      })

      const peers = Effect.map(recentRows, (rows): ReadonlyArray<Peer> => {
        const byId = new Map(rows.map((r) => [r.id, r]))
        const seedUrl = seedUrls()
        // a seed is a peer until its row says it is stale; one with no row stays, as before membership
        const liveSeeds = seedList().filter((s) => {
          const row = byId.get(s.id)
          return row === undefined || statusOf(row) === "active"
        })
        const live = rows
          .filter((r) => r.id !== self.id && !seedUrl.has(r.id) && r.internal_url !== "" && statusOf(r) === "active")
          .map((r) => ({ id: r.id, url: r.internal_url }))
        return [...liveSeeds, ...live]
      })

      const known = Effect.map(recentRows, (rows): ReadonlyArray<Peer> => {
        const seedUrl = seedUrls()
        return [
          ...seedList(),
          ...rows.filter((r) => r.id !== self.id && !seedUrl.has(r.id) && r.internal_url !== "").map((r) => ({ id: r.id, url: r.internal_url }))
        ]
      })

      const unstopped = Effect.map(recentRows, (rows): ReadonlyArray<Peer> => {
        const byId = new Map(rows.map((r) => [r.id, r]))
        const seedUrl = seedUrls()
        return [
          ...seedList().filter((s) => byId.get(s.id)?.left_at == null),
          ...rows
            .filter((r) => r.id !== self.id && !seedUrl.has(r.id) && r.internal_url !== "" && r.left_at === null)
            .map((r) => ({ id: r.id, url: r.internal_url }))
        ]
      })

      const urlIn = (rows: ReadonlyArray<typeof NodeRow.Type>, id: string) => {
        const url = connected.get(id) ?? config.peers.get(id) ?? rows.find((r) => r.id === id)?.internal_url
        return url === undefined || url === "" ? undefined : url
      }
      const downIn = (rows: ReadonlyArray<typeof NodeRow.Type>, id: string) => {
        if (connected.has(id)) return undefined
        const row = rows.find((r) => r.id === id)
        const status = row === undefined ? undefined : statusOf(row)
        return status === "inactive" || status === "stopped" ? status : undefined
      }

      const urlOf = (id: string) => {
        const seed = connected.get(id) ?? config.peers.get(id)
        if (seed !== undefined) return Effect.succeed<string | undefined>(seed)
        return Effect.map(recentRows, (rows) => urlIn(rows, id))
      }

      const downOf = (id: string) => (connected.has(id) ? Effect.succeed(undefined) : Effect.map(recentRows, (rows) => downIn(rows, id)))

      const addressNow = (id: string) => {
        if (connected.has(id)) return { url: connected.get(id), down: undefined }
        if (cached === undefined || Date.now() - cached.at >= READ_CACHE_MS) return undefined
        return { url: urlIn(cached.rows, id), down: downIn(cached.rows, id) }
      }

      return Membership.of({
        self,
        nodes,
        peers,
        known,
        unstopped,
        urlOf,
        downOf,
        addressNow,
        connect: (id, url) => Effect.sync(() => connected.set(id, url)),
        disconnect: (id) => Effect.sync(() => connected.delete(id))
      })
    })
  )

  /** Over an embedded registry of its own and the test configuration. */
  static readonly Test = Layer.suspend(() => Membership.Live.pipe(Layer.provide(Layer.mergeAll(SqliteRegistryStore.Test, PorticoConfig.Test))))
}
