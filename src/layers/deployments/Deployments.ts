/**
 * The deployments service (spec §2.7, §3.4, §4.8): what the deployments routes do, over the
 * record store, the per-deployment lock, the instance directories, content storage and the host
 * table. Uploads are `DeploymentUploads.ts`; this module holds the management routes and wires
 * the two together. A dynamic app's update, rollback, environment change and delete run on its
 * home node, forwarded there from any other gateway (`DeploymentHome.ts`). The decisions are in docs/deployments.md ("Routes", "The deployments service").
 */
import { Context, Effect, Either, Layer, Option, Schedule } from "effect"
import { applyEnvChange, type EnvChange } from "../../domain/DeploymentEnv.js"
import type { DeploymentRouteCode } from "../../domain/Errors.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { type Refused, refuse } from "../Refused.js"
import type { Page, PageRequest } from "../registry/Keyset.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { ContentIndex } from "../storage/ContentIndex.js"
import { Storage } from "../storage/Storage.js"
import { type DeploymentEvent, type DeploymentRecord, type DeploymentType, isDynamic, type VersionRecord } from "./DeploymentRecord.js"
import { type DeploymentHomeService, makeDeploymentHome, SWEEP_EVERY } from "./DeploymentHome.js"
import { DeploymentLocks } from "./DeploymentLocks.js"
import { DeploymentStore } from "./DeploymentStore.js"
import { type DeploymentTooling, makeDeploymentUploads, releaseSiteContent } from "./DeploymentUploads.js"
import { InstanceDirs } from "./InstanceDirs.js"
import { AppBuilds } from "./build/AppBuilds.js"
import { AppRuntime } from "./runtime/AppRuntime.js"
import { AppHosts } from "./serving/AppHosts.js"
import { Replicas } from "./replicas/Replicas.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export type DeploymentsRefused = Refused<DeploymentRouteCode>
export type DeploymentsError = DeploymentsRefused | StoreError

export interface EnvView {
  readonly names: ReadonlyArray<string>
  readonly envVersion: bigint
}

export interface DeploymentsService {
  /** `POST /v1/deployments/{type}/upload`: the multipart body, streamed. */
  readonly upload: (namespace: string, type: DeploymentType, contentType: string, body: AsyncIterable<Uint8Array>) => Effect.Effect<DeploymentRecord, DeploymentsError>
  /** `POST /v1/deployments/{type}/update`. */
  readonly update: (namespace: string, type: DeploymentType, contentType: string, body: AsyncIterable<Uint8Array>) => Effect.Effect<DeploymentRecord, DeploymentsError>
  readonly list: (namespace: string, page: PageRequest) => Effect.Effect<Page<DeploymentRecord>, DeploymentsError>
  readonly get: (namespace: string, name: string) => Effect.Effect<DeploymentRecord, DeploymentsError>
  readonly remove: (namespace: string, name: string) => Effect.Effect<void, DeploymentsError>
  readonly versions: (namespace: string, name: string) => Effect.Effect<{ readonly record: DeploymentRecord; readonly versions: ReadonlyArray<VersionRecord> }, DeploymentsError>
  readonly rollback: (namespace: string, name: string, version: number) => Effect.Effect<DeploymentRecord, DeploymentsError>
  readonly events: (namespace: string, name: string, page: PageRequest) => Effect.Effect<Page<DeploymentEvent>, DeploymentsError>
  readonly env: (namespace: string, name: string) => Effect.Effect<EnvView, DeploymentsError>
  readonly setEnv: (namespace: string, name: string, change: EnvChange) => Effect.Effect<EnvView & { readonly restarted: boolean }, DeploymentsError>
  readonly grants: (namespace: string, name: string) => Effect.Effect<ReadonlyArray<string>, DeploymentsError>
  readonly setGrants: (namespace: string, name: string, grants: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, DeploymentsError>
}

export const makeDeployments = (tools: DeploymentTooling): DeploymentsService => {
  const { store, locks, hosts, instances, home } = tools
  const uploads = makeDeploymentUploads(tools)

  /** The hosts table now, so a change is served at once; a failed read is retried by its own timer. */
  const refreshHosts = hosts.refresh.pipe(Effect.catchAll((e) => Effect.logWarning(`deployment host table not refreshed: ${e.detail}`)))
  /**
   * A change, then the host table, whatever its outcome: a refused one may have written a status
   * too (a first upload kept `failed`, an app the old version could not replace), and a cut one
   * is written whole or undone.
   */
  const thenRefresh = <A>(change: Effect.Effect<A, DeploymentsError>) => Effect.ensuring(change, refreshHosts)

  const named = (namespace: string, name: string): Effect.Effect<DeploymentRecord, DeploymentsError> =>
    Effect.flatMap(store.get(namespace, name), (found) =>
      Option.match(found, {
        onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${name} in this namespace`, "list them with GET /v1/deployments/list")),
        onSome: Effect.succeed
      })
    )

  /** Runs `work` on the deployment's record read again under its lock (it may have moved while waiting). */
  const locked = <A>(namespace: string, name: string, work: (record: DeploymentRecord) => Effect.Effect<A, DeploymentsError>) =>
    Effect.flatMap(named(namespace, name), (record) => locks.withLock(record.id, Effect.flatMap(store.byId(namespace, record.id), (again) =>
      Option.match(again, {
        onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${name} in this namespace`)),
        onSome: work
      })
    )))

  const envView = (namespace: string, record: DeploymentRecord) =>
    Effect.map(store.environment(namespace, record.id), (stored) => ({ names: Object.keys(stored.env).sort(), envVersion: stored.version }))

  /**
   * The delete on this node: under the lock (a first upload holds it through its setup, so a
   * delete waits for that to end); once begun, finished whole: cut halfway it would leave a record
   * with no process.
   */
  const removeHere = (namespace: string, name: string): Effect.Effect<void, DeploymentsError> =>
    locked(namespace, name, (record) =>
      Effect.uninterruptible(
        Effect.gen(function* () {
          // the process first, so its port is free when the record goes; each replica owes a
          // teardown from the same batch that removes the record, and is asked for it at once
          const replicaNodes = tools.replicaRows === undefined ? [] : (yield* tools.replicaRows.of(record.id)).map((r) => r.node)
          yield* uploads.stop(record)
          yield* store.remove(namespace, record.id)
          // a static site's files, a dynamic app's stored versions
          yield* releaseSiteContent(tools, namespace, record.name)
          if (record.type !== "static") yield* Effect.ignore(Effect.tapError(instances.release({ id: record.id, namespace, name: record.name }), (e) => Effect.logWarning(`instance directory of ${record.id} not removed: ${e.detail}`)))
          if (tools.replicas !== undefined && replicaNodes.length > 0) yield* tools.replicas.removed(record, replicaNodes)
          yield* refreshHosts
        })
      )
    )

  /**
   * The delete on the home node (DeploymentHome.ts); its replicas are asked to tear down from here
   * too, which is no work when the home node did it, and at once when it did not answer.
   */
  const removeElsewhere = (homeNode: DeploymentHomeService, record: DeploymentRecord) =>
    Effect.gen(function* () {
      const replicaNodes = tools.replicaRows === undefined ? [] : (yield* tools.replicaRows.of(record.id)).map((r) => r.node)
      yield* homeNode.remove(record)
      if (tools.replicas !== undefined && replicaNodes.length > 0) yield* tools.replicas.removed(record, replicaNodes)
      yield* refreshHosts
    })

  return {
    upload: (namespace, type, contentType, body) => thenRefresh(uploads.upload(namespace, type, contentType, body)),
    update: (namespace, type, contentType, body) => thenRefresh(uploads.update(namespace, type, contentType, body)),
    list: (namespace, page) => store.list(namespace, page),
    get: named,
    // a dynamic app's delete runs on its home node (DeploymentHome.ts), any other here
    remove: (namespace, name) =>
      Effect.flatMap(named(namespace, name), (found) => (home !== undefined && home.elsewhere(found) ? removeElsewhere(home, found) : removeHere(namespace, name))),
    versions: (namespace, name) =>
      Effect.gen(function* () {
        const record = yield* named(namespace, name)
        const versions = yield* store.versions(namespace, record.id)
        return { record, versions: [...versions].sort((a, b) => b.version - a.version) }
      }),
    rollback: (namespace, name, version) =>
      thenRefresh(
        Effect.flatMap(named(namespace, name), (found) =>
          home?.elsewhere(found) === true ? home.rollback(found, version) : locked(namespace, name, (record) => uploads.rollback(namespace, record, version))
        )
      ),
    events: (namespace, name, page) => Effect.flatMap(named(namespace, name), (record) => store.events(namespace, record.id, page)),
    env: (namespace, name) => Effect.flatMap(named(namespace, name), (record) => envView(namespace, record)),
    // once under the lock, finished whole: the write and the restart (up to the start timeout) run
    // uninterruptible, so a cut request leaves the environment written and the app started with it
    setEnv: (namespace, name, change) =>
      thenRefresh(Effect.flatMap(named(namespace, name), (found) => home?.elsewhere(found) === true ? home.setEnv(found, change) : locked(namespace, name, (record) =>
        Effect.uninterruptible(Effect.gen(function* () {
          const stored = yield* store.environment(namespace, record.id)
          const applied = applyEnvChange(stored.env, change)
          if (Either.isLeft(applied)) return yield* Effect.fail(refuse("VALIDATION_FAILED", applied.left.message))
          if (!applied.right.changed) return { names: Object.keys(stored.env).sort(), envVersion: stored.version, restarted: false }
          const names = [...Object.keys(change.set ?? {}), ...(change.unset ?? []).map(String)]
          const envVersion = yield* store.writeEnvironment(namespace, record.id, stored, applied.right.env, names)
          // an app that runs, or should and failed, is started with the new environment (the way
          // out of a failed start is changing what it lacked); a stopped app and a static site only record it
          const restarted = isDynamic(record.type) && (record.status === "active" || record.status === "failed")
          if (restarted) yield* uploads.restart(namespace, record, applied.right.env)
          if (isDynamic(record.type) && tools.replicas !== undefined) yield* tools.replicas.envChanged(record, envVersion)
          return { names: Object.keys(applied.right.env).sort(), envVersion, restarted }
        }))
      ))),
    grants: (namespace, name) => Effect.map(named(namespace, name), (record) => record.grants),
    setGrants: (namespace, name, grants) => Effect.flatMap(named(namespace, name), (record) => store.setGrants(namespace, record.id, grants))
  }
}

export class Deployments extends Context.Tag("portico/Deployments")<Deployments, DeploymentsService>() {
  /** With forwarding to home nodes, and this node's owed teardowns carried out at start and every `SWEEP_EVERY`. */
  static readonly Live = Layer.scoped(
    Deployments,
    Effect.gen(function* () {
      const base = {
        config: yield* PorticoConfig,
        store: yield* DeploymentStore,
        locks: yield* DeploymentLocks,
        instances: yield* InstanceDirs,
        registry: yield* RegistryStore,
        runtime: yield* AppRuntime
      }
      const home = makeDeploymentHome({ ...base, internal: internalClient(yield* Coordination) })
      yield* Effect.forkScoped(Effect.repeat(home.sweep, Schedule.spaced(SWEEP_EVERY)))
      const replicas = yield* Replicas
      return makeDeployments({
        ...base,
        replicas: replicas.fanout,
        replicaRows: replicas.rows,
        hosts: yield* AppHosts,
        storage: yield* Storage,
        index: yield* ContentIndex,
        builds: yield* AppBuilds,
        home
      })
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    Deployments.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          AppBuilds.Test,
          Coordination.Test,
          AppHosts.Test,
          AppRuntime.Test,
          ContentIndex.Test,
          Replicas.Test,
          DeploymentLocks.Test,
          DeploymentStore.Test,
          InstanceDirs.Test,
          PorticoConfig.Test,
          SqliteRegistryStore.Test,
          Storage.Test
        )
      )
    )
  )
}
