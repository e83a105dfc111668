import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"

const settingsFrom = (env: Record<string, string>) =>
  Layer.build(PorticoConfig.fromEnv({ dataDir: "/tmp/portico-config-test" })).pipe(
    Effect.map((context) => Context.get(context, PorticoConfig)),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" })),
    Effect.scoped
  )

describe("PorticoConfig", () => {
  it.effect("keeps a cluster's URL credentials in its setting but never prints them in a refusal", () =>
    Effect.gen(function* () {
      const ok = yield* settingsFrom({ PORTICO_SQL_RQLITE_URLS: "a=http://u:secret@10.0.0.5:4001" })
      expect(ok.sql.rqlite.get("a")).toBe("http://u:secret@10.0.0.5:4001")

      // the same cluster named twice is refused; the message names the pair without its password
      const refused = yield* Effect.flip(settingsFrom({ PORTICO_SQL_RQLITE_URLS: "a=http://u:secret@h:1,b=http://u:secret@h:1" }))
      expect(String(refused)).toContain("b=http://***@h:1")
      expect(String(refused)).not.toContain("secret")

      const redis = yield* Effect.flip(
        settingsFrom({ PORTICO_REDIS_URL: "redis://127.0.0.1:6379", PORTICO_REDIS_URLS: "a=redis://:hunter2@h:1,a=redis://h:2" })
      )
      expect(String(redis)).not.toContain("hunter2")
    })
  )

  it.effect("refuses sizes, counts and durations of zero or less, and non-integers", () =>
    Effect.gen(function* () {
      for (const [name, value] of <Array<[string, string]>>[
        ["PORTICO_CACHE_MAX_BYTES", "0"],
        ["PORTICO_SQL_WORKERS", "-1"],
        ["PORTICO_MAX_BODY_BYTES", "0"],
        ["PORTICO_STORAGE_QUOTA_BYTES", "-5"],
        ["PORTICO_SQL_TIMEOUT_MS", "1.5"]
      ]) {
        const refused = yield* Effect.flip(settingsFrom({ [name]: value }))
        expect(String(refused), name).toContain(name.slice("PORTICO_".length))
      }
      expect((yield* settingsFrom({ PORTICO_CACHE_MAX_BYTES: "1" })).cache.maxBytesPerNamespace).toBe(1)
    })
  )

  it.effect("keeps the push credential cache within the spec's 30 seconds", () =>
    Effect.gen(function* () {
      expect((yield* settingsFrom({})).pushCredentialCacheSeconds).toBe(30)
      expect((yield* settingsFrom({ PORTICO_PUSH_CREDENTIAL_CACHE_SECONDS: "2" })).pushCredentialCacheSeconds).toBe(2)
      for (const value of ["0", "31", "1.5"]) {
        const refused = yield* Effect.flip(settingsFrom({ PORTICO_PUSH_CREDENTIAL_CACHE_SECONDS: value }))
        expect(String(refused), value).toContain("PUSH_CREDENTIAL_CACHE_SECONDS")
      }
    })
  )
})
