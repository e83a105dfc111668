/**
 * A replica node's side of a dynamic deployment (spec §4.8 "Replicas", §4.10
 * `/v1/internal/deployments/replica/*`; docs/deployments.md, "Replicas"): runs the version the
 * home node names, fetched by CID from content storage, on a port of this node's own, and keeps
 * its row in `deployment_replicas` saying whether it serves.
 *
 * Every operation runs under the deployment's lock and takes type, limits and port from the
 * registry's rows found by id, namespace and name together, never from the caller: a mismatched
 * pair is 404, a static site 400, a version older than the one this replica runs 409. What the
 * app does after its start (gave up, stopped) is written to the replica's row, not the record.
 */
import { Duration, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { PorticoSettings } from "../../config/PorticoConfig.js"
import type { StoreError } from "../../registry/RegistryStore.js"
import type { StorageService } from "../../storage/Storage.js"
import { type DeploymentRecord, isDynamic } from "../DeploymentRecord.js"
import type { DeploymentLocksService } from "../DeploymentLocks.js"
import type { DeploymentStoreService } from "../DeploymentStore.js"
import type { InstanceDirsService } from "../InstanceDirs.js"
import { probe } from "../runtime/HealthCheck.js"
import type { AppRuntimeService } from "../runtime/AppRuntime.js"
import { fetchVersion, type FetchFailure } from "./ArtifactPack.js"
import type { ReplicaRowsService } from "./ReplicaRows.js"

/** A replica route's refusal: the status and the reason its `{error}` body carries. */
export class ReplicaRefused {
  readonly _tag = "ReplicaRefused"
  constructor(
    readonly status: 400 | 404 | 409 | 502 | 503,
    readonly reason: string
  ) {}
}

export interface ReplicaTarget {
  readonly deploymentId: string
  readonly namespace: string
  readonly name: string
}

/** A version to run: `version` of the deployment, whose directory is version `artifactVersion`'s (a rollback's is an older one), stored as `cid`. */
export interface ReplicaOrder extends ReplicaTarget {
  readonly version: number
  readonly artifactVersion: number
  readonly cid: string
}

export interface ReplicaApplied {
  readonly node: string
  readonly version: number
  readonly port: number
}

export interface ReplicaHostService {
  /** setup, update and rollback alike: this node runs `order`'s version, fetched when it does not hold it. */
  readonly apply: (order: ReplicaOrder, first: boolean) => Effect.Effect<ReplicaApplied, ReplicaRefused>
  /** The environment stamped `envVersion` (already written by the home node): the app restarted with it. */
  readonly env: (target: ReplicaTarget, envVersion: bigint) => Effect.Effect<{ readonly node: string; readonly envVersion: bigint }, ReplicaRefused>
  /** Stops the app, removes its directory and its row here, and any teardown owed by this node for it. */
  readonly teardown: (target: ReplicaTarget) => Effect.Effect<void, ReplicaRefused>
  /** After a restart: every replica of this node brought back at the version the registry holds. */
  readonly resume: Effect.Effect<void>
  /** One health round: each replica's row made to say whether its app answers here (every `PROBE_EVERY`). */
  readonly probeRound: Effect.Effect<void>
}

export interface ReplicaHostTools {
  readonly config: PorticoSettings
  readonly store: DeploymentStoreService
  readonly rows: ReplicaRowsService
  readonly locks: DeploymentLocksService
  readonly instances: InstanceDirsService
  readonly runtime: AppRuntimeService
  readonly storage: StorageService
}

/** Spec §4.8, §8: the artifact is polled every 2 s, up to 60 s. */
export const POLL_EVERY = Duration.seconds(2)
export const POLL_FOR = Duration.seconds(60)
/** Spec §8: a health probe every 30 s per local replica. */
export const PROBE_EVERY = Duration.seconds(30)

const storeFailed = (e: StoreError) => new ReplicaRefused(503, `the registry did not answer: ${e.detail}`)

/** The version number of an artifact directory `versions/<n>`. */
export const artifactVersionOf = (artifact: string): number | undefined => {
  const match = /^versions\/(\d{1,9})$/.exec(artifact)
  return match === null ? undefined : Number(match[1])
}

const CID_MARK = ".portico-cid"

export const makeReplicaHost = (tools: ReplicaHostTools): ReplicaHostService => {
  const { config, store, rows, runtime } = tools
  const self = config.nodeId

  const recordOf = (target: ReplicaTarget) =>
    Effect.gen(function* () {
      const found = yield* Effect.mapError(store.byId(target.namespace, target.deploymentId), storeFailed)
      if (Option.isNone(found) || found.value.name !== target.name) return yield* Effect.fail(new ReplicaRefused(404, "no such deployment: id, namespace and name do not match"))
      const record = found.value
      if (!isDynamic(record.type)) return yield* Effect.fail(new ReplicaRefused(400, "a static site runs no process"))
      if (record.homeNode === self) return yield* Effect.fail(new ReplicaRefused(409, "this node is the deployment's home node"))
      return record
    })

  /** The deployment's instance directory on this node, claimed by the rules of InstanceDirs (another's is 409). */
  const claimDir = (record: DeploymentRecord) =>
    Effect.mapError(tools.instances.claim({ id: record.id, namespace: record.namespace, name: record.name }), (e) =>
      e._tag === "Refused" ? new ReplicaRefused(409, e.reason) : new ReplicaRefused(503, e.detail)
    )

  const ownRow = (id: string) => Effect.map(Effect.mapError(rows.of(id), storeFailed), (all) => all.find((r) => r.node === self))

  /** The version's directory in place: kept when it holds `cid` already, else fetched, retrying what is not retrievable yet. */
  const placeVersion = (instanceDir: string, order: ReplicaOrder) =>
    Effect.gen(function* () {
      const dir = path.join(instanceDir, "versions", String(order.artifactVersion))
      const held = yield* Effect.promise(() => fs.promises.readFile(path.join(dir, CID_MARK), "utf8").catch(() => ""))
      if (held === order.cid) return
      yield* Effect.promise(() => fs.promises.rm(dir, { recursive: true, force: true }))
      yield* Effect.promise(() => fs.promises.mkdir(path.dirname(dir), { recursive: true, mode: 0o755 }))
      const deadline = Date.now() + Duration.toMillis(POLL_FOR)
      for (;;) {
        const fetched = yield* Effect.either(fetchVersion(tools.storage, order.namespace, order.cid, dir))
        if (fetched._tag === "Right") break
        const failure: FetchFailure = fetched.left
        if (failure._tag === "Refused") return yield* Effect.fail(new ReplicaRefused(502, `artifact not fetched: ${failure.detail}`))
        if (Date.now() + Duration.toMillis(POLL_EVERY) > deadline) return yield* Effect.fail(new ReplicaRefused(502, `artifact not retrievable within ${Duration.toSeconds(POLL_FOR)} s: ${failure.detail}`))
        yield* Effect.sleep(POLL_EVERY)
      }
      yield* Effect.promise(() => fs.promises.writeFile(path.join(dir, CID_MARK), order.cid, { mode: 0o644 }))
    })

  /** The supervisor's word on this replica's process, written to its row. */
  const statusTo = (version: number, envVersion: bigint) => (_namespace: string, id: string, status: string, detail?: Readonly<Record<string, string | number>>) =>
    Effect.as(
      status === "active" ? rows.markActive(id, self, version, envVersion) : rows.markFailed(id, self, `${status}: ${String(detail?.["reason"] ?? "")}`, false),
      true
    )

  /** Starts `record` as this replica runs it: its own port, the version's directory; answers once healthy. */
  const startHere = (record: DeploymentRecord, instanceDir: string, port: number, version: number, artifactVersion: number) =>
    Effect.gen(function* () {
      const env = yield* Effect.mapError(store.environment(record.namespace, record.id), (e) =>
        e._tag === "Refused" ? new ReplicaRefused(404, e.reason) : storeFailed(e)
      )
      const here = { ...record, port, version, artifact: `versions/${artifactVersion}` }
      yield* Effect.mapError(runtime.start({ record: here, instanceDir, env: env.env, setStatus: statusTo(version, env.version) }), (e) =>
        new ReplicaRefused(e.code === "UNAVAILABLE" ? 503 : 502, e.reason)
      )
      return env.version
    })

  const apply: ReplicaHostService["apply"] = (order, first) =>
    tools.locks.withLock(
      order.deploymentId,
      Effect.gen(function* () {
        const record = yield* recordOf(order)
        const row = yield* ownRow(order.deploymentId)
        if (row !== undefined && row.status === "active" && row.version > order.version) {
          return yield* Effect.fail(new ReplicaRefused(409, `version ${order.version} is older than version ${row.version}, which this replica runs`))
        }
        if (record.version > order.version) return yield* Effect.fail(new ReplicaRefused(409, `version ${order.version} is older than the deployment's version ${record.version}`))
        const claim = yield* claimDir(record)
        // a failed setup stops what it started and gives its port back; a failed update keeps its port
        const failed = (reason: string) => Effect.zipRight(Effect.ignore(rows.markFailed(record.id, self, reason, first)), first ? runtime.stop(record.id) : Effect.void)
        return yield* Effect.gen(function* () {
          yield* placeVersion(claim.dir, order)
          const port = yield* Effect.mapError(rows.claimPort(record.id, self, config.deployments.appPorts), storeFailed)
          if (port === undefined) return yield* Effect.fail(new ReplicaRefused(503, "no free app port on this node"))
          const envVersion = yield* startHere(record, claim.dir, port, order.version, order.artifactVersion)
          yield* Effect.mapError(rows.markActive(record.id, self, order.version, envVersion), storeFailed)
          return { node: self, version: order.version, port }
        }).pipe(Effect.tapError((e) => failed(e.reason)))
      })
    ).pipe(Effect.catchTag("Refused", (e) => Effect.fail(new ReplicaRefused(503, e.reason))))

  const env: ReplicaHostService["env"] = (target, envVersion) =>
    tools.locks.withLock(
      target.deploymentId,
      Effect.gen(function* () {
        const record = yield* recordOf(target)
        const row = yield* ownRow(record.id)
        if (row === undefined || row.port === undefined) return yield* Effect.fail(new ReplicaRefused(404, "this node holds no replica of the deployment"))
        if (row.envVersion > envVersion) return yield* Effect.fail(new ReplicaRefused(409, `environment ${envVersion} is older than ${row.envVersion}, which this replica runs`))
        const versions = yield* Effect.mapError(store.versions(record.namespace, record.id), storeFailed)
        const artifact = versions.find((v) => v.version === row.version)?.artifact
        const artifactVersion = artifact === undefined ? undefined : artifactVersionOf(artifact)
        if (artifactVersion === undefined) return yield* Effect.fail(new ReplicaRefused(409, `this replica runs no version the registry holds (${row.version})`))
        const claim = yield* claimDir(record)
        const started = yield* startHere(record, claim.dir, row.port, row.version, artifactVersion).pipe(
          Effect.tapError((e) => Effect.ignore(rows.markFailed(record.id, self, e.reason, false)))
        )
        yield* Effect.mapError(rows.markActive(record.id, self, row.version, started), storeFailed)
        return { node: self, envVersion: started }
      })
    ).pipe(Effect.catchTag("Refused", (e) => Effect.fail(new ReplicaRefused(503, e.reason))))

  const teardown: ReplicaHostService["teardown"] = (target) =>
    tools.locks.withLock(
      target.deploymentId,
      Effect.gen(function* () {
        // the home node's own process is never a replica's to stop
        const found = yield* Effect.mapError(store.byId(target.namespace, target.deploymentId), storeFailed)
        if (Option.isSome(found) && found.value.homeNode === self) return yield* Effect.fail(new ReplicaRefused(409, "this node is the deployment's home node"))
        yield* runtime.stop(target.deploymentId)
        yield* Effect.mapError(tools.instances.release({ id: target.deploymentId, namespace: target.namespace, name: target.name }), (e) => new ReplicaRefused(503, e.detail))
        yield* Effect.mapError(rows.remove(target.deploymentId, self), storeFailed)
      })
    ).pipe(Effect.catchTag("Refused", (e) => Effect.fail(new ReplicaRefused(503, e.reason))))

  /** This node's replica rows with their records; a row whose deployment went is dropped (its owed teardown stops the app). */
  const mine = Effect.gen(function* () {
    const held = yield* rows.onNode(self)
    const found: Array<{ readonly row: (typeof held)[number]; readonly record: DeploymentRecord }> = []
    for (const row of held) {
      const namespace = yield* rows.namespaceOf(row.deploymentId)
      const record = namespace === undefined ? Option.none() : yield* store.byId(namespace, row.deploymentId)
      if (Option.isNone(record)) yield* Effect.ignore(rows.remove(row.deploymentId, self))
      else found.push({ row, record: record.value })
    }
    return found
  })

  const resume: ReplicaHostService["resume"] = Effect.gen(function* () {
    for (const { row, record } of yield* mine) {
      if (record.homeNode === self) continue
      const cid = yield* rows.versionCid(record.id, record.version)
      const artifactVersion = artifactVersionOf(record.artifact)
      if (cid === undefined || artifactVersion === undefined) continue
      const order = { deploymentId: record.id, namespace: record.namespace, name: record.name, version: record.version, artifactVersion, cid }
      yield* apply(order, row.port === undefined).pipe(Effect.catchAll((e) => Effect.logWarning(`replica of ${record.id} not resumed: ${e.reason}`)))
    }
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`replicas not resumed: ${e.detail}`)))

  const probeRound: ReplicaHostService["probeRound"] = Effect.gen(function* () {
    for (const { row, record } of yield* mine) {
      if (row.port === undefined) continue
      const stats = yield* runtime.stats(record.id)
      const answers = stats?.running === true && (yield* probe(row.port, record.healthPath ?? "/health"))
      // active again only when it runs what the record says: a replica that missed a change stays
      // failed until the change is sent again (a rerun, the replica check)
      const current = row.version === record.version && row.envVersion >= record.envVersion
      if (answers && current && row.status === "failed") yield* rows.markActive(record.id, self, row.version, row.envVersion)
      if (!answers && row.status === "active") yield* rows.markFailed(record.id, self, "the health probe did not answer", false)
    }
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`replica health round not done: ${e.detail}`)))

  return { apply, env, teardown, resume, probeRound }
}
