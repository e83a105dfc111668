/** The caller as a forwarded call carries it (domain/Principal.ts): the schema's members, nothing else. */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { ForwardedPrincipal, forwardedPrincipal, type Principal, toPrincipal } from "../../src/domain/Principal.js"

const strict = Schema.decodeUnknownSync(ForwardedPrincipal, { onExcessProperty: "error" })

const session: Principal = {
  namespace: "acme",
  subject: "0xabc",
  method: "jwt",
  role: "developer",
  grants: [{ name: "db:write", pattern: undefined }, { name: "cache", pattern: "a/*" }],
  keyId: undefined,
  sessionId: "s1",
  deviceId: "d1"
}

describe("forwardedPrincipal", () => {
  it("keeps what the home node needs and comes back the same", () => {
    expect(toPrincipal(strict(forwardedPrincipal(session)))).toEqual(session)
  })
  it("leaves out members the credential's principal has beyond the schema, which the strict payload would refuse", () => {
    const withMore = { ...session, wallet: "0xabc", expiresAt: 1 } as Principal
    expect(() => strict(withMore)).toThrow()
    expect(toPrincipal(strict(forwardedPrincipal(withMore)))).toEqual(session)
  })
})
