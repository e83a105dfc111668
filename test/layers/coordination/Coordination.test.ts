/** Node-to-node calls (spec §4.10): overlay sources and the coordination MAC. */
import { it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { describe, expect } from "vitest"
import { Membership } from "../../../src/layers/cluster/Membership.js"
import { canonicalJson, Coordination, isOverlaySource, MAC_HEADER, NONCE_HEADER, TIME_HEADER } from "../../../src/layers/coordination/Coordination.js"
import { PorticoConfig, testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { parseExactJson } from "../../../src/domain/ExactJson.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"

const registry = () => SqliteRegistryStore.layer({ filename: path.join(mkdtempSync(path.join(tmpdir(), "portico-coord-")), "registry.db") })
const nodeLayer = (nodeId: string) =>
  Coordination.Live.pipe(
    Layer.provide(Membership.Live),
    Layer.provide(Layer.mergeAll(Sealer.Test, registry(), PorticoConfig.layer(testSettings(mkdtempSync(path.join(tmpdir(), "portico-coordination-")), { nodeId }))))
  )

const EVICT = "/v1/internal/storage/evict"
const QUERY = "/v1/internal/sqlite/query"

describe("coordination", () => {
  it("takes loopback, private, CGNAT and unique-local sources only", () => {
    for (const ok of ["127.0.0.1", "::1", "::ffff:10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "fd12:3456::1"]) {
      expect(isOverlaySource(ok), ok).toBe(true)
    }
    for (const bad of [undefined, "8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:db8::1", "::ffff:1.2.3.4", "fe80::1"]) {
      expect(isOverlaySource(bad), String(bad)).toBe(false)
    }
  })

  it.effect("accepts a v2 call signed for this node, within a minute, over the same body, once", () =>
    Effect.gen(function* () {
      const c = yield* Coordination
      const body = JSON.stringify({ query: "INSERT INTO t VALUES (1)" })
      const headers = yield* c.sign("node-b", "POST", QUERY, body)
      expect(headers[MAC_HEADER]).toMatch(/^v2=/)
      // another body, another route, another node, a public source, no nonce, another nonce
      expect(yield* c.verify("POST", QUERY, body + " ", headers, "127.0.0.1", false)).toBe("coordination MAC invalid")
      expect(yield* c.verify("POST", "/v1/internal/other", body, headers, "127.0.0.1", false)).toBe("coordination MAC invalid")
      const forA = yield* c.sign("node-a", "POST", QUERY, body)
      expect(yield* c.verify("POST", QUERY, body, forA, "127.0.0.1", false)).toBe("coordination MAC invalid")
      expect(yield* c.verify("POST", QUERY, body, headers, "203.0.113.9", false)).toBe("not from the cluster's private network")
      expect(yield* c.verify("POST", QUERY, body, {}, "127.0.0.1", false)).toBe("coordination MAC missing")
      expect(yield* c.verify("POST", QUERY, body, { ...headers, [NONCE_HEADER]: undefined }, "127.0.0.1", false)).toBe("coordination nonce missing")
      expect(yield* c.verify("POST", QUERY, body, { ...headers, [NONCE_HEADER]: "A".repeat(24) }, "127.0.0.1", false)).toBe("coordination MAC invalid")
      // the refusals above spent nothing: the genuine call is accepted, then never again
      expect(yield* c.verify("POST", QUERY, body, headers, "127.0.0.1", false)).toBeUndefined()
      expect(yield* c.verify("POST", QUERY, body, headers, "127.0.0.1", false)).toBe("coordination call replayed")
      // and after the window it is expired, whatever it was
      const later = yield* c.sign("node-b", "POST", QUERY, body)
      yield* TestClock.adjust("61 seconds")
      expect(yield* c.verify("POST", QUERY, body, later, "127.0.0.1", false)).toBe("coordination MAC expired")
    }).pipe(Effect.provide(nodeLayer("node-b")))
  )

  it.effect("takes a v1 MAC (no nonce) only where the route allows it: storage eviction", () =>
    Effect.gen(function* () {
      const c = yield* Coordination
      const sealer = yield* Sealer
      const body = JSON.stringify({ cid: "bafk" })
      // what a gateway of the previous release sends
      const { createHash } = yield* Effect.promise(() => import("node:crypto"))
      const time = "0"
      const digest = createHash("sha256").update(body, "utf8").digest("hex")
      const v1 = { [MAC_HEADER]: "v1=" + sealer.hash("coordination-mac", ["POST", EVICT, "node-b", time, digest].join("\n")), [TIME_HEADER]: time }
      expect(yield* c.verify("POST", EVICT, body, v1, "127.0.0.1", true)).toBeUndefined()
      expect(yield* c.verify("POST", EVICT, body, v1, "127.0.0.1", false)).toBe("coordination MAC v1 is not accepted here: v2 is required")
    }).pipe(Effect.provide(Layer.merge(nodeLayer("node-b"), Sealer.Test)))
  )

  it("writes numbers so the receiving end reads the same value back", () => {
    for (const n of [3e18, 1e19, -1e19, 1.5e19, 1e20, 2 ** 53, 0.1, 42, -7, 1e-7, Infinity, -Infinity, Number.MAX_VALUE]) {
      const back = parseExactJson(canonicalJson({ params: [n] })) as { params: Array<unknown> }
      expect(back.params[0], String(n)).toBe(n)
    }
    // a wide integer stays an integer, digits and all
    expect(canonicalJson({ a: 9223372036854775807n, b: [1, "x"] })).toBe('{"a":9223372036854775807,"b":[1,"x"]}')
  })
})
