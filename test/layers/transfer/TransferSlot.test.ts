/**
 * The gateway's one transfer slot on the TestClock over its test double: an import, export or
 * backup holding it refuses a second with 429, is stopped with 503 at its budget (5 minutes in
 * the test settings), and the slot is free again once it ends either way.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, TestClock } from "effect"
import { TransferSlot } from "../../../src/layers/transfer/TransferSlot.js"

const statusOf = (exit: Exit.Exit<unknown, { readonly status: number }>) =>
  Exit.isSuccess(exit) ? "done" : exit.cause._tag === "Fail" ? exit.cause.error.status : "defect"

describe("transfer slot", () => {
  it.layer(TransferSlot.Test)((it) => {
    it.effect("one transfer at a time, each stopped at its budget", () =>
      Effect.gen(function* () {
        const slot = yield* TransferSlot
        const long = yield* Effect.fork(Effect.exit(slot.run("export", Effect.sleep(Duration.hours(1)))))
        yield* TestClock.adjust(Duration.seconds(1))
        expect(statusOf(yield* Effect.exit(slot.run("import", Effect.void)))).toBe(429)

        yield* TestClock.adjust(Duration.minutes(5).pipe(Duration.subtract(Duration.seconds(2))))
        expect(long.unsafePoll()).toBeNull()
        yield* TestClock.adjust(Duration.seconds(1))
        expect(statusOf(yield* Fiber.join(long))).toBe(503)

        // free again; a transfer within its budget finishes
        const quick = yield* Effect.fork(Effect.exit(slot.run("backup", Effect.as(Effect.sleep(Duration.minutes(4)), "ok"))))
        yield* TestClock.adjust(Duration.minutes(4))
        expect(statusOf(yield* Fiber.join(quick))).toBe("done")
        expect(statusOf(yield* Effect.exit(slot.run("import", Effect.void)))).toBe("done")
      })
    )

    it.effect("a held slot (an export's answer) is given back at its last byte, at the request's end, or at the budget", () =>
      Effect.gen(function* () {
        const slot = yield* TransferSlot
        // given back early: free at once; the first request's end then frees nothing another took since
        const second = yield* Effect.scoped(
          Effect.gen(function* () {
            const giveBack = yield* slot.hold("export")
            expect(statusOf(yield* Effect.exit(slot.run("import", Effect.void)))).toBe(429)
            yield* giveBack
            return yield* Effect.fork(Effect.scoped(Effect.zipRight(slot.hold("backup"), Effect.never)))
          })
        )
        yield* TestClock.adjust(Duration.seconds(1))
        expect(statusOf(yield* Effect.exit(slot.run("import", Effect.void)))).toBe(429)
        yield* Fiber.interrupt(second)
        expect(statusOf(yield* Effect.exit(slot.run("import", Effect.void)))).toBe("done")
        // a stalled reader: the budget gives the slot back
        const stalled = yield* Effect.fork(Effect.scoped(Effect.zipRight(slot.hold("export"), Effect.never)))
        yield* TestClock.adjust(Duration.seconds(1))
        expect(statusOf(yield* Effect.exit(slot.run("import", Effect.void)))).toBe(429)
        yield* TestClock.adjust(Duration.minutes(5))
        expect(statusOf(yield* Effect.exit(slot.run("import", Effect.void)))).toBe("done")
        yield* Fiber.interrupt(stalled)
      })
    )
  })
})
