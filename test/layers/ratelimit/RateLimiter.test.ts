import { describe, expect, it } from "vitest"
import { clientNetwork } from "../../../src/layers/ratelimit/RateLimiter.js"

describe("clientNetwork", () => {
  it("keys IPv4 on its /24, and an IPv4-mapped IPv6 address on the same /24", () => {
    expect(clientNetwork("203.0.113.7")).toBe("203.0.113.0/24")
    expect(clientNetwork("::ffff:203.0.113.7")).toBe("203.0.113.0/24")
    expect(clientNetwork("::FFFF:203.0.113.200")).toBe("203.0.113.0/24")
    expect(clientNetwork("0:0:0:0:0:ffff:203.0.113.7")).toBe("203.0.113.0/24")
    // the mapped address written in hex is the same address
    expect(clientNetwork("::ffff:cb00:7107")).toBe("203.0.113.0/24")
  })

  it("gives every spelling of one /64 the same key", () => {
    // the audit's pair: one /64, two keys before
    expect(clientNetwork("2001:db8:0:0:1::")).toBe(clientNetwork("2001:db8::1"))
    const key = clientNetwork("2001:db8::1")
    expect(key).toBe("2001:db8:0:0::/64")
    for (const spelling of [
      "2001:db8:0:0:1::",
      "2001:0db8:0000:0000:0000:0000:0000:0001",
      "2001:DB8::1",
      "2001:db8:0:0:ffff:ffff:ffff:ffff",
      "2001:db8::1%eth0",
      "2001:db8:0::0:1",
      "2001:db8::"
    ]) {
      expect(clientNetwork(spelling), spelling).toBe(key)
    }
  })

  it("keeps groups written after :: in their place, so different /64s get different keys", () => {
    // the audit's pair: two /64s, one key before
    expect(clientNetwork("2001::5:1:2:3:4")).not.toBe(clientNetwork("2001::6:1:2:3:4"))
    expect(clientNetwork("2001::5:1:2:3:4")).toBe("2001:0:0:5::/64")
    expect(clientNetwork("2001::6:1:2:3:4")).toBe("2001:0:0:6::/64")
    expect(clientNetwork("::5:6:7:8:9")).toBe("0:0:0:5::/64")
    expect(clientNetwork("2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1:2::/64")
    expect(clientNetwork("2001:db8:1:3::")).not.toBe(clientNetwork("2001:db8:1:2::"))
  })

  it("handles loopback, link-local with a zone, and an embedded IPv4 outside the mapped range", () => {
    expect(clientNetwork("::1")).toBe("0:0:0:0::/64")
    expect(clientNetwork("::")).toBe("0:0:0:0::/64")
    expect(clientNetwork("fe80::1%eth0")).toBe(clientNetwork("FE80::abcd%2"))
    expect(clientNetwork("fe80::1%eth0")).toBe("fe80:0:0:0::/64")
    // NAT64 is a real IPv6 network, not the IPv4 one it carries
    expect(clientNetwork("64:ff9b::203.0.113.7")).toBe("64:ff9b:0:0::/64")
  })

  it("reads the mapped, compressed and full forms alike (node:net and URL do the parsing)", () => {
    expect(clientNetwork("::ffff:1.2.3.4")).toBe("1.2.3.0/24")
    expect(clientNetwork("0000:0000:0000:0000:0000:ffff:0102:0304")).toBe("1.2.3.0/24")
    expect(clientNetwork("[::ffff:1.2.3.4]")).toBe("1.2.3.0/24")
    expect(clientNetwork("1.2.3.4")).toBe("1.2.3.0/24")
    // compressed at the start, in the middle and at the end, and written out in full
    expect(clientNetwork("::1:2:3:4:5:6:7")).toBe("0:1:2:3::/64")
    expect(clientNetwork("1:2:3:4:5:6:7::")).toBe("1:2:3:4::/64")
    expect(clientNetwork("1:2::7:8")).toBe("1:2:0:0::/64")
    expect(clientNetwork("0001:0002:0003:0004:0005:0006:0007:0008")).toBe("1:2:3:4::/64")
    expect(clientNetwork("1:0:0:4::8")).toBe("1:0:0:4::/64")
    // an IPv4 address with a leading zero is not one a socket reports: keyed by itself
    expect(clientNetwork("01.2.3.4")).toBe("01.2.3.4")
    expect(clientNetwork("1.2.3")).toBe("1.2.3")
  })

  it("keys a missing address as unknown and an unparsable one by itself", () => {
    expect(clientNetwork(undefined)).toBe("unknown")
    expect(clientNetwork("")).toBe("unknown")
    expect(clientNetwork("1::2::3")).toBe("1::2::3")
    expect(clientNetwork("1:2:3:4:5:6:7:8:9")).toBe("1:2:3:4:5:6:7:8:9")
    expect(clientNetwork("::ffff:999.1.1.1")).toBe("::ffff:999.1.1.1")
    expect(clientNetwork("1:2:3:4:5:6:7:8::")).toBe("1:2:3:4:5:6:7:8::")
  })
})
