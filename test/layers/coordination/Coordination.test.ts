/** Node-to-node calls (spec §4.10): overlay sources and the coordination MAC. */
import { it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { describe, expect } from "vitest"
import { Coordination, isOverlaySource } from "../../../src/layers/coordination/Coordination.js"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"

const layer = Coordination.Live.pipe(
  Layer.provide(Layer.mergeAll(Sealer.Test, PorticoConfig.layer(testSettings("/tmp/unused", { nodeId: "node-b" }))))
)

describe("coordination", () => {
  it("takes loopback, private, CGNAT and unique-local sources only", () => {
    for (const ok of ["127.0.0.1", "::1", "::ffff:10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "fd12:3456::1"]) {
      expect(isOverlaySource(ok), ok).toBe(true)
    }
    for (const bad of [undefined, "8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:db8::1", "::ffff:1.2.3.4", "fe80::1"]) {
      expect(isOverlaySource(bad), String(bad)).toBe(false)
    }
  })

  it.effect("accepts a call signed for this node, within a minute, over the same body", () =>
    Effect.gen(function* () {
      const c = yield* Coordination
      const body = JSON.stringify({ cid: "bafk" })
      const headers = yield* c.sign("node-b", "POST", "/v1/internal/storage/evict", body)
      expect(yield* c.verify("POST", "/v1/internal/storage/evict", body, headers, "127.0.0.1")).toBeUndefined()
      // another body, another route, another node, a public source
      expect(yield* c.verify("POST", "/v1/internal/storage/evict", body + " ", headers, "127.0.0.1")).toBe("coordination MAC invalid")
      expect(yield* c.verify("POST", "/v1/internal/other", body, headers, "127.0.0.1")).toBe("coordination MAC invalid")
      const forA = yield* c.sign("node-a", "POST", "/v1/internal/storage/evict", body)
      expect(yield* c.verify("POST", "/v1/internal/storage/evict", body, forA, "127.0.0.1")).toBe("coordination MAC invalid")
      expect(yield* c.verify("POST", "/v1/internal/storage/evict", body, headers, "203.0.113.9")).toBe(
        "not from the cluster's private network"
      )
      expect(yield* c.verify("POST", "/v1/internal/storage/evict", body, {}, "127.0.0.1")).toBe("coordination MAC missing")
      // a replay after the window
      yield* TestClock.adjust("61 seconds")
      expect(yield* c.verify("POST", "/v1/internal/storage/evict", body, headers, "127.0.0.1")).toBe("coordination MAC expired")
    }).pipe(Effect.provide(layer))
  )
})
