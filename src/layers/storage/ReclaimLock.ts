/**
 * The lock between imports and reclaims on one node: an import holds a shared hold from its
 * first block until its caller has recorded the pin; a sweep or an eviction takes the lock
 * exclusively, and reads the list of pins to keep only once it holds it. So a reclaim never
 * removes blocks an import has written, whether or not their pin was recorded while it waited.
 *
 * New shared holders may go ahead of a waiting reclaim: a sweep can wait behind a steady stream
 * of uploads, never the other way round (a reclaim that held uploads back would let one stalled
 * client stop every upload on the node). An eviction, which a client waits for, gives up after a
 * bounded wait instead (`exclusiveWithin`).
 */
import { Clock, Data, Duration, Effect, Option, type Scope } from "effect"

const ALL = 1_000_000
const POLL = Duration.millis(50)

/** The exclusive hold could not be had within the wait: an import is still in progress. */
export class ReclaimBusy extends Data.TaggedError("ReclaimBusy")<{}> {}

export interface ReclaimLock {
  /** A shared hold until the current scope closes. */
  readonly hold: Effect.Effect<void, never, Scope.Scope>
  /** Runs `work` with no import in progress. */
  readonly exclusive: <A, E, R>(work: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** As `exclusive`, but fails with `ReclaimBusy` when the hold takes longer than `wait`. */
  readonly exclusiveWithin: (wait: Duration.DurationInput) => <A, E, R>(work: Effect.Effect<A, E, R>) => Effect.Effect<A, E | ReclaimBusy, R>
}

export const makeReclaimLock: Effect.Effect<ReclaimLock> = Effect.map(Effect.makeSemaphore(ALL), (permits) => {
  // Polled rather than a timed-out wait: an interrupted wait that had just been granted could
  // leave every permit taken, and with them every upload on the node stopped for good.
  const exclusiveWithin =
    (wait: Duration.DurationInput) =>
    <A, E, R>(work: Effect.Effect<A, E, R>): Effect.Effect<A, E | ReclaimBusy, R> => {
      const attempt = (deadline: number): Effect.Effect<A, E | ReclaimBusy, R> =>
        Effect.flatMap(permits.withPermitsIfAvailable(ALL)(work), (done) =>
          Option.isSome(done)
            ? Effect.succeed(done.value)
            : Effect.flatMap(Clock.currentTimeMillis, (now) =>
                now >= deadline ? Effect.fail(new ReclaimBusy()) : Effect.zipRight(Effect.sleep(POLL), Effect.suspend(() => attempt(deadline)))
              )
        )
      return Effect.flatMap(Clock.currentTimeMillis, (start) => attempt(start + Duration.toMillis(wait)))
    }
  return {
    hold: Effect.asVoid(Effect.acquireRelease(permits.take(1), () => permits.release(1))),
    exclusive: permits.withPermits(ALL),
    exclusiveWithin
  }
})
