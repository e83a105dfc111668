import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Exit, Layer, Scope } from "effect"
import { type Delivery, PubSubEngine } from "../../../src/layers/pubsub/PubSubEngine.js"
import { RedisPubSubEngine, type RedisPubSubConfig } from "../../../src/layers/pubsub/RedisPubSubEngine.js"
import { hasRedisServer, redisMissingMessage, redisServer } from "../../support/redis.js"
import { pubSubEngineSuite, waitFor } from "./PubSubEngine.suite.js"

const config = (url: string, patch: Partial<RedisPubSubConfig> = {}): RedisPubSubConfig => ({
  url,
  history: { size: 5, maxAgeMs: 60_000 },
  publishTimeoutMs: 1000,
  reapIntervalMs: 200,
  connectTimeoutMs: 2000,
  ...patch
})

const build = (layer: Layer.Layer<PubSubEngine, unknown>) => Effect.map(Layer.build(layer), (c) => Context.get(c, PubSubEngine))

if (!hasRedisServer()) {
  describe("RedisPubSubEngine", () => {
    it("needs the redis-server binary", () => {
      expect.fail(redisMissingMessage())
    })
  })
} else {
  pubSubEngineSuite("RedisPubSubEngine", {
    // two gateways on one server
    pair: Effect.map(redisServer(), (server) => [RedisPubSubEngine.layer(config(server.url)), RedisPubSubEngine.layer(config(server.url))] as const)
  })

  describe("RedisPubSubEngine specifics", () => {
    it.scopedLive("carries a message of 1 MiB intact to the other gateway", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const a = yield* build(RedisPubSubEngine.layer(config(server.url)))
        const b = yield* build(RedisPubSubEngine.layer(config(server.url)))
        const got: Array<Delivery> = []
        yield* b.subscribe("ns", "big", { deliver: (d) => void got.push(d), interrupted: () => {} })
        const data = Buffer.alloc(1024 * 1024, 7).toString("base64")
        yield* a.publish("ns", "big", `"type":"message","data":"${data}"`, 1)
        yield* waitFor(() => got.length === 1)
        expect((JSON.parse(got[0]!.frame) as { data: string }).data).toBe(data)
      })
    )

    it.scopedLive("a namespace lists only its own topics, whatever its name looks like to a glob", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const a = yield* build(RedisPubSubEngine.layer(config(server.url)))
        const none = { deliver: () => {}, interrupted: () => {} }
        yield* a.subscribe("acme", "t", none)
        yield* a.subscribe("acme-2", "other", none)
        yield* a.subscribe("a*", "star", none)
        expect(yield* a.topics("acme")).toEqual(["t"])
        expect(yield* a.topics("a*")).toEqual(["star"])
        expect(yield* a.topics("a")).toEqual([])
      })
    )

    it.scopedLive("history ages out", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const a = yield* build(RedisPubSubEngine.layer(config(server.url, { history: { size: 5, maxAgeMs: 300 } })))
        const first = yield* a.publish("ns", "h", `"type":"message","data":""`, Date.now())
        expect((yield* a.history("ns", "h", { epoch: first.epoch, offset: 0 })).complete).toBe(true)
        yield* Effect.sleep("400 millis")
        expect((yield* a.history("ns", "h", { epoch: first.epoch, offset: 0 })).complete).toBe(false)
      })
    )

    it.scopedLive("a crashed gateway's member leaves by the other's reaping, with its event", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const b = yield* build(RedisPubSubEngine.layer(config(server.url)))
        const got: Array<Delivery> = []
        yield* b.subscribe("ns", "room", { deliver: (d) => void got.push(d), interrupted: () => {} })
        const crashed = yield* Scope.make()
        const a = yield* Scope.extend(build(RedisPubSubEngine.layer(config(server.url))), crashed) as Effect.Effect<Context.Tag.Service<PubSubEngine>, unknown>
        yield* a.join("ns", "room", { connection: "c", memberId: "ghost", subject: "s", joinedAt: 1, meta: undefined }, Date.now() + 300)
        yield* Scope.close(crashed, Exit.void)
        yield* waitFor(() => got.length === 2)
        expect(got.map((d) => (JSON.parse(d.frame) as { event: string }).event)).toEqual(["join", "leave"])
        expect(yield* b.presence("ns", "room")).toEqual([])
      })
    )

    it.scopedLive("with Redis gone: publishes fail fast, listeners are told once; back on its port, delivery resumes unasked", () =>
      Effect.gen(function* () {
        const server = yield* redisServer()
        const a = yield* build(RedisPubSubEngine.layer(config(server.url)))
        const got: Array<Delivery> = []
        const interruptions: Array<string> = []
        yield* a.subscribe("ns", "t", { deliver: (d) => void got.push(d), interrupted: (why) => void interruptions.push(why) })
        yield* a.publish("ns", "t", `"type":"message","data":""`, 1)
        yield* waitFor(() => got.length === 1)
        yield* server.kill
        const started = Date.now()
        const failed = yield* Effect.either(a.publish("ns", "t", `"type":"message","data":""`, 2))
        expect(Either.isLeft(failed)).toBe(true)
        expect(Date.now() - started).toBeLessThan(1500)
        yield* waitFor(() => interruptions.length > 0)
        yield* Effect.sleep("300 millis")
        expect(interruptions.length).toBe(1)
        yield* server.start
        let published = false
        while (!published) {
          published = Either.isRight(yield* Effect.either(a.publish("ns", "t", `"type":"message","data":""`, 3)))
          if (!published) yield* Effect.sleep("100 millis")
        }
        yield* waitFor(() => got.length >= 2)
        // the restarted server kept nothing (no persistence): the topic's sequence starts again
        expect(got[got.length - 1]!.epoch).not.toBe(got[0]!.epoch)
      })
    )

    it.live("refuses to start when Redis does not answer", () =>
      Effect.gen(function* () {
        const failed = yield* Effect.scoped(Effect.either(build(RedisPubSubEngine.layer(config("redis://127.0.0.1:1", { connectTimeoutMs: 500 })))))
        expect(Either.isLeft(failed)).toBe(true)
      })
    )
  })
}
