import { it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { describe, expect } from "vitest"
import { makeReclaimLock, ReclaimBusy } from "../../../src/layers/storage/ReclaimLock.js"

describe("ReclaimLock", () => {
  it.live("gives up an exclusive wait past its bound and leaves the lock usable", () =>
    Effect.gen(function* () {
      const lock = yield* makeReclaimLock
      const scope = yield* Scope.make()
      yield* Scope.extend(lock.hold, scope)
      const ran = yield* Deferred.make<void>()
      const busy = yield* Effect.flip(lock.exclusiveWithin("200 millis")(Deferred.succeed(ran, undefined)))
      expect(busy).toBeInstanceOf(ReclaimBusy)
      expect(yield* Deferred.isDone(ran)).toBe(false)
      // shared holds still work beside the abandoned wait
      yield* Effect.scoped(lock.hold)
      yield* Scope.close(scope, Exit.void)
      expect(yield* lock.exclusiveWithin("200 millis")(Effect.succeed("ran"))).toBe("ran")
    })
  )

  it.live("runs an exclusive once the import it waited for lets go, within the bound", () =>
    Effect.gen(function* () {
      const lock = yield* makeReclaimLock
      const scope = yield* Scope.make()
      yield* Scope.extend(lock.hold, scope)
      const waiting = yield* Effect.fork(lock.exclusiveWithin("5 seconds")(Effect.succeed("ran")))
      yield* Effect.sleep("150 millis")
      expect(waiting.unsafePoll()).toBeNull()
      yield* Scope.close(scope, Exit.void)
      expect(yield* Fiber.join(waiting)).toBe("ran")
      // and nothing stays taken: an import and another reclaim go ahead
      yield* Effect.scoped(lock.hold)
      expect(yield* lock.exclusive(Effect.succeed(1))).toBe(1)
    })
  )
})
