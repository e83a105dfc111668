/**
 * One transfer at a time per gateway (spec §8): imports, exports, backups and restores move whole
 * databases, and two at once would compete for the same disk and memory. A second caller is
 * told to come back (429) rather than queued; a transfer past its budget is stopped.
 */
import { Context, Duration, Effect, Fiber, Layer, type Scope } from "effect"
import { Code } from "../../domain/Errors.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { type Refused, refuse } from "../Refused.js"

export interface TransferSlotService {
  /** Runs `work` holding the slot, within the budget; 429 when the slot is taken. */
  readonly run: <A, E, R>(what: string, work: Effect.Effect<A, E, R>) => Effect.Effect<A, E | TransferBusy, R>
  /**
   * Takes the slot until the returned effect runs (the streamed answer's last byte has been read
   * for the client), the scope closes (the request ends: a client gone mid-answer), or the budget
   * runs out, whichever is first; 429 when it is taken. Giving it back twice is harmless.
   */
  readonly hold: (what: string) => Effect.Effect<Effect.Effect<void>, TransferBusy, Scope.Scope>
}

/**
 * The slot's refusals: taken (429, retry when the running transfer has finished), or a transfer
 * stopped at its budget (503). In the catalogue's codes (src/layers/Refused.ts), not the SQL
 * family's type, so this folder imports no database module.
 */
export type TransferBusy = Refused<typeof Code.RATE_LIMITED | typeof Code.UNAVAILABLE>

const busy = (): TransferBusy => refuse(Code.RATE_LIMITED, "another import, export or backup is running on this gateway", "retry when it has finished", 5)

export class TransferSlot extends Context.Tag("portico/TransferSlot")<TransferSlot, TransferSlotService>() {
  static readonly Live = Layer.effect(
    TransferSlot,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const budget = Duration.millis(config.sql.transferBudgetMs)
      // One JavaScript thread, and a caller is never queued: a flag is the whole lock. The
      // generation makes giving back idempotent per holder: an early give-back (an export's last
      // byte) followed by the request's end, or the budget, must not free a slot another transfer
      // took since, which a Semaphore's release would.
      let taken = false
      let generation = 0
      const take = Effect.suspend(() => {
        if (taken) return Effect.fail(busy())
        taken = true
        return Effect.succeed(++generation)
      })
      const give = (held: number) =>
        Effect.sync(() => {
          if (generation === held) taken = false
        })
      return {
        run: (what, work) =>
          Effect.acquireUseRelease(
            take,
            () =>
              Effect.timeoutFail(work, {
                duration: budget,
                onTimeout: () =>
                  refuse(Code.UNAVAILABLE, `the ${what} ran over its ${Duration.format(budget)} budget and was stopped`, "retry later, or move less data at once", 30)
              }),
            give
          ),
        hold: (_what) =>
          Effect.gen(function* () {
            const held = yield* Effect.acquireRelease(take, give)
            // a stalled reader must not keep the slot forever: the budget gives it back, on its
            // own fiber (Effect's clock, so tests drive it), stopped when the request ends. Not
            // `forkScoped`: the request's scope is the listener's own (src/api/node/RequestScope.ts)
            const budgetFiber = yield* Effect.forkDaemon(Effect.delay(give(held), budget))
            yield* Effect.addFinalizer(() => Fiber.interrupt(budgetFiber))
            return give(held)
          })
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() => TransferSlot.Live.pipe(Layer.provide(PorticoConfig.Test)))
}
