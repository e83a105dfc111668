/** PORTICO_DOMAINS_PENDING_PER_NAMESPACE, the cap on a namespace's unverified custom domain claims (docs/deployments.md, "Custom domains"). */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"

const settingsFrom = (env: Record<string, string>) =>
  Layer.build(PorticoConfig.fromEnv({ dataDir: "/tmp/portico-config-test" })).pipe(
    Effect.map((context) => Context.get(context, PorticoConfig)),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" })),
    Effect.scoped
  )

describe("PORTICO_DOMAINS_PENDING_PER_NAMESPACE", () => {
  it.effect("is 50 by default, and takes a positive integer", () =>
    Effect.gen(function* () {
      expect((yield* settingsFrom({})).domainsPendingPerNamespace).toBe(50)
      expect((yield* settingsFrom({ PORTICO_DOMAINS_PENDING_PER_NAMESPACE: "7" })).domainsPendingPerNamespace).toBe(7)
    })
  )

  it.effect("refuses zero, a negative number and a non-integer at start", () =>
    Effect.gen(function* () {
      for (const value of ["0", "-3", "2.5", "many"]) {
        const refused = yield* Effect.flip(settingsFrom({ PORTICO_DOMAINS_PENDING_PER_NAMESPACE: value }))
        expect(String(refused), value).toContain("DOMAINS_PENDING_PER_NAMESPACE")
      }
    })
  )
})
