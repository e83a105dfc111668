import { describe, expect, it } from "vitest"
import { matchesKeyPattern, parseGrant, profileGrants } from "../../src/domain/Grants.js"

describe("grants", () => {
  it("parses known grants and narrowed cache grants only", () => {
    expect(parseGrant("cache")).toEqual({ name: "cache", keyPattern: undefined })
    expect(parseGrant("db:write")).toEqual({ name: "db:write", keyPattern: undefined })
    expect(parseGrant("cache:key=sessions/*")).toEqual({ name: "cache", keyPattern: "sessions/*" })
    expect(parseGrant("root")).toBeUndefined()
    expect(parseGrant("admin:key=x/*")).toBeUndefined()
    expect(parseGrant("cache:key=")).toBeUndefined()
    expect(parseGrant("cache:key=a b")).toBeUndefined()
  })
  it("keeps cache out of the runtime profile (spec §5.4)", () => {
    expect(profileGrants.runtime).not.toContain("cache")
    expect(profileGrants.admin).toContain("cache")
  })
  it("matches key patterns with * as any run", () => {
    expect(matchesKeyPattern("sessions/*", "sessions/abc")).toBe(true)
    expect(matchesKeyPattern("sessions/*", "sessions/")).toBe(true)
    expect(matchesKeyPattern("sessions/*", "session/abc")).toBe(false)
    expect(matchesKeyPattern("sessions/*", "other/sessions/abc")).toBe(false)
    expect(matchesKeyPattern("a/*/z", "a/mid/z")).toBe(true)
    expect(matchesKeyPattern("a/*/z", "a/z")).toBe(false)
    expect(matchesKeyPattern("exact", "exact")).toBe(true)
    expect(matchesKeyPattern("exact", "exactly")).toBe(false)
  })
})
