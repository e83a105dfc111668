/**
 * Participant events as the gateway takes them (src/layers/webrtc/RoomEvents.ts): a report MAC'd
 * under the namespace's event key, fresh, naming this node and seen once is published on the
 * room's platform topic; anything else is 401 and publishes nothing.
 */
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { eventKeyOf, eventMac } from "../../../src/domain/SfuTicket.js"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"
import { PubSub } from "../../../src/layers/pubsub/PubSub.js"
import { RoomEvents } from "../../../src/layers/webrtc/RoomEvents.js"
import { WebRtc } from "../../../src/layers/webrtc/WebRtc.js"

const services = Layer.mergeAll(WebRtc.Test, PubSub.Test, PorticoConfig.Test)
const layer = Layer.mergeAll(RoomEvents.Live.pipe(Layer.provide(services)), services)

describe("participant events", () => {
  it("publishes a genuine report once, and refuses forged, stale, replayed and misaddressed ones", () =>
    Effect.gen(function* () {
      const webrtc = yield* WebRtc
      const events = yield* RoomEvents
      const config = yield* PorticoConfig
      yield* webrtc.enable("calls", "0xowner")
      const key = eventKeyOf((yield* webrtc.relaySecret("calls"))!)
      let n = 0
      const report = (over: Record<string, unknown> = {}) => {
        const body = {
          namespace: "calls",
          room: "standup",
          event: "join",
          peer_id: "p1",
          user: "0xabc",
          device: "",
          node: config.nodeId,
          at: Date.now(),
          nonce: (++n).toString(16).padStart(32, "0"),
          reason: "",
          ...over
        } as const
        const raw = JSON.stringify(body)
        return { body: body as never, raw, mac: eventMac(key, raw) }
      }
      const codeOf = (r: ReturnType<typeof report>, mac: string | undefined = r.mac) => Effect.map(Effect.flip(events.report(r.body, r.raw, mac)), (e) => [e.code, e.reason])

      const genuine = report()
      yield* events.report(genuine.body, genuine.raw, genuine.mac)
      expect(yield* codeOf(genuine)).toEqual(["UNAUTHORIZED", "participant event refused: it was seen before"])
      const other = report()
      expect((yield* codeOf(other, eventMac(eventKeyOf(new Uint8Array(32)), other.raw)))[1]).toMatch(/MAC does not hold/)
      expect((yield* Effect.flip(events.report(other.body, other.raw, undefined))).reason).toMatch(/MAC does not hold/)
      // the body as sent is what the MAC covers: a re-serialized body does not hold
      expect((yield* Effect.flip(events.report(other.body, other.raw + " ", other.mac))).code).toBe("UNAUTHORIZED")
      expect((yield* codeOf(report({ at: Date.now() - 61_000 })))[1]).toMatch(/stale/)
      expect((yield* codeOf(report({ node: "another-node" })))[1]).toMatch(/another node/)
      // a namespace without media on holds no key
      expect((yield* codeOf(report({ namespace: "elsewhere" })))[1]).toMatch(/MAC does not hold/)
      yield* webrtc.disable("calls", "0xowner")
      expect((yield* codeOf(report()))[1]).toMatch(/MAC does not hold/)
    }).pipe(Effect.provide(layer), Effect.runPromise))
})
