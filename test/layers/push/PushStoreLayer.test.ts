/**
 * PushStore's layers: Live takes the topic lifetime from PORTICO_PUSH_TOPIC_LIFETIME_SECONDS; the
 * Test double runs on the registry's and the sealer's doubles with the spec's 7 days.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, Option, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { topicExpiry, topicIdOf } from "../../../src/domain/PushRegistrations.js"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"
import { PushStore } from "../../../src/layers/push/PushStore.js"
import { registryLayer } from "../../../src/layers/registry/registryLayer.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"

const start = Date.UTC(2026, 10, 26, 9)

describe("PushStore layers", () => {
  it.scoped("Test: the spec's lifetime over the doubles", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const push = Context.get(yield* Layer.build(PushStore.Test), PushStore)
      const topicId = topicIdOf(Buffer.alloc(16, 1))
      expect((yield* push.registerTopic("shop", topicId, "relay_push", "t")).expiresAt).toBe(topicExpiry(start / 1000))
      expect(Option.isSome(yield* push.topic("shop", topicId))).toBe(true)
    })
  )

  it.scoped("Live: the lifetime configured by PORTICO_PUSH_TOPIC_LIFETIME_SECONDS", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-push-layer-"))),
        (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
      )
      const config = PorticoConfig.fromEnv({ dataDir: dir })
      const settings = Context.get(
        yield* Layer.build(config).pipe(
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PORTICO_PUSH_TOPIC_LIFETIME_SECONDS", "30"], ["PORTICO_NODE_ID", "n1"]]), { pathDelim: "_" }))
        ),
        PorticoConfig
      )
      expect(settings.pushTopicLifetimeSeconds).toBe(30)
      const layer = PushStore.Live.pipe(Layer.provide(Layer.mergeAll(registryLayer(settings), Sealer.Test, PorticoConfig.layer(settings))))
      const push = Context.get(yield* Layer.build(layer), PushStore)
      expect((yield* push.registerTopic("shop", topicIdOf(Buffer.alloc(16, 2)), "relay_push", "t")).expiresAt).toBe(start / 1000 + 30)
    })
  )
})
