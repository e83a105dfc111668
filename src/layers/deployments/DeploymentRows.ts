/**
 * The deployment tables' rows as the registry answers them (both engines: numbers as numbers,
 * stamps as 20-digit text), decoded by Schema and turned into the records of DeploymentRecord.ts.
 * A row not of its shape is a StoreError of reason `statement` (a damaged row, never a client's).
 */
import { Schema } from "effect"
import { decodeRows } from "../registry/RegistryRows.js"
import type { Statement } from "../registry/RegistryStore.js"
import {
  type CustomDomainRecord,
  type DeploymentEvent,
  DeploymentEventType,
  type DeploymentRecord,
  DeploymentStatus,
  DeploymentType,
  EventDetail,
  RestartPolicy,
  type VersionRecord,
  VersionSource
} from "./DeploymentRecord.js"

/** The columns every record read selects, in DeploymentRow's order. */
export const DEPLOYMENT_COLUMNS = `id, namespace, name, type, status, version, domain, home_node, port, artifact, memory_bytes,
  cpu_millis, pids, restart_policy, health_path, grants, env_version, created_at, updated_at`

/**
 * The lowest free app port of a node's range, NULL when the range is full: six parameters, the
 * node, the first port twice, the node, the first and the last port. Over `app_ports`, every
 * port a home or a replica holds on a node (migration 25), so both allocations pick from one set.
 */
export const FREE_PORT_SQL = `CASE WHEN NOT EXISTS (SELECT 1 FROM app_ports WHERE node = ? AND port = ?) THEN ? ELSE (
    SELECT MIN(d.port + 1) FROM app_ports d WHERE d.node = ? AND d.port >= ? AND d.port < ?
      AND NOT EXISTS (SELECT 1 FROM app_ports e WHERE e.node = d.node AND e.port = d.port + 1)) END`

/**
 * The teardowns a delete owes (`deployment_teardowns`), written in the batch that removes the
 * record and only if it does: one by each replica node (done at once by the delete's own calls,
 * else by that node's sweep), and one by the home node when it did not answer (`homeOwes`).
 */
export const owedTeardowns = (namespace: string, id: string, now: number, homeOwes: string | undefined): ReadonlyArray<Statement> => [
  ...(homeOwes === undefined
    ? []
    : [
        {
          sql: `INSERT INTO deployment_teardowns (deployment_id, home_node, namespace, name, created_at)
                SELECT id, ?, namespace, name, ? FROM deployments WHERE namespace = ? AND id = ? ON CONFLICT DO NOTHING`,
          params: [homeOwes, now, namespace, id]
        }
      ]),
  {
    sql: `INSERT INTO deployment_teardowns (deployment_id, home_node, namespace, name, created_at)
          SELECT r.deployment_id, r.node_id, d.namespace, d.name, ? FROM deployment_replicas r JOIN deployments d ON d.id = r.deployment_id
          WHERE d.namespace = ? AND d.id = ? ON CONFLICT DO NOTHING`,
    params: [now, namespace, id]
  }
]

const Stamp = Schema.String.pipe(Schema.pattern(/^\d{1,20}$/))

const DeploymentRow = Schema.Struct({
  id: Schema.String,
  namespace: Schema.String,
  name: Schema.String,
  type: DeploymentType,
  status: DeploymentStatus,
  version: Schema.Number,
  domain: Schema.String,
  home_node: Schema.String,
  port: Schema.NullOr(Schema.Number),
  artifact: Schema.String,
  memory_bytes: Schema.Number,
  cpu_millis: Schema.Number,
  pids: Schema.Number,
  restart_policy: RestartPolicy,
  health_path: Schema.NullOr(Schema.String),
  grants: Schema.parseJson(Schema.Array(Schema.String)),
  env_version: Stamp,
  created_at: Schema.Number,
  updated_at: Stamp
})

const VersionRow = Schema.Struct({
  version: Schema.Number,
  artifact: Schema.String,
  source: VersionSource,
  rollback_from: Schema.NullOr(Schema.Number),
  created_at: Schema.Number
})

const EventRow = Schema.Struct({
  seq: Schema.Number,
  type: DeploymentEventType,
  version: Schema.Number,
  at: Schema.Number,
  detail: Schema.parseJson(EventDetail)
})

const DomainRow = Schema.Struct({
  domain: Schema.String,
  token: Schema.String,
  created_at: Schema.Number,
  verified_at: Schema.NullOr(Schema.Number)
})

export const decodeDeployments = decodeRows("deployment", DeploymentRow)
export const decodeVersions = decodeRows("deployment version", VersionRow)
export const decodeEvents = decodeRows("deployment event", EventRow)
export const decodeDomains = decodeRows("deployment domain", DomainRow)

export const toDeployment = (row: typeof DeploymentRow.Type): DeploymentRecord => ({
  id: row.id,
  namespace: row.namespace,
  name: row.name,
  type: row.type,
  status: row.status,
  version: row.version,
  domain: row.domain,
  homeNode: row.home_node,
  port: row.port ?? undefined,
  artifact: row.artifact,
  contentCid: row.type === "static" ? row.artifact : undefined,
  limits: { memoryBytes: row.memory_bytes, cpuMillis: row.cpu_millis, pids: row.pids, restartPolicy: row.restart_policy },
  healthPath: row.health_path ?? undefined,
  grants: row.grants,
  envVersion: BigInt(row.env_version),
  createdAt: row.created_at,
  updatedAt: BigInt(row.updated_at)
})

export const toVersion = (row: typeof VersionRow.Type): VersionRecord => ({
  version: row.version,
  artifact: row.artifact,
  source: row.source,
  rollbackFrom: row.rollback_from ?? undefined,
  createdAt: row.created_at
})

export const toEvent = (row: typeof EventRow.Type): DeploymentEvent => ({
  seq: row.seq,
  type: row.type,
  version: row.version,
  at: row.at,
  detail: row.detail
})

export const toDomain = (row: typeof DomainRow.Type): CustomDomainRecord => ({
  domain: row.domain,
  token: row.token,
  createdAt: row.created_at,
  verifiedAt: row.verified_at ?? undefined
})
