/**
 * Replicas of dynamic deployments (docs/deployments.md, "Replicas"): this node's part as a
 * replica (`host`, ReplicaHost.ts), as a home node (`fanout`, ReplicaFanout.ts), and the rows both
 * keep (`rows`, ReplicaRows.ts). Once the gateway listens, this node's replicas are brought back
 * at the version the registry holds, each is probed every 30 s, and processes the registry gives
 * this node no more are swept every 2 minutes (OrphanSweep.ts; spec §8).
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { Membership } from "../../cluster/Membership.js"
import { PorticoConfig } from "../../config/PorticoConfig.js"
import { Coordination } from "../../coordination/Coordination.js"
import { internalClient } from "../../coordination/InternalClient.js"
import { RegistryStore } from "../../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../registry/SqliteRegistryStore.js"
import { Storage } from "../../storage/Storage.js"
import { DeploymentLocks } from "../DeploymentLocks.js"
import { DeploymentStore } from "../DeploymentStore.js"
import { InstanceDirs } from "../InstanceDirs.js"
import { AppRuntime } from "../runtime/AppRuntime.js"
import { makeReplicaFanout, type ReplicaFanoutService } from "./ReplicaFanout.js"
import { makeReplicaHost, PROBE_EVERY, type ReplicaHostService } from "./ReplicaHost.js"
import { makeReplicaRows, type ReplicaRowsService } from "./ReplicaRows.js"
import { makeOrphanSweep, ORPHAN_SWEEP_EVERY } from "./OrphanSweep.js"

export interface ReplicasService {
  readonly rows: ReplicaRowsService
  readonly host: ReplicaHostService
  readonly fanout: ReplicaFanoutService
}

export class Replicas extends Context.Tag("portico/Replicas")<Replicas, ReplicasService>() {
  static readonly Live = Layer.scoped(
    Replicas,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const registry = yield* RegistryStore
      const store = yield* DeploymentStore
      const storage = yield* Storage
      const instances = yield* InstanceDirs
      const runtime = yield* AppRuntime
      const rows = makeReplicaRows(registry)
      const host = makeReplicaHost({ config, store, rows, locks: yield* DeploymentLocks, instances, runtime, storage })
      const fanout = makeReplicaFanout({
        config,
        rows,
        store,
        registry,
        storage,
        internal: internalClient(yield* Coordination),
        membership: yield* Membership,
        instancesRoot: instances.root
      })
      yield* Effect.forkScoped(
        Effect.zipRight(
          Effect.zipRight(runtime.ready, host.resume),
          Effect.repeat(Effect.zipRight(Effect.sleep(PROBE_EVERY), host.probeRound), Schedule.forever)
        )
      )
      const sweep = makeOrphanSweep({ nodeId: config.nodeId, store, rows, runtime })
      yield* Effect.forkScoped(Effect.zipRight(runtime.ready, Effect.repeat(Effect.zipRight(Effect.sleep(ORPHAN_SWEEP_EVERY), sweep), Schedule.forever)))
      return { rows, host, fanout }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    Replicas.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          AppRuntime.Test,
          Coordination.Test,
          DeploymentLocks.Test,
          DeploymentStore.Test,
          InstanceDirs.Test,
          Membership.Test,
          PorticoConfig.Test,
          SqliteRegistryStore.Test,
          Storage.Test
        )
      )
    )
  )
}
