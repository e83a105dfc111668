/**
 * Node administration (docs/cluster.md, "Node administration"): a node's status and log, and its
 * drain, for an operator on any gateway. Another node is asked over the overlay (its snapshot, its
 * log through `/v1/internal/node/logs`); a drain is a mark on its registry row, which the node
 * reads at its next heartbeat (at once when the operator asked the node itself).
 */
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import type { NodeCode } from "../../domain/Errors.js"
import type { NodeCommand } from "../../domain/NodeAdmin.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { OperatorAudit } from "../operators/OperatorAudit.js"
import { OperatorHealth, type PeerSnapshot } from "../operators/OperatorHealth.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { type ClusterNode, Membership } from "./Membership.js"
import { NodeHeartbeat } from "./NodeHeartbeat.js"
import { NodeLogs } from "./NodeLogs.js"

/** Another node's log arrives within this, or it is unreachable. */
const LOGS_TIMEOUT = Duration.seconds(5)

const LogAnswer = Schema.parseJson(Schema.Struct({ node: Schema.String, lines: Schema.Array(Schema.String) }))

export type NodeRefused = Refused<NodeCode>

export interface NodeAdminService {
  /** Node `id` as the membership knows it, with its snapshot or why there is none. */
  readonly status: (id: string) => Effect.Effect<{ readonly node: ClusterNode; readonly snapshot: PeerSnapshot }, NodeRefused | StoreError>
  /** Node `id`'s last `lines` lines of output. */
  readonly logs: (id: string, lines: number) => Effect.Effect<ReadonlyArray<string>, NodeRefused | StoreError>
  /** Marks node `id` draining or not; answers whether it now is. */
  readonly command: (id: string, command: NodeCommand, actor: string) => Effect.Effect<boolean, NodeRefused | StoreError>
}

export class NodeAdmin extends Context.Tag("portico/NodeAdmin")<NodeAdmin, NodeAdminService>() {
  static readonly Live = Layer.effect(
    NodeAdmin,
    Effect.gen(function* () {
      const membership = yield* Membership
      const health = yield* OperatorHealth
      const coordination = yield* Coordination
      const store = yield* RegistryStore
      const audit = yield* OperatorAudit
      const heartbeat = yield* NodeHeartbeat
      const logs = yield* NodeLogs
      const self = membership.self.id

      const find = (id: string) =>
        Effect.flatMap(membership.nodes, (nodes) => {
          const node = nodes.find((n) => n.id === id)
          return node === undefined
            ? Effect.fail(refuse("NOT_FOUND", `no node ${id} in this cluster`, "GET /v1/network/peers lists the cluster's nodes"))
            : Effect.succeed(node)
        })

      return NodeAdmin.of({
        status: (id) =>
          Effect.gen(function* () {
            const node = yield* find(id)
            const snapshot: PeerSnapshot =
              node.status === "retired" || node.status === "stopped"
                ? { node: id, reachable: false, error: `the node is ${node.status}` }
                : yield* health.snapshotOf(id)
            return { node, snapshot }
          }),

        logs: (id, lines) =>
          Effect.gen(function* () {
            if (id === self) return logs.tail(lines)
            const node = yield* find(id)
            const unreachable = refuse("UNAVAILABLE", `node ${id} did not answer with its log`, `its status is ${node.status}; retry once it is active`, 5)
            const answer = yield* Effect.mapError(internalClient(coordination).call(id, "nodeLogs", { lines }, LOGS_TIMEOUT), () => unreachable)
            if (answer.status !== 200) return yield* Effect.fail(unreachable)
            const decoded = yield* Effect.mapError(Schema.decodeUnknown(LogAnswer)(answer.text), () => unreachable)
            // a node answers for the node it is: another id is a wrong address
            return decoded.node === id ? decoded.lines : yield* Effect.fail(unreachable)
          }),

        command: (id, command, actor) =>
          Effect.gen(function* () {
            const draining = command === "drain"
            const now = yield* Clock.currentTimeMillis
            const entry = yield* audit.statement(
              { actor, action: `node.${command}`, target: id },
              { sql: "EXISTS (SELECT 1 FROM cluster_nodes WHERE id = ? AND retired_at IS NULL)", params: [id] }
            )
            const [changed] = yield* store.batch([
              {
                sql: `UPDATE cluster_nodes SET draining_at = ${draining ? "COALESCE(draining_at, ?)" : "NULL"} WHERE id = ? AND retired_at IS NULL`,
                params: draining ? [now, id] : [id]
              },
              entry
            ])
            if (changed === undefined || changed.rowsAffected === 0) {
              return yield* Effect.fail(refuse("NOT_FOUND", `no node ${id} in this cluster (or it is retired)`, "GET /v1/network/peers lists the cluster's nodes"))
            }
            if (id === self) yield* heartbeat.setDraining(draining)
            return draining
          })
      })
    })
  )
}
