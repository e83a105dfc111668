/**
 * The pub/sub service's rules over the embedded engine: the platform's one entry point, the rate
 * budget charged per message, a batch judged whole before anything is published.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Exit, Layer } from "effect"
import { parseGrant } from "../../../src/domain/Grants.js"
import type { Principal } from "../../../src/domain/Principal.js"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"
import { MemoryPubSubEngine } from "../../../src/layers/pubsub/MemoryPubSubEngine.js"
import { PubSub } from "../../../src/layers/pubsub/PubSub.js"
import type { Delivery } from "../../../src/layers/pubsub/PubSubEngine.js"
import { RateLimiter } from "../../../src/layers/ratelimit/RateLimiter.js"

const caller: Principal = {
  namespace: "ns",
  subject: "key:1",
  method: "api_key",
  role: "runtime",
  grants: [parseGrant("pubsub")!],
  keyId: "1",
  sessionId: undefined,
  deviceId: undefined
}

const open = { rps: 1_000_000, burst: 1_000_000 }
const withBudget = (burst: number) =>
  PubSub.Live.pipe(
    Layer.provide(
      Layer.mergeAll(
        MemoryPubSubEngine.Test,
        PorticoConfig.Test,
        RateLimiter.MessageBudget.pipe(
          Layer.provide(RateLimiter.Test({ settings: { enabled: true, perClientNetwork: open, perNamespace: { rps: 0.001, burst }, perWallet: open } }))
        )
      )
    )
  )
const service = (layer: Layer.Layer<PubSub, unknown>) => Effect.map(Layer.build(layer), (c) => Context.get(c, PubSub))
const message = (topic: string, text = "x") => ({ topic, data_base64: Buffer.from(text).toString("base64") })

describe("the pub/sub service", () => {
  it.scoped("publishes the platform's events on reserved topics only, as frames of type event", () =>
    Effect.gen(function* () {
      const pubsub = yield* service(PubSub.Test)
      const got: Array<Delivery> = []
      yield* pubsub.engine.subscribe("ns", "_portico/webrtc/r1", { deliver: (d) => void got.push(d), interrupted: () => {} })
      yield* pubsub.publishPlatform("ns", "_portico/webrtc/r1", "participant.joined", '{"participant":"p1"}')
      expect(JSON.parse(got[0]!.frame)).toMatchObject({ type: "event", event: "participant.joined", body: { participant: "p1" }, offset: 1 })
      // a platform event elsewhere is a bug in the platform, not a client's mistake
      expect(Exit.isFailure(yield* Effect.exit(pubsub.publishPlatform("ns", "rooms/a", "x", "{}")))).toBe(true)
      const refused = yield* Effect.either(pubsub.publish(caller, message("_portico/webrtc/r1")))
      expect(Either.isLeft(refused) && refused.left.code).toBe("FORBIDDEN")
    })
  )

  it.scoped("charges every message of a batch to the namespace's budget, and refuses the whole batch past it", () =>
    Effect.gen(function* () {
      const pubsub = yield* service(withBudget(3))
      const got: Array<Delivery> = []
      yield* pubsub.engine.subscribe("ns", "t", { deliver: (d) => void got.push(d), interrupted: () => {} })
      // the gate charged the request itself; the batch takes its other four: one more than the budget
      const refused = yield* Effect.either(pubsub.publishBatch(caller, Array.from({ length: 5 }, () => message("t"))))
      expect(Either.isLeft(refused) && refused.left.code).toBe("RATE_LIMITED")
      expect(got).toEqual([])
      const spent = yield* Effect.either(pubsub.charge("ns", 1))
      expect(Either.isLeft(spent)).toBe(true)
    })
  )

  it.scoped("judges every message of a batch before publishing any", () =>
    Effect.gen(function* () {
      const pubsub = yield* service(PubSub.Test)
      const got: Array<Delivery> = []
      yield* pubsub.engine.subscribe("ns", "t", { deliver: (d) => void got.push(d), interrupted: () => {} })
      for (const bad of [message("bad topic"), message("_portico/x"), { topic: "t", data_base64: "%%" }]) {
        const refused = yield* Effect.either(pubsub.publishBatch(caller, [message("t"), bad]))
        expect(Either.isLeft(refused) && refused.left.reason.startsWith("messages[1]")).toBe(true)
      }
      expect(got).toEqual([])
      const published = yield* pubsub.publishBatch(caller, [message("t", "a"), message("t", "b")])
      expect(published.map((p) => p.offset)).toEqual([1, 2])
      expect(got.map((d) => d.offset)).toEqual([1, 2])
    })
  )
})
