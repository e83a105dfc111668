import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { batcher } from "../../../src/layers/sql/Batcher.js"

/** A `send` that records each request's items and answers when the test says so. */
const recorder = () => {
  const sent: Array<ReadonlyArray<number>> = []
  const gates: Array<Deferred.Deferred<void, string>> = []
  const send = (items: ReadonlyArray<number>) =>
    Effect.gen(function* () {
      sent.push(items)
      const gate = yield* Deferred.make<void, string>()
      gates.push(gate)
      yield* Deferred.await(gate)
      return items.map((n) => n * 10)
    })
  return { sent, gates, send }
}

/** Lets the event loop run past `setImmediate`, where a batch leaves. */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve))))

describe("batcher", () => {
  it.live("sends the calls of one turn as one request, and each gets its own outcome", () =>
    Effect.gen(function* () {
      const { sent, gates, send } = recorder()
      const call = batcher({ send, maxInFlight: 2, maxItems: 100, maxWeight: 1, weigh: () => 0 })
      const fibers = yield* Effect.forEach([1, 2, 3], (n) => Effect.fork(call(n)))
      yield* nextTurn
      expect(sent).toEqual([[1, 2, 3]])
      yield* Deferred.succeed(gates[0]!, undefined)
      const outcomes = yield* Effect.forEach(fibers, Fiber.join)
      expect(outcomes).toEqual([
        { out: 10, size: 3 },
        { out: 20, size: 3 },
        { out: 30, size: 3 }
      ])
    })
  )

  it.live("gathers calls while maxInFlight requests are out, and the first answer sends them together", () =>
    Effect.gen(function* () {
      const { sent, gates, send } = recorder()
      const call = batcher({ send, maxInFlight: 1, maxItems: 100, maxWeight: 1, weigh: () => 0 })
      const first = yield* Effect.fork(call(1))
      yield* nextTurn
      const later = yield* Effect.forEach([2, 3], (n) => Effect.fork(call(n)))
      yield* nextTurn
      yield* Effect.forEach([4], (n) => Effect.fork(call(n)))
      yield* nextTurn
      // one request out: the others wait for it
      expect(sent).toEqual([[1]])
      yield* Deferred.succeed(gates[0]!, undefined)
      expect(yield* Fiber.join(first)).toEqual({ out: 10, size: 1 })
      yield* nextTurn
      expect(sent).toEqual([[1], [2, 3, 4]])
      yield* Deferred.succeed(gates[1]!, undefined)
      expect((yield* Effect.forEach(later, Fiber.join)).map((o) => o.out)).toEqual([20, 30])
    })
  )

  it.live("keeps a batch within maxItems and maxWeight, one call at least, in arrival order", () =>
    Effect.gen(function* () {
      const { sent, gates, send } = recorder()
      // weight: the number itself, in tenths
      const call = batcher({ send, maxInFlight: 10, maxItems: 3, maxWeight: 1, weigh: (n: number) => n / 10 })
      yield* Effect.forEach([1, 1, 1, 1, 5, 6, 20, 1], (n) => Effect.fork(call(n)))
      yield* nextTurn
      expect(sent).toEqual([[1, 1, 1], [1, 5], [6], [20], [1]])
      for (const gate of gates) yield* Deferred.succeed(gate, undefined)
    })
  )

  it.live("fails every call of a failed request, and sends no call whose caller went away", () =>
    Effect.gen(function* () {
      const { sent, gates, send } = recorder()
      const call = batcher({ send, maxInFlight: 1, maxItems: 100, maxWeight: 1, weigh: () => 0 })
      const first = yield* Effect.fork(call(1))
      yield* nextTurn
      const kept = yield* Effect.fork(call(2))
      const gone = yield* Effect.fork(call(3))
      yield* nextTurn
      yield* Fiber.interrupt(gone)
      yield* Deferred.fail(gates[0]!, "down")
      expect(yield* Effect.flip(Fiber.join(first))).toBe("down")
      yield* nextTurn
      expect(sent).toEqual([[1], [2]])
      yield* Deferred.fail(gates[1]!, "still down")
      expect(yield* Effect.flip(Fiber.join(kept))).toBe("still down")
    })
  )

  it.live("offers calls without a fiber beside effect calls: each outcome once, after offer returns, a throwing callback alone", () =>
    Effect.gen(function* () {
      const { sent, gates, send } = recorder()
      const call = batcher({ send, maxInFlight: 2, maxItems: 100, maxWeight: 1, weigh: () => 0 })
      const heard: Array<string> = []
      let returned = false
      call.offer(1, (exit) => {
        expect(returned).toBe(true)
        heard.push(`1 ${JSON.stringify(exit)}`)
      })
      call.offer(2, () => {
        heard.push("2")
        throw new Error("a callback's bug")
      })
      returned = true
      const effect = yield* Effect.fork(call(3))
      // the forked call joins the queue once it runs
      yield* Effect.yieldNow()
      call.offer(4, (exit) => heard.push(exit._tag === "Success" ? `4 ${exit.value.out}/${exit.value.size}` : "4 failed"))
      yield* nextTurn
      expect(sent).toEqual([[1, 2, 3, 4]])
      expect(heard).toEqual([])
      yield* Deferred.succeed(gates[0]!, undefined)
      expect(yield* Fiber.join(effect)).toEqual({ out: 30, size: 4 })
      expect(heard).toEqual([`1 ${JSON.stringify({ _id: "Exit", _tag: "Success", value: { out: 10, size: 4 } })}`, "2", "4 40/4"])
      // a failed request reaches an offered call as its failure
      call.offer(5, (exit) => heard.push(exit._tag === "Failure" ? "5 failed" : "5 answered"))
      yield* nextTurn
      yield* Deferred.fail(gates[1]!, "down")
      yield* nextTurn
      expect(heard.at(-1)).toBe("5 failed")
    })
  )
})
