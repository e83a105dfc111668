import * as dnsPacket from "dns-packet"
import { describe, expect, it } from "vitest"
import { answerQuery } from "../../../src/layers/edge/AcmeDns.js"

const challenges = { isChallengeName: (name: string) => /^_acme-challenge\.(.+\.)?example\.com\.?$/i.test(name) }
const query = (name: string, type: "TXT" | "A" | "SOA", extra: Partial<dnsPacket.Packet> = {}) =>
  dnsPacket.decode(dnsPacket.encode({ type: "query", id: 42, flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type, class: "IN" }], ...extra }))
const decoded = async (answer: Promise<Buffer | undefined>) => {
  const bytes = await answer
  if (bytes === undefined) throw new Error("no answer")
  return dnsPacket.decode(bytes) as dnsPacket.DecodedPacket & { rcode: string }
}

describe("the DNS-01 answer", () => {
  const records = async (name: string) => (name === "_acme-challenge.example.com" ? ["token-a", "token-b"] : [])

  it("answers TXT from the records, authoritative and uncached", async () => {
    const answer = await decoded(answerQuery(query("_acme-challenge.Example.com", "TXT"), challenges, records))
    expect(answer.id).toBe(42)
    expect(answer.rcode).toBe("NOERROR")
    expect((answer.flags ?? 0) & dnsPacket.AUTHORITATIVE_ANSWER).toBeTruthy()
    expect((answer.answers as Array<dnsPacket.TxtAnswer>).map((a) => [a.type, a.ttl, (a.data as Array<Buffer>).map(String)])).toEqual([
      ["TXT", 0, ["token-a"]],
      ["TXT", 0, ["token-b"]]
    ])
  })

  it("answers no records with the zone's SOA, SOA itself, and other types with no data", async () => {
    const none = await decoded(answerQuery(query("_acme-challenge.www.example.com", "TXT"), challenges, records))
    expect(none.rcode).toBe("NOERROR")
    expect(none.answers).toEqual([])
    expect(none.authorities?.[0]?.type).toBe("SOA")
    expect((await decoded(answerQuery(query("_acme-challenge.example.com", "SOA"), challenges, records))).answers?.[0]?.type).toBe("SOA")
    expect((await decoded(answerQuery(query("_acme-challenge.example.com", "A"), challenges, records))).answers).toEqual([])
  })

  it("refuses every other name, is SERVFAIL when the registry does not answer, and ignores answers sent to it", async () => {
    for (const name of ["example.com", "www.example.com", "_acme-challenge.example.org"]) {
      expect((await decoded(answerQuery(query(name, "TXT"), challenges, records))).rcode).toBe("REFUSED")
    }
    expect((await decoded(answerQuery(query("_acme-challenge.example.com", "TXT"), challenges, async () => undefined))).rcode).toBe("SERVFAIL")
    const response = dnsPacket.decode(dnsPacket.encode({ type: "response", id: 1, questions: [{ name: "_acme-challenge.example.com", type: "TXT", class: "IN" }] }))
    expect(await answerQuery(response, challenges, records)).toBeUndefined()
  })
})
