/**
 * The orphan unit sweep (spec §8: every 2 minutes, bounded to 90 s, at most 2 stopped a sweep; a
 * unit unmatched on two sweeps in a row and at least 10 minutes old; docs/deployments.md,
 * "Replicas"): an app process this node runs that the registry no longer gives it (no record
 * homed here, no replica row of this node) is stopped. Owed teardowns cover the deletes this node
 * missed; this covers what nothing owes, such as a home role moved away while the node was cut
 * off. The instance directory stays for an operator to look at.
 */
import { Duration, Effect, Option } from "effect"
import type { StoreError } from "../../registry/RegistryStore.js"
import type { DeploymentStoreService } from "../DeploymentStore.js"
import type { AppRuntimeService } from "../runtime/AppRuntime.js"
import type { ReplicaRowsService } from "./ReplicaRows.js"

export const ORPHAN_SWEEP_EVERY = Duration.minutes(2)
const SWEEP_BOUND = Duration.seconds(90)
const MAX_STOPPED = 2
const MIN_AGE_MS = 10 * 60_000

export interface OrphanSweepTools {
  readonly nodeId: string
  readonly store: DeploymentStoreService
  readonly rows: ReplicaRowsService
  readonly runtime: AppRuntimeService
}

/** One sweep at a time; `unmatched` carries the ids seen unmatched by the previous sweep. */
export const makeOrphanSweep = (tools: OrphanSweepTools) => {
  let unmatched = new Set<string>()

  /** Whether this node should run deployment `id`: homed here, or a replica row of this node. */
  const matched = (id: string): Effect.Effect<boolean, StoreError> =>
    Effect.gen(function* () {
      const namespace = yield* tools.rows.namespaceOf(id)
      if (namespace === undefined) return false
      const record = yield* tools.store.byId(namespace, id)
      if (Option.isSome(record) && record.value.homeNode === tools.nodeId) return true
      return (yield* tools.rows.of(id)).some((r) => r.node === tools.nodeId)
    })

  return Effect.gen(function* () {
    const now = Date.now()
    const seen = new Set<string>()
    let stopped = 0
    for (const unit of yield* tools.runtime.running) {
      if (yield* matched(unit.id)) continue
      seen.add(unit.id)
      if (!unmatched.has(unit.id) || now - unit.since < MIN_AGE_MS || stopped >= MAX_STOPPED) continue
      yield* Effect.logWarning(`deployment ${unit.id}: its process runs here but the registry gives it no home or replica on this node; stopped`)
      yield* tools.runtime.stop(unit.id)
      stopped++
    }
    unmatched = seen
  }).pipe(
    Effect.timeout(SWEEP_BOUND),
    Effect.catchAll((e) => Effect.logWarning(`orphan sweep not done: ${"detail" in e ? e.detail : "it took longer than 90 s"}`))
  )
}
