/**
 * The telemetry stream's events on the TestClock (spec §6.2): a snapshot at once and every
 * interval, keepalive comments between, `event: error` for a snapshot that could not be
 * assembled, and the end after 100 seconds.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Ref, Stream, TestClock } from "effect"
import { KEEPALIVE, telemetryEvents } from "../../../src/layers/operators/Telemetry.js"

describe("telemetryEvents", () => {
  it.effect("snapshots every interval, keepalives, errors, and the end after 100 s", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0)
      // every third snapshot fails
      const snapshot = Effect.flatMap(Ref.updateAndGet(calls, (n) => n + 1), (n) => (n % 3 === 0 ? Effect.fail("down") : Effect.succeed({ n })))
      const fiber = yield* Effect.fork(Stream.runCollect(telemetryEvents(snapshot, 10)))
      yield* TestClock.adjust("101 seconds")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      const snapshots = events.filter((e) => e.startsWith("event: snapshot\n"))
      const errors = events.filter((e) => e.startsWith("event: error\n"))
      const keepalives = events.filter((e) => e === KEEPALIVE)
      // at 0, 10, …, 90 s, and the one due at 100 s as the end falls due too: each third an error
      expect(snapshots.length + errors.length).toBeGreaterThanOrEqual(10)
      expect(snapshots.length + errors.length).toBeLessThanOrEqual(11)
      expect(errors).toHaveLength(3)
      expect(snapshots[0]).toBe('event: snapshot\ndata: {"n":1}\n\n')
      expect(JSON.parse(errors[0]!.split("data: ")[1]!)).toEqual({ error: "no snapshot could be assembled" })
      // at 15, 30, …, 90 s
      expect(keepalives).toHaveLength(6)
      for (const e of events) expect(e.endsWith("\n\n")).toBe(true)
    })
  )

  it.effect("the stream has ended by 100 s", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.fork(Stream.runCount(telemetryEvents(Effect.succeed({}), 2)))
      yield* TestClock.adjust("100 seconds")
      // it ended on its own: no more time was needed for the join
      const count = yield* Fiber.join(fiber)
      expect(count).toBeGreaterThanOrEqual(50)
      expect(count).toBeLessThanOrEqual(51 + 6)
    })
  )
})
