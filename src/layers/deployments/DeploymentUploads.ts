/**
 * Upload, update and rollback of a deployment's content (docs/deployments.md, "The deployments
 * service"). The form's fields are checked before anything is stored; the archive is unpacked as
 * it streams (Archive.ts). A static site is stored as content (SiteManifest.ts) and its record
 * points at the manifest; a dynamic app is unpacked into `versions/<n>/app` of its instance
 * directory, prepared (AppBuilds) and started (AppRuntime).
 *
 * Nothing half written, whether a step is refused or cut (the client's connection closed, or the
 * body cap reached: the listener interrupts the fiber): a first upload removes its record, process,
 * directory and content, except an app that did not get healthy, whose record stays `failed` so
 * its log can be read and an update can fix it; an update or rollback leaves the deployment as it
 * was. Each mutation runs in `Effect.uninterruptibleMask`: the steps that read the body or wait on
 * the app (unpacking, prepare, start) run interruptible, each with its undo attached as
 * `Effect.onError` (which runs on interruption too); the registry writes between them run whole.
 * A dynamic first upload holds its deployment's lock from before its record exists until it is
 * active, failed or removed (docs/deployments.md, "The deployments service").
 */
import { Cause, Effect, Either, Exit, Option } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { DeploymentFieldInvalid, generatedDomain, overrideDomain, randomLabel } from "../../domain/DeploymentRules.js"
import type { DeploymentRouteCode } from "../../domain/Errors.js"
import type { PorticoSettings } from "../config/PorticoConfig.js"
import { type Refused, refuse } from "../Refused.js"
import type { RegistryStoreService, StoreError } from "../registry/RegistryStore.js"
import type { ContentIndexService } from "../storage/ContentIndex.js"
import type { StorageService } from "../storage/Storage.js"
import { ArchiveRefused, type ArchiveWriteFailed, extractArchive } from "./Archive.js"
import { type DeploymentFields, type DeploymentForm, readDeploymentForm } from "./DeploymentForm.js"
import type { DeploymentLocksService } from "./DeploymentLocks.js"
import type { DeploymentHomeService } from "./DeploymentHome.js"
import { type DeploymentRecord, type DeploymentType, isDynamic, newDeploymentId } from "./DeploymentRecord.js"
import type { DeploymentStoreService } from "./DeploymentStore.js"
import type { AppBuildsService } from "./build/AppBuilds.js"
import { type InstanceDirError, type InstanceDirsService } from "./InstanceDirs.js"
import type { AppRuntimeService } from "./runtime/AppRuntime.js"
import type { ReplicaFanoutService } from "./replicas/ReplicaFanout.js"
import type { ReplicaRowsService } from "./replicas/ReplicaRows.js"
import type { AppHostsService } from "./serving/AppHosts.js"
import { storeSiteDirectory } from "./serving/SiteManifest.js"

type Failure = Refused<DeploymentRouteCode> | StoreError

/** What `Effect.uninterruptibleMask` hands its body: runs an effect interruptible again. */
type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** The services the deployments service works with. */
export interface DeploymentTooling {
  readonly config: PorticoSettings
  readonly store: DeploymentStoreService
  readonly locks: DeploymentLocksService
  readonly instances: InstanceDirsService
  readonly hosts: AppHostsService
  readonly storage: StorageService
  readonly index: ContentIndexService
  readonly registry: RegistryStoreService
  readonly runtime: AppRuntimeService
  readonly builds: AppBuildsService
  /** Forwarding to a dynamic app's home node (DeploymentHome.ts); absent, every change runs here. */
  readonly home?: DeploymentHomeService | undefined
  /** A dynamic app's replicas (replicas/ReplicaFanout.ts); absent, it runs on its home node alone. */
  readonly replicas?: ReplicaFanoutService | undefined
  readonly replicaRows?: ReplicaRowsService | undefined
}

/** What the operator of a gateway that cannot run apps does (docs/operations.md); static sites deploy meanwhile. */
export const SANDBOX_HINT =
  "on the gateway's machine, as root: `bash scripts/engines.sh sandbox` (bubblewrap and the sandbox helpers), then restart it; static sites deploy meanwhile"

/** Generated hosts drawn before giving up: a clash of 6 random characters is already rare. */
const DOMAIN_DRAWS = 5

/** A directory of the gateway's own for unpacking a static site before it is stored. */
const stagingDir = (config: PorticoSettings) => path.join(config.dataDir, "deploy-staging")

const removeDir = (dir: string) => Effect.promise(() => fs.promises.rm(dir, { recursive: true, force: true }))

/** The CIDs a static site's content references hold (kind `deployment`, ref its name). */
const siteCids = (tools: DeploymentTooling, namespace: string, name: string): Effect.Effect<ReadonlySet<string>, StoreError> =>
  Effect.map(
    tools.registry.query({
      sql: "SELECT DISTINCT cid FROM content_refs WHERE namespace = ? AND kind = 'deployment' AND ref = ?",
      params: [namespace, name]
    }),
    (rows) => new Set(rows.map((row) => String(row["cid"])))
  )

/**
 * Releases the content references a static site holds, but those to a CID of `keep`, and the pins
 * nothing else keeps: its files then count against no quota and the sweep may drop them.
 */
export const releaseSiteContent = (
  tools: DeploymentTooling,
  namespace: string,
  name: string,
  keep: ReadonlySet<string> = new Set()
): Effect.Effect<void, StoreError> =>
  Effect.gen(function* () {
    for (const cid of yield* siteCids(tools, namespace, name)) {
      if (keep.has(cid)) continue
      yield* tools.index.release({ namespace, cid, kind: "deployment", ref: name })
      yield* tools.index.dropPinIfUnreferenced(cid)
    }
  })

/** An undo's own failure is logged: the refusal or interruption it follows is what the caller gets. */
const logged = (what: string) => <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<void> =>
  Effect.catchAllCause(Effect.asVoid(effect), (cause) => Effect.logWarning(`${what} not undone`, cause))

/** The archive's refusal as the route answers it: 413 past a cap, else 400; the platform's own failure 500. */
const archiveFailure = (formFailure: () => Error | undefined) => (e: ArchiveRefused | ArchiveWriteFailed): Effect.Effect<never, Refused<"BAD_REQUEST" | "PAYLOAD_TOO_LARGE" | "INTERNAL">> => {
  const form = formFailure()
  if (form !== undefined) return Effect.fail(refuse("BAD_REQUEST", form.message, "send the fields first and the archive last, as one whole multipart body"))
  if (e instanceof ArchiveRefused) {
    return Effect.fail(
      e.overCap
        ? refuse("PAYLOAD_TOO_LARGE", `the archive is refused: ${e.message}`, "uploads take 256 MiB, 1 GiB unpacked and 100,000 entries")
        : refuse("BAD_REQUEST", `the archive is refused: ${e.message}`, "send a tar.gz of the app's directory, without absolute paths, '..' or links leaving it")
    )
  }
  return Effect.zipRight(Effect.logError(`deployment archive not written: ${e.detail}`), Effect.fail(refuse("INTERNAL", "the archive could not be written on the gateway", "retry; the operator has the log")))
}

export const makeDeploymentUploads = (tools: DeploymentTooling) => {
  const { config, store, storage } = tools

  /** The form's checked fields and its archive, or 400. */
  const readForm = (type: DeploymentType, first: boolean, contentType: string, body: AsyncIterable<Uint8Array>) =>
    Effect.gen(function* () {
      if (!/^multipart\/form-data\s*;/i.test(contentType)) {
        return yield* Effect.fail(refuse("BAD_REQUEST", "the upload must be multipart/form-data", "send the fields, then the tar.gz as the file part archive"))
      }
      const form = yield* Effect.promise(() => readDeploymentForm(type, first, contentType, body))
      if (Either.isLeft(form)) return yield* Effect.fail(refuse(form.left instanceof DeploymentFieldInvalid ? "VALIDATION_FAILED" : "BAD_REQUEST", form.left.message))
      return form.right
    })

  /** Unpacks a static site and stores it as content under the deployment's name; answers the manifest's CID. */
  const storeSite = (namespace: string, name: string, archive: AsyncIterable<Uint8Array>, formFailure: () => Error | undefined) =>
    Effect.gen(function* () {
      const staging = stagingDir(config)
      yield* Effect.promise(() => fs.promises.mkdir(staging, { recursive: true, mode: 0o700 }))
      const dir = path.join(staging, crypto.randomBytes(12).toString("hex"))
      return yield* Effect.gen(function* () {
        yield* Effect.catchAll(extractArchive(archive, dir), archiveFailure(formFailure))
        return (yield* storeSiteDirectory(storage, namespace, name, dir)).cid
      }).pipe(Effect.ensuring(removeDir(dir)))
    })

  /** Creates the record, drawing a generated host again when it clashes with another. */
  const createRecord = (namespace: string, type: DeploymentType, fields: DeploymentFields, artifact: string, id?: string) =>
    Effect.gen(function* () {
      for (let draw = 1; ; draw++) {
        const domain = fields.subdomain === undefined ? generatedDomain(fields.name, randomLabel(), config.baseDomain) : overrideDomain(fields.subdomain, config.baseDomain)
        const created = yield* Effect.either(
          store.create({
            id,
            namespace,
            name: fields.name,
            type,
            domain,
            homeNode: config.nodeId,
            artifact,
            healthPath: fields.healthCheck,
            env: fields.env,
            status: type === "static" ? "active" : "deploying"
          })
        )
        if (Either.isRight(created)) return created.right
        const e = created.left
        if (e._tag === "Refused" && e.code === "CONFLICT" && fields.subdomain === undefined && draw < DOMAIN_DRAWS) continue
        return yield* Effect.fail(e)
      }
    })

  const nameTaken = (namespace: string, name: string) =>
    Effect.flatMap(store.get(namespace, name), (found) =>
      Option.isSome(found)
        ? Effect.fail(refuse("DEPLOYMENT_EXISTS", `deployment ${name} exists in this namespace`, "deploy with --update to replace it"))
        : Effect.void
    )

  const staticUpload = (namespace: string, fields: DeploymentFields, archive: AsyncIterable<Uint8Array>, formFailure: () => Error | undefined) =>
    Effect.gen(function* () {
      // a taken name is answered before the archive is stored (the create's own rule still decides a race)
      yield* nameTaken(namespace, fields.name)
      return yield* Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const giveBack = releaseIfUnowned(namespace, fields.name)
          // reading and storing may be cut; the record is one batch, written whole after them
          const cid = yield* restore(storeSite(namespace, fields.name, archive, formFailure)).pipe(Effect.onError(() => giveBack))
          return yield* createRecord(namespace, "static", fields, cid).pipe(Effect.onError(() => giveBack))
        })
      )
    })

  /**
   * A refused first upload gives back the content it stored under the name, unless a deployment
   * of that name exists (one created meanwhile by a racing upload holds the same references).
   */
  const releaseIfUnowned = (namespace: string, name: string) =>
    logged(`content of the refused upload ${name}`)(
      Effect.flatMap(store.get(namespace, name), (found) => (Option.isSome(found) ? Effect.void : releaseSiteContent(tools, namespace, name)))
    )

  /**
   * Under the lock. The old versions hold references under the same name: what a refused or cut
   * update stored is told apart as the CIDs the name did not hold before it (nothing else adds
   * references under the name while the lock is held), and only those are given back.
   */
  const staticUpdate = (namespace: string, record: DeploymentRecord, archive: AsyncIterable<Uint8Array>, formFailure: () => Error | undefined) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const held = yield* restore(siteCids(tools, namespace, record.name))
        const giveBack = logged(`content of the refused update of ${record.name}`)(releaseSiteContent(tools, namespace, record.name, held))
        const cid = yield* restore(storeSite(namespace, record.name, archive, formFailure)).pipe(Effect.onError(() => giveBack))
        return yield* store.addVersion(namespace, record.id, record.version, cid).pipe(Effect.onError(() => giveBack))
      })
    )

  /** The instance directory's failure: the platform's own (500, logged), never the tenant's. */
  const dirFailure = (e: InstanceDirError) =>
    Effect.zipRight(Effect.logError(`instance directory: ${e.detail}`), Effect.fail(refuse("INTERNAL", "the app's directory could not be prepared on the gateway", "retry; the operator has the log")))

  /** Claims the directory; whole, never cut between making it and marking it. */
  const claimDir = (record: DeploymentRecord) =>
    Effect.uninterruptible(Effect.catchTag(tools.instances.claim({ id: record.id, namespace: record.namespace, name: record.name }), "InstanceDirError", dirFailure))

  /** The deployment's own instance directory (claimed at its first upload; claiming again proves the marker). */
  const instanceDirOf = (record: DeploymentRecord) => Effect.map(claimDir(record), (claim) => claim.dir)

  /**
   * Unpacks the archive into `versions/<n>/app` and prepares it (start.json); answers the
   * version's relative path, the record's artifact. A refusal or interruption leaves no version
   * directory (an interrupted unpacking or install has ended before it is removed).
   */
  const placeVersion = (record: DeploymentRecord, instanceDir: string, n: number, form: DeploymentForm) =>
    Effect.gen(function* () {
      const artifact = `versions/${n}`
      const versionDir = path.join(instanceDir, artifact)
      // a directory left by a version that never became current (a crash) is not kept
      yield* removeDir(versionDir)
      yield* Effect.promise(() => fs.promises.mkdir(versionDir, { recursive: true, mode: 0o755 }))
      yield* Effect.gen(function* () {
        yield* Effect.catchAll(extractArchive(form.archive, path.join(versionDir, "app")), archiveFailure(form.formFailure))
        // the install can take minutes: an event says so to a client reading the events meanwhile
        const onInstall = (timeoutMs: number) =>
          Effect.catchAllCause(store.addEvent(record.id, "installing", { version: n, timeout_seconds: Math.round(timeoutMs / 1000) }), (cause) =>
            Effect.logWarning(`deployment ${record.id}: the installing event was not written`, cause)
          )
        yield* tools.builds.prepare({ type: record.type as "nextjs" | "go" | "nodejs", versionDir, skipInstall: form.fields.skipInstall, record, onInstall })
      }).pipe(Effect.onError(() => removeDir(versionDir)))
      return artifact
    })

  const envOf = (record: DeploymentRecord) => Effect.map(store.environment(record.namespace, record.id), (stored) => stored.env)

  /**
   * Starts `next` (the record as it will be once its version is written) in place of `current`'s
   * process, then `commit`s the version. When the new process does not get healthy, or the start is
   * cut, or the commit refused, the version is not written, `abandon` runs (the update's version
   * directory removed) and the previous process is started again (a production platform keeps the
   * old release serving; none when none was active), so the deployment stays as it was; the
   * refusal stands. Called inside `Effect.uninterruptibleMask`: only `restore`d steps may be cut.
   */
  const switchTo = (
    restore: Restore,
    current: DeploymentRecord,
    next: DeploymentRecord,
    instanceDir: string,
    commit: Effect.Effect<DeploymentRecord, Failure>,
    abandon: Effect.Effect<void> = Effect.void
  ) =>
    Effect.gen(function* () {
      const env = yield* restore(envOf(current)).pipe(Effect.onError(() => abandon))
      const restoreOld = logged(`the previous version of ${current.id}`)(
        Effect.gen(function* () {
          // the runtime stopped the old process for the new one; a new one cut mid-start may still run
          if (current.status !== "active") return yield* tools.runtime.stop(current.id)
          const back = yield* Effect.either(tools.runtime.start({ record: current, instanceDir, env }))
          if (Either.isLeft(back)) yield* store.setStatus(current.namespace, current.id, "failed", { reason: "the previous version did not start again" })
        })
      )
      const giveUp = Effect.zipRight(restoreOld, abandon)
      yield* restore(tools.runtime.start({ record: next, instanceDir, env })).pipe(Effect.onError(() => giveUp))
      const written = yield* commit.pipe(Effect.onError(() => giveUp))
      if (written.status !== "active") yield* store.setStatus(current.namespace, current.id, "active", { reason: `version ${written.version} started` })
      return yield* reread(current)
    })

  /** The record as stored now. */
  const reread = (record: DeploymentRecord) =>
    Effect.flatMap(store.byId(record.namespace, record.id), (found) =>
      Option.match(found, { onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${record.name} in this namespace`)), onSome: Effect.succeed })
    )

  const dynamicUpload = (namespace: string, type: DeploymentType, form: DeploymentForm) =>
    Effect.gen(function* () {
      const unavailable = yield* tools.runtime.available
      if (unavailable !== undefined) {
        return yield* Effect.fail(refuse("UNAVAILABLE", `this gateway cannot run apps: ${unavailable}`, SANDBOX_HINT))
      }
      yield* nameTaken(namespace, form.fields.name)
      // the lock is taken before the record exists: no update, rollback, environment change or
      // delete of it runs until its setup has ended (active, failed or removed)
      const id = newDeploymentId()
      return yield* tools.locks.withLock(id, firstSetup(namespace, type, form, id))
    })

  /** Whether a failed start leaves the record `failed` (an app that did not get healthy) rather than removed. */
  const keptFailed = (cause: Cause.Cause<Failure>) =>
    !Cause.isInterrupted(cause) &&
    Option.exists(Cause.failureOption(cause), (e) => e._tag === "Refused" && e.code === "APP_START_FAILED")

  /**
   * A first upload's setup, under its lock: the record (written whole), the directory's claim, the
   * archive into `versions/1/app`, the prepare and the start, then `active`. A refusal or a cut
   * before `active` stops whatever was started, releases the directory and removes the record;
   * an app that did not get healthy is kept `failed` instead (its log readable; an update fixes it).
   */
  const firstSetup = (namespace: string, type: DeploymentType, form: DeploymentForm, id: string) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const record = yield* createRecord(namespace, type, form.fields, "versions/1", id)
        // release removes the directory only while its marker names this deployment (not after a collision)
        const undo = logged(`the refused first upload of ${id}`)(
          Effect.all([tools.runtime.stop(id), tools.instances.release({ id, namespace, name: record.name }), store.remove(namespace, id)], { discard: true })
        )
        const instanceDir = yield* restore(
          Effect.gen(function* () {
            const claim = yield* claimDir(record)
            yield* placeVersion(record, claim.dir, 1, form)
            return claim.dir
          })
        ).pipe(Effect.onError(() => undo))
        const started = yield* Effect.exit(restore(Effect.flatMap(envOf(record), (env) => tools.runtime.start({ record, instanceDir, env }))))
        if (Exit.isFailure(started)) {
          const kept = keptFailed(started.cause)
            ? yield* Effect.isSuccess(store.setStatus(namespace, id, "failed", { reason: "not healthy after its start" }))
            : false
          if (!kept) yield* undo
          return yield* Effect.failCause(started.cause)
        }
        yield* store.setStatus(namespace, id, "active", { reason: "version 1 started" }).pipe(Effect.onError(() => undo))
        const active = yield* reread(record)
        // the replicas' setup is reported by its events and rows, never the upload's failure
        if (tools.replicas !== undefined) yield* tools.replicas.created(active)
        return active
      })
    )

  /** The version applied here sent on to every active replica (502 REPLICAS_FAILED when not all applied it). */
  const onReplicas = (record: DeploymentRecord, kind: "update" | "rollback") => (tools.replicas === undefined ? Effect.void : tools.replicas.changed(record, kind))

  /**
   * Under the lock: version current + 1 from the archive, started in place of the running one.
   * A `health_check` in the form is the path the new version is judged by, written with the
   * version (the health path is the deployment's: a rollback keeps it).
   */
  const dynamicUpdate = (current: DeploymentRecord, form: DeploymentForm) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const instanceDir = yield* restore(instanceDirOf(current))
        const n = current.version + 1
        const artifact = `versions/${n}`
        const abandon = removeDir(path.join(instanceDir, artifact))
        yield* restore(placeVersion(current, instanceDir, n, form)).pipe(Effect.onError(() => abandon))
        const healthPath = form.fields.healthCheck ?? current.healthPath
        const next = { ...current, version: n, artifact, healthPath }
        const commit = store.addVersion(current.namespace, current.id, current.version, artifact, form.fields.healthCheck)
        return yield* Effect.tap(switchTo(restore, current, next, instanceDir, commit, abandon), (done) => onReplicas(done, "update"))
      })
    )

  /** Under the lock: a new version serving `version`'s directory, started in place of the running one. */
  const dynamicRollback = (current: DeploymentRecord, version: number) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const target = (yield* restore(store.versions(current.namespace, current.id))).find((v) => v.version === version)
        if (target === undefined) return yield* Effect.fail(refuse("NOT_FOUND", `deployment ${current.name} has no version ${version}`, "list them with GET /v1/deployments/versions"))
        const instanceDir = yield* restore(instanceDirOf(current))
        const next = { ...current, version: current.version + 1, artifact: target.artifact }
        return yield* Effect.tap(switchTo(restore, current, next, instanceDir, store.rollback(current.namespace, current.id, current.version, version)), (done) =>
          onReplicas(done, "rollback")
        )
      })
    )

  return {
    upload: (namespace: string, type: DeploymentType, contentType: string, body: AsyncIterable<Uint8Array>): Effect.Effect<DeploymentRecord, Failure> =>
      Effect.gen(function* () {
        const form = yield* readForm(type, true, contentType, body)
        if (isDynamic(type)) return yield* dynamicUpload(namespace, type, form)
        return yield* staticUpload(namespace, form.fields, form.archive, form.formFailure)
      }),
    update: (namespace: string, type: DeploymentType, contentType: string, body: AsyncIterable<Uint8Array>): Effect.Effect<DeploymentRecord, Failure> =>
      Effect.gen(function* () {
        const form = yield* readForm(type, false, contentType, body)
        const found = yield* store.get(namespace, form.fields.name)
        if (Option.isNone(found)) return yield* Effect.fail(refuse("NOT_FOUND", `no deployment ${form.fields.name} in this namespace`, "deploy it first, without --update"))
        const record = found.value
        if (record.type !== type) return yield* Effect.fail(refuse("VALIDATION_FAILED", `type: deployment ${record.name} is ${record.type}, not ${type}`, `update it as ${record.type}`))
        if (tools.home?.elsewhere(record) === true) return yield* tools.home.update(record, form)
        return yield* tools.locks.withLock(
          record.id,
          Effect.gen(function* () {
            const current = yield* store.byId(namespace, record.id)
            if (Option.isNone(current)) return yield* Effect.fail(refuse("NOT_FOUND", `no deployment ${record.name} in this namespace`))
            if (isDynamic(type)) return yield* dynamicUpdate(current.value, form)
            return yield* staticUpdate(namespace, current.value, form.archive, form.formFailure)
          })
        )
      }),
    /** Under the deployment's lock: a new version serving `version`'s content (a static site's: one write, whole). */
    rollback: (namespace: string, record: DeploymentRecord, version: number): Effect.Effect<DeploymentRecord, Failure> =>
      isDynamic(record.type) ? dynamicRollback(record, version) : Effect.uninterruptible(store.rollback(namespace, record.id, record.version, version)),
    /**
     * Under the deployment's lock: an app that runs, or failed, started again with `env` (an
     * environment change), `active` once healthy. The environment is already written: an app that
     * does not get healthy with it is `failed` (502).
     * The caller runs it uninterruptible (docs/deployments.md: an environment change is finished).
     */
    restart: (namespace: string, record: DeploymentRecord, env: Readonly<Record<string, string>>): Effect.Effect<void, Failure> =>
      Effect.gen(function* () {
        const instanceDir = yield* instanceDirOf(record)
        const started = yield* Effect.either(tools.runtime.start({ record, instanceDir, env }))
        if (Either.isRight(started)) {
          if (record.status !== "active") yield* store.setStatus(namespace, record.id, "active", { reason: "started after an environment change" })
          return
        }
        if (started.left.code === "APP_START_FAILED") yield* store.setStatus(namespace, record.id, "failed", { reason: "not healthy after an environment change" })
        return yield* Effect.fail(started.left)
      }),
    /** Stops a dynamic app's process (delete). */
    stop: (record: DeploymentRecord): Effect.Effect<void> => (isDynamic(record.type) ? tools.runtime.stop(record.id) : Effect.void)
  }
}
