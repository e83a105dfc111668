/**
 * Rate limits shared through a real redis-server: two limiters on one server stand for two
 * gateways. Without Redis each holds its own budget (so two admit twice the limit); with it they
 * draw on one. Redis stopped or hung: each answers from its own budget, never a failure.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { Redis } from "ioredis"
import type { RateLimitSetting } from "../../../src/layers/config/PorticoConfig.js"
import { makeRateLimiter, type RateLimiterService } from "../../../src/layers/ratelimit/RateLimiter.js"
import { connectSharedBuckets } from "../../../src/layers/ratelimit/SharedBuckets.js"
import { LEASE_MS, leaseSizeOf, OUTAGE_MS } from "../../../src/layers/ratelimit/SharedBudget.js"
import { hasRedisServer, redisMissingMessage, redisServer } from "../../support/redis.js"

// so slow a refill that a test never sees a token come back
const slow = (burst: number): RateLimitSetting => ({ rps: 0.001, burst })

const settings = (perNamespace: RateLimitSetting, perWallet: RateLimitSetting = slow(3)) => ({
  enabled: true,
  perClientNetwork: slow(5),
  perNamespace,
  perWallet
})

/** One "gateway": a limiter on its own connection to `url`, or with no Redis at all. */
const gateway = (url: string | undefined, perNamespace: RateLimitSetting, perWallet?: RateLimitSetting) =>
  Effect.gen(function* () {
    const shared = url === undefined ? undefined : yield* connectSharedBuckets(url)
    return makeRateLimiter({ settings: settings(perNamespace, perWallet), ownLimit: () => Effect.succeed(undefined), shared })
  })

/** Asks `limiters` in turn until `rounds` asks are made; how many each admitted. */
const drain = (limiters: ReadonlyArray<RateLimiterService>, namespace: string, rounds: number) =>
  Effect.gen(function* () {
    const admitted = limiters.map(() => 0)
    for (let i = 0; i < rounds; i++) {
      const at = i % limiters.length
      const decision = yield* limiters[at]!.checkNamespace(namespace)
      if (decision.allowed) admitted[at]! += 1
    }
    return admitted
  })

const sum = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0)

if (!hasRedisServer()) {
  describe("shared rate limits", () => {
    it("needs the redis-server binary", () => {
      expect.fail(redisMissingMessage())
    })
  })
} else {
  describe("shared rate limits", () => {
    it.scopedLive("without Redis two gateways admit two budgets; with one Redis they share one", () =>
      Effect.gen(function* () {
        const limit = slow(10)
        const apart = [yield* gateway(undefined, limit), yield* gateway(undefined, limit)]
        expect(yield* drain(apart, "acme", 40)).toEqual([10, 10])

        const server = yield* redisServer()
        const together = [yield* gateway(server.url, limit), yield* gateway(server.url, limit)]
        const admitted = yield* drain(together, "acme", 40)
        expect(sum(admitted)).toBe(10)
        // both took part, and another namespace's budget is its own
        expect(admitted.every((n) => n > 0)).toBe(true)
        expect(sum(yield* drain(together, "other", 40))).toBe(10)
      })
    )

    it.scopedLive("three gateways with leases admit exactly one budget, and the lane spends leased tokens on the spot", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const limit = slow(640)
        const lease = leaseSizeOf(limit)
        expect(lease).toBe(20)
        const [a, b, c] = [yield* gateway(server.url, limit), yield* gateway(server.url, limit), yield* gateway(server.url, limit)]
        // nothing known yet: the lane has no answer and charges nothing
        expect(a!.admitNow("acme", Date.now())).toBeUndefined()
        // one take leases `lease` tokens: one spent now, the rest on the spot without Redis
        expect((yield* a!.checkNamespace("acme")).allowed).toBe(true)
        let spot = 0
        while (a!.admitNow("acme", Date.now())?.allowed === true) spot++
        expect(spot).toBe(lease - 1)
        // the lease spent, the lane declines to the asynchronous path again
        expect(a!.admitNow("acme", Date.now())).toBeUndefined()

        const admitted = yield* drain([a!, b!, c!], "acme", 2000)
        expect(sum(admitted) + lease).toBe(640)
        // the bucket known empty: the lane refuses on the spot, naming the namespace
        const refused = b!.admitNow("acme", Date.now())
        expect(refused?.allowed).toBe(false)
        expect(refused?.refusedBy).toBe("namespace")
        expect(refused?.retryAfterSeconds).toBeGreaterThanOrEqual(1)
      })
    )

    it.scopedLive("tokens a lease did not spend go back to the shared budget", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const limit = slow(64)
        expect(leaseSizeOf(limit)).toBe(2)
        const [a, b] = [yield* gateway(server.url, limit), yield* gateway(server.url, limit)]
        // a leases 2 and spends 1; after the lease lapses its next take hands the other back
        expect((yield* a!.checkNamespace("acme")).allowed).toBe(true)
        yield* Effect.sleep(Duration.millis(LEASE_MS + 50))
        expect((yield* a!.checkNamespace("acme")).allowed).toBe(true)
        // a holds one unspent leased token now; everything else is b's to take
        const admitted = yield* drain([b!], "acme", 200)
        expect(admitted[0]).toBe(64 - 2 - 1)
      })
    )

    it.scopedLive("sign-in attempts per wallet are one budget across gateways, whatever the case of the address", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const [a, b] = [yield* gateway(server.url, slow(100), slow(3)), yield* gateway(server.url, slow(100), slow(3))]
        const wallet = "0x" + "ab".repeat(20)
        const answers: Array<boolean> = []
        for (let i = 0; i < 4; i++) {
          answers.push((yield* a!.checkWallet(wallet)).allowed)
          answers.push((yield* b!.checkWallet(wallet.toUpperCase().replace("0X", "0x"))).allowed)
        }
        expect(answers.filter(Boolean)).toHaveLength(3)
      })
    )

    it.scopedLive("Redis stopped: each gateway answers from its own budget at once, never a failure", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const limit = slow(6)
        const a = yield* gateway(server.url, limit)
        expect(sum(yield* drain([a], "acme", 4))).toBe(4)
        yield* server.stop
        const started = Date.now()
        // the local bucket is full: it admits its whole budget, then refuses with a Retry-After
        const admitted = yield* drain([a], "acme", 10)
        expect(admitted[0]).toBe(6)
        expect(Date.now() - started).toBeLessThan(1000)
        const refused = yield* a.checkNamespace("acme")
        expect(refused.allowed).toBe(false)
        expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1)
        // while Redis is out, the lane answers from the local bucket too
        expect(a.admitNow("acme", Date.now())?.allowed).toBe(false)
        // sign-in keeps its own limit as well
        const wallet = "0x" + "cd".repeat(20)
        const walletAnswers: Array<boolean> = []
        for (let i = 0; i < 5; i++) walletAnswers.push((yield* a.checkWallet(wallet)).allowed)
        expect(walletAnswers).toEqual([true, true, true, false, false])
      })
    )

    it.scopedLive("Redis hung: a check waits at most its deadline, then the gateway shares again once Redis answers", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const limit = slow(50)
        const [a, b] = [yield* gateway(server.url, limit), yield* gateway(server.url, limit)]
        expect((yield* a!.checkNamespace("acme")).allowed).toBe(true)
        const admin = new Redis(server.url)
        yield* Effect.addFinalizer(() => Effect.sync(() => admin.disconnect()))
        yield* Effect.promise(() => admin.call("CLIENT", "PAUSE", "1500", "ALL"))
        const started = Date.now()
        const during = yield* a!.checkNamespace("other")
        const waited = Date.now() - started
        expect(during.allowed).toBe(true)
        expect(waited).toBeLessThan(600)
        // the next second answers locally without waiting again
        const again = Date.now()
        expect((yield* a!.checkNamespace("other")).allowed).toBe(true)
        expect(Date.now() - again).toBeLessThan(50)
        // Redis back and the outage window over: takes are shared again
        yield* Effect.sleep(Duration.millis(1500 + OUTAGE_MS))
        const admitted = yield* drain([a!, b!], "shared-after", 200)
        expect(sum(admitted)).toBe(50)
      })
    )
  })
}
