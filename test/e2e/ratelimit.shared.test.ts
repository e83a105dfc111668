/**
 * Two gateway processes on one registry and one Redis (`PORTICO_REDIS_URL`): a namespace's rate
 * limit is one budget across both, on both request paths. With Redis stopped, each gateway
 * answers from its own budget: 200s again, never a 5xx.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { hasRedisServer, redisMissingMessage, type RedisServer, startRedis } from "../support/redis.js"

const BURST = 30

if (!hasRedisServer()) {
  describe("a namespace's rate limit shared through Redis", () => {
    it("needs the redis-server binary", () => {
      expect.fail(redisMissingMessage())
    })
  })
} else {
  describe("a namespace's rate limit shared through Redis", () => {
    let redis: RedisServer
    let one: Gateway
    let two: Gateway
    let key: string

    beforeAll(async () => {
      redis = await Effect.runPromise(startRedis())
      const env = {
        PORTICO_RATE_LIMIT: "true",
        PORTICO_RATE_LIMIT_CLIENT_RPS: "10000",
        PORTICO_RATE_LIMIT_CLIENT_BURST: "10000",
        PORTICO_REDIS_URL: redis.url
      }
      one = await startGateway({ env })
      key = (await one.cli(["namespace", "create", "shared"])).api_key
      const set = await one.request("PUT", "/v1/namespace/rate-limit", { token: key, json: { requests_per_second: 1, burst: BURST } })
      expect(set.status, set.text).toBe(200)
      two = await startGateway({ dataDir: one.dataDir, env })
    }, 90_000)

    afterAll(async () => {
      await one?.stop()
      await two?.stop()
      if (redis !== undefined) await Effect.runPromise(redis.stop)
    })

    it("admits one budget across two gateways, and each refuses with 429 RATE_LIMITED once it is spent", async () => {
      const started = Date.now()
      const replies: Array<[string, Reply]> = []
      for (let i = 0; i < 4 * BURST; i++) {
        const gw = i % 2 === 0 ? one : two
        replies.push([gw === one ? "one" : "two", await gw.request("GET", "/v1/auth/whoami", { token: key })])
      }
      const seconds = (Date.now() - started) / 1000
      const ok = replies.filter(([, r]) => r.status === 200)
      // the setting call above took one token; the budget refills at 1 per second meanwhile
      expect(ok.length).toBeGreaterThanOrEqual(BURST - 1)
      expect(ok.length).toBeLessThanOrEqual(BURST + Math.ceil(seconds) + 1)
      // without the shared store each gateway would have admitted its own BURST
      expect(ok.length).toBeLessThan(2 * BURST - 5)
      for (const name of ["one", "two"]) {
        const limited = replies.find(([n, r]) => n === name && r.status === 429)?.[1]
        if (limited === undefined) throw new Error(`gateway ${name} never refused: ${replies.map(([, r]) => r.status).join(",")}`)
        expect(limited.body).toMatchObject({ code: "RATE_LIMITED" })
        expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      }
      expect(replies.every(([, r]) => r.status === 200 || r.status === 429)).toBe(true)
    })

    it("with Redis stopped, each gateway answers from its own budget: no 5xx, and 200 again", async () => {
      await Effect.runPromise(redis.stop)
      const statuses: Array<number> = []
      const deadline = Date.now() + 10_000
      // a gateway that saw the shared bucket empty refuses until its next token was due, then
      // finds Redis gone and takes from its own full bucket
      while (Date.now() < deadline) {
        const reply = await two.request("GET", "/v1/auth/whoami", { token: key })
        statuses.push(reply.status)
        if (reply.status === 200) break
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
      expect(statuses.at(-1), statuses.join(",")).toBe(200)
      expect(statuses.every((s) => s === 200 || s === 429)).toBe(true)
      expect(two.logs()).toContain("rate limits: Redis did not answer")
    })
  })
}
