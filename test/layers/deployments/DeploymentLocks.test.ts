/**
 * The per-deployment lock: changes of one deployment take turns, different deployments do not
 * wait for each other, a wait past the bound is UNAVAILABLE (503) and runs nothing, and the map
 * forgets a deployment once no one holds or waits for its lock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Either, Fiber, TestClock } from "effect"
import { makeDeploymentLocks } from "../../../src/layers/deployments/DeploymentLocks.js"

describe("DeploymentLocks", () => {
  it.effect("one deployment's changes take turns; another deployment's run meanwhile", () =>
    Effect.gen(function* () {
      const locks = makeDeploymentLocks()
      const order: Array<string> = []
      const release = yield* Deferred.make<void>()
      const holding = yield* Deferred.make<void>()
      const first = yield* Effect.fork(
        locks.withLock("d1", Effect.sync(() => order.push("first in")).pipe(Effect.zipRight(Deferred.succeed(holding, undefined)), Effect.zipRight(Deferred.await(release))))
      )
      yield* Deferred.await(holding)
      const second = yield* Effect.fork(locks.withLock("d1", Effect.sync(() => order.push("second"))))
      yield* Effect.sleep(Duration.zero).pipe(Effect.repeatN(10))
      yield* locks.withLock("d2", Effect.sync(() => order.push("other deployment")))
      expect(order).toEqual(["first in", "other deployment"])
      expect(locks.busy()).toEqual(["d1"])
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      expect(order).toEqual(["first in", "other deployment", "second"])
      expect(locks.busy()).toEqual([])
    })
  )

  it.effect("a wait past the bound is UNAVAILABLE with a retry, and its work never runs", () =>
    Effect.gen(function* () {
      const locks = makeDeploymentLocks({ wait: Duration.seconds(120) })
      const release = yield* Deferred.make<void>()
      const holding = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(locks.withLock("d1", Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release))))
      yield* Deferred.await(holding)
      let ran = false
      const waiter = yield* Effect.fork(Effect.either(locks.withLock("d1", Effect.sync(() => (ran = true)))))
      yield* TestClock.adjust(Duration.seconds(121))
      const refused = yield* Fiber.join(waiter)
      expect(Either.isLeft(refused) && refused.left).toMatchObject({ code: "UNAVAILABLE", status: 503, retryAfterSeconds: 5 })
      expect(ran).toBe(false)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      // the lock is whole again after a timed-out waiter and a failing holder
      expect(yield* Effect.either(locks.withLock("d1", Effect.fail("boom")))).toEqual(Either.left("boom"))
      expect(yield* locks.withLock("d1", Effect.succeed(7))).toBe(7)
      expect(locks.busy()).toEqual([])
    })
  )

  it.effect("an interrupted holder or waiter gives the lock back", () =>
    Effect.gen(function* () {
      const locks = makeDeploymentLocks()
      const holding = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(locks.withLock("d1", Effect.zipRight(Deferred.succeed(holding, undefined), Effect.never)))
      yield* Deferred.await(holding)
      const waiter = yield* Effect.fork(locks.withLock("d1", Effect.void))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(waiter)
      yield* Fiber.interrupt(holder)
      expect(locks.busy()).toEqual([])
      expect(yield* locks.withLock("d1", Effect.succeed("free"))).toBe("free")
    })
  )
})
