/**
 * The cluster's one background worker (docs/cluster.md, "The cluster worker"): periodic work that
 * must run once for the whole cluster, not once per node, runs on the node holding the `worker`
 * lease in the registry. Every node tries to take or renew it each heartbeat with one conditional
 * upsert (rqlite's writes are linearizable, so two nodes never both win); the lease lasts the
 * membership's TTL by the registry's clock, so a dead holder's lease lapses when it turns inactive
 * and another node takes over. A holder that loses the lease (cut off from the registry past the
 * TTL) stops starting tasks at its next try.
 *
 * The tasks: the sweep of a shared content store (the IPFS Cluster engine: one sweep for the
 * cluster, where the embedded engine's blocks are each node's own and each node sweeps them), the
 * registry's housekeeping (function schedules' spent claims, spent and expired node invites), and
 * the replica check of dynamic deployments (replicas/ReplicaCheck.ts: homes of retired nodes
 * moved, missing and failed replicas set up again, every PORTICO_REPLICA_CHECK_MS), and
 * after a root-secret rotation the re-sealing of values sealed under an older generation
 * (secrets/Reseal.ts): each heartbeat until a pass finds none left, then every ten minutes (a
 * node that had not yet taken the rotation may have sealed one meanwhile).
 */
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { FunctionStore } from "../functions/FunctionStore.js"
import { CLAIM_KEEP_S } from "../functions/Schedules.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { resealAll } from "../secrets/Reseal.js"
import { Sealer } from "../secrets/Sealer.js"
import { Storage } from "../storage/Storage.js"
import { Membership, REGISTRY_NOW } from "../cluster/Membership.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { DeploymentStore } from "../deployments/DeploymentStore.js"
import { replicaCheck } from "../deployments/replicas/ReplicaCheck.js"
import { Replicas } from "../deployments/replicas/Replicas.js"

const LEASE = "worker"
/** How long after a complete re-seal pass the next looks again. */
const RESEAL_RECHECK_MS = 10 * 60_000

interface Task {
  readonly name: string
  readonly everyMs: number
  readonly run: Effect.Effect<void>
}

export interface ClusterWorkerService {
  /** Whether this node held the lease at its last try. */
  readonly holding: Effect.Effect<boolean>
  /** The node holding the lease now, by the registry; undefined when none does. */
  readonly holder: Effect.Effect<string | undefined>
}

export class ClusterWorker extends Context.Tag("portico/ClusterWorker")<ClusterWorker, ClusterWorkerService>() {
  static readonly Live = Layer.scoped(
    ClusterWorker,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const store = yield* RegistryStore
      const { self } = yield* Membership
      const functions = yield* FunctionStore
      const storage = yield* Storage
      const sealer = yield* Sealer
      const ttl = config.membership.nodeTtlMs
      let holding = false
      const scope = yield* Effect.scope

      /** The generation the last complete re-seal pass found nothing left under an older one, and when. */
      let resealedFor = { generation: 0, at: 0 }
      let resealing = false
      const reseal = Effect.suspend(() => {
        const generation = sealer.generation()
        if (resealing || (generation === resealedFor.generation && Date.now() - resealedFor.at < RESEAL_RECHECK_MS)) return Effect.void
        resealing = true
        return resealAll(store, sealer).pipe(
          Effect.tap(({ resealed, skipped }) =>
            Effect.zipRight(
              resealed > 0 || skipped > 0 ? Effect.logInfo(`re-sealed ${resealed} values under root generation ${generation}; ${skipped} left as they were`) : Effect.void,
              Effect.sync(() => {
                if (skipped === 0) resealedFor = { generation, at: Date.now() }
              })
            )
          ),
          Effect.catchAll((e) => Effect.logWarning(`re-sealing failed: ${e.detail}`)),
          Effect.ensuring(Effect.sync(() => void (resealing = false))),
          Effect.asVoid
        )
      })
      const tasks: ReadonlyArray<Task> = [
        ...(config.storage.cluster === undefined
          ? []
          : [
              {
                name: "storage sweep",
                everyMs: config.storage.sweepIntervalMs,
                run: storage.sweep.pipe(
                  Effect.tap(({ removed }) => (removed > 0 ? Effect.logInfo(`storage sweep removed ${removed} blocks`) : Effect.void)),
                  Effect.catchAll((e) => Effect.logWarning(`storage sweep failed: ${e.reason}`))
                )
              }
            ]),
        {
          name: "registry housekeeping",
          everyMs: 10 * 60_000,
          run: Effect.suspend(() =>
            Effect.all([
              functions.pruneClaims(Math.floor(Date.now() / 1000) - CLAIM_KEEP_S, Date.now() - CLAIM_KEEP_S * 1000),
              store.exec({ sql: "DELETE FROM node_invites WHERE expires_at < ?", params: [Date.now() - 86_400_000] })
            ])
          ).pipe(Effect.catchAll((e) => Effect.logWarning(`registry housekeeping failed: ${e.detail}`)), Effect.asVoid)
        },
        { name: "re-seal", everyMs: config.membership.heartbeatMs, run: reseal },
        {
          name: "replica check",
          everyMs: config.deployments.replicaCheckMs,
          run: replicaCheck({ registry: store, store: yield* DeploymentStore, fanout: (yield* Replicas).fanout, membership: yield* Membership })
        }
      ]
      /** When each task last ran on this node while it held the lease. */
      const lastRun = new Map<string, number>()

      const tryLease = store
        .exec({
          sql: `INSERT INTO cluster_leases (name, holder, until) VALUES (?, ?, ${REGISTRY_NOW} + ?)
                ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
                WHERE cluster_leases.holder = excluded.holder OR cluster_leases.until < ${REGISTRY_NOW}`,
          params: [LEASE, self.id, ttl]
        })
        .pipe(
          Effect.map((r) => r.rowsAffected === 1),
          Effect.orElseSucceed(() => false)
        )

      const round = Effect.gen(function* () {
        const won = yield* tryLease
        if (won !== holding) yield* Effect.logInfo(won ? "this node now runs the cluster's background work" : "this node no longer runs the cluster's background work")
        holding = won
        if (!won) return lastRun.clear()
        const now = Date.now()
        for (const task of tasks) {
          const last = lastRun.get(task.name)
          // a new holder waits a full interval: the last holder may have just run it
          if (last === undefined) lastRun.set(task.name, now)
          else if (now - last >= task.everyMs) {
            lastRun.set(task.name, now)
            yield* Effect.forkIn(task.run, scope)
          }
        }
      })

      yield* Effect.forkScoped(Effect.repeat(round, Schedule.spaced(Duration.millis(config.membership.heartbeatMs))))
      // a clean stop hands the lease on at once
      yield* Effect.addFinalizer(() =>
        store.exec({ sql: "DELETE FROM cluster_leases WHERE name = ? AND holder = ?", params: [LEASE, self.id] }).pipe(Effect.timeout("2 seconds"), Effect.ignore)
      )

      return ClusterWorker.of({
        holding: Effect.sync(() => holding),
        holder: store
          .query({ sql: `SELECT holder FROM cluster_leases WHERE name = ? AND until >= ${REGISTRY_NOW}`, params: [LEASE] })
          .pipe(
            Effect.map(([row]) => (row === undefined ? undefined : String(row.holder))),
            Effect.orElseSucceed(() => undefined)
          )
      })
    })
  )

  /** Over its collaborators' test doubles: it takes the lease of its own registry. */
  static readonly Test = Layer.suspend(() =>
    ClusterWorker.Live.pipe(
      Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test, Sealer.Test, Membership.Test, FunctionStore.Test, Storage.Test, DeploymentStore.Test, Replicas.Test))
    )
  )
}
