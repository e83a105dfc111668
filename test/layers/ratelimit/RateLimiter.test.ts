import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import { clientNetwork, defaultRateLimits, RateLimiter } from "../../../src/layers/ratelimit/RateLimiter.js"

describe("clientNetwork", () => {
  it("keys IPv4 on its /24, and an IPv4-mapped IPv6 address on the same /24", () => {
    expect(clientNetwork("203.0.113.7")).toBe("203.0.113.0/24")
    expect(clientNetwork("::ffff:203.0.113.7")).toBe("203.0.113.0/24")
    expect(clientNetwork("::FFFF:203.0.113.200")).toBe("203.0.113.0/24")
    expect(clientNetwork("0:0:0:0:0:ffff:203.0.113.7")).toBe("203.0.113.0/24")
    // the mapped address written in hex is the same address
    expect(clientNetwork("::ffff:cb00:7107")).toBe("203.0.113.0/24")
  })

  it("gives every spelling of one /64 the same key", () => {
    // the audit's pair: one /64, two keys before
    expect(clientNetwork("2001:db8:0:0:1::")).toBe(clientNetwork("2001:db8::1"))
    const key = clientNetwork("2001:db8::1")
    expect(key).toBe("2001:db8:0:0::/64")
    for (const spelling of [
      "2001:db8:0:0:1::",
      "2001:0db8:0000:0000:0000:0000:0000:0001",
      "2001:DB8::1",
      "2001:db8:0:0:ffff:ffff:ffff:ffff",
      "2001:db8::1%eth0",
      "2001:db8:0::0:1",
      "2001:db8::"
    ]) {
      expect(clientNetwork(spelling), spelling).toBe(key)
    }
  })

  it("keeps groups written after :: in their place, so different /64s get different keys", () => {
    // the audit's pair: two /64s, one key before
    expect(clientNetwork("2001::5:1:2:3:4")).not.toBe(clientNetwork("2001::6:1:2:3:4"))
    expect(clientNetwork("2001::5:1:2:3:4")).toBe("2001:0:0:5::/64")
    expect(clientNetwork("2001::6:1:2:3:4")).toBe("2001:0:0:6::/64")
    expect(clientNetwork("::5:6:7:8:9")).toBe("0:0:0:5::/64")
    expect(clientNetwork("2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1:2::/64")
    expect(clientNetwork("2001:db8:1:3::")).not.toBe(clientNetwork("2001:db8:1:2::"))
  })

  it("handles loopback, link-local with a zone, and an embedded IPv4 outside the mapped range", () => {
    expect(clientNetwork("::1")).toBe("0:0:0:0::/64")
    expect(clientNetwork("::")).toBe("0:0:0:0::/64")
    expect(clientNetwork("fe80::1%eth0")).toBe(clientNetwork("FE80::abcd%2"))
    expect(clientNetwork("fe80::1%eth0")).toBe("fe80:0:0:0::/64")
    // NAT64 is a real IPv6 network, not the IPv4 one it carries
    expect(clientNetwork("64:ff9b::203.0.113.7")).toBe("64:ff9b:0:0::/64")
  })

  it("reads the mapped, compressed and full forms alike (node:net and URL do the parsing)", () => {
    expect(clientNetwork("::ffff:1.2.3.4")).toBe("1.2.3.0/24")
    expect(clientNetwork("0000:0000:0000:0000:0000:ffff:0102:0304")).toBe("1.2.3.0/24")
    expect(clientNetwork("[::ffff:1.2.3.4]")).toBe("1.2.3.0/24")
    expect(clientNetwork("1.2.3.4")).toBe("1.2.3.0/24")
    // compressed at the start, in the middle and at the end, and written out in full
    expect(clientNetwork("::1:2:3:4:5:6:7")).toBe("0:1:2:3::/64")
    expect(clientNetwork("1:2:3:4:5:6:7::")).toBe("1:2:3:4::/64")
    expect(clientNetwork("1:2::7:8")).toBe("1:2:0:0::/64")
    expect(clientNetwork("0001:0002:0003:0004:0005:0006:0007:0008")).toBe("1:2:3:4::/64")
    expect(clientNetwork("1:0:0:4::8")).toBe("1:0:0:4::/64")
    // an IPv4 address with a leading zero is not one a socket reports: keyed by itself
    expect(clientNetwork("01.2.3.4")).toBe("01.2.3.4")
    expect(clientNetwork("1.2.3")).toBe("1.2.3")
  })

  it("keys a missing address as unknown and an unparsable one by itself", () => {
    expect(clientNetwork(undefined)).toBe("unknown")
    expect(clientNetwork("")).toBe("unknown")
    expect(clientNetwork("1::2::3")).toBe("1::2::3")
    expect(clientNetwork("1:2:3:4:5:6:7:8:9")).toBe("1:2:3:4:5:6:7:8:9")
    expect(clientNetwork("::ffff:999.1.1.1")).toBe("::ffff:999.1.1.1")
    expect(clientNetwork("1:2:3:4:5:6:7:8::")).toBe("1:2:3:4:5:6:7:8::")
  })
})

describe("RateLimiter.Test (in memory, driven by the TestClock)", () => {
  const settings = {
    enabled: true,
    perClientNetwork: { rps: 1, burst: 2 },
    perNamespace: { rps: 2, burst: 4 },
    perWallet: { rps: 1, burst: 1 }
  }
  const admittedOf = (check: Effect.Effect<{ readonly allowed: boolean }>, times: number) =>
    Effect.map(Effect.replicateEffect(check, times), (ds) => ds.map((d) => d.allowed))

  it.effect("spends a namespace's burst, refuses with a Retry-After, and refills at its rate", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      expect(yield* admittedOf(limiter.checkNamespace("acme"), 5)).toEqual([true, true, true, true, false])
      const refused = yield* limiter.checkNamespace("acme")
      expect(refused).toEqual({ allowed: false, retryAfterSeconds: 1 })
      yield* TestClock.adjust("1 second")
      expect(yield* admittedOf(limiter.checkNamespace("acme"), 3)).toEqual([true, true, false])
    }).pipe(Effect.provide(RateLimiter.Test({ settings })))
  )

  it.effect("holds a namespace's own limit, capped at the default, and answers the lane from the same bucket", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      expect(yield* limiter.limitOf("small")).toEqual({ limit: { rps: 1, burst: 2 }, source: "namespace" })
      // above the ceiling: held to it
      expect(yield* limiter.limitOf("greedy")).toEqual({ limit: { rps: 2, burst: 4 }, source: "namespace" })
      expect(yield* limiter.limitOf("plain")).toEqual({ limit: settings.perNamespace, source: "default" })
      // the lane's `now` is the same clock's
      const now = yield* Clock.currentTimeMillis
      // burst 2: one on the spot, one through the asynchronous check, then the lane refuses
      expect(limiter.admitNow("small", now)?.allowed).toBe(true)
      expect((yield* limiter.checkNamespace("small")).allowed).toBe(true)
      expect(limiter.admitNow("small", now)).toEqual({ allowed: false, retryAfterSeconds: 1, refusedBy: "namespace" })
      // a namespace whose limit was never read: the lane has no answer
      expect(limiter.admitNow("unread", now)).toBeUndefined()
    }).pipe(Effect.provide(RateLimiter.Test({ settings, namespaceLimits: { small: { rps: 1, burst: 2 }, greedy: { rps: 99, burst: 99 } } })))
  )

  it.effect("limits client networks and wallets on their own budgets", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      expect(yield* admittedOf(limiter.checkClient("203.0.113.7"), 2)).toEqual([true, true])
      // the same /24, on the spot as the listener asks
      const now = yield* Clock.currentTimeMillis
      expect(limiter.checkClientNow("203.0.113.99", now).allowed).toBe(false)
      expect(limiter.checkClientNow("198.51.100.1", now).allowed).toBe(true)
      expect(yield* admittedOf(limiter.checkWallet("0xAB"), 1)).toEqual([true])
      expect((yield* limiter.checkWallet("0xab")).allowed).toBe(false)
    }).pipe(Effect.provide(RateLimiter.Test({ settings })))
  )

  it.effect("switched off, admits everything", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      expect((yield* admittedOf(limiter.checkNamespace("acme"), 5000)).every(Boolean)).toBe(true)
      expect(limiter.admitNow("acme", yield* Clock.currentTimeMillis)?.allowed).toBe(true)
    }).pipe(Effect.provide(RateLimiter.Test({ settings: { ...defaultRateLimits, enabled: false } })))
  )
})
