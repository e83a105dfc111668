/**
 * The anonymity proxy's destination rules (spec §4.7, §8; docs/proxy.md "Destinations"): every
 * spelling of a private address refused, local names refused, public names and addresses passed
 * in the form sent to the SOCKS upstream, ports 80 and 443 only, URLs of anon requests.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { judgeDestination, judgeHost, judgePort, judgeUrl, parseLegacyIpv4 } from "../../src/domain/ProxyDestination.js"

const codeOf = <A, E extends { code: string }>(e: Either.Either<A, E>): string => (Either.isLeft(e) ? e.left.code : "ok")

describe("parseLegacyIpv4 (inet_aton spellings)", () => {
  it.each([
    ["127.0.0.1", "127.0.0.1"],
    ["2130706433", "127.0.0.1"],
    ["0177.0.0.1", "127.0.0.1"],
    ["0x7f000001", "127.0.0.1"],
    ["0x7F.0.0.1", "127.0.0.1"],
    ["127.1", "127.0.0.1"],
    ["127.0.1", "127.0.0.1"],
    ["10.65535", "10.0.255.255"],
    ["0", "0.0.0.0"],
    ["0x", "0.0.0.0"],
    ["00", "0.0.0.0"],
    ["8.8.8.8", "8.8.8.8"],
    ["134744072", "8.8.8.8"],
    ["010.010.010.010", "8.8.8.8"]
  ])("%s is %s", (text, address) => {
    expect(parseLegacyIpv4(text)).toBe(address)
  })

  it.each(["256.0.0.1", "1.2.3.4.5", "4294967296", "08.0.0.1", "1..2", "0x1g", "1.2.3.256", "1.2.65536", "", "-1"])("%s is not an address", (text) => {
    expect(parseLegacyIpv4(text)).toBeUndefined()
  })
})

describe("judgeHost", () => {
  const privateSpellings = [
    "127.0.0.1",
    "2130706433",
    "0177.0.0.1",
    "0x7f000001",
    "0x7f.0x0.0x0.0x1",
    "127.1",
    "127.000.000.001",
    "127.0.0.1.",
    "0",
    "0.0.0.0",
    "10.0.0.1",
    "012.0.0.1",
    "167772161",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.0.1",
    "0xc0a80001",
    "3232235521",
    "169.254.169.254",
    "0xa9fea9fe",
    "100.64.0.1",
    "100.127.255.255",
    "224.0.0.1",
    "239.255.255.250",
    "255.255.255.255",
    "4294967295",
    "::1",
    "[::1]",
    "::",
    "::ffff:127.0.0.1",
    "[::ffff:127.0.0.1]",
    "::ffff:7f00:1",
    "::ffff:8.8.8.8",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "[fe80::1%25eth0]",
    "fe80::1%eth0",
    "ff02::1",
    "localhost",
    "LOCALHOST",
    "localhost.",
    "app.localhost",
    "a.b.localhost.",
    "printer.local",
    "db.internal",
    "nas.home.arpa",
    "intranet",
    "router",
    "1.2.3.4.5",
    "4294967296",
    "08.0.0.1",
    "example.123"
  ]
  it.each(privateSpellings)("%s is refused RELAY_DESTINATION_NOT_ALLOWED", (host) => {
    expect(codeOf(judgeHost(host))).toBe("RELAY_DESTINATION_NOT_ALLOWED")
  })

  it.each([
    ["example.com", "example.com", "name"],
    ["Example.COM.", "example.com", "name"],
    ["dest.portico-test", "dest.portico-test", "name"],
    ["xn--bcher-kva.example", "xn--bcher-kva.example", "name"],
    ["_srv.example.org", "_srv.example.org", "name"],
    ["duckduckgogg42xjoc72x3sjasowoarfbgcmvfimaftt6twagswzczad.onion", "duckduckgogg42xjoc72x3sjasowoarfbgcmvfimaftt6twagswzczad.onion", "name"],
    ["8.8.8.8", "8.8.8.8", "ipv4"],
    ["134744072", "8.8.8.8", "ipv4"],
    ["0x8.0x8.0x8.0x8", "8.8.8.8", "ipv4"],
    ["1.1", "1.0.0.1", "ipv4"],
    ["2606:4700:4700::1111", "2606:4700:4700::1111", "ipv6"],
    ["[2001:4860:4860::8888]", "2001:4860:4860::8888", "ipv6"]
  ])("%s passes as %s (%s)", (raw, host, kind) => {
    expect(judgeHost(raw)).toEqual(Either.right({ host, kind }))
  })

  it.each(["", "exa mple.com", "bücher.example", "-bad.example", "bad-.example", "a..b", "[example.com]", "ex\r\nample.com", "a".repeat(64) + ".com", "a/b.com", "a@b.com"])(
    "%j is refused VALIDATION_FAILED",
    (host) => {
      expect(codeOf(judgeHost(host))).toBe("VALIDATION_FAILED")
    }
  )
})

describe("judgePort", () => {
  it("defaults to 443 and takes 80 and 443", () => {
    expect(judgePort(undefined)).toEqual(Either.right(443))
    expect(judgePort("")).toEqual(Either.right(443))
    expect(judgePort("80")).toEqual(Either.right(80))
    expect(judgePort(443)).toEqual(Either.right(443))
  })
  it.each(["22", "8080", "0", "65535", "99999", "0443"])("port %s is refused RELAY_DESTINATION_NOT_ALLOWED", (port) => {
    expect(codeOf(judgePort(port))).toBe(port === "0443" ? "ok" : "RELAY_DESTINATION_NOT_ALLOWED")
  })
  it.each(["http", "-80", "+80", "80.0", "1e2", " 80", "123456"])("port %j is refused VALIDATION_FAILED", (port) => {
    expect(codeOf(judgePort(port))).toBe("VALIDATION_FAILED")
  })
})

describe("judgeDestination", () => {
  it("needs a host", () => {
    expect(codeOf(judgeDestination(undefined, "443"))).toBe("VALIDATION_FAILED")
  })
  it("joins host and port", () => {
    expect(judgeDestination("example.com", "80")).toEqual(Either.right({ host: "example.com", kind: "name", port: 80 }))
  })
})

describe("judgeUrl", () => {
  it("takes http and https URLs with their default or an allowed port", () => {
    expect(judgeUrl("https://example.com/a/b?c=d#frag")).toEqual(
      Either.right({ host: "example.com", kind: "name", port: 443, scheme: "https", path: "/a/b?c=d", hostHeader: "example.com" })
    )
    expect(judgeUrl("http://example.com")).toEqual(
      Either.right({ host: "example.com", kind: "name", port: 80, scheme: "http", path: "/", hostHeader: "example.com" })
    )
    expect(judgeUrl("http://example.com:443/x")).toEqual(
      Either.right({ host: "example.com", kind: "name", port: 443, scheme: "http", path: "/x", hostHeader: "example.com:443" })
    )
    expect(judgeUrl("https://[2606:4700:4700::1111]/")).toEqual(
      Either.right({ host: "2606:4700:4700::1111", kind: "ipv6", port: 443, scheme: "https", path: "/", hostHeader: "[2606:4700:4700::1111]" })
    )
  })
  it.each([
    "http://127.0.0.1/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://0x7f000001/",
    "http://127.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://localhost/",
    "http://localhost./",
    "http://x.localhost/",
    "http://10.0.0.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://example.com:8080/",
    "http://example.com:22/"
  ])("%s is refused RELAY_DESTINATION_NOT_ALLOWED", (url) => {
    expect(codeOf(judgeUrl(url))).toBe("RELAY_DESTINATION_NOT_ALLOWED")
  })
  it.each(["example.com/x", "/relative", "ftp://example.com/", "file:///etc/passwd", "http://user:pw@example.com/", "http://exa mple.com/", "http://example.com/\r\nX: y", "http://", "javascript:alert(1)"])(
    "%j is refused VALIDATION_FAILED",
    (url) => {
      expect(codeOf(judgeUrl(url))).toBe("VALIDATION_FAILED")
    }
  )
})
