/**
 * The registry's side of replicas (migration 25; docs/deployments.md, "Replicas"): one row per
 * deployment and node running it besides its home, and the CID of each dynamic version's
 * prepared directory. A replica's row is written by the node it names (setup, update, env,
 * teardown run there under the deployment's lock); the home node and the cluster's worker only
 * read rows, add a `failed` one for a node that did not answer, and remove them with the record.
 */
import { Effect, Schema } from "effect"
import { decodeRows } from "../../registry/RegistryRows.js"
import type { RegistryStoreService, StoreError } from "../../registry/RegistryStore.js"
import { FREE_PORT_SQL } from "../DeploymentRows.js"

export const ReplicaStatus = Schema.Literal("active", "failed")
export type ReplicaStatus = typeof ReplicaStatus.Type

export interface ReplicaRow {
  readonly deploymentId: string
  readonly node: string
  readonly status: ReplicaStatus
  /** The app's port on that node; none after a failed setup (spec §2.7). */
  readonly port: number | undefined
  /** The deployment version the replica runs. */
  readonly version: number
  /** The environment stamp it was started with. */
  readonly envVersion: bigint
  readonly reason: string | undefined
  readonly updatedAt: number
}

const Row = Schema.Struct({
  deployment_id: Schema.String,
  node_id: Schema.String,
  status: ReplicaStatus,
  port: Schema.NullOr(Schema.Number),
  version: Schema.Number,
  env_version: Schema.String.pipe(Schema.pattern(/^\d{1,20}$/)),
  reason: Schema.NullOr(Schema.String),
  updated_at: Schema.Number
})
const decode = decodeRows("deployment replica", Row)
const COLUMNS = "deployment_id, node_id, status, port, version, env_version, reason, updated_at"

const toReplica = (row: typeof Row.Type): ReplicaRow => ({
  deploymentId: row.deployment_id,
  node: row.node_id,
  status: row.status,
  port: row.port ?? undefined,
  version: row.version,
  envVersion: BigInt(row.env_version),
  reason: row.reason ?? undefined,
  updatedAt: row.updated_at
})

/** A stamp as stored: 20-digit text, so text order is number order. */
export const stampText = (stamp: bigint): string => stamp.toString().padStart(20, "0")

const nowSeconds = () => Math.floor(Date.now() / 1000)

/**
 * A row may be written only for a deployment that exists and is not homed on that node (two
 * parameters: the id, the node): a late failure report never outlives a delete, and never makes
 * a replica of a node that took the home role meanwhile.
 */
const REPLICA_OF = "EXISTS (SELECT 1 FROM deployments WHERE id = ? AND home_node <> ?)"

export interface ReplicaRowsService {
  /** Every replica of a deployment, by node. */
  readonly of: (deploymentId: string) => Effect.Effect<ReadonlyArray<ReplicaRow>, StoreError>
  /** Every replica row this node holds. */
  readonly onNode: (node: string) => Effect.Effect<ReadonlyArray<ReplicaRow>, StoreError>
  /** Every replica row of the cluster (the host table, the worker's check). */
  readonly all: Effect.Effect<ReadonlyArray<ReplicaRow>, StoreError>
  /**
   * The row of `deploymentId` on `node` holding a port: its own port if it has one, else the
   * lowest free one of `range` on that node (undefined when the range is full). The row stays
   * `failed` ("setting up") until `markActive`, so nothing is routed to it before it answers.
   */
  readonly claimPort: (deploymentId: string, node: string, range: { readonly first: number; readonly last: number }) => Effect.Effect<number | undefined, StoreError>
  readonly markActive: (deploymentId: string, node: string, version: number, envVersion: bigint) => Effect.Effect<void, StoreError>
  /** `failed` with why; a failed setup gives its port back (`dropPort`). */
  readonly markFailed: (deploymentId: string, node: string, reason: string, dropPort: boolean) => Effect.Effect<void, StoreError>
  /** A failed row for a node the home could not reach, unless the node wrote its own row. */
  readonly noteUnreached: (deploymentId: string, node: string, reason: string) => Effect.Effect<void, StoreError>
  /** The row gone, and any teardown owed by `node` for the deployment. */
  readonly remove: (deploymentId: string, node: string) => Effect.Effect<void, StoreError>
  /** The namespace of deployment `deploymentId`; undefined when it is gone. */
  readonly namespaceOf: (deploymentId: string) => Effect.Effect<string | undefined, StoreError>
  /** The CID of version `version`'s prepared directory (an archive in content storage). */
  readonly versionCid: (deploymentId: string, version: number) => Effect.Effect<string | undefined, StoreError>
  readonly setVersionCid: (deploymentId: string, version: number, cid: string) => Effect.Effect<void, StoreError>
}

export const makeReplicaRows = (store: RegistryStoreService): ReplicaRowsService => {
  const select = (where: string, params: ReadonlyArray<string | number>) =>
    Effect.map(Effect.flatMap(store.query({ sql: `SELECT ${COLUMNS} FROM deployment_replicas ${where}`, params }), decode), (rows) => rows.map(toReplica))

  return {
    of: (id) => select("WHERE deployment_id = ? ORDER BY node_id", [id]),
    onNode: (node) => select("WHERE node_id = ? ORDER BY deployment_id", [node]),
    all: select("ORDER BY deployment_id, node_id", []),
    claimPort: (id, node, range) =>
      Effect.gen(function* () {
        const [held] = yield* select("WHERE deployment_id = ? AND node_id = ?", [id, node])
        if (held?.port !== undefined) return held.port
        yield* store.exec({
          sql: `INSERT INTO deployment_replicas (deployment_id, node_id, status, port, version, env_version, reason, updated_at)
                SELECT ?, ?, 'failed', p.port, 0, ?, 'setting up', ? FROM (SELECT ${FREE_PORT_SQL} AS port) p WHERE p.port IS NOT NULL AND ${REPLICA_OF}
                ON CONFLICT (deployment_id, node_id) DO UPDATE SET port = excluded.port, status = 'failed', reason = 'setting up', updated_at = excluded.updated_at`,
          params: [id, node, stampText(0n), nowSeconds(), node, range.first, range.first, node, range.first, range.last, id, node]
        })
        const [claimed] = yield* select("WHERE deployment_id = ? AND node_id = ?", [id, node])
        return claimed?.port !== undefined && claimed.port <= range.last ? claimed.port : undefined
      }),
    markActive: (id, node, version, envVersion) =>
      Effect.asVoid(
        store.exec({
          sql: "UPDATE deployment_replicas SET status = 'active', version = ?, env_version = ?, reason = NULL, updated_at = ? WHERE deployment_id = ? AND node_id = ?",
          params: [version, stampText(envVersion), nowSeconds(), id, node]
        })
      ),
    markFailed: (id, node, reason, dropPort) =>
      Effect.asVoid(
        store.exec({
          sql: `INSERT INTO deployment_replicas (deployment_id, node_id, status, port, version, env_version, reason, updated_at)
                SELECT ?, ?, 'failed', NULL, 0, ?, ?, ? WHERE ${REPLICA_OF}
                ON CONFLICT (deployment_id, node_id) DO UPDATE SET status = 'failed', reason = excluded.reason, updated_at = excluded.updated_at${dropPort ? ", port = NULL" : ""}`,
          params: [id, node, stampText(0n), reason.slice(0, 500), nowSeconds(), id, node]
        })
      ),
    noteUnreached: (id, node, reason) =>
      Effect.asVoid(
        store.exec({
          sql: `INSERT INTO deployment_replicas (deployment_id, node_id, status, port, version, env_version, reason, updated_at)
                SELECT ?, ?, 'failed', NULL, 0, ?, ?, ? WHERE ${REPLICA_OF}
                ON CONFLICT (deployment_id, node_id) DO UPDATE SET status = 'failed', reason = excluded.reason, updated_at = excluded.updated_at`,
          params: [id, node, stampText(0n), reason.slice(0, 500), nowSeconds(), id, node]
        })
      ),
    remove: (id, node) =>
      Effect.asVoid(
        store.batch([
          { sql: "DELETE FROM deployment_replicas WHERE deployment_id = ? AND node_id = ?", params: [id, node] },
          { sql: "DELETE FROM deployment_teardowns WHERE deployment_id = ? AND home_node = ?", params: [id, node] }
        ])
      ),
    namespaceOf: (id) =>
      Effect.map(store.query({ sql: "SELECT namespace FROM deployments WHERE id = ?", params: [id] }), (rows) => {
        const namespace = rows[0]?.["namespace"]
        return typeof namespace === "string" ? namespace : undefined
      }),
    versionCid: (id, version) =>
      Effect.map(store.query({ sql: "SELECT cid FROM deployment_versions WHERE deployment_id = ? AND version = ?", params: [id, version] }), (rows) => {
        const cid = rows[0]?.["cid"]
        return typeof cid === "string" && cid !== "" ? cid : undefined
      }),
    setVersionCid: (id, version, cid) =>
      Effect.asVoid(store.exec({ sql: "UPDATE deployment_versions SET cid = ? WHERE deployment_id = ? AND version = ?", params: [cid, id, version] }))
  }
}
