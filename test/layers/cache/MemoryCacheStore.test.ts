import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Effect, Layer, Option, TestClock } from "effect"
import { CacheStore } from "../../../src/layers/cache/CacheStore.js"
import { MemoryCacheStore } from "../../../src/layers/cache/MemoryCacheStore.js"
import { cacheStoreSuite } from "./CacheStore.suite.js"

cacheStoreSuite("MemoryCacheStore", { provision: Effect.succeed(MemoryCacheStore.layer(64 * 1024 * 1024)) })

describe("MemoryCacheStore on a test clock", () => {
  // The embedded engine reads Effect's Clock, so expiry moves with TestClock and needs no waiting;
  // Redis keeps its own clock, which is why the shared suite waits in real time instead.
  it.scoped("expires an entry once the clock passes its time, and not before", () =>
    Effect.gen(function* () {
      // a realistic start: lru-cache reads an entry started at time 0 as one without a TTL
      yield* TestClock.setTime(Date.UTC(2026, 10, 22))
      const store = Context.get(yield* Layer.build(MemoryCacheStore.layer(1024 * 1024)), CacheStore)
      const now = yield* Clock.currentTimeMillis
      yield* store.put("ns", "m", "day", { json: "1", expiresAt: now + 86_400_000 })
      yield* store.put("ns", "m", "year", { json: "2", expiresAt: now + 365 * 86_400_000 })
      yield* store.put("ns", "m", "kept", { json: "3", expiresAt: undefined })

      yield* TestClock.adjust("23 hours")
      expect(yield* store.get("ns", "m", "day")).toEqual(Option.some("1"))
      yield* TestClock.adjust("59 minutes")
      expect(yield* store.get("ns", "m", "day")).toEqual(Option.some("1"))
      yield* TestClock.adjust("61 seconds")
      expect(yield* store.get("ns", "m", "day")).toEqual(Option.none())
      expect(yield* store.mget("ns", "m", ["day", "year", "kept"])).toEqual([undefined, "2", "3"])

      yield* TestClock.adjust("365 days")
      expect([...(yield* store.scan("ns", "m", () => true))]).toEqual(["kept"])
    })
  )
})
