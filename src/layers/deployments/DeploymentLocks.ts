/**
 * A dynamic first upload's setup, update, rollback, environment change and delete of one
 * deployment take turns (spec §4.8): a semaphore of one permit per deployment id, made on first
 * use and dropped when no one holds or waits for it, so the map holds only deployments being
 * changed. A first upload takes it on the id it draws before its record is written.
 *
 * In-process: it orders the work of one gateway. That is the whole rule on one node, where every
 * change of a deployment runs on its home node's gateway; the compare-and-swap writes of
 * DeploymentStore still refuse a change that raced past it (another process on the same registry).
 */
import { Context, Duration, Effect, Layer, Option } from "effect"
import { refuse } from "../Refused.js"
import type { DeploymentRefused } from "./DeploymentRefused.js"

export interface DeploymentLocksService {
  /**
   * Runs `effect` holding `id`'s lock. Waiting longer than the wait bound (spec §8: lock and local
   * work share 120 s) is UNAVAILABLE (503, retry after a few seconds) and runs nothing.
   */
  readonly withLock: <A, E, R>(id: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DeploymentRefused, R>
  /** Deployments whose lock is held or waited for (for tests and health). */
  readonly busy: () => ReadonlyArray<string>
}

interface Entry {
  readonly semaphore: Effect.Semaphore
  users: number
}

/** Spec §8: the lock and the local work share 120 s; waiting longer is a 503. */
export const LOCK_WAIT = Duration.seconds(120)

export const makeDeploymentLocks = (options: { readonly wait?: Duration.DurationInput | undefined } = {}): DeploymentLocksService => {
  const wait = Duration.decode(options.wait ?? LOCK_WAIT)
  const entries = new Map<string, Entry>()

  const enter = (id: string): Entry => {
    let entry = entries.get(id)
    if (entry === undefined) {
      entry = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
      entries.set(id, entry)
    }
    entry.users++
    return entry
  }
  const leave = (id: string, entry: Entry) =>
    Effect.sync(() => {
      entry.users--
      if (entry.users === 0 && entries.get(id) === entry) entries.delete(id)
    })

  const withLock: DeploymentLocksService["withLock"] = (id, effect) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const entry = enter(id)
        const taken = yield* restore(Effect.timeoutOption(entry.semaphore.take(1), wait)).pipe(Effect.onInterrupt(() => leave(id, entry)))
        if (Option.isNone(taken)) {
          yield* leave(id, entry)
          return yield* refuse("UNAVAILABLE", `deployment ${id} is being changed`, "retry once the change in progress ends", 5)
        }
        return yield* restore(effect).pipe(Effect.ensuring(Effect.zipRight(entry.semaphore.release(1), leave(id, entry))))
      })
    )

  return { withLock, busy: () => [...entries.keys()] }
}

export class DeploymentLocks extends Context.Tag("portico/DeploymentLocks")<DeploymentLocks, DeploymentLocksService>() {
  static readonly Live = Layer.sync(DeploymentLocks, () => makeDeploymentLocks())

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"): it reads nothing: the locks are the process's own. */
  static readonly Test = DeploymentLocks.Live
}
