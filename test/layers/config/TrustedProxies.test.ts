import { describe, expect, it } from "vitest"
import { clientBehind, parseTrustedProxies, protoBehind, type TrustedProxies } from "../../../src/layers/config/TrustedProxies.js"

const parsed = (entries: ReadonlyArray<string>): TrustedProxies => {
  const result = parseTrustedProxies(entries)
  if (typeof result === "string") throw new Error(result)
  return result
}

describe("trusted proxies", () => {
  const proxies = parsed(["127.0.0.1", "10.9.0.0/16", "fd00::/8"])

  it("parses addresses and ranges, and refuses anything else", () => {
    expect(parsed([]).any).toBe(false)
    expect(parsed([""]).any).toBe(false)
    expect(proxies.trusts("127.0.0.1")).toBe(true)
    expect(proxies.trusts("::ffff:127.0.0.1")).toBe(true)
    expect(proxies.trusts("10.9.200.1")).toBe(true)
    expect(proxies.trusts("fd12::1")).toBe(true)
    expect(proxies.trusts("127.0.0.2")).toBe(false)
    expect(proxies.trusts(undefined)).toBe(false)
    for (const bad of ["localhost", "10.0.0.0/33", "10.0.0.0/x", "1.2.3", "::/129"]) expect(parseTrustedProxies([bad])).toBeTypeOf("string")
  })

  it("takes the right-most address a trusted proxy did not write, so a client cannot choose its own", () => {
    const table: ReadonlyArray<readonly [string | undefined, string | undefined, string | undefined]> = [
      // [peer, X-Forwarded-For, client]
      ["127.0.0.1", "198.51.100.7", "198.51.100.7"],
      ["127.0.0.1", "203.0.113.9, 198.51.100.7", "198.51.100.7"], // the left one is the client's own claim
      ["127.0.0.1", "198.51.100.7, 10.9.0.4", "198.51.100.7"], // a second proxy of ours in between
      ["127.0.0.1", "10.9.0.4", "127.0.0.1"], // only proxies named: the peer
      ["127.0.0.1", "not-an-ip, 198.51.100.7", "198.51.100.7"],
      ["127.0.0.1", "198.51.100.7, garbage", "127.0.0.1"], // a malformed chain names no one
      ["127.0.0.1", undefined, "127.0.0.1"],
      ["198.51.100.20", "203.0.113.9", "198.51.100.20"], // an untrusted peer is the client, whatever it sends
      ["::ffff:127.0.0.1", "2001:db8::5", "2001:db8::5"]
    ]
    for (const [peer, header, client] of table) expect(clientBehind(proxies, peer, header), `${peer} ${header}`).toBe(client)
  })

  it("takes the scheme from a trusted proxy only", () => {
    expect(protoBehind(proxies, "127.0.0.1", "https", false)).toBe("https")
    expect(protoBehind(proxies, "127.0.0.1", "HTTPS, http", false)).toBe("https")
    expect(protoBehind(proxies, "127.0.0.1", "gopher", false)).toBe("http")
    expect(protoBehind(proxies, "198.51.100.20", "https", false)).toBe("http")
    expect(protoBehind(proxies, "198.51.100.20", undefined, true)).toBe("https")
  })
})
