/**
 * Cache entries with a ttl, on the TestClock over the cache's test double (the memory store reads
 * the Clock): an entry answers until its ttl has passed, then is a miss; an entry put again
 * takes the new ttl, and one without a ttl stays.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, TestClock } from "effect"
import { parseGrant } from "../../../src/domain/Grants.js"
import type { Principal } from "../../../src/domain/Principal.js"
import { Cache } from "../../../src/layers/cache/Cache.js"

const caller: Principal = {
  namespace: "shop",
  subject: "key:k1",
  method: "api_key",
  role: "custom",
  grants: [parseGrant("cache")!],
  keyId: "k1",
  sessionId: undefined,
  deviceId: undefined
}

describe("cache expiry", () => {
  it.layer(Cache.Test)((it) => {
    it.effect("an entry answers until its ttl has passed, then is a miss", () =>
      Effect.gen(function* () {
        // a real date: lru-cache reads an entry started at time 0 as having no start, so never stale
        yield* TestClock.setTime(Date.UTC(2026, 4, 1))
        const cache = yield* Cache
        const get = (key: string) =>
          Effect.map(Effect.either(cache.get(caller, "m", key)), (r) => (Either.isLeft(r) ? (r.left._tag === "CacheRefused" ? r.left.status : "down") : r.right))
        yield* cache.put(caller, { dmap: "m", key: "short", json: '"a"', ttl: "30s" })
        yield* cache.put(caller, { dmap: "m", key: "kept", json: '"b"', ttl: undefined })
        yield* cache.put(caller, { dmap: "m", key: "again", json: '"c"', ttl: "10s" })

        yield* TestClock.adjust(Duration.millis(9_999))
        expect([yield* get("short"), yield* get("again")]).toEqual(['"a"', '"c"'])
        // put again with a longer ttl, counted from now
        yield* cache.put(caller, { dmap: "m", key: "again", json: '"d"', ttl: "1m" })
        yield* TestClock.adjust(Duration.millis(20_000))
        expect(yield* get("short")).toBe('"a"')
        // (the instant itself is left unasserted: the memory store reads an entry as live then,
        // while a put whose expiry is that instant is dropped)
        yield* TestClock.adjust(Duration.millis(2))
        expect([yield* get("short"), yield* get("again"), yield* get("kept")]).toEqual([404, '"d"', '"b"'])
        yield* TestClock.adjust(Duration.minutes(1))
        expect([yield* get("again"), yield* get("kept")]).toEqual([404, '"b"'])
      })
    )
  })
})
