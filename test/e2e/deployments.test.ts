/**
 * The deployments routes (docs/deployments.md, "Routes", "The deployments service") through a real
 * gateway on both registry engines: a static site uploaded as a tar.gz made by GNU tar, served on
 * its host, updated, rolled back, its versions, events, environment and grants, deleted; and the
 * refusals (bad name and hostile archive with nothing stored, a taken name, a cap passed, a runtime
 * key, an unknown name, another namespace's deployment).
 */
import { FetchHttpClient } from "@effect/platform"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeClient } from "../../src/client.js"
import { PorticoConfig, testSettings } from "../../src/layers/config/PorticoConfig.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { registryLayer } from "../../src/layers/registry/registryLayer.js"
import { call, expectRefusal, notCalled, refusal } from "../support/client.js"
import { type Gateway, mintKey, type Reply, startGateway, testTmp, getOnHost } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { deployForm } from "../support/deploymentFixture.js"
import { tarOf } from "../support/tarball.js"

const BASE = "sites.test"

/** A tar.gz of `files` made by GNU tar. */
/** One ustar header for `name` of `size` bytes (the size may be a lie: the body is not written). */
const tarHeader = (name: string, size: number): Buffer => {
  const h = Buffer.alloc(512)
  h.write(name, 0, "utf8")
  h.write("0000644\0", 100)
  h.write("0000000\0", 108)
  h.write("0000000\0", 116)
  h.write(size.toString(8).padStart(11, "0") + "\0", 124)
  h.write("00000000000\0", 136)
  h.write("0", 156)
  h.write("ustar\0", 257)
  h.write("00", 263)
  h.write("        ", 148)
  let sum = 0
  for (const b of h) sum += b
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148)
  return h
}

/** A tar.gz whose one entry climbs out with `..`. */
const hostileTar = (): Buffer => {
  const body = Buffer.alloc(512)
  body.write("pwned")
  return zlib.gzipSync(Buffer.concat([tarHeader("../escaped.txt", 5), body, Buffer.alloc(1024)]))
}

/** A tar.gz whose header says 2 GiB: past the unpacked cap before any byte is written. */
const hugeTar = (): Buffer => zlib.gzipSync(Buffer.concat([tarHeader("big.bin", 2 * 1024 * 1024 * 1024), Buffer.alloc(4096)]))

const formOf = (fields: Record<string, string>, archive?: Buffer): FormData => deployForm(fields, archive, "site.tar.gz")


const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
  expect(typeof reply.body.error).toBe("string")
}

const siteV1 = { "index.html": "<h1>v1</h1>", "about/index.html": "<p>about v1</p>" }
const siteV2 = { "index.html": "<h1>v2</h1>", "app.js": "console.log(2)" }

describe.each(["sqlite", "rqlite"] as const)("deployments routes, registry on %s", (engine) => {
  let gw: Gateway
  let rqlited: RqlitedServer | undefined
  let admin: string
  let other: string
  let runtimeKey: string

  const upload = async (token: string, type: string, form: FormData, action: "upload" | "update" = "upload"): Promise<Reply> => {
    const res = await fetch(`${gw.url}/v1/deployments/${type}/${action}`, { method: "POST", body: form, headers: { authorization: `Bearer ${token}` } })
    const text = await res.text()
    let body: any
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    return { status: res.status, headers: res.headers, text, body }
  }
  const get = (token: string, route: string) => gw.request("GET", `/v1/deployments/${route}`, { token })
  const post = (token: string, route: string, json: unknown) => gw.request("POST", `/v1/deployments/${route}`, { token, json })
  let registry: ManagedRuntime.ManagedRuntime<RegistryStore, unknown>
  /** Content references the namespace `shop` holds for deployment `name`, read from the gateway's registry. */
  const refsOf = (name: string) =>
    registry.runPromise(
      Effect.map(
        Effect.flatMap(RegistryStore, (r) => r.query({ sql: "SELECT COUNT(*) AS n FROM content_refs WHERE namespace = 'shop' AND kind = 'deployment' AND ref = ?", params: [name] })),
        (rows) => Number(rows[0]?.["n"])
      )
    )
  /** Staging directories left behind (none: each upload removes its own). */
  const stagingLeft = () => fs.readdirSync(path.join(gw.dataDir, "deploy-staging"), { withFileTypes: true }).length

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      rqlited = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway({ env: { PORTICO_BASE_DOMAIN: BASE, ...(rqlited === undefined ? {} : { PORTICO_RQLITE_URL: rqlited.url }) } })
    admin = (await gw.cli(["namespace", "create", "shop"])).api_key
    other = (await gw.cli(["namespace", "create", "rival"])).api_key
    runtimeKey = await mintKey(gw, admin, { profile: "runtime", label: "app" })
    const settings = testSettings(gw.dataDir, rqlited === undefined ? {} : { registry: { engine: "rqlite", url: rqlited.url, user: undefined, password: undefined } })
    registry = ManagedRuntime.make(registryLayer(settings).pipe(Layer.provide(PorticoConfig.layer(settings))))
  }, 120_000)

  afterAll(async () => {
    await registry?.dispose()
    await gw?.stop()
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("uploads a static site through the typed client and serves it on its host, unknown routes answering /index.html", async () => {
    const client = await Effect.runPromise(makeClient({ baseUrl: gw.url, token: admin }).pipe(Effect.provide(FetchHttpClient.layer)))
    const created = await Effect.runPromise(
      client.deployments.upload({ path: { type: "static" }, payload: formOf({ name: "blog", env: JSON.stringify({ GREETING: "hi" }) }, tarOf(siteV1)) }).pipe(Effect.provide(FetchHttpClient.layer))
    )
    expect(created).toMatchObject({ name: "blog", namespace: "shop", type: "static", status: "active", version: 1, port: null, health_check: null })
    expect(created.content_cid).toMatch(/^b[a-z2-7]+$/)
    expect(created.domain).toMatch(new RegExp(`^blog-[a-z0-9]{6}\\.${BASE.replace(".", "\\.")}$`))
    expect((await getOnHost(gw.port, created.domain, "/")).body).toBe("<h1>v1</h1>")
    expect((await getOnHost(gw.port, created.domain, "/about")).body).toBe("<p>about v1</p>")
    expect((await getOnHost(gw.port, created.domain, "/some/client/route"))).toEqual({ status: 200, body: "<h1>v1</h1>" })
    expect(stagingLeft()).toBe(0)
    expect(await refsOf("blog")).toBeGreaterThanOrEqual(3)
    const got = await get(admin, "get?name=blog")
    expect(got.status, got.text).toBe(200)
    expect(got.body).toEqual(created)
  })

  it("updates to version 2, rolls back to a version 3 serving v1, and lists the versions and events newest first", async () => {
    const before = (await get(admin, "get?name=blog")).body
    const domain = before.domain
    const updated = await upload(admin, "static", formOf({ name: "blog" }, tarOf(siteV2)), "update")
    expect(updated.status, updated.text).toBe(200)
    expect(updated.body).toMatchObject({ name: "blog", version: 2, status: "active", domain })
    expect(updated.body.content_cid).not.toBe(before.content_cid)
    expect((await getOnHost(gw.port, domain, "/")).body).toBe("<h1>v2</h1>")
    expect((await getOnHost(gw.port, domain, "/app.js")).body).toBe("console.log(2)")

    const rolled = await post(admin, "rollback", { name: "blog", version: 1 })
    expect(rolled.status, rolled.text).toBe(200)
    expect(rolled.body).toMatchObject({ version: 3, content_cid: before.content_cid })
    expect((await getOnHost(gw.port, domain, "/")).body).toBe("<h1>v1</h1>")
    expectError(await post(admin, "rollback", { name: "blog", version: 9 }), 404, "NOT_FOUND")

    const versions = await get(admin, "versions?name=blog")
    expect(versions.status, versions.text).toBe(200)
    expect(versions.body.current).toBe(3)
    expect(versions.body.versions.map((v: any) => [v.version, v.source, v.rollback_from])).toEqual([
      [3, "rollback", 1],
      [2, "update", null],
      [1, "upload", null]
    ])
    const events = await get(admin, "events?name=blog&limit=2")
    expect(events.status, events.text).toBe(200)
    expect(events.body.events.map((e: any) => e.type)).toEqual(["rolled_back", "updated"])
    const rest = await get(admin, `events?name=blog&cursor=${events.body.next_cursor}`)
    expect(rest.body.events.map((e: any) => e.type)).toEqual(["created"])
    expect(rest.body.next_cursor).toBeNull()
  })

  it("refuses an update of another type, and an update with env", async () => {
    expectError(await upload(admin, "nodejs", formOf({ name: "blog" }, tarOf(siteV2)), "update"), 400, "VALIDATION_FAILED")
    expectError(await upload(admin, "static", formOf({ name: "blog", env: "{}" }, tarOf(siteV2)), "update"), 400, "VALIDATION_FAILED")
    expectError(await upload(admin, "static", formOf({ name: "nosuch" }, tarOf(siteV2)), "update"), 404, "NOT_FOUND")
  })

  it("lists the environment's names only, sets and unsets with a new version stamp, refuses platform names", async () => {
    const env = await get(admin, "env?name=blog")
    expect(env.status, env.text).toBe(200)
    expect(env.body).toMatchObject({ name: "blog", names: ["GREETING"] })
    expect(env.text).not.toContain("hi")
    const set = await post(admin, "env/set", { name: "blog", set: { API_URL: "https://x.test", SECRET: "s3cret" }, unset: ["GREETING"] })
    expect(set.status, set.text).toBe(200)
    expect(set.body).toMatchObject({ name: "blog", names: ["API_URL", "SECRET"], restarted: false })
    expect(BigInt(set.body.env_version) > BigInt(env.body.env_version)).toBe(true)
    expect(set.text).not.toContain("s3cret")
    expectError(await post(admin, "env/set", { name: "blog", set: { PORT: "1" } }), 400, "VALIDATION_FAILED")
    // dynamic-loader and runtime-injection names are the platform's, and nothing is written
    for (const name of ["LD_PRELOAD", "LD_LIBRARY_PATH", "NODE_OPTIONS", "GODEBUG", "GLIBC_TUNABLES"]) {
      const loader = await post(admin, "env/set", { name: "blog", set: { OK: "1", [name]: "/var/lib/app/state/x.so" } })
      expectError(loader, 400, "VALIDATION_FAILED")
      expect(loader.body.error).toMatch(new RegExp(`set\\.${name}.*reserved by the platform`))
    }
    expect((await get(admin, "env?name=blog")).body.names).toEqual(["API_URL", "SECRET"])
    const same = await post(admin, "env/set", { name: "blog", unset: ["NOT_THERE"] })
    expect(same.body.env_version).toBe(set.body.env_version)
    // __proto__ is a variable name like any other, kept through the JSON body's decoding
    const proto = await post(admin, "env/set", { name: "blog", set: { ["__proto__"]: "p", B: "b" } })
    expect(proto.status, proto.text).toBe(200)
    expect(proto.body.names).toEqual(["API_URL", "B", "SECRET", "__proto__"])
    expect((await post(admin, "env/set", { name: "blog", unset: ["__proto__", "B"] })).body.names).toEqual(["API_URL", "SECRET"])
    for (const set of [{ A: 1 }, ["A"], "A=1", null]) expectError(await post(admin, "env/set", { name: "blog", set }), 400, "VALIDATION_FAILED")
    expect((await get(admin, "events?name=blog&limit=1")).body.events[0]).toMatchObject({ type: "env_changed" })
  })

  it("sets grants (data plane only) with the owner's key", async () => {
    expect((await get(admin, "grants?name=blog")).body.grants).toContain("storage")
    const put = await gw.request("PUT", "/v1/deployments/grants", { token: admin, json: { name: "blog", grants: ["cache", "storage"] } })
    expect(put.status, put.text).toBe(200)
    expect(put.body).toEqual({ name: "blog", grants: ["cache", "storage"] })
    expectError(await gw.request("PUT", "/v1/deployments/grants", { token: admin, json: { name: "blog", grants: ["admin"] } }), 400, "VALIDATION_FAILED")
    expect((await get(admin, "grants?name=blog")).body.grants).toEqual(["cache", "storage"])
  })

  it("refuses a bad name, a bad subdomain and bad env before storing anything", async () => {
    const bad: ReadonlyArray<Record<string, string>> = [{ name: "-bad" }, { name: "ok", subdomain: "api" }, { name: "ok", env: JSON.stringify({ PORT: "1" }) }, { name: "ok", env: "[1]" }, { name: "ok", extra: "x" }, { name: "ns-ok" }]
    for (const fields of bad) {
      expectError(await upload(admin, "static", formOf(fields, tarOf(siteV1))), 400, "VALIDATION_FAILED")
    }
    expectError(await upload(admin, "static", formOf({ name: "ok" })), 400, "BAD_REQUEST")
    // the env field is read as strictly as env/set's JSON body: a name given twice, never last-wins
    for (const env of ['{"A":"1","A":"2"}', '{"A":"1","\\u0041":"2"}']) {
      const twice = await upload(admin, "static", formOf({ name: "ok", env }, tarOf(siteV1)))
      expectError(twice, 400, "VALIDATION_FAILED")
      expect(twice.body.error).toBe("env.A: given twice")
    }
    expectError(await get(admin, "get?name=ok"), 404, "NOT_FOUND")
    expectError(await get(admin, "get?name=ns-ok"), 404, "NOT_FOUND")
    expect(await refsOf("ok")).toBe(0)
    expect((await get(admin, "list")).body.deployments.map((d: any) => d.name)).toEqual(["blog"])
  })

  it("refuses a hostile archive (400) and one past the unpacked cap (413), leaving nothing", async () => {
    expectError(await upload(admin, "static", formOf({ name: "evil" }, hostileTar())), 400, "BAD_REQUEST")
    expectError(await upload(admin, "static", formOf({ name: "huge" }, hugeTar())), 413, "PAYLOAD_TOO_LARGE")
    expectError(await get(admin, "get?name=evil"), 404, "NOT_FOUND")
    expectError(await get(admin, "get?name=huge"), 404, "NOT_FOUND")
    expect([await refsOf("evil"), await refsOf("huge")]).toEqual([0, 0])
    expect(stagingLeft()).toBe(0)
    expect(fs.existsSync(path.join(gw.dataDir, "escaped.txt"))).toBe(false)
  })

  it("refuses a taken name with 409 DEPLOYMENT_EXISTS and a taken subdomain with 409 CONFLICT", async () => {
    expectError(await upload(admin, "static", formOf({ name: "blog" }, tarOf(siteV1))), 409, "DEPLOYMENT_EXISTS")
    const first = await upload(admin, "static", formOf({ name: "docs", subdomain: "Docs" }, tarOf(siteV1)))
    expect(first.status, first.text).toBe(201)
    expect(first.body.domain).toBe(`docs.${BASE}`)
    expectError(await upload(other, "static", formOf({ name: "docs2", subdomain: "docs" }, tarOf(siteV1))), 409, "CONFLICT")
  })

  it("refuses a runtime key (403) and keeps another namespace's deployments out of sight (404)", async () => {
    expectError(await get(runtimeKey, "list"), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await upload(runtimeKey, "static", formOf({ name: "x" }, tarOf(siteV1))), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await get(other, "get?name=blog"), 404, "NOT_FOUND")
    expectError(await post(other, "delete", { name: "blog" }), 404, "NOT_FOUND")
    expect((await get(other, "list")).body).toEqual({ deployments: [], next_cursor: null })
    expectError(await get(admin, "get?name=nosuch"), 404, "NOT_FOUND")
    expectError(await get(admin, "get?name=bad%20name"), 400, "VALIDATION_FAILED")
  })

  it("pages the list in name order", async () => {
    const page = await get(admin, "list?limit=1")
    expect(page.body.deployments.map((d: any) => d.name)).toEqual(["blog"])
    const next = await get(admin, `list?limit=1&cursor=${page.body.next_cursor}`)
    expect(next.body.deployments.map((d: any) => d.name)).toEqual(["docs"])
  })

  it("answers every route through the checked typed client, each answer decoded strictly by its declared schema", async () => {
    const created = await call(gw, admin, (c) => c.deployments.upload({ path: { type: "static" }, payload: formOf({ name: "typed" }, tarOf(siteV1)) }))
    expect(created).toMatchObject({ name: "typed", version: 1 })
    const updated = await call(gw, admin, (c) => c.deployments.update({ path: { type: "static" }, payload: formOf({ name: "typed" }, tarOf(siteV2)) }))
    expect(updated.version).toBe(2)
    expect((await call(gw, admin, (c) => c.deployments.get({ urlParams: { name: "typed" } }))).version).toBe(2)
    expect((await call(gw, admin, (c) => c.deployments.list({ urlParams: {} }))).deployments.map((d) => d.name)).toContain("typed")
    expect((await call(gw, admin, (c) => c.deployments.versions({ urlParams: { name: "typed" } }))).current).toBe(2)
    expect((await call(gw, admin, (c) => c.deployments.rollback({ payload: { name: "typed", version: 1 } }))).version).toBe(3)
    expect((await call(gw, admin, (c) => c.deployments.events({ urlParams: { name: "typed", limit: 1 } }))).events[0]?.type).toBe("rolled_back")
    expect((await call(gw, admin, (c) => c.deployments.envSet({ payload: { name: "typed", set: { A: "1" } } }))).names).toEqual(["A"])
    expect((await call(gw, admin, (c) => c.deployments.env({ urlParams: { name: "typed" } }))).names).toEqual(["A"])
    expect((await call(gw, admin, (c) => c.deployments.setGrants({ payload: { name: "typed", grants: ["cache"] } }))).grants).toEqual(["cache"])
    expect((await call(gw, admin, (c) => c.deployments.grants({ urlParams: { name: "typed" } }))).grants).toEqual(["cache"])
    expectRefusal(await refusal(gw, admin, (c) => c.deployments.envSet({ payload: { name: "typed", set: { PORT: "1" } } })), 400, "VALIDATION_FAILED")
    expectRefusal(await refusal(gw, admin, (c) => c.deployments.upload({ path: { type: "static" }, payload: formOf({ name: "typed" }, tarOf(siteV1)) })), 409, "DEPLOYMENT_EXISTS")
    expect(await call(gw, admin, (c) => c.deployments.delete({ payload: { name: "typed" } }))).toEqual({ name: "typed", deleted: true })
    expectRefusal(await refusal(gw, admin, (c) => c.deployments.get({ urlParams: { name: "typed" } })), 404, "NOT_FOUND")
    expect(notCalled(["deployments"])).toEqual([])
  })

  it("deletes: the host answers 404, the name is free again, a second delete is 404", async () => {
    const domain = (await get(admin, "get?name=blog")).body.domain
    const deleted = await post(admin, "delete", { name: "blog" })
    expect(deleted.status, deleted.text).toBe(200)
    expect(deleted.body).toEqual({ name: "blog", deleted: true })
    expect(await refsOf("blog")).toBe(0)
    expect((await getOnHost(gw.port, domain, "/")).status).toBe(404)
    expectError(await post(admin, "delete", { name: "blog" }), 404, "NOT_FOUND")
    const again = await upload(admin, "static", formOf({ name: "blog" }, tarOf(siteV2)))
    expect(again.status, again.text).toBe(201)
    expect(again.body.version).toBe(1)
    expect((await getOnHost(gw.port, again.body.domain, "/")).body).toBe("<h1>v2</h1>")
  })
})
