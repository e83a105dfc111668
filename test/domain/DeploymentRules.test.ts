import { Either } from "effect"
import { describe, expect, it } from "vitest"
import {
  deploymentName,
  deploymentType,
  generatedDomain,
  hostLabelOfName,
  instanceName,
  isDynamicType,
  overrideDomain,
  randomLabel,
  randomLabelFrom,
  subdomainOverride,
  checkHost
} from "../../src/domain/DeploymentRules.js"

const refusedField = <A>(result: Either.Either<A, { field: string }>): string | undefined => (Either.isLeft(result) ? result.left.field : undefined)

describe("deployment name", () => {
  it("takes 1-56 letters, digits, - and _, first a letter or digit", () => {
    for (const name of ["a", "Blog", "my_app-2", "9lives", "x".repeat(56), "a-", "a_"]) expect(Either.getOrThrow(deploymentName(name))).toBe(name)
  })
  it("refuses the rest naming the field", () => {
    for (const name of ["", "-a", "_a", "x".repeat(57), "a.b", "a b", "café", "a/b", "a\u0000", "..", 5, undefined]) {
      expect(refusedField(deploymentName(name))).toBe("name")
    }
  })
})

describe("deployment type", () => {
  it("is one of four, and only static runs no process", () => {
    expect(Either.getOrThrow(deploymentType("nodejs"))).toBe("nodejs")
    expect(refusedField(deploymentType("python"))).toBe("type")
    expect(refusedField(deploymentType("Static"))).toBe("type")
    expect(isDynamicType("static")).toBe(false)
    expect(isDynamicType("go")).toBe(true)
  })
})

describe("domains", () => {
  it("draws 6 characters of a-z0-9, evenly (bytes of 252 and above skipped)", () => {
    expect(randomLabelFrom(new Uint8Array([0, 35, 36, 251, 252, 255, 1, 2]))).toBe("a9a9bc")
    expect(randomLabelFrom(new Uint8Array([252, 253, 254, 255, 0]))).toBeUndefined()
    const seen = new Set<string>()
    for (let i = 0; i < 200; i++) {
      const label = randomLabel()
      expect(label).toMatch(/^[a-z0-9]{6}$/)
      seen.add(label)
    }
    expect(seen.size).toBe(200)
  })
  it("builds <name>-<random>.<base> as one DNS label of at most 63", () => {
    expect(generatedDomain("blog", "k3j9x2", "apps.example.test")).toBe("blog-k3j9x2.apps.example.test")
    expect(generatedDomain("My_App", "abc123", "Apps.Example.TEST")).toBe("my-app-abc123.apps.example.test")
    const longest = generatedDomain("a".repeat(56), "abc123", "d.test")
    expect(longest.split(".")[0]).toHaveLength(63)
  })
  it("keeps '--' out of a host label (no punycode look-alikes)", () => {
    expect(hostLabelOfName("xn--app")).toBe("xn-app")
    expect(hostLabelOfName("a__b")).toBe("a-b")
    expect(generatedDomain("ab-", "zzzzzz", "d.test")).toBe("ab-zzzzzz.d.test")
  })
  it("takes a --subdomain as one lowercase DNS label, not a platform host", () => {
    expect(Either.getOrThrow(subdomainOverride("Blog"))).toBe("blog")
    expect(Either.getOrThrow(subdomainOverride("a"))).toBe("a")
    expect(Either.getOrThrow(subdomainOverride("x".repeat(63)))).toHaveLength(63)
    expect(overrideDomain("blog", "Apps.Test")).toBe("blog.apps.test")
    for (const bad of ["", "-a", "a-", "a.b", "a_b", "x".repeat(64), "xn--abc", "ns-demo", "www", "API", "café", 7]) {
      expect(refusedField(subdomainOverride(bad))).toBe("subdomain")
    }
  })
  it("asks a name whose generated host would begin 'ns-' for a subdomain", () => {
    for (const name of ["ns", "NS", "ns-shop", "NS_shop", "ns__x", "Ns-"]) {
      expect([name, refusedField(checkHost(name, undefined))]).toEqual([name, "subdomain"])
      expect(Either.isRight(checkHost(name, "shop"))).toBe(true)
    }
    for (const name of ["nss", "n-s", "news", "snow", "blog"]) expect(Either.isRight(checkHost(name, undefined))).toBe(true)
  })
  it("names the instance <namespace>-<name>, which two deployments can share", () => {
    expect(instanceName("acme", "blog")).toBe("acme-blog")
    expect(instanceName("a-b", "c")).toBe(instanceName("a", "b-c"))
  })
})
