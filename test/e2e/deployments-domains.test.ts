/**
 * Custom domains over DNS (spec §4.8; docs/deployments.md "Custom domains") through a real gateway
 * whose PORTICO_DNS_SERVERS is the DNS stand-in (test/support/dnsStandIn.ts, the real protocol
 * on 127.0.0.1), on both registry engines. The static sites' records are written with
 * DeploymentStore and their files stored through the storage service, against the gateway's own
 * data dir and registry before it starts, as the serving suite does; so is a pending claim aged
 * past its 7 days. Tenants: `shop` (the domains' holder), `rival` (claims shop's domains) and
 * `crowd` (fills its cap of pending claims, 30 here).
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PENDING_CLAIM_SECONDS } from "../../src/domain/CustomDomainRules.js"
import { testSettings, type PorticoSettings } from "../../src/layers/config/PorticoConfig.js"
import { makeDeploymentStore } from "../../src/layers/deployments/DeploymentStore.js"
import { storeSiteDirectory } from "../../src/layers/deployments/serving/SiteManifest.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { Sealer } from "../../src/layers/secrets/Sealer.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { Storage } from "../../src/layers/storage/Storage.js"
import { type DnsStandIn, startDnsStandIn } from "../support/dnsStandIn.js"
import { type Gateway, mintKey, type Reply, startGateway, testTmp, getOnHost } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const BASE = "apps.test"
const PENDING_CAP = 30

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body?.code, reply.text).toBe(code)
  expect(Object.keys(reply.body ?? {}).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
}


describe.each(["sqlite", "rqlite"] as const)("custom domains verified over DNS, registry on %s", (engine) => {
  let gw: Gateway
  let dns: DnsStandIn
  let rqlited: RqlitedServer | undefined
  let key: string
  let runtimeKey: string
  let rivalKey: string
  let crowdKey: string
  let staleToken: string

  const add = (name: string, domain: string, token = key) => gw.request("POST", "/v1/deployments/domains/add", { token, json: { name, domain } })
  const verify = (name: string, domain: string, token = key) => gw.request("POST", "/v1/deployments/domains/verify", { token, json: { name, domain } })
  const list = (name: string, token = key) => gw.request("GET", `/v1/deployments/domains/list?name=${encodeURIComponent(name)}`, { token })
  const remove = (name: string, domain: string, token = key) => gw.request("POST", "/v1/deployments/domains/remove", { token, json: { name, domain } })

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      rqlited = await Effect.runPromise(startRqlited())
    }
    dns = await startDnsStandIn()
    const dataDir = fs.mkdtempSync(path.join(testTmp(), "portico-domains-"))
    const registry: PorticoSettings["registry"] =
      rqlited === undefined ? { engine: "sqlite", file: path.join(dataDir, "registry.db") } : { engine: "rqlite", url: rqlited.url, user: undefined, password: undefined }
    const settings = testSettings(dataDir, { baseDomain: BASE, registry })
    const site = fs.mkdtempSync(path.join(testTmp(), "site-"))
    fs.writeFileSync(path.join(site, "index.html"), "<!doctype html><title>custom home</title>")
    const rivalSite = fs.mkdtempSync(path.join(testTmp(), "site-"))
    fs.writeFileSync(path.join(rivalSite, "index.html"), "<!doctype html><title>rival home</title>")
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const registry = yield* RegistryStore
          const deployments = makeDeploymentStore(registry, yield* Sealer)
          const stored = yield* storeSiteDirectory(yield* Storage, "shop", "blog", site)
          const rivalStored = yield* storeSiteDirectory(yield* Storage, "rival", "squat", rivalSite)
          const create = (namespace: string, name: string, cid = stored.cid) =>
            deployments.create({ namespace, name, type: "static", domain: `${name}-${namespace}.${BASE}`, homeNode: "n", artifact: cid, status: "active" })
          const blog = yield* deployments.create({ namespace: "shop", name: "blog", type: "static", domain: `blog-abc123.${BASE}`, homeNode: "n", artifact: stored.cid, status: "active" })
          yield* deployments.create({ namespace: "shop", name: "docs", type: "static", domain: `docs-def456.${BASE}`, homeNode: "n", artifact: stored.cid, status: "active" })
          // another namespace's deployment: never reachable by shop's callers
          yield* deployments.create({ namespace: "zoo", name: "elsewhere", type: "static", domain: `elsewhere-ghi789.${BASE}`, homeNode: "n", artifact: stored.cid, status: "active" })
          yield* create("rival", "squat", rivalStored.cid)
          yield* create("rival", "squat2", rivalStored.cid)
          yield* create("crowd", "c1")
          yield* create("crowd", "c2")
          // a claim added 7 days and a minute ago, never verified
          staleToken = (yield* deployments.addDomain("shop", blog.id, "stale.example.com")).token
          yield* registry.exec({
            sql: "UPDATE deployment_domains SET created_at = created_at - ? WHERE domain = ?",
            params: [PENDING_CLAIM_SECONDS + 60, "stale.example.com"]
          })
        }).pipe(Effect.provide(servicesLayer(settings, { sqliteWorkers: "in-process" })))
      )
    )
    gw = await startGateway({
      dataDir,
      env: {
        PORTICO_BASE_DOMAIN: BASE,
        PORTICO_DNS_SERVERS: dns.server,
        PORTICO_DOMAINS_PENDING_PER_NAMESPACE: String(PENDING_CAP),
        ...(rqlited === undefined ? {} : { PORTICO_RQLITE_URL: rqlited.url })
      }
    })
    key = (await gw.cli(["namespace", "create", "shop"])).api_key
    runtimeKey = await mintKey(gw, key, { profile: "runtime", label: "app" })
    rivalKey = (await gw.cli(["namespace", "create", "rival"])).api_key
    crowdKey = (await gw.cli(["namespace", "create", "crowd"])).api_key
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
    await dns?.close()
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("adds, refuses verification until the TXT record holds the token, then serves the domain; lists and removes it", async () => {
    const added = await add("blog", "WWW.Example.COM.")
    expect(added.status, added.text).toBe(200)
    expect(Object.keys(added.body).sort()).toEqual(["domain", "name", "txt", "verified"])
    expect(added.body).toMatchObject({ domain: "www.example.com", name: "blog", verified: false, txt: { name: "_portico-verify.www.example.com" } })
    const token: string = added.body.txt.value
    expect(token).toMatch(/^portico-verify-[A-Za-z0-9_-]{22}$/)

    // not served before it is verified: the host is no app's, so the API answers it
    const before = await getOnHost(gw.port, "www.example.com", "/")
    expect(before.body).not.toContain("custom home")

    // no record at all
    const missing = await verify("blog", "www.example.com")
    expectError(missing, 400, "DOMAIN_NOT_VERIFIED")
    expect(missing.body.hint).toContain(token)
    expect(dns.questions().some((q) => q.name === "_portico-verify.www.example.com" && q.type === "TXT")).toBe(true)

    // a record with another value (another deployment's token, a typo)
    dns.setTxt("_portico-verify.www.example.com", ["portico-verify-somethingelse0000000000", token + "x"])
    expectError(await verify("blog", "www.example.com"), 400, "DOMAIN_NOT_VERIFIED")
    expect((await list("blog")).body.domains[0]).toMatchObject({ domain: "www.example.com", verified: false, verified_at: null })

    // the right one, beside other TXT records of the name
    dns.setTxt("_portico-verify.www.example.com", ["v=spf1 -all", token])
    const verified = await verify("blog", "www.example.com")
    expect(verified.status, verified.text).toBe(200)
    expect(verified.body).toMatchObject({ domain: "www.example.com", name: "blog", verified: true })
    expect(Number.isInteger(verified.body.verified_at)).toBe(true)

    // served at once on this gateway, the host in any case and with a port
    const served = await getOnHost(gw.port, "www.example.com", "/")
    expect(served.status).toBe(200)
    expect(served.body).toContain("custom home")
    expect((await getOnHost(gw.port, "WWW.EXAMPLE.COM:443", "/any/route")).body).toContain("custom home")

    // verifying again answers as it is, without asking DNS
    const asked = dns.questions().length
    dns.setTxt("_portico-verify.www.example.com", undefined)
    const again = await verify("blog", "www.example.com")
    expect([again.status, again.body.verified_at]).toEqual([200, verified.body.verified_at])
    expect(dns.questions().length).toBe(asked)

    const listed = await list("blog")
    expect(listed.status, listed.text).toBe(200)
    expect(listed.body).toEqual({
      name: "blog",
      domains: [{ domain: "www.example.com", verified: true, verified_at: verified.body.verified_at, txt: { name: "_portico-verify.www.example.com", value: token } }]
    })

    const removed = await remove("blog", "www.example.com.")
    expect([removed.status, removed.body]).toEqual([200, { domain: "www.example.com", removed: true }])
    const after = await getOnHost(gw.port, "www.example.com", "/")
    expect(after.body).not.toContain("custom home")
    expect((await list("blog")).body.domains).toEqual([])
    expectError(await remove("blog", "www.example.com"), 404, "NOT_FOUND")
  })

  it("refuses names that are not a domain of the tenant's, with 400 naming the rule", async () => {
    for (const bad of ["localhost", "app.localhost", "127.0.0.1", "[::1]", "example", "bad_label.example.com", "-x.example.com", "bücher.example"]) {
      const refused = await add("blog", bad)
      expectError(refused, 400, "VALIDATION_FAILED")
      expect(refused.body.error, bad).toContain("domain")
    }
    expectError(await add("blog", BASE), 400, "VALIDATION_FAILED")
    // the platform's names, a deployment's own host included
    expectError(await add("blog", `blog-abc123.${BASE}`), 400, "VALIDATION_FAILED")
    expectError(await add("blog", `x.ns-shop.${BASE}`), 400, "VALIDATION_FAILED")
    // the schema's bounds and strictness
    expectError(await gw.request("POST", "/v1/deployments/domains/add", { token: key, json: { name: "blog" } }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("POST", "/v1/deployments/domains/add", { token: key, json: { name: "blog", domain: "a.com", extra: 1 } }), 400, "VALIDATION_FAILED")
    expect((await list("blog")).body.domains).toEqual([])
  })

  it("lets several deployments wait on one domain, each with its own token; the same deployment twice is 409", async () => {
    const first = await add("docs", "shared.example.org")
    expect(first.status, first.text).toBe(200)
    const second = await add("blog", "shared.example.org")
    expect(second.status, second.text).toBe(200)
    expect(second.body.txt.value).not.toBe(first.body.txt.value)
    expectError(await add("docs", "Shared.Example.org"), 409, "CONFLICT")
    expect((await remove("docs", "shared.example.org")).status).toBe(200)
    expect((await remove("blog", "shared.example.org")).status).toBe(200)
  })

  it("another tenant's pending claim blocks neither the holder's add nor its verify; after it, the other's verify and add are 409 naming no one", async () => {
    const domain = "www.shop-owned.com"
    const txt = `_portico-verify.${domain}`
    const squatted = await add("squat", domain, rivalKey)
    expect(squatted.status, squatted.text).toBe(200)
    const claimed = await add("blog", domain)
    expect(claimed.status, claimed.text).toBe(200)
    const tokenA: string = claimed.body.txt.value
    const tokenB: string = squatted.body.txt.value
    expect(tokenA).not.toBe(tokenB)
    // each tenant reads its own token only
    expect((await list("blog")).body.domains.map((d: { txt: { value: string } }) => d.txt.value)).toEqual([tokenA])
    expect((await list("squat", rivalKey)).body.domains.map((d: { txt: { value: string } }) => d.txt.value)).toEqual([tokenB])

    // the rival's token in DNS verifies nothing of shop's; shop's own does
    dns.setTxt(txt, [tokenB])
    expectError(await verify("blog", domain), 400, "DOMAIN_NOT_VERIFIED")
    dns.setTxt(txt, [tokenA, tokenB])
    const verified = await verify("blog", domain)
    expect(verified.status, verified.text).toBe(200)
    expect((await getOnHost(gw.port, domain, "/")).body).toContain("custom home")

    // the rival's verify is 409 though its token is published, without asking DNS
    const asked = dns.questions().length
    const lost = await verify("squat", domain, rivalKey)
    expectError(lost, 409, "CONFLICT")
    expect(dns.questions().length).toBe(asked)
    // a new claim from the rival's other deployment: 409, "in use", and shop's names nowhere
    const refused = await add("squat2", domain, rivalKey)
    expectError(refused, 409, "CONFLICT")
    expect(refused.body.error).toContain("in use")
    for (const answer of [lost, refused]) expect(answer.text).not.toMatch(/shop(?!-owned)|blog/)
    expect((await getOnHost(gw.port, domain, "/")).body).toContain("custom home")

    // once shop lets go, the rival's pending claim can verify
    expect((await remove("blog", domain)).status).toBe(200)
    const taken = await verify("squat", domain, rivalKey)
    expect(taken.status, taken.text).toBe(200)
    expect((await getOnHost(gw.port, domain, "/")).body).toContain("rival home")
    expect((await remove("squat", domain, rivalKey)).status).toBe(200)
    dns.setTxt(txt, undefined)
  })

  it("forgets a claim left unverified for 7 days: not listed, not verifiable, and added again with a new token", async () => {
    dns.setTxt("_portico-verify.stale.example.com", [staleToken])
    expect((await list("blog")).body.domains.map((d: { domain: string }) => d.domain)).not.toContain("stale.example.com")
    expectError(await verify("blog", "stale.example.com"), 404, "NOT_FOUND")
    expectError(await remove("blog", "stale.example.com"), 404, "NOT_FOUND")
    const again = await add("blog", "stale.example.com")
    expect(again.status, again.text).toBe(200)
    expect(again.body.txt.value).not.toBe(staleToken)
    expect((await remove("blog", "stale.example.com")).status).toBe(200)
    dns.setTxt("_portico-verify.stale.example.com", undefined)
  })

  it(`caps a namespace's pending claims at PORTICO_DOMAINS_PENDING_PER_NAMESPACE (${PENDING_CAP}), its deployments together`, async () => {
    for (let i = 0; i < 20; i++) expect((await add("c1", `p${i}.crowd.example`, crowdKey)).status).toBe(200)
    for (let i = 20; i < PENDING_CAP; i++) expect((await add("c2", `p${i}.crowd.example`, crowdKey)).status).toBe(200)
    const over = await add("c2", `p${PENDING_CAP}.crowd.example`, crowdKey)
    expectError(over, 400, "VALIDATION_FAILED")
    expect(over.body.error).toContain(`at most ${PENDING_CAP} unverified`)
    // another namespace is not counted with crowd
    expect((await add("squat", `p${PENDING_CAP}.crowd.example`, rivalKey)).status).toBe(200)
    expect((await remove("squat", `p${PENDING_CAP}.crowd.example`, rivalKey)).status).toBe(200)
    // a verified claim is no longer pending
    dns.setTxt("_portico-verify.p0.crowd.example", [(await list("c1", crowdKey)).body.domains.find((d: { domain: string }) => d.domain === "p0.crowd.example").txt.value])
    expect((await verify("c1", "p0.crowd.example", crowdKey)).status).toBe(200)
    expect((await add("c2", `p${PENDING_CAP}.crowd.example`, crowdKey)).status).toBe(200)
    expectError(await add("c2", `p${PENDING_CAP + 1}.crowd.example`, crowdKey), 400, "VALIDATION_FAILED")
  })

  it("two verifies of one domain at once: exactly one wins and serves, the other is 409", async () => {
    const domain = "race.example.net"
    const mine = await add("docs", domain)
    const theirs = await add("squat", domain, rivalKey)
    expect([mine.status, theirs.status]).toEqual([200, 200])
    dns.setTxt(`_portico-verify.${domain}`, [mine.body.txt.value, theirs.body.txt.value])
    const [a, b] = await Promise.all([verify("docs", domain), verify("squat", domain, rivalKey)])
    expect([a.status, b.status].sort(), `${a.text} ${b.text}`).toEqual([200, 409])
    const loser = a.status === 409 ? a : b
    expectError(loser, 409, "CONFLICT")
    const shopWon = a.status === 200
    const verifiedOf = async (name: string, token: string) =>
      (await list(name, token)).body.domains.find((d: { domain: string }) => d.domain === domain).verified
    expect([await verifiedOf("docs", key), await verifiedOf("squat", rivalKey)]).toEqual([shopWon, !shopWon])
    expect((await getOnHost(gw.port, domain, "/")).body).toContain(shopWon ? "custom home" : "rival home")
    expect((await remove("docs", domain)).status).toBe(200)
    expect((await remove("squat", domain, rivalKey)).status).toBe(200)
    dns.setTxt(`_portico-verify.${domain}`, undefined)
  })

  it("answers 404 for an unknown deployment, another namespace's, and a domain the deployment does not hold", async () => {
    expectError(await add("nope", "a.example.com"), 404, "NOT_FOUND")
    expectError(await list("nope"), 404, "NOT_FOUND")
    expectError(await add("elsewhere", "a.example.com"), 404, "NOT_FOUND")
    expectError(await verify("elsewhere", "a.example.com"), 404, "NOT_FOUND")
    expectError(await verify("blog", "never-added.example.com"), 404, "NOT_FOUND")
    expectError(await remove("blog", "never-added.example.com"), 404, "NOT_FOUND")
  })

  it("is control plane: a runtime key is 403, no credential 401", async () => {
    expectError(await add("blog", "a.example.com", runtimeKey), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await list("blog", runtimeKey), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await verify("blog", "a.example.com", runtimeKey), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await remove("blog", "a.example.com", runtimeKey), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("GET", "/v1/deployments/domains/list?name=blog"), 401, "UNAUTHORIZED")
  })

  it("answers 503 with Retry-After when DNS fails or does not answer, and keeps the domain unverified", async () => {
    expect((await add("blog", "flaky.example.net")).status).toBe(200)
    dns.fail("_portico-verify.flaky.example.net", 2)
    const failed = await verify("blog", "flaky.example.net")
    expectError(failed, 503, "UNAVAILABLE")
    expect(failed.headers.get("retry-after")).toBe("5")
    dns.setSilent(true)
    try {
      const started = Date.now()
      expectError(await verify("blog", "flaky.example.net"), 503, "UNAVAILABLE")
      expect(Date.now() - started).toBeLessThan(8000)
    } finally {
      dns.setSilent(false)
    }
    expect((await list("blog")).body.domains).toMatchObject([{ domain: "flaky.example.net", verified: false }])
    expect((await remove("blog", "flaky.example.net")).status).toBe(200)
  }, 20_000)

  it("caps a deployment at 20 custom domains", async () => {
    for (let i = 0; i < 20; i++) expect((await add("docs", `d${i}.example.com`)).status).toBe(200)
    const over = await add("docs", "d20.example.com")
    expectError(over, 400, "VALIDATION_FAILED")
    expect(over.body.error).toContain("20")
    expect((await list("docs")).body.domains).toHaveLength(20)
  })
})
