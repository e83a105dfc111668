/**
 * The proxy's settings (docs/proxy.md "Settings"): the upstream is `socks5h://host:port` only, and
 * every limit defaults to spec §8's value.
 */
import { ConfigProvider, Effect, Either } from "effect"
import { describe, expect, it } from "vitest"
import { defaultProxySettings, parseSocksUrl, proxyConfig } from "../../../src/layers/config/ProxySettings.js"

const load = (env: Record<string, string>) => Effect.runPromise(Effect.either(Effect.withConfigProvider(proxyConfig, ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" }))))

describe("proxy settings", () => {
  it("reads socks5h URLs and refuses socks5 and anything else", () => {
    expect(parseSocksUrl("socks5h://127.0.0.1:9050")).toEqual(Either.right({ host: "127.0.0.1", port: 9050 }))
    expect(parseSocksUrl("socks5h://tor.internal:9050/")).toEqual(Either.right({ host: "tor.internal", port: 9050 }))
    expect(parseSocksUrl("socks5h://[::1]:9050")).toEqual(Either.right({ host: "::1", port: 9050 }))
    for (const bad of ["socks5://127.0.0.1:9050", "http://127.0.0.1:9050", "socks5h://127.0.0.1", "socks5h://127.0.0.1:0", "socks5h://127.0.0.1:70000", "socks5h://u:p@127.0.0.1:9050"]) {
      expect(Either.isLeft(parseSocksUrl(bad)), bad).toBe(true)
    }
  })

  it("defaults to spec §8's limits and no upstream", async () => {
    expect(await load({})).toEqual(Either.right(defaultProxySettings))
    expect(defaultProxySettings).toMatchObject({ socks: undefined, tunnelsPerUser: 24, tunnelsPerNode: 512, tunnelMaxBytes: 256 * 1024 * 1024, tunnelIdleSeconds: 120, tunnelLifetimeSeconds: 1800, relayPerAddress: 4 })
  })

  it("reads the environment, refusing a socks5 URL and a revocation check over 9 s at start", async () => {
    const read = await load({ PORTICO_PROXY_SOCKS_URL: "socks5h://127.0.0.1:9050", PORTICO_PROXY_TUNNEL_IDLE_SECONDS: "1" })
    expect(Either.isRight(read) && read.right.socks).toEqual({ host: "127.0.0.1", port: 9050 })
    expect(Either.isRight(read) && read.right.tunnelIdleSeconds).toBe(1)
    expect(Either.isLeft(await load({ PORTICO_PROXY_SOCKS_URL: "socks5://127.0.0.1:9050" }))).toBe(true)
    expect(Either.isLeft(await load({ PORTICO_PROXY_REVOCATION_CHECK_MS: "10000" }))).toBe(true)
    expect(Either.isLeft(await load({ PORTICO_PROXY_TUNNELS_PER_USER: "0" }))).toBe(true)
  })
})
