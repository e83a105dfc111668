/**
 * A namespace's apps on this node, brought back to what the registry says (spec §4.10
 * `/v1/internal/namespace/repair` and `spawn`; docs/cluster.md, "Repair and spawn").
 *
 * Portico's per-namespace processes are its deployed apps, so these are what a repair reconciles:
 * every dynamic deployment homed on this node whose record says it should run (`active`), or whose
 * supervisor gave up on it (`failed`), is started from its instance directory and stored
 * environment where this gateway does not run it. Such gaps come from a gateway that started while
 * the registry did not answer (nothing resumed), an app that failed past its restarts, or a fix
 * made outside the API. A `stopped` app (a clean exit under `on-failure`) chose to end and is left.
 *
 * `spawn` does the same for one named app (`start`), or stops and starts it again (`restart`).
 * Each app is worked on under its deployment lock, its record read again there, so a repair and an
 * update or delete never interleave.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { SpawnAction } from "../../domain/NodeAdmin.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { refuse } from "../Refused.js"
import type { StoreError } from "../registry/RegistryStore.js"
import type { DeploymentRefused } from "./DeploymentRefused.js"
import { type DeploymentRecord, isDynamic } from "./DeploymentRecord.js"
import { DeploymentLocks } from "./DeploymentLocks.js"
import { DeploymentStore } from "./DeploymentStore.js"
import { AppRuntime, type RuntimeRefused } from "./runtime/AppRuntime.js"
import { AppHosts } from "./serving/AppHosts.js"

export interface RepairedApps {
  /** Apps this gateway already ran. */
  readonly running: ReadonlyArray<string>
  /** Apps started by the repair. */
  readonly started: ReadonlyArray<string>
  /** Apps that did not start, each with why; their status is `failed` with that reason. */
  readonly failed: ReadonlyArray<{ readonly name: string; readonly reason: string }>
}

export interface AppRepairService {
  readonly repair: (namespace: string) => Effect.Effect<RepairedApps, StoreError>
  /** One app of `namespace` homed here: whether it was `running` already or was `started`. */
  readonly spawn: (
    namespace: string,
    name: string,
    action: SpawnAction
  ) => Effect.Effect<"running" | "started", DeploymentRefused | RuntimeRefused | StoreError>
}

/** What a repair starts: a dynamic app that should run or whose supervisor gave up. */
const wanted = (record: DeploymentRecord) => isDynamic(record.type) && (record.status === "active" || record.status === "failed")

export class AppRepair extends Context.Tag("portico/AppRepair")<AppRepair, AppRepairService>() {
  static readonly Live = Layer.effect(
    AppRepair,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* DeploymentStore
      const runtime = yield* AppRuntime
      const locks = yield* DeploymentLocks
      const hosts = yield* AppHosts
      const refreshHosts = hosts.refresh.pipe(Effect.catchAll((e) => Effect.logWarning(`deployment host table not refreshed: ${e.detail}`)))

      /** Starts `record` unless it runs, and writes what came of it to its status. */
      const bringBack = (record: DeploymentRecord, restart: boolean) =>
        Effect.gen(function* () {
          if (restart) yield* runtime.stop(record.id)
          const outcome = yield* runtime.revive(record).pipe(
            Effect.tapError((refused) => Effect.ignore(store.setStatus(record.namespace, record.id, "failed", { reason: `not started by a repair: ${refused.reason}` })))
          )
          if (outcome === "started" && record.status !== "active") {
            yield* store.setStatus(record.namespace, record.id, "active", { reason: restart ? "restarted by an operator" : "started by a repair" })
          }
          return outcome
        })

      /** `work` on the record of deployment `id` read again under its lock; none when it went meanwhile. */
      const underLock = <A, E>(namespace: string, id: string, work: (record: DeploymentRecord) => Effect.Effect<A, E>) =>
        locks.withLock(id, Effect.flatMap(store.byId(namespace, id), (again) => (Option.isNone(again) ? Effect.succeed(Option.none<A>()) : Effect.asSome(work(again.value)))))

      const repair: AppRepairService["repair"] = (namespace) =>
        Effect.gen(function* () {
          const here = (yield* store.onNode(config.nodeId)).filter((r) => r.namespace === namespace && wanted(r))
          const running: Array<string> = []
          const started: Array<string> = []
          const failed: Array<{ name: string; reason: string }> = []
          yield* Effect.forEach(
            here,
            (record) =>
              underLock(namespace, record.id, (again) =>
                again.homeNode !== config.nodeId || !wanted(again) ? Effect.succeed(undefined) : bringBack(again, false)
              ).pipe(
                Effect.map((outcome) => {
                  const done = Option.getOrUndefined(outcome)
                  if (done === "running") running.push(record.name)
                  else if (done === "started") started.push(record.name)
                }),
                Effect.catchAll((e) => Effect.sync(() => void failed.push({ name: record.name, reason: "reason" in e ? e.reason : "the registry did not answer" })))
              ),
            { concurrency: 2, discard: true }
          )
          if (started.length > 0 || failed.length > 0) yield* refreshHosts
          return { running: running.sort(), started: started.sort(), failed: failed.sort((a, b) => (a.name < b.name ? -1 : 1)) }
        })

      const spawn: AppRepairService["spawn"] = (namespace, name, action) =>
        Effect.gen(function* () {
          const found = yield* store.get(namespace, name)
          if (Option.isNone(found)) return yield* Effect.fail(refuse("NOT_FOUND", `no deployment ${name} in this namespace`))
          const outcome = yield* underLock(namespace, found.value.id, (record) =>
            Effect.gen(function* () {
              if (!isDynamic(record.type)) return yield* Effect.fail(refuse("CONFLICT", "a static site runs no process"))
              if (record.homeNode !== config.nodeId) {
                return yield* Effect.fail(refuse("CONFLICT", `deployment ${name} is homed on node ${record.homeNode}`, "send the spawn to its home node"))
              }
              return yield* bringBack(record, action === "restart")
            })
          )
          yield* refreshHosts
          return yield* Option.match(outcome, {
            onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${name} in this namespace`)),
            onSome: Effect.succeed
          })
        })

      return AppRepair.of({ repair, spawn })
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    AppRepair.Live.pipe(
      Layer.provide(Layer.mergeAll(AppHosts.Test, AppRuntime.Test, DeploymentLocks.Test, DeploymentStore.Test, PorticoConfig.Test))
    )
  )
}
