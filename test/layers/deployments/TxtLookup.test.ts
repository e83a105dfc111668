/**
 * TXT lookups over the real DNS protocol against the stand-in (test/support/dnsStandIn.ts) on
 * 127.0.0.1: records, no records, a failing or silent server, and a long answer that comes over
 * TCP after a truncated UDP one.
 */
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DnsUnavailable, lookupTxt } from "../../../src/layers/deployments/TxtLookup.js"
import { type DnsStandIn, startDnsStandIn } from "../../support/dnsStandIn.js"

describe("TXT lookups", () => {
  let dns: DnsStandIn

  beforeAll(async () => {
    dns = await startDnsStandIn()
  })
  afterAll(async () => {
    await dns?.close()
  })

  const lookup = (name: string, timeout: number = 5000) => Effect.runPromise(Effect.either(lookupTxt([dns.server], name, timeout)))

  it("answers every TXT record of a name, a split record's strings joined", async () => {
    dns.setTxt("_portico-verify.www.example.com", ["portico-verify-abc", ["v=spf1 ", "-all"]])
    const answer = await lookup("_portico-verify.www.example.com")
    expect(Either.getOrThrow(answer).slice().sort()).toEqual(["portico-verify-abc", "v=spf1 -all"])
    expect(dns.questions().some((q) => q.name === "_portico-verify.www.example.com" && q.type === "TXT" && q.transport === "udp")).toBe(true)
  })

  it("answers no records for a name that does not exist or holds no TXT", async () => {
    expect(Either.getOrThrow(await lookup("_portico-verify.nowhere.example"))).toEqual([])
    dns.setTxt("empty.example.com", [])
    expect(Either.getOrThrow(await lookup("empty.example.com"))).toEqual([])
  })

  it("asks again over TCP when the UDP answer is truncated", async () => {
    const long = Array.from({ length: 12 }, (_, i) => `record-${i}-${"x".repeat(200)}`)
    dns.setTxt("big.example.com", long)
    const answer = Either.getOrThrow(await lookup("big.example.com"))
    expect(answer.slice().sort()).toEqual(long.slice().sort())
    expect(dns.questions().some((q) => q.name === "big.example.com" && q.transport === "tcp")).toBe(true)
  })

  it("is DnsUnavailable when the server fails or refuses", async () => {
    dns.fail("broken.example.com", 2)
    const failed = await lookup("broken.example.com")
    expect(Either.isLeft(failed) && failed.left instanceof DnsUnavailable).toBe(true)
    dns.fail("refused.example.com", 5)
    expect(Either.isLeft(await lookup("refused.example.com"))).toBe(true)
  })

  it("is DnsUnavailable within its timeout when the server does not answer", async () => {
    dns.setSilent(true)
    try {
      const started = Date.now()
      const silent = await lookup("_portico-verify.www.example.com", 1000)
      expect(Either.isLeft(silent)).toBe(true)
      expect(Date.now() - started).toBeLessThan(3000)
    } finally {
      dns.setSilent(false)
    }
  })

  it("is DnsUnavailable when nothing listens on the server's port", async () => {
    const gone = await startDnsStandIn()
    await gone.close()
    const answer = await Effect.runPromise(Effect.either(lookupTxt([gone.server], "www.example.com", 5000)))
    expect(Either.isLeft(answer)).toBe(true)
  })
})
