import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Duration, Effect, Either, Layer, Option } from "effect"
import { CacheStore } from "../../../src/layers/cache/CacheStore.js"
import { RedisCacheStore } from "../../../src/layers/cache/RedisCacheStore.js"
import type { RedisCacheConfig } from "../../../src/layers/cache/RedisCacheStore.js"
import { hasRedisServer, redisMissingMessage, redisServer } from "../../support/redis.js"
import { cacheStoreSuite } from "./CacheStore.suite.js"

/** Short deadlines so failure paths are quick; a local server answers in well under a millisecond. */
const testConfig = (url: string, patch?: Partial<RedisCacheConfig>): RedisCacheConfig => ({
  url,
  commandTimeout: Duration.seconds(1),
  connectTimeout: Duration.seconds(2),
  ...patch
})

const build = (config: RedisCacheConfig) =>
  Effect.map(Layer.build(RedisCacheStore.layer(config)), (context) => Context.get(context, CacheStore))

const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.either(effect), (result) =>
    Either.isLeft(result) ? Effect.succeed(result.left) : Effect.dieMessage("expected a failure, got a success")
  )

if (!hasRedisServer()) {
  // CI installs redis-server; a machine without it must say so instead of passing quietly.
  describe("RedisCacheStore", () => {
    it("needs the redis-server binary", () => {
      expect.fail(redisMissingMessage())
    })
  })
} else {
  cacheStoreSuite("RedisCacheStore", {
    provision: Effect.map(redisServer(), (server) => RedisCacheStore.layer(testConfig(server.url)))
  })

  describe("RedisCacheStore specifics", () => {
    it.scopedLive("reports engine `redis`", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const store = yield* build(testConfig(server.url))
        expect(store.engine).toBe("redis")
      })
    )

    it.scopedLive("refuses to start against a server with maxmemory-policy noeviction", () =>
      Effect.gen(function* () {
        const server = yield* redisServer({ policy: "noeviction" })
        const error = yield* failureOf(build(testConfig(server.url)))
        expect(error._tag).toBe("RedisCacheRefused")
        expect(error.detail).toContain("noeviction")
      })
    )

    it.scopedLive("refuses volatile-lru (entries without a TTL would never be evicted)", () =>
      Effect.gen(function* () {
        const server = yield* redisServer({ policy: "volatile-lru" })
        const error = yield* failureOf(build(testConfig(server.url)))
        expect(error._tag).toBe("RedisCacheRefused")
      })
    )

    it.scopedLive("refuses a server without maxmemory", () =>
      Effect.gen(function* () {
        const server = yield* redisServer({ maxmemory: "0" })
        const error = yield* failureOf(build(testConfig(server.url)))
        expect(error._tag).toBe("RedisCacheRefused")
        expect(error.detail).toContain("maxmemory")
      })
    )

    it.scopedLive("accepts allkeys-lfu", () =>
      Effect.gen(function* () {
        const server = yield* redisServer({ policy: "allkeys-lfu" })
        const store = yield* build(testConfig(server.url))
        yield* store.ping
      })
    )

    it.scopedLive("fails the layer promptly when nothing listens", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        yield* server.stop
        const started = yield* Clock.currentTimeMillis
        const error = yield* failureOf(build(testConfig(server.url)))
        expect(error._tag).toBe("CacheUnavailable")
        expect((yield* Clock.currentTimeMillis) - started).toBeLessThan(3000)
        // The detail may reach a client: it must not carry the peer address.
        expect(error.detail).not.toContain("127.0.0.1")
      })
    )

    it.scopedLive("a stopped server gives CacheUnavailable within 2 s", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const store = yield* build(testConfig(server.url))
        yield* store.put("ns", "m", "k", { json: "1", expiresAt: undefined })
        yield* server.stop

        for (const operation of [
          store.get("ns", "m", "k"),
          store.put("ns", "m", "k", { json: "2", expiresAt: undefined }),
          store.mget("ns", "m", ["k"]),
          store.scan("ns", "m", () => true),
          store.ping
        ]) {
          const started = yield* Clock.currentTimeMillis
          const error = yield* failureOf(operation)
          expect(error._tag).toBe("CacheUnavailable")
          expect((yield* Clock.currentTimeMillis) - started).toBeLessThan(2000)
        }
      })
    )

    it.scopedLive("evicts least recently used entries under a small maxmemory", () =>
      Effect.gen(function* () {
        const server = yield* redisServer({ maxmemory: "2mb" })
        const store = yield* build(testConfig(server.url))
        const value = JSON.stringify("x".repeat(10_000))
        const count = 500 // ~5 MB written into a 2 MB server
        for (let index = 0; index < count; index++) {
          yield* store.put("ns", "m", `k${index}`, { json: value, expiresAt: undefined })
        }
        // Redis' LRU is approximated by sampling, so a few early keys may survive and, rarely, a
        // recent one goes: assert the shape (early ones mostly gone, the newest kept), not a cut.
        const early = yield* store.mget("ns", "m", Array.from({ length: 100 }, (_, index) => `k${index}`))
        const late = yield* store.mget("ns", "m", Array.from({ length: 10 }, (_, index) => `k${count - 10 + index}`))
        expect(early.filter((slot) => slot !== undefined).length).toBeLessThan(10)
        // (sampling can pick a recent key now and then: nearly all of the newest stay)
        expect(late.filter((slot) => slot === value).length).toBeGreaterThanOrEqual(8)
        const live = yield* store.scan("ns", "m", () => true)
        expect(live.length).toBeGreaterThan(10)
        expect(live.length).toBeLessThan(count / 2)
      })
    )

    it.scopedLive("routes a namespace with an override to its own deployment", () =>
      Effect.gen(function* () {
        const shared = yield* redisServer()
        const own = yield* redisServer()
        const store = yield* build(testConfig(shared.url, { overrides: { big: own.url } }))
        yield* store.put("big", "m", "k", { json: '"big"', expiresAt: undefined })
        yield* store.put("small", "m", "k", { json: '"small"', expiresAt: undefined })

        const onOwn = yield* build(testConfig(own.url))
        const onShared = yield* build(testConfig(shared.url))
        expect(yield* onOwn.get("big", "m", "k")).toEqual(Option.some('"big"'))
        expect(yield* onShared.get("big", "m", "k")).toEqual(Option.none())
        expect(yield* onShared.get("small", "m", "k")).toEqual(Option.some('"small"'))
        yield* store.ping
        // Either deployment down makes the store unhealthy.
        yield* own.stop
        expect((yield* failureOf(store.ping))._tag).toBe("CacheUnavailable")
      })
    )

    it.scopedLive("scan stops at scanLimit", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const store = yield* build(testConfig(server.url, { scanLimit: 25 }))
        for (let index = 0; index < 100; index++) yield* store.put("ns", "m", `k${index}`, { json: "1", expiresAt: undefined })
        expect((yield* store.scan("ns", "m", () => true)).length).toBe(25)
      })
    )
  })
}
