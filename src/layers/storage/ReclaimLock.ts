/**
 * The lock between imports and reclaims on one node: an import holds a shared hold from its
 * first block until its caller has recorded the pin; a sweep or an eviction takes the lock
 * exclusively. So a reclaim never removes blocks an import has written but not yet pinned.
 * (New shared holders may go ahead of a waiting reclaim: a sweep can wait behind a steady
 * stream of uploads, never the other way round.)
 */
import { Effect, type Scope } from "effect"

const ALL = 1_000_000

export interface ReclaimLock {
  /** A shared hold until the current scope closes. */
  readonly hold: Effect.Effect<void, never, Scope.Scope>
  /** Runs `work` with no import in progress. */
  readonly exclusive: <A, E, R>(work: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const makeReclaimLock: Effect.Effect<ReclaimLock> = Effect.map(Effect.makeSemaphore(ALL), (permits) => ({
  hold: Effect.asVoid(Effect.acquireRelease(permits.take(1), () => permits.release(1))),
  exclusive: permits.withPermits(ALL)
}))
