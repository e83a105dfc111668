/**
 * What the registry keeps of a deployment (spec §2.7, §3.4): the record, its versions, its events
 * and its custom domains, as the store answers them, with the defaults a new record gets and the
 * version stamp's rule. Field rules on names, domains and the environment's contents are the
 * deployment rules' (src/domain, slice D2); what reaches the store has passed them.
 */
import { Clock, Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import { dataPlane, type GrantName, parseGrant } from "../../domain/Grants.js"

export const DeploymentType = Schema.Literal("static", "nextjs", "go", "nodejs")
export type DeploymentType = typeof DeploymentType.Type

/** Whether a type runs a process (and so has a port, limits and a health check). */
export const isDynamic = (type: DeploymentType): boolean => type !== "static"

/**
 * `deploying`: the record is written and the first version being set up (no traffic yet);
 * `active`: serving; `failed`: the set-up or the process failed and the restart policy gave up;
 * `stopped`: stopped on purpose (kept, not served). See docs/deployments.md, "Records".
 */
export const DeploymentStatus = Schema.Literal("deploying", "active", "failed", "stopped")
export type DeploymentStatus = typeof DeploymentStatus.Type

export const RestartPolicy = Schema.Literal("always", "on-failure", "never")
export type RestartPolicy = typeof RestartPolicy.Type

/** The cgroup limits and restart policy recorded on a deployment (spec §2.7). */
export interface Limits {
  readonly memoryBytes: number
  /** Thousandths of one CPU: 1000 is one core's worth of time per period. */
  readonly cpuMillis: number
  readonly pids: number
  readonly restartPolicy: RestartPolicy
}

export const defaultLimits: Limits = { memoryBytes: 512 * 1024 * 1024, cpuMillis: 1000, pids: 256, restartPolicy: "on-failure" }

export const defaultHealthPath = "/health"

/**
 * Spec §4.8's runtime profile: invoke, storage, push, webrtc, proxy, pubsub, cache (push is the
 * `push:write` grant of src/domain/Grants.ts).
 */
export const defaultDeploymentGrants: ReadonlyArray<GrantName> = ["invoke", "storage", "push:write", "webrtc", "proxy", "pubsub", "cache"]

/**
 * A deployment's grants checked: each a known grant of the data plane (a narrowed `cache:key=`
 * included), never the control plane (spec §4.8). Answers the first refused grant, or the list
 * deduplicated in the order given.
 */
export const checkDeploymentGrants = (
  grants: ReadonlyArray<string>
): { readonly ok: true; readonly grants: ReadonlyArray<string> } | { readonly ok: false; readonly refused: string } => {
  const kept: Array<string> = []
  for (const grant of grants) {
    const parsed = parseGrant(grant)
    if (parsed === undefined || !dataPlane.includes(parsed.name)) return { ok: false, refused: grant }
    if (!kept.includes(grant)) kept.push(grant)
  }
  return { ok: true, grants: kept }
}

export interface DeploymentRecord {
  readonly id: string
  readonly namespace: string
  readonly name: string
  readonly type: DeploymentType
  readonly status: DeploymentStatus
  readonly version: number
  readonly domain: string
  /** The node that runs it (spec §4.8's home node); ports are unique per node. */
  readonly homeNode: string
  /** Dynamic types only, from the app port range (spec §8: 10200-19999). */
  readonly port: number | undefined
  /** The current version's artifact: a content CID, or a directory under the instance directory. */
  readonly artifact: string
  /** Static sites: the site's content CID (the artifact). */
  readonly contentCid: string | undefined
  readonly limits: Limits
  /** Dynamic types only. */
  readonly healthPath: string | undefined
  readonly grants: ReadonlyArray<string>
  /** The environment's version stamp: nanoseconds, strictly increasing per deployment. */
  readonly envVersion: bigint
  /** Seconds since the epoch. */
  readonly createdAt: number
  /** The last write's stamp (nanoseconds); an environment change writes the same stamp as envVersion. */
  readonly updatedAt: bigint
}

/**
 * The uid a dynamic deployment's process runs as (the sandbox's identity, docs/deployments.md "The
 * sandbox"): 61,000,000 plus its port, so it is unique per node because the port is, and needs no
 * allocation of its own. Static sites run no process and have none.
 */
export const SANDBOX_UID_BASE = 61_000_000

export const sandboxUid = (record: Pick<DeploymentRecord, "port">): number | undefined =>
  record.port === undefined ? undefined : SANDBOX_UID_BASE + record.port

/** How a version was made: uploaded first, updated, or a rollback to an older version's artifact. */
export const VersionSource = Schema.Literal("upload", "update", "rollback")
export type VersionSource = typeof VersionSource.Type

export interface VersionRecord {
  readonly version: number
  readonly artifact: string
  readonly source: VersionSource
  /** For a rollback: the version whose artifact it points at. */
  readonly rollbackFrom: number | undefined
  readonly createdAt: number
}

/**
 * Event types. The store writes the life-cycle ones in the same batch as the change; the others
 * come from the process supervisor and the replicas (spec §6.1; `home_moved`: the home role went
 * to a replica when the home node was retired).
 */
export const DeploymentEventType = Schema.Literal(
  "created",
  "updated",
  "rolled_back",
  "env_changed",
  "grants_changed",
  "status_changed",
  "domain_added",
  "domain_verified",
  "domain_removed",
  "restarted",
  "installing",
  "starting",
  "health_check_failed",
  "replica_setup_failed",
  "replica_update_failed",
  "replica_env_failed",
  "home_moved"
)
export type DeploymentEventType = typeof DeploymentEventType.Type

/** A small, flat detail object: reasons and numbers, never environment values or tokens. */
export const EventDetail = Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number) })
export type EventDetail = typeof EventDetail.Type

export interface DeploymentEvent {
  /** Increasing per registry: the listing's order and cursor. */
  readonly seq: number
  readonly type: DeploymentEventType
  /** The deployment's version when it happened. */
  readonly version: number
  readonly at: number
  readonly detail: EventDetail
}

export interface CustomDomainRecord {
  readonly domain: string
  /** The value the tenant publishes in a DNS TXT record to prove the domain. */
  readonly token: string
  readonly createdAt: number
  readonly verifiedAt: number | undefined
}

/** A new deployment id: `d` and 24 hex characters (96 random bits), DNS-, path- and user-name safe. */
export const newDeploymentId = (): string => "d" + crypto.randomBytes(12).toString("hex")

/** A custom domain's verification token: 128 random bits, base64url. */
export const newVerificationToken = (): string => "portico-verify-" + crypto.randomBytes(16).toString("base64url")

/** Stamps are stored as fixed-width decimal text so that text order is number order on both engines. */
export const stampText = (stamp: bigint): string => stamp.toString().padStart(20, "0")

/** The next stamp after `previous`: the clock's nanoseconds, or one more than `previous` if the clock has not moved past it. */
export const nextStamp = (previous: bigint | undefined): Effect.Effect<bigint> =>
  Effect.map(Clock.currentTimeNanos, (now) => (previous !== undefined && now <= previous ? previous + 1n : now))
