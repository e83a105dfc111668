/**
 * The home node's side of replicas (spec §4.8 "Replicas", §8; docs/deployments.md, "Replicas"):
 * each prepared version stored by CID, replicas set up on the nodes with the most room, and every
 * update, rollback and environment change sent on to each active replica once the home node has
 * applied it. Runs under the deployment's lock, inside the change it follows.
 *
 * A replica that fails is reported, never hidden: a setup failure is a `replica_setup_failed`
 * event and a `failed` row (the cluster's worker tries again); a change that did not apply
 * everywhere is 502 REPLICAS_FAILED naming how many nodes applied it and each failing node with a
 * generic reason (refused with a status, timed out, unreachable), a `replica_update_failed` or
 * `replica_env_failed` event, and the replica's row `failed`, so no request is routed to a
 * replica running something else. The peer's own text and addresses stay in this node's log.
 */
import { Duration, Effect, Either } from "effect"
import * as path from "node:path"
import type { MembershipService } from "../../cluster/Membership.js"
import type { PorticoSettings } from "../../config/PorticoConfig.js"
import type { PeerAnswer, PeerUnreachable } from "../../coordination/Coordination.js"
import type { InternalClient } from "../../coordination/InternalClient.js"
import type { NamespaceName } from "../../../domain/Names.js"
import { refuse, type Refused } from "../../Refused.js"
import type { RegistryStoreService, StoreError } from "../../registry/RegistryStore.js"
import type { StorageService } from "../../storage/Storage.js"
import type { DeploymentRecord, DeploymentEventType } from "../DeploymentRecord.js"
import type { DeploymentStoreService } from "../DeploymentStore.js"
import { instanceName } from "../InstanceDirs.js"
import { storeVersion } from "./ArtifactPack.js"
import { artifactVersionOf } from "./ReplicaHost.js"
import { stampText, type ReplicaRowsService } from "./ReplicaRows.js"

/**
 * Spec §8's deadlines for the replica part of a change: one replica call at most 180 s, all of
 * them 210 s. The home node's own part comes first (DeploymentHome's hop allows for both).
 */
export const REPLICA_CALL = Duration.seconds(180)
export const REPLICAS_TOTAL = Duration.seconds(210)

type Kind = "setup" | "update" | "rollback" | "env"
const ROUTE = { setup: "replicaSetup", update: "replicaUpdate", rollback: "replicaRollback" } as const
const EVENT: Record<Exclude<Kind, "setup">, DeploymentEventType> = { update: "replica_update_failed", rollback: "replica_update_failed", env: "replica_env_failed" }

/** How one replica call ended, in the generic words a client is given. */
type Failed = { readonly node: string; readonly ok: false; readonly reason: string }
type Outcome = { readonly node: string; readonly ok: true } | Failed
/** A version for replicas: the CID of its directory, and which version's directory it is. */
type VersionOrder = { readonly cid: string; readonly artifactVersion: number }
/** One replica route called on one node. */
type Call = (node: string) => Effect.Effect<PeerAnswer, PeerUnreachable>

export interface ReplicaFanoutTools {
  readonly config: PorticoSettings
  readonly rows: ReplicaRowsService
  readonly store: DeploymentStoreService
  readonly registry: RegistryStoreService
  readonly storage: StorageService
  readonly internal: InternalClient
  readonly membership: MembershipService
  /** Where this node's instance directories are. */
  readonly instancesRoot: string
}

export interface ReplicaFanoutService {
  /** A dynamic app's first version is active here: its directory stored, its replicas set up. Never fails the upload. */
  readonly created: (record: DeploymentRecord) => Effect.Effect<void>
  /** An update or rollback applied here (`record` as it is now): sent to every active replica. */
  readonly changed: (record: DeploymentRecord, kind: "update" | "rollback") => Effect.Effect<void, Refused<"REPLICAS_FAILED">>
  /** An environment change applied here, stamped `envVersion`: sent to every active replica. */
  readonly envChanged: (record: DeploymentRecord, envVersion: bigint) => Effect.Effect<void, Refused<"REPLICAS_FAILED">>
  /** The record is gone: each replica asked to tear down now (each owes a teardown row already). */
  readonly removed: (record: DeploymentRecord, nodes: ReadonlyArray<string>) => Effect.Effect<void>
  /** Replicas missing or failed set up again (the cluster's worker, every replica check). */
  readonly ensure: (record: DeploymentRecord) => Effect.Effect<void>
}

export const makeReplicaFanout = (tools: ReplicaFanoutTools): ReplicaFanoutService => {
  const { config, rows, store, internal } = tools
  const self = config.nodeId
  // a replica fetches the version by CID: with the embedded content engine each node's blocks are
  // its own, so an app runs on its home node alone (docs/deployments.md, "Replicas")
  const wanted = config.storage.cluster === undefined ? 0 : config.deployments.replicas

  const logged = <A, E extends { readonly detail: string } | Refused>(what: string, effect: Effect.Effect<A, E>) =>
    Effect.catchAll(Effect.asVoid(effect), (e) => Effect.logWarning(`${what}: ${"detail" in e ? e.detail : e.reason}`))

  /** The CID of the record's current version's directory: stored now when this node prepared it and no CID is known yet. */
  const cidOf = (record: DeploymentRecord): Effect.Effect<VersionOrder | undefined, StoreError | Refused> =>
    Effect.gen(function* () {
      const artifactVersion = artifactVersionOf(record.artifact)
      if (artifactVersion === undefined) return undefined
      const known = (yield* rows.versionCid(record.id, record.version)) ?? (yield* rows.versionCid(record.id, artifactVersion))
      if (known !== undefined) {
        yield* rows.setVersionCid(record.id, record.version, known)
        return { cid: known, artifactVersion }
      }
      if (record.homeNode !== self) return undefined
      const dir = path.join(tools.instancesRoot, instanceName(record.namespace, record.name), record.artifact)
      const cid = yield* storeVersion(tools.storage, record.namespace, record.name, artifactVersion, dir)
      yield* rows.setVersionCid(record.id, artifactVersion, cid)
      yield* rows.setVersionCid(record.id, record.version, cid)
      return { cid, artifactVersion }
    })

  const targetOf = (record: DeploymentRecord) => ({ deployment_id: record.id, namespace: record.namespace as NamespaceName, name: record.name })

  /** The call that makes `node` run `record`'s version from `order` (setup, update and rollback alike on the replica). */
  const versionCall = (record: DeploymentRecord, kind: Exclude<Kind, "env">, order: VersionOrder): Call => (node) =>
    internal.call(node, ROUTE[kind], { ...targetOf(record), version: record.version, cid: order.cid, artifact_version: order.artifactVersion }, REPLICA_CALL)

  /** Runs `call` on `node`; the answer in generic words, the details to the log. */
  const send = (record: DeploymentRecord, node: string, kind: Kind, call: Call): Effect.Effect<Outcome> =>
    Effect.gen(function* () {
      const answer = yield* Effect.either(Effect.timeout(call(node), REPLICA_CALL))
      if (Either.isLeft(answer)) {
        const timedOut = answer.left._tag === "TimeoutException"
        yield* Effect.logWarning(`replica ${kind} of ${record.id} on ${node}: ${timedOut ? "timed out" : answer.left.detail}`)
        return { node, ok: false, reason: timedOut ? "timed out" : "unreachable" } as const
      }
      if (answer.right.status === 200) return { node, ok: true } as const
      yield* Effect.logWarning(`replica ${kind} of ${record.id} on ${node}: ${answer.right.status} ${answer.right.text.slice(0, 500)}`)
      return { node, ok: false, reason: `refused with status ${answer.right.status}` } as const
    })

  /** What failed, noted: a failed row (nothing routed to it) and the kind's event, one per node. */
  const noteFailures = (record: DeploymentRecord, kind: Kind, failed: ReadonlyArray<Failed>) =>
    Effect.forEach(
      failed,
      (f) =>
        logged(
          `replica ${kind} failure of ${record.id} not recorded`,
          Effect.zipRight(
            rows.noteUnreached(record.id, f.node, `${kind}: ${f.reason}`),
            store.addEvent(record.id, kind === "setup" ? "replica_setup_failed" : EVENT[kind], { node: f.node, reason: f.reason, version: record.version })
          )
        ),
      { discard: true }
    )

  /** `call` on every node of `nodes` at once (so all within REPLICAS_TOTAL); a call still running then counts as timed out. */
  const fanOut = (record: DeploymentRecord, nodes: ReadonlyArray<string>, kind: Kind, call: Call) =>
    Effect.forEach(
      nodes,
      (node) =>
        Effect.timeoutTo(send(record, node, kind, call), {
          duration: REPLICAS_TOTAL,
          onSuccess: (outcome): Outcome => outcome,
          onTimeout: (): Outcome => ({ node, ok: false, reason: "timed out" })
        }),
      { concurrency: "unbounded" }
    )

  /** Live nodes (this one too) with the most room first (fewest app ports held), none of `taken`. */
  const candidates = (taken: ReadonlySet<string>) =>
    Effect.gen(function* () {
      const peers = [self, ...(yield* tools.membership.peers).map((p) => p.id)].filter((id) => !taken.has(id))
      if (peers.length === 0) return []
      const held = yield* tools.registry.query({ sql: "SELECT node, COUNT(*) AS n FROM app_ports GROUP BY node", params: [] })
      const load = new Map(held.map((row) => [String(row["node"]), Number(row["n"])]))
      return [...peers].sort((a, b) => (load.get(a) ?? 0) - (load.get(b) ?? 0) || (a < b ? -1 : 1))
    })

  /** Missing replicas set up, failed ones tried again (on their node while it is live, else on another). */
  const ensure = (record: DeploymentRecord) =>
    logged(
      `replicas of ${record.id} not set up`,
      Effect.gen(function* () {
        if (wanted === 0 || record.status !== "active") return
        const order = yield* cidOf(record)
        if (order === undefined) return
        const held = yield* rows.of(record.id)
        const live = new Set([self, ...(yield* tools.membership.peers).map((p) => p.id)])
        const active = held.filter((r) => r.status === "active" && r.version === record.version)
        const retry = held.filter((r) => (r.status === "failed" || r.version !== record.version) && live.has(r.node)).map((r) => r.node)
        const fresh = yield* candidates(new Set([record.homeNode, ...held.map((r) => r.node)]))
        const targets = [...retry, ...fresh].slice(0, Math.max(0, wanted - active.length))
        // more than wanted (a node came back after another took its place): the newest active ones
        // go, and failed ones on live nodes not tried again (each holds a port, maybe a process)
        const extra = [
          ...[...active].sort((a, b) => a.updatedAt - b.updatedAt || (a.node < b.node ? -1 : 1)).slice(wanted),
          ...held.filter((r) => !active.includes(r) && live.has(r.node) && !targets.includes(r.node))
        ]
        if (extra.length > 0) yield* removeFrom(record, extra.map((r) => r.node))
        if (targets.length === 0) return
        const outcomes = yield* fanOut(record, targets, "setup", versionCall(record, "setup", order))
        // a 409 is a replica already past this version (a change raced the check): no failure of it
        yield* noteFailures(record, "setup", outcomes.filter((o): o is Failed => !o.ok && o.reason !== "refused with status 409"))
      })
    )

  /** Asks `nodes` to tear their replicas of `record` down (each removes its own row). */
  const removeFrom = (record: DeploymentRecord, nodes: ReadonlyArray<string>) =>
    Effect.forEach(
      nodes,
      (node) =>
        Effect.ignore(Effect.timeout(internal.call(node, "replicaTeardown", targetOf(record), "30 seconds"), "30 seconds")),
      { concurrency: "unbounded", discard: true }
    )

  /** The replicas that hold a process: active, or failed after their setup (a rerun reaches one an earlier change missed, spec §4.8). */
  const running = (record: DeploymentRecord) =>
    Effect.map(Effect.orElseSucceed(rows.of(record.id), () => []), (held) => held.filter((r) => r.status === "active" || r.port !== undefined).map((r) => r.node))

  /** 502 naming how many of the nodes applied the change and each that did not. */
  const partial = (record: DeploymentRecord, kind: Exclude<Kind, "setup">, total: number, failed: ReadonlyArray<Failed>) =>
    Effect.zipRight(
      noteFailures(record, kind, failed),
      Effect.fail(
        refuse(
          "REPLICAS_FAILED",
          `applied on ${total - failed.length} of ${total} nodes; not on ${failed.map((f) => `${f.node}: ${f.reason}`).join(", ")}`,
          "the home node runs the change; rerun it to send it to every replica again"
        )
      )
    )

  /** The change on every replica that holds a process, after the home node. */
  const toReplicas = (record: DeploymentRecord, kind: Exclude<Kind, "setup">, call: Call) =>
    Effect.gen(function* () {
      const nodes = yield* running(record)
      if (nodes.length === 0) return
      const failed = (yield* fanOut(record, nodes, kind, call)).filter((o): o is Failed => !o.ok)
      if (failed.length > 0) return yield* partial(record, kind, 1 + nodes.length, failed)
    })

  return {
    created: (record) => ensure(record),
    changed: (record, kind) =>
      Effect.gen(function* () {
        // a version is stored only where replicas are wanted (the replica check sets them up
        // from it later too): without, an update costs its namespace no stored archive
        if (wanted === 0) return
        const order = yield* Effect.catchAll(cidOf(record), (e) =>
          Effect.as(Effect.logWarning(`version ${record.version} of ${record.id} not stored for its replicas: ${"detail" in e ? e.detail : e.reason}`), undefined)
        )
        if (order !== undefined) return yield* toReplicas(record, kind, versionCall(record, kind, order))
        const nodes = yield* running(record)
        if (nodes.length > 0) yield* partial(record, kind, 1 + nodes.length, nodes.map((node) => ({ node, ok: false, reason: "the version was not stored" }) as const))
      }),
    envChanged: (record, envVersion) =>
      toReplicas(record, "env", (node) => internal.call(node, "replicaEnv", { ...targetOf(record), env_version: stampText(envVersion) }, REPLICA_CALL)),
    removed: removeFrom,
    ensure
  }
}
