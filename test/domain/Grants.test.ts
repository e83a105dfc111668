import { describe, expect, it } from "vitest"
import { cacheGrantReaches, cacheGrantReachesMap, cacheScope, matchesKeyPattern, parseGrant, profileGrants, roleGrants } from "../../src/domain/Grants.js"

describe("grants", () => {
  it("parses known grants and narrowed cache grants only", () => {
    expect(parseGrant("cache")).toEqual({ name: "cache", pattern: undefined })
    expect(parseGrant("db:write")).toEqual({ name: "db:write", pattern: undefined })
    expect(parseGrant("cache:key=sessions/*")).toEqual({ name: "cache", pattern: "sessions/*" })
    expect(parseGrant("root")).toBeUndefined()
    expect(parseGrant("admin:key=x/*")).toBeUndefined()
    expect(parseGrant("cache:key=")).toBeUndefined()
    expect(parseGrant("cache:key=a b")).toBeUndefined()
    // a pattern with neither / nor * matches no <map>/<key>: refused, not minted useless
    expect(parseGrant("cache:key=m1")).toBeUndefined()
    expect(parseGrant("cache:key=m1/k1")).toEqual({ name: "cache", pattern: "m1/k1" })
    expect(parseGrant("cache:key=app*")).toEqual({ name: "cache", pattern: "app*" })
    // control characters and lone surrogates would be stored mangled or print as something else
    expect(parseGrant("cache:key=m\u0000/*")).toBeUndefined()
    expect(parseGrant("cache:key=m\u007f/*")).toBeUndefined()
    expect(parseGrant("cache:key=m\ud800/*")).toBeUndefined()
    // a topic pattern is a topic's characters and *: one with a comma or a quote matches no topic
    expect(parseGrant("pubsub:topic=chat/*")).toEqual({ name: "pubsub", pattern: "chat/*" })
    expect(parseGrant("pubsub:topic=a,b")).toBeUndefined()
    expect(parseGrant('pubsub:topic="x"')).toBeUndefined()
    expect(parseGrant("cache:key=é/*")).toEqual({ name: "cache", pattern: "é/*" })
    expect(parseGrant("cache:key=😀/*")).toEqual({ name: "cache", pattern: "😀/*" })
  })
  it("keeps cache out of the runtime profile (spec §5.4)", () => {
    expect(profileGrants.runtime).not.toContain("cache")
    expect(profileGrants.admin).toContain("cache")
    // every signed-in session holds cache (spec §5.4), a reader's too
    for (const role of ["owner", "admin", "developer", "runtime", "reader", "user"] as const) expect(roleGrants[role]).toContain("cache")
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
  it("reads a cache narrowing as one map and a glob over its keys", () => {
    expect(cacheScope("m1/*")).toEqual({ map: "m1", keys: "*" })
    expect(cacheScope("m1/a/*")).toEqual({ map: "m1/a", keys: "*" })
    expect(cacheScope("m1/user-*")).toEqual({ map: "m1", keys: "user-*" })
    expect(cacheScope("m1/k")).toEqual({ map: "m1", keys: "k" })
    expect(cacheScope("*")).toEqual({ map: undefined, keys: "*" })
    expect(cacheScope("app*/x")).toEqual({ map: undefined, keys: "app*/x" })
    // a map named with the narrowed map as its prefix is another map
    expect(cacheGrantReaches("m1/*", "m1", "x")).toBe(true)
    expect(cacheGrantReaches("m1/*", "m1", "a/x")).toBe(true)
    expect(cacheGrantReaches("m1/*", "m1/a", "x")).toBe(false)
    expect(cacheGrantReaches("m1/*", "m1/secrets", "x")).toBe(false)
    expect(cacheGrantReaches("m1/user-*", "m1", "user-7")).toBe(true)
    expect(cacheGrantReaches("m1/user-*", "m1", "admin")).toBe(false)
    expect(cacheGrantReaches("*", "anything", "x")).toBe(true)
    expect(cacheGrantReachesMap("m1/*", "m1")).toBe(true)
    expect(cacheGrantReachesMap("m1/*", "m1/a")).toBe(false)
    expect(cacheGrantReachesMap("app*", "apple")).toBe(true)
    expect(cacheGrantReachesMap("app*", "other")).toBe(false)
  })
})
