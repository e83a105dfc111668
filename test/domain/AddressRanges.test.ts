/**
 * The address rules of the guarded egress client (spec §4.6): which resolved addresses a
 * tenant-chosen host may reach, and the operator's allow-list.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { judgeAddress, parseCidrs } from "../../src/domain/AddressRanges.js"

const refused = [
  ["0.0.0.0", "unspecified"],
  ["10.1.2.3", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["192.168.1.1", "private"],
  ["127.0.0.1", "loopback"],
  ["127.255.0.9", "loopback"],
  ["169.254.169.254", "link-local"],
  ["100.64.0.1", "carrier-grade NAT"],
  ["100.127.255.254", "carrier-grade NAT"],
  ["198.18.0.1", "benchmarking"],
  ["198.19.255.255", "benchmarking"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["240.0.0.1", "reserved"],
  ["255.255.255.255", "reserved"],
  ["192.0.2.10", "documentation"],
  ["::", "unspecified"],
  ["::1", "loopback"],
  ["::ffff:127.0.0.1", "IPv4-mapped"],
  ["::ffff:8.8.8.8", "IPv4-mapped"],
  ["::127.0.0.1", "IPv4-compatible"],
  ["64:ff9b::7f00:1", "NAT64"],
  ["2002:7f00:1::1", "6to4"],
  ["2001:0:4136:e378::1", "Teredo"],
  ["fd12:3456::1", "unique local"],
  ["fc00::1", "unique local"],
  ["fe80::1", "link-local"],
  ["fe80::1%eth0", "link-local"],
  ["ff02::1", "multicast"],
  ["2001:db8::1", "documentation"],
  ["5f00::1", "outside IPv6 global unicast"]
] as const

describe("AddressRanges", () => {
  it("refuses every special-purpose range, naming it", () => {
    for (const [address, name] of refused) {
      const verdict = judgeAddress(address)
      expect(verdict.permitted, address).toBe(false)
      if (!verdict.permitted) expect(verdict.reason, address).toContain(name)
    }
  })

  it("permits public unicast addresses of both families, neighbours of refused ranges included", () => {
    for (const address of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "198.20.0.1", "11.0.0.1", "223.255.255.254", "2606:4700:4700::1111", "2a00:1450::1"]) {
      expect(judgeAddress(address), address).toEqual({ permitted: true })
    }
  })

  it("refuses what is not an IP address", () => {
    expect(judgeAddress("localhost").permitted).toBe(false)
    expect(judgeAddress("2130706433").permitted).toBe(false)
  })

  it("the allow-list exempts its ranges and nothing else", () => {
    const allow = Either.getOrThrow(parseCidrs(" 127.0.0.0/8 , ::1 ,10.9.0.0/16"))
    expect(allow.cidrs).toEqual(["127.0.0.0/8", "::1/128", "10.9.0.0/16"])
    expect(judgeAddress("127.0.0.1", allow)).toEqual({ permitted: true })
    expect(judgeAddress("::1", allow)).toEqual({ permitted: true })
    expect(judgeAddress("10.9.3.4", allow)).toEqual({ permitted: true })
    expect(judgeAddress("10.10.0.1", allow).permitted).toBe(false)
    expect(judgeAddress("169.254.169.254", allow).permitted).toBe(false)
  })

  it("parses an empty list, and names the first entry that is not a CIDR", () => {
    expect(Either.getOrThrow(parseCidrs("")).cidrs).toEqual([])
    for (const [text, bad] of [
      ["127.0.0.0/33", "127.0.0.0/33"],
      ["1.2.3.4,nope", "nope"],
      ["::1/129", "::1/129"],
      ["1.2.3.4/-1", "1.2.3.4/-1"],
      ["1.2.3.4/8x", "1.2.3.4/8x"]
    ] as const) {
      expect(parseCidrs(text), text).toEqual(Either.left(bad))
    }
  })
})
