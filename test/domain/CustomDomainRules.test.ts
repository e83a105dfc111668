/** The custom-domain name rules (docs/deployments.md, "Custom domains"). */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { customDomain, DOMAIN_MAX_LENGTH, verificationRecordName } from "../../src/domain/CustomDomainRules.js"

const BASE = "apps.example.net"
const accepted = (value: unknown) => {
  const result = customDomain(value, BASE)
  if (Either.isLeft(result)) throw new Error(`refused ${JSON.stringify(value)}: ${result.left.message}`)
  return result.right
}
const refusal = (value: unknown, base = BASE) => {
  const result = customDomain(value, base)
  if (Either.isRight(result)) throw new Error(`accepted ${JSON.stringify(value)} as ${result.right}`)
  expect(result.left.field).toBe("domain")
  return result.left.reason
}

describe("custom domain rules", () => {
  it("keeps a host name lowercased, without its trailing dot or surrounding blanks", () => {
    expect(accepted("example.com")).toBe("example.com")
    expect(accepted("WWW.Example.COM.")).toBe("www.example.com")
    expect(accepted("  shop.example.co.uk ")).toBe("shop.example.co.uk")
    expect(accepted("a-1.b2.io")).toBe("a-1.b2.io")
    expect(accepted("123.example.com")).toBe("123.example.com")
    // a 63-character label is the longest
    expect(accepted(`${"a".repeat(63)}.com`)).toBe(`${"a".repeat(63)}.com`)
  })

  it("takes punycode as given and refuses non-ASCII names", () => {
    expect(accepted("xn--bcher-kva.example")).toBe("xn--bcher-kva.example")
    expect(refusal("bücher.example")).toMatch(/punycode/)
  })

  it("refuses names that are not host names", () => {
    for (const bad of ["", ".", "com", "example..com", ".example.com", "-a.example.com", "a-.example.com", "a_b.example.com", "a b.com", "a/b.com", "*.example.com", `${"a".repeat(64)}.com`]) {
      refusal(bad)
    }
    for (const bad of [undefined, null, 42, ["example.com"]]) refusal(bad)
  })

  it("refuses a name whose verification record would pass 253 characters", () => {
    const label = "a".repeat(60)
    const long = [label, label, label, "a".repeat(DOMAIN_MAX_LENGTH - 3 * 61 - 4), "com"].join(".")
    expect(long.length).toBe(DOMAIN_MAX_LENGTH)
    expect(accepted(long)).toBe(long)
    expect(verificationRecordName(long).length).toBe(253)
    refusal("b" + long)
  })

  it("refuses IP literals in every spelling", () => {
    for (const ip of ["127.0.0.1", "10.0.0.1", "127.1", "1.2.3.4.", "::1", "[::1]", "2001:db8::1", "0x7f.1"]) {
      expect(refusal(ip)).toMatch(/IP address|label/)
    }
  })

  it("refuses localhost names", () => {
    expect(refusal("localhost")).toMatch(/at least two labels|localhost/)
    expect(refusal("app.localhost")).toMatch(/localhost/)
    expect(refusal("A.LOCALHOST.")).toMatch(/localhost/)
  })

  it("refuses the base domain and every name under it", () => {
    expect(refusal("apps.example.net")).toMatch(/platform/)
    expect(refusal("blog-abc123.apps.example.net")).toMatch(/platform/)
    expect(refusal("deep.blog.APPS.example.net.")).toMatch(/platform/)
    // a sibling or a name merely ending in the same characters is not under it
    expect(accepted("example.net")).toBe("example.net")
    expect(accepted("myapps.example.net")).toBe("myapps.example.net")
  })

  it("names the verification record under the domain", () => {
    expect(verificationRecordName("www.example.com")).toBe("_portico-verify.www.example.com")
  })
})
