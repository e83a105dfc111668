/**
 * This gateway's row in the cluster's membership (Membership.ts, docs/cluster.md "Membership"),
 * kept by a running gateway only (the CLI's commands on the same data directory write none).
 *
 * The first write binds the node id to this node's key (NodeKey.ts): a row of the same id under
 * another key is never overwritten. When the registry answers so at start, the gateway does not
 * start; when it answers so later (the row was taken while this node was away), the heartbeat
 * stops and the log says why. Then every `PORTICO_NODE_HEARTBEAT_MS` the row's `last_seen` is
 * refreshed with the registry's clock, and its internal URL once the gateway listens (a beat before
 * that keeps the URL the row holds). A clean
 * stop writes `left_at`, so the others know at once that its memory went with it.
 */
import { Context, Data, Effect, Fiber, Layer, Schedule } from "effect"
import { keyMayHold } from "../../domain/NodeStamp.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { VERSION } from "../health/Health.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { Membership, REGISTRY_NOW } from "./Membership.js"

export class NodeIdTaken extends Data.TaggedError("NodeIdTaken")<{ readonly nodeId: string }> {
  override get message() {
    return `node id ${this.nodeId} is registered with another node's key: give this node another PORTICO_NODE_ID, or start it on the data directory that holds its node.key`
  }
}

/** The node left the cluster: its key is not accepted again (docs/cluster.md, "Leaving"). */
export class NodeRetired extends Data.TaggedError("NodeRetired")<{ readonly nodeId: string }> {
  override get message() {
    return `node ${this.nodeId} left the cluster (POST /v1/node/leave) and its key is retired: start a new node on an empty data directory with \`portico serve --join <invite>\``
  }
}

export interface NodeHeartbeatService {
  /** The gateway listens on `port`: its internal URL is written now (PORTICO_INTERNAL_URL wins). */
  readonly listening: (port: number) => Effect.Effect<void>
  /** Whether an operator asked this node to drain, as of its last heartbeat (or its own command). */
  readonly draining: Effect.Effect<boolean>
  /** This node's drain as an operator set it through this node: known at once, not at the next beat. */
  readonly setDraining: (draining: boolean) => Effect.Effect<void>
}

/** `http://<host>:<port>` when the gateway listens on one address; empty (reachable only as a seed) on a wildcard. */
export const defaultInternalUrl = (host: string, port: number): string => {
  if (host === "0.0.0.0" || host === "::" || host === "") return ""
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`
}

export class NodeHeartbeat extends Context.Tag("portico/NodeHeartbeat")<NodeHeartbeat, NodeHeartbeatService>() {
  static readonly Live = Layer.scoped(
    NodeHeartbeat,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const { self } = yield* Membership
      const settings = config.membership
      let internalUrl = settings.internalUrl ?? ""
      // the default URL is known once the gateway listens; until then a beat keeps the URL the
      // row holds (the same one, for a node restarted on its address): blanked, a node restarting
      // read as active yet unreachable to every other node's cache for a moment
      let urlKnown = settings.internalUrl !== undefined
      let taken = false
      let draining = false
      let stopping = false

      /** Writes this node's row: false when the id is another key's. */
      const beat = Effect.suspend(() =>
        store.exec({
          sql: `INSERT INTO cluster_nodes (id, public_key, internal_url, public_url, version, joined_at, last_seen)
                VALUES (?, ?, ?, ?, ?, ${REGISTRY_NOW}, ${REGISTRY_NOW})
                ON CONFLICT (id) DO UPDATE SET internal_url = CASE WHEN ? THEN excluded.internal_url ELSE cluster_nodes.internal_url END, public_url = excluded.public_url, version = excluded.version, last_seen = excluded.last_seen, left_at = NULL
                WHERE cluster_nodes.public_key = excluded.public_key AND cluster_nodes.retired_at IS NULL`,
          params: [self.id, self.publicKey, internalUrl, config.deployments.publicUrl ?? "", VERSION, urlKnown ? 1 : 0]
        })
      ).pipe(
        Effect.map((r) => r.rowsAffected === 1),
        Effect.tap((mine) =>
          mine
            ? Effect.map(store.query({ sql: "SELECT draining_at FROM cluster_nodes WHERE id = ?", params: [self.id] }), ([row]) => {
                draining = row !== undefined && row.draining_at !== null
              })
            : Effect.void
        )
      )

      const heartbeat = Effect.suspend(() => (taken ? Effect.succeed(true) : beat)).pipe(
        Effect.flatMap((mine) => {
          if (mine || taken) return Effect.void
          taken = true
          return store.query({ sql: "SELECT retired_at FROM cluster_nodes WHERE id = ? AND public_key = ?", params: [self.id, self.publicKey] }).pipe(
            Effect.map(([row]) => (row !== undefined && row.retired_at !== null ? new NodeRetired({ nodeId: self.id }) : new NodeIdTaken({ nodeId: self.id }))),
            Effect.flatMap((why) => Effect.logError(why.message))
          )
        }),
        Effect.catchAll((e) => Effect.logWarning(`the node heartbeat was not written: ${e.detail}`)),
        // once the clean stop began, no beat: it would clear the stop's `left_at`
        (beatOnce) => Effect.suspend(() => (stopping ? Effect.void : beatOnce))
      )

      // an id derived from another key is that key's, whatever the registry holds yet
      if (!keyMayHold(self.id, self.publicKey)) return yield* Effect.fail(new NodeIdTaken({ nodeId: self.id }))
      // the claim; a registry that does not answer now is tried again by the heartbeat
      const claimed = yield* Effect.either(beat)
      if (claimed._tag === "Right" && !claimed.right) {
        const [row] = yield* Effect.orElseSucceed(store.query({ sql: "SELECT retired_at FROM cluster_nodes WHERE id = ? AND public_key = ?", params: [self.id, self.publicKey] }), () => [])
        return yield* Effect.fail(row !== undefined && row.retired_at !== null ? new NodeRetired({ nodeId: self.id }) : new NodeIdTaken({ nodeId: self.id }))
      }
      const beating = yield* Effect.forkScoped(Effect.repeat(heartbeat, Schedule.spaced(`${settings.heartbeatMs} millis`)))
      // a clean stop: the row says so at once. Finalizers run last-added first, so the heartbeat
      // fiber is stopped here, and awaited, before the write: a beat landing after it would clear
      // `left_at` again
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => void (stopping = true)).pipe(
          Effect.zipRight(Fiber.interrupt(beating)),
          Effect.zipRight(
            store
              .exec({ sql: `UPDATE cluster_nodes SET left_at = ${REGISTRY_NOW} WHERE id = ? AND public_key = ?`, params: [self.id, self.publicKey] })
              .pipe(Effect.timeout("2 seconds"), Effect.ignore)
          )
        )
      )

      return NodeHeartbeat.of({
        draining: Effect.sync(() => draining),
        setDraining: (value) => Effect.sync(() => void (draining = value)),
        listening: (port) =>
          Effect.suspend(() => {
            if (settings.internalUrl === undefined) internalUrl = defaultInternalUrl(config.host, port)
            urlKnown = true
            return heartbeat
          })
      })
    })
  )

  /** Over a membership and an embedded registry of their own. */
  static readonly Test = Layer.suspend(() =>
    NodeHeartbeat.Live.pipe(Layer.provide(Membership.Live), Layer.provide(Layer.mergeAll(SqliteRegistryStore.Test, PorticoConfig.Test)))
  )
}
