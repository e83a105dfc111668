/** PORTICO_DNS_SERVERS, the resolvers custom domains are verified against (docs/deployments.md, "Custom domains"). */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer } from "effect"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"

const settingsFrom = (env: Record<string, string>) =>
  Layer.build(PorticoConfig.fromEnv({ dataDir: "/tmp/portico-config-test" })).pipe(
    Effect.map((context) => Context.get(context, PorticoConfig)),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" })),
    Effect.scoped
  )

describe("PORTICO_DNS_SERVERS", () => {
  it.effect("is empty by default: the system's resolvers", () =>
    Effect.gen(function* () {
      expect((yield* settingsFrom({})).dnsServers).toEqual([])
    })
  )

  it.effect("takes ip, ip:port, bare IPv6 and [ipv6]:port, in order", () =>
    Effect.gen(function* () {
      const settings = yield* settingsFrom({ PORTICO_DNS_SERVERS: " 127.0.0.1:5353, 10.0.0.2 ,::1,[2001:db8::1]:53," })
      expect(settings.dnsServers).toEqual(["127.0.0.1:5353", "10.0.0.2", "::1", "[2001:db8::1]:53"])
    })
  )

  it.effect("refuses names, bad addresses and ports at start", () =>
    Effect.gen(function* () {
      for (const value of ["dns.example.com", "127.0.0.1:0", "127.0.0.1:70000", "300.1.1.1", "[127.0.0.1]:53", "[::1", "1.2.3.4:53:53"]) {
        const refused = yield* Effect.flip(settingsFrom({ PORTICO_DNS_SERVERS: value }))
        expect(String(refused), value).toContain("DNS_SERVERS")
      }
    })
  )
})
