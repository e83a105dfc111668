import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { defaultPubSubSettings, pubSubConfig } from "../../../src/layers/config/PubSubSettings.js"

const read = (env: Readonly<Record<string, string | undefined>>) => Effect.either(Effect.withConfigProvider(pubSubConfig(), ConfigProvider.fromMap(new Map(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)), { pathDelim: "_" })))

describe("pub/sub settings", () => {
  it.effect("default to the documented values, the embedded bus unless a Redis URL is set", () =>
    Effect.gen(function* () {
      expect(yield* read({})).toEqual(Either.right(defaultPubSubSettings))
      const shared = yield* read({ PORTICO_REDIS_URL: "redis://127.0.0.1:6379" })
      expect(Either.getOrThrow(shared).redisUrl).toBe("redis://127.0.0.1:6379")
      const own = yield* read({ PORTICO_REDIS_URL: "redis://a:1", PORTICO_PUBSUB_REDIS_URL: "redis://b:2" })
      expect(Either.getOrThrow(own).redisUrl).toBe("redis://b:2")
    })
  )

  it.effect("refuse at start what the gateway could not work with", () =>
    Effect.gen(function* () {
      for (const env of [
        { PORTICO_PUBSUB_MAX_MESSAGE_BYTES: "0" },
        { PORTICO_PUBSUB_MAX_MESSAGE_BYTES: "lots" },
        { PORTICO_PUBSUB_BATCH_MAX: "-1" },
        { PORTICO_PUBSUB_REVOCATION_CHECK_MS: "10000" },
        { PORTICO_PUBSUB_PING_INTERVAL_MS: "60000", PORTICO_PUBSUB_DEAD_PEER_MS: "60000" },
        { PORTICO_PUBSUB_MAX_MESSAGE_BYTES: "4194304", PORTICO_PUBSUB_SOCKET_QUEUE_BYTES: "4194304" },
        { PORTICO_PUBSUB_MAX_MESSAGE_BYTES: "1048576", PORTICO_PUBSUB_BATCH_MAX_BYTES: "1024" },
        { PORTICO_PUBSUB_REDIS_URL: "http://redis:6379" }
      ]) {
        expect(Either.isLeft(yield* read(env)), JSON.stringify(env)).toBe(true)
      }
      expect(Either.isRight(yield* read({ PORTICO_PUBSUB_HISTORY_SIZE: "0", PORTICO_PUBSUB_HISTORY_SECONDS: "0" }))).toBe(true)
    })
  )
})
