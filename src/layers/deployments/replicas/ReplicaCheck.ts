/**
 * The cluster's replica check (spec §3.4, §8: every 5 minutes by the cluster's worker;
 * docs/deployments.md, "Replicas"), run by the node holding the worker lease
 * (src/layers/nodes/ClusterWorker.ts):
 *
 * - a deployment whose home node was retired (`POST /v1/node/leave` moves them at once; this
 *   catches any it could not) gets the home role moved to
 *   an active replica, which already runs it: the record's home and port become the replica's in
 *   one batch with the replica row's removal (so its port stays taken once), and a `home_moved`
 *   event says so. The original system never moved it; a retired node's apps then stayed homeless.
 * - every active dynamic deployment with fewer active replicas at its version than wanted gets
 *   them set up again (failed ones on their node while it is live, else on the nodes with the most
 *   room), from the version's CID.
 */
import { Effect } from "effect"
import type { MembershipService } from "../../cluster/Membership.js"
import type { RegistryStoreService, StoreError } from "../../registry/RegistryStore.js"
import { decodeDeployments, DEPLOYMENT_COLUMNS, toDeployment } from "../DeploymentRows.js"
import type { DeploymentStoreService } from "../DeploymentStore.js"
import type { ReplicaFanoutService } from "./ReplicaFanout.js"

export interface ReplicaCheckTools {
  readonly registry: RegistryStoreService
  readonly store: DeploymentStoreService
  readonly fanout: ReplicaFanoutService
  readonly membership: MembershipService
}

/**
 * Moves the home role of every deployment homed on `node` (retired) to one of its active
 * replicas; answers how many moved. A deployment with no active replica stays where it is.
 */
export const moveHomesOff = (
  registry: RegistryStoreService,
  addEvent: DeploymentStoreService["addEvent"],
  node: string
): Effect.Effect<number, StoreError> =>
  Effect.gen(function* () {
    const rows = yield* registry.query({
      sql: `SELECT d.id, r.node_id, r.port FROM deployments d JOIN deployment_replicas r ON r.deployment_id = d.id
            WHERE d.home_node = ? AND r.status = 'active' AND r.port IS NOT NULL ORDER BY d.id, r.updated_at DESC`,
      params: [node]
    })
    const moved = new Set<string>()
    for (const row of rows) {
      const id = String(row["id"])
      if (moved.has(id)) continue
      const to = String(row["node_id"])
      const written = yield* registry.batch([
        { sql: "DELETE FROM deployment_replicas WHERE deployment_id = ? AND node_id = ?", params: [id, to] },
        { sql: "UPDATE deployments SET home_node = ?, port = ? WHERE id = ? AND home_node = ?", params: [to, Number(row["port"]), id, node] }
      ])
      if ((written.at(-1)?.rowsAffected ?? 0) === 0) continue
      moved.add(id)
      yield* addEvent(id, "home_moved", { from: node, to })
      yield* Effect.logInfo(`deployment ${id}: home role moved from retired node ${node} to ${to}`)
    }
    return moved.size
  })

/** Moves the home role of every deployment homed on a retired node to one of its active replicas. */
const moveHomes = (tools: ReplicaCheckTools) =>
  Effect.gen(function* () {
    const retired = (yield* tools.membership.nodes).filter((n) => n.status === "retired").map((n) => n.id)
    for (const node of retired) yield* moveHomesOff(tools.registry, tools.store.addEvent, node)
  })

export const replicaCheck = (tools: ReplicaCheckTools): Effect.Effect<void> =>
  Effect.gen(function* () {
    yield* moveHomes(tools)
    const rows = yield* tools.registry.query({
      sql: `SELECT ${DEPLOYMENT_COLUMNS} FROM deployments WHERE type <> 'static' AND status = 'active' ORDER BY id`,
      params: []
    })
    for (const record of (yield* decodeDeployments(rows)).map(toDeployment)) yield* tools.fanout.ensure(record)
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`replica check not done: ${e.detail}`)))
