/**
 * The operator health detail when the registry does not answer (docs/operators.md, "Health and
 * telemetry"): the count, the namespace page, the app ports and the cluster's nodes are unread
 * (undefined, null on the wire) and the registry check names the error, while the gateway's own port and the app port
 * range are still given. Over HTTP an operator's session needs the registry itself, so this case
 * is shown here, on stand-ins; the e2e suite (test/e2e/operator-health.test.ts) shows the rest.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Cache } from "../../../src/layers/cache/Cache.js"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"
import { Coordination } from "../../../src/layers/coordination/Coordination.js"
import { Health } from "../../../src/layers/health/Health.js"
import { OperatorHealth } from "../../../src/layers/operators/OperatorHealth.js"
import { RegistryStore, StoreError } from "../../../src/layers/registry/RegistryStore.js"
import { Membership } from "../../../src/layers/cluster/Membership.js"
import { makeTestLayer } from "../../../src/layers/TestLayer.js"

const down = Layer.mergeAll(
  makeTestLayer(RegistryStore)({
    engine: "rqlite",
    query: () => Effect.fail(new StoreError({ reason: "unavailable", detail: "connection refused" }))
  }),
  makeTestLayer(Cache)({ ping: Effect.void }),
  makeTestLayer(Health)({ version: "test", startedAt: 0 }),
  makeTestLayer(Coordination)({}),
  makeTestLayer(Membership)({ nodes: Effect.fail(new StoreError({ reason: "unavailable", detail: "connection refused" })) }),
  PorticoConfig.Test
)

describe("OperatorHealth.detail", () => {
  it.layer(OperatorHealth.Live.pipe(Layer.provide(down)))((it) => {
    it.effect("gives what it knows without the registry: the gateway's port and the range", () =>
      Effect.gen(function* () {
        const health = yield* OperatorHealth
        const before = yield* health.detail({ limit: 10, after: undefined })
        // not listening yet: no port to name
        expect(before.ports.gateway).toBeUndefined()
        yield* health.listening(43123)
        const detail = yield* health.detail({ limit: 10, after: undefined })
        expect(detail.status).toBe("degraded")
        expect(detail.namespaces).toBeUndefined()
        expect(detail.hosted).toBeUndefined()
        expect(detail.checks["registry"]).toMatchObject({ ok: false, error: "connection refused" })
        expect(detail.checks["cache"]).toMatchObject({ ok: true })
        expect(detail.ports).toEqual({ gateway: { host: "127.0.0.1", port: 43123 }, appRange: { first: 10200, last: 19999 }, apps: undefined })
        expect(detail.nodes).toBeUndefined()
      })
    )
  })
})
