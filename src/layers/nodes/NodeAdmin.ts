/**
 * Node administration (docs/cluster.md, "Node administration"): a node's status and log, its
 * drain, and its leaving, for an operator on any gateway. Another node is asked over the overlay
 * (its snapshot, its log through `/v1/internal/node/logs`); a drain is a mark on its registry row,
 * which the node reads at its next heartbeat (at once when the operator asked the node itself).
 *
 * A node leaves through another: that one drains it, takes each of its node-local databases
 * (DatabaseMoves.ts), and retires it: its row stays, marked, its key no longer heartbeats, and
 * nothing calls it. What cannot move is counted first, and the leave refused unless forced: the
 * databases of a node that does not answer, and its deployments (their apps run on it).
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
import { type ClusterNode, Membership, REGISTRY_NOW } from "../cluster/Membership.js"
import { NodeHeartbeat } from "../cluster/NodeHeartbeat.js"
import { NodeLogs } from "../cluster/NodeLogs.js"
import { DatabaseMoves } from "../sql/DatabaseMoves.js"
import { ClusterWorker } from "./ClusterWorker.js"
import { DeploymentStore } from "../deployments/DeploymentStore.js"
import { moveHomesOff } from "../deployments/replicas/ReplicaCheck.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** Another node's log arrives within this, or it is unreachable. */
const LOGS_TIMEOUT = Duration.seconds(5)

const LogAnswer = Schema.parseJson(Schema.Struct({ node: Schema.String, lines: Schema.Array(Schema.String) }))

export type NodeRefused = Refused<NodeCode>

export interface NodeAdminService {
  /** Node `id` as the membership knows it, with its snapshot or why there is none. */
  readonly status: (
    id: string
  ) => Effect.Effect<{ readonly node: ClusterNode; readonly snapshot: PeerSnapshot; readonly runsWorker: boolean }, NodeRefused | StoreError>
  /** Node `id`'s last `lines` lines of output. */
  readonly logs: (id: string, lines: number) => Effect.Effect<ReadonlyArray<string>, NodeRefused | StoreError>
  /** Marks node `id` draining or not; answers whether it now is. */
  readonly command: (id: string, command: Exclude<NodeCommand, "repair">, actor: string) => Effect.Effect<boolean, NodeRefused | StoreError>
  /** Moves node `id`'s databases here and retires it; `force` retires it even with what cannot move. */
  readonly leave: (id: string, force: boolean, actor: string) => Effect.Effect<NodeLeft, NodeRefused | StoreError>
}

export interface NodeLeft {
  readonly moved: ReadonlyArray<{ readonly namespace: string; readonly database: string }>
  /** What stayed on the node: databases that could not move, deployments (only with `force`). */
  readonly lostDatabases: number
  readonly lostDeployments: number
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
      const moves = yield* DatabaseMoves
      const worker = yield* ClusterWorker
      const deploymentStore = yield* DeploymentStore
      const self = membership.self.id

      const find = (id: string) =>
        Effect.flatMap(membership.nodes, (nodes) => {
          const node = nodes.find((n) => n.id === id)
          return node === undefined
            ? Effect.fail(refuse("NOT_FOUND", `no node ${id} in this cluster`, "GET /v1/network/peers lists the cluster's nodes"))
            : Effect.succeed(node)
        })

      const mark = (id: string, action: string, actor: string, sql: string, params: ReadonlyArray<string | number>, detail?: Record<string, number>) =>
        Effect.gen(function* () {
          const entry = yield* audit.statement(
            { actor, action, target: id, ...(detail === undefined ? {} : { detail }) },
            { sql: "EXISTS (SELECT 1 FROM cluster_nodes WHERE id = ?)", params: [id] }
          )
          const [changed] = yield* store.batch([{ sql, params }, entry])
          return changed !== undefined && changed.rowsAffected > 0
        })

      const leave: NodeAdminService["leave"] = (id, force, actor) =>
        Effect.gen(function* () {
          if (id === self) {
            return yield* Effect.fail(refuse("CONFLICT", "a node leaves through another node, which takes its databases", "send POST /v1/node/leave to another gateway of the cluster"))
          }
          const node = yield* find(id)
          if (node.status === "retired") return yield* Effect.fail(refuse("NOT_FOUND", `node ${id} has left already`))
          const databases = yield* store.query({ sql: "SELECT namespace, name FROM local_databases WHERE home_node = ? ORDER BY namespace, name", params: [id] })
          const [apps] = yield* store.query({ sql: "SELECT COUNT(*) AS n FROM deployments WHERE home_node = ?", params: [id] })
          // an app with an active replica elsewhere is not lost: its home role moves there
          const [replicated] = yield* store.query({
            sql: `SELECT COUNT(DISTINCT d.id) AS n FROM deployments d JOIN deployment_replicas r ON r.deployment_id = d.id
                  WHERE d.home_node = ? AND r.status = 'active' AND r.port IS NOT NULL`,
            params: [id]
          })
          const deployments = Number(apps?.n ?? 0)
          const unreplicated = deployments - Number(replicated?.n ?? 0)
          const reachable = node.status === "active"
          if (!force && unreplicated > 0) {
            return yield* Effect.fail(
              refuse("CONFLICT", `node ${id} is the home of ${unreplicated} deployment(s) that run nowhere else`, "delete them or deploy them again through another node, or send force: true to retire it with them")
            )
          }
          if (!force && !reachable && databases.length > 0) {
            return yield* Effect.fail(
              refuse("CONFLICT", `node ${id} is ${node.status}: its ${databases.length} database(s) cannot be moved`, "start it again and retry, or send force: true to retire it without them")
            )
          }
          yield* mark(id, "node.drain", actor, "UPDATE cluster_nodes SET draining_at = COALESCE(draining_at, ?) WHERE id = ?", [Date.now(), id])
          const moved: Array<{ namespace: string; database: string }> = []
          if (reachable) {
            for (const row of databases) {
              const namespace = String(row.namespace)
              const database = String(row.name)
              const outcome = yield* Effect.either(moves.moveHere(id, namespace, database))
              if (outcome._tag === "Right") moved.push({ namespace, database })
              else if (!force) {
                return yield* Effect.fail(
                  refuse("UNAVAILABLE", `moved ${moved.length} of ${databases.length} database(s) off ${id}; ${database} of ${namespace}: ${outcome.left.reason}`, "retry the leave: the node stays draining and nothing is lost", 5)
                )
              }
            }
          }
          const lostDatabases = databases.length - moved.length
          yield* mark(id, "node.leave", actor, `UPDATE cluster_nodes SET retired_at = ${REGISTRY_NOW} WHERE id = ? AND retired_at IS NULL`, [id], {
            moved: moved.length,
            lost_databases: lostDatabases,
            lost_deployments: unreplicated
          })
          // the apps with a replica get their home role there now (the replica check catches any left)
          const movedApps = yield* moveHomesOff(store, deploymentStore.addEvent, id)
          return { moved, lostDatabases, lostDeployments: deployments - movedApps }
        })

      return NodeAdmin.of({
        leave,
        status: (id) =>
          Effect.gen(function* () {
            const node = yield* find(id)
            const snapshot: PeerSnapshot =
              node.status === "retired" || node.status === "stopped"
                ? { node: id, reachable: false, error: `the node is ${node.status}` }
                : yield* health.snapshotOf(id)
            return { node, snapshot, runsWorker: (yield* worker.holder) === id }
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

  /** Over its collaborators' test doubles. */
  static readonly Test = Layer.suspend(() =>
    NodeAdmin.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          Membership.Test,
          OperatorHealth.Test,
          Coordination.Test,
          SqliteRegistryStore.Test,
          OperatorAudit.Test,
          NodeHeartbeat.Test,
          NodeLogs.Test,
          DatabaseMoves.Test,
          ClusterWorker.Test,
          DeploymentStore.Test
        )
      )
    )
  )
}
