/**
 * Dynamic deployments through the routes (docs/deployments.md, "The deployments service") on a
 * real gateway, both registry engines: a Node.js app uploaded (skip_install), prepared, started in
 * the real sandbox and proxied on its host; an update to version 2; an update whose app never
 * gets healthy is 502 and the old release keeps serving; a rollback; an environment change
 * restarting the app; delete stopping it and removing its directory. Runs as root (the sandbox).
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Wallet } from "ethers"
import { operatorToken } from "../support/client.js"
import { internalCall } from "../support/internalCall.js"
import { type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { deployForm } from "../support/deploymentFixture.js"
import { tarOf } from "../support/tarball.js"

const BASE = "apps.test"

/** The app: answers its version and GREETING; with `sick`, its health path never answers 200. */
const appSource = (version: string, sick = false) => `
const http = require("node:http")
http.createServer((req, res) => {
  if (req.url === "/health") { res.writeHead(${sick ? 503 : 200}); return res.end("health") }
  res.writeHead(200, { "content-type": "application/json" })
  res.end(JSON.stringify({ version: ${JSON.stringify(version)}, greeting: process.env.GREETING ?? null, uid: process.getuid() }))
}).listen(Number(process.env.PORT))
`


const onHost = (port: number, host: string, urlPath: string) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "GET", path: urlPath, headers: { host }, agent: false }, (res) => {
      let text = ""
      res.on("data", (c) => (text += c))
      res.on("end", () => {
        let body: any = text
        try {
          body = JSON.parse(text)
        } catch {}
        resolve({ status: res.statusCode ?? 0, body })
      })
    })
    req.on("error", reject)
    req.end()
  })

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
}

describe.each(["sqlite", "rqlite"] as const)("dynamic deployments through the routes, registry on %s", (engine) => {
  let gw: Gateway
  let rqlited: RqlitedServer | undefined
  let admin: string
  let operator: string
  let domain = ""
  const nodeId = `apps-${engine}-${process.pid}`
  const operatorWallet = Wallet.createRandom()

  const upload = async (action: "upload" | "update", fields: Record<string, string>, archive: Buffer, type = "nodejs"): Promise<Reply> => {
    const res = await fetch(`${gw.url}/v1/deployments/${type}/${action}`, { method: "POST", body: deployForm(fields, archive), headers: { authorization: `Bearer ${admin}` } })
    const text = await res.text()
    return { status: res.status, headers: res.headers, text, body: JSON.parse(text) }
  }
  const get = (route: string) => gw.request("GET", `/v1/deployments/${route}`, { token: admin })
  const post = (route: string, json: unknown) => gw.request("POST", `/v1/deployments/${route}`, { token: admin, json })

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      rqlited = await Effect.runPromise(startRqlited())
    }
    const dataDir = fs.mkdtempSync(path.join(testTmp(), "portico-apps-"))
    gw = await startGateway({
      dataDir,
      env: {
        PORTICO_BASE_DOMAIN: BASE,
        PORTICO_NODE_ID: nodeId,
        PORTICO_APP_START_TIMEOUT_MS: "8000",
        PORTICO_OPERATORS: operatorWallet.address.toLowerCase(),
        ...(rqlited === undefined ? {} : { PORTICO_RQLITE_URL: rqlited.url })
      }
    })
    admin = (await gw.cli(["namespace", "create", "shop"])).api_key
    operator = await operatorToken(gw, operatorWallet)
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("uploads a Node.js app, starts it sandboxed and serves it on its host", async () => {
    const created = await upload("upload", { name: "api", skip_install: "true", env: JSON.stringify({ GREETING: "hello" }) }, tarOf({ "index.js": appSource("v1") }))
    expect(created.status, created.text).toBe(201)
    expect(created.body).toMatchObject({ name: "api", type: "nodejs", status: "active", version: 1, health_check: "/health", content_cid: null })
    expect(created.body.port).toBeGreaterThanOrEqual(20200)
    domain = created.body.domain
    const served = await onHost(gw.port, domain, "/")
    expect(served.status).toBe(200)
    expect(served.body).toMatchObject({ version: "v1", greeting: "hello" })
    expect(served.body.uid).toBe(61_000_000 + created.body.port)
  }, 60_000)

  it("updates to version 2 and serves it", async () => {
    const updated = await upload("update", { name: "api" }, tarOf({ "index.js": appSource("v2") }))
    expect(updated.status, updated.text).toBe(200)
    expect(updated.body).toMatchObject({ version: 2, status: "active" })
    expect((await onHost(gw.port, domain, "/")).body).toMatchObject({ version: "v2" })
  }, 60_000)

  it("keeps the old release serving when the new one never gets healthy (502), and writes no version", async () => {
    expectError(await upload("update", { name: "api" }, tarOf({ "index.js": appSource("v3", true) })), 502, "APP_START_FAILED")
    expect((await get("get?name=api")).body).toMatchObject({ version: 2, status: "active" })
    expect((await onHost(gw.port, domain, "/")).body).toMatchObject({ version: "v2" })
  }, 60_000)

  it("refuses an app the build step cannot run (400) and an update of another type", async () => {
    expectError(await upload("update", { name: "api" }, tarOf({ "server.js": "x" }), "nextjs"), 400, "VALIDATION_FAILED")
    expectError(await upload("upload", { name: "gobad" }, tarOf({ "main.go": "package main" }), "go"), 400, "VALIDATION_FAILED")
    expectError(await get("get?name=gobad"), 404, "NOT_FOUND")
    expect(fs.existsSync(path.join(gw.dataDir, "deployments", "shop-gobad"))).toBe(false)
  }, 60_000)

  it("refuses a name whose instance directory another deployment owns (409 INSTANCE_COLLISION), leaving no record and the directory as it was", async () => {
    const dir = path.join(gw.dataDir, "deployments", "shop-coll")
    fs.mkdirSync(dir, { recursive: true })
    const marker = JSON.stringify({ deployment_id: "d000000000000000000000001", namespace: "shop-coll", name: "x" })
    fs.writeFileSync(path.join(dir, ".portico-owner"), marker, { mode: 0o600 })
    expectError(await upload("upload", { name: "coll", skip_install: "true" }, tarOf({ "index.js": appSource("c") })), 409, "INSTANCE_COLLISION")
    expectError(await get("get?name=coll"), 404, "NOT_FOUND")
    expect(fs.readFileSync(path.join(dir, ".portico-owner"), "utf8")).toBe(marker)
    expect(fs.readdirSync(dir)).toEqual([".portico-owner"])
  }, 60_000)

  it("rolls back to version 1 as version 3", async () => {
    const rolled = await post("rollback", { name: "api", version: 1 })
    expect(rolled.status, rolled.text).toBe(200)
    expect(rolled.body).toMatchObject({ version: 3, status: "active" })
    expect((await onHost(gw.port, domain, "/")).body).toMatchObject({ version: "v1" })
    const versions = await get("versions?name=api")
    expect(versions.body.versions.map((v: any) => [v.version, v.source, v.rollback_from])).toEqual([
      [3, "rollback", 1],
      [2, "update", null],
      [1, "upload", null]
    ])
  }, 60_000)

  it("restarts the app on an environment change", async () => {
    const set = await post("env/set", { name: "api", set: { GREETING: "changed" } })
    expect(set.status, set.text).toBe(200)
    expect(set.body).toMatchObject({ names: ["GREETING"], restarted: true })
    expect((await onHost(gw.port, domain, "/")).body).toMatchObject({ version: "v1", greeting: "changed" })
  }, 60_000)

  it("starts a failed app again with the environment it lacked, which makes it active", async () => {
    const needy = `if (!process.env.REQUIRED) { console.error("REQUIRED is not set"); process.exit(1) }\n${appSource("needy")}`
    const first = await upload("upload", { name: "needy", skip_install: "true" }, tarOf({ "index.js": needy }))
    expectError(first, 502, "APP_START_FAILED")
    const failed = (await get("get?name=needy")).body
    expect(failed.status).toBe("failed")
    // the host table has the failed record at once: its host is the app's, not running (503)
    expect((await onHost(gw.port, failed.domain, "/")).status).toBe(503)
    const set = await post("env/set", { name: "needy", set: { REQUIRED: "yes" } })
    expect(set.status, set.text).toBe(200)
    expect(set.body).toMatchObject({ names: ["REQUIRED"], restarted: true })
    const record = (await get("get?name=needy")).body
    expect(record.status).toBe("active")
    expect((await onHost(gw.port, record.domain, "/")).body).toMatchObject({ version: "needy" })
    expect((await post("delete", { name: "needy" })).status).toBe(200)
  }, 60_000)

  it("starts a failed app again on an operator's repair of its node, once it can run; reports one that cannot", async () => {
    const gated = `if (!require("node:fs").existsSync(require("node:path").join(__dirname, "go"))) { console.error("no go file"); process.exit(1) }\n${appSource("gated")}`
    expectError(await upload("upload", { name: "gated", skip_install: "true" }, tarOf({ "index.js": gated })), 502, "APP_START_FAILED")
    const command = (json: unknown, token = operator) => gw.request("POST", "/v1/node/command", { token, json })
    // still unable to run: reported, and still failed with why
    const early = await command({ node: nodeId, command: "repair", namespace: "shop" })
    expect(early.status, early.text).toBe(200)
    expect(early.body.repaired).toEqual([{ node: nodeId, namespace: "shop", running: ["api"], started: [], failed: [{ name: "gated", reason: expect.stringMatching(/did not start/) }] }])
    expect((await get("get?name=gated")).body.status).toBe("failed")
    // what it waits for, beside its code
    fs.writeFileSync(path.join(gw.dataDir, "deployments", "shop-gated", "versions", "1", "app", "go"), "")
    const repaired = await command({ node: nodeId, command: "repair" })
    expect(repaired.status, repaired.text).toBe(200)
    expect(repaired.body).toEqual({ node: nodeId, command: "repair", draining: false, repaired: [{ node: nodeId, namespace: "shop", running: ["api"], started: ["gated"], failed: [] }] })
    const record = (await get("get?name=gated")).body
    expect(record.status).toBe("active")
    expect((await onHost(gw.port, record.domain, "/")).body).toMatchObject({ version: "gated" })
    // once more: nothing to do
    expect((await command({ node: nodeId, command: "repair" })).body.repaired[0]).toMatchObject({ running: ["api", "gated"], started: [], failed: [] })
    // refusals
    for (const [json, token, status, code] of [
      [{ node: nodeId, command: "drain", namespace: "shop" }, operator, 400, "VALIDATION_FAILED"],
      [{ node: "node-nowhere", command: "repair" }, operator, 404, "NOT_FOUND"],
      [{ node: nodeId, command: "repair" }, admin, 403, "NOT_AN_OPERATOR"]
    ] as const) {
      const answer = await command(json, token)
      expect([answer.status, answer.body.code], answer.text).toEqual([status, code])
    }
    expect((await post("delete", { name: "gated" })).status).toBe(200)
  }, 90_000)

  it("spawns one app on its node through /v1/internal/namespace/spawn: start is a no-op for a running app, restart starts it again", async () => {
    const spawn = (json: unknown) => internalCall(gw, nodeId, "/v1/internal/namespace/spawn", json)
    const started = await spawn({ namespace: "shop", service: "app", name: "api", action: "start" })
    expect([started.status, started.body], started.text).toEqual([200, { node: nodeId, namespace: "shop", name: "api", state: "running" }])
    const restarted = await spawn({ namespace: "shop", service: "app", name: "api", action: "restart" })
    expect([restarted.status, restarted.body.state], restarted.text).toEqual([200, "started"])
    expect((await onHost(gw.port, domain, "/")).status).toBe(200)
    expect((await get("get?name=api")).body.status).toBe("active")
    const missing = await spawn({ namespace: "shop", service: "app", name: "ghost", action: "start" })
    expect([missing.status, missing.body.code]).toEqual([404, "NOT_FOUND"])
    for (const bad of [{ namespace: "shop", service: "shell", name: "api", action: "start" }, { namespace: "shop", service: "app", name: "api", action: "rm -rf" }]) {
      expect((await spawn(bad)).status).toBe(400)
    }
    // without the MAC, as a client would send it
    const unsigned = await gw.request("POST", "/v1/internal/namespace/spawn", { json: { namespace: "shop", service: "app", name: "api", action: "start" } })
    expect([unsigned.status, unsigned.body.code]).toEqual([403, "COORDINATION_REFUSED"])
    const repaired = await internalCall(gw, nodeId, "/v1/internal/namespace/repair", { namespace: "shop" })
    expect([repaired.status, repaired.body], repaired.text).toEqual([200, { node: nodeId, namespace: "shop", running: ["api"], started: [], failed: [] }])
  }, 60_000)

  it("deletes: the process stops, the directory goes, the host is 404", async () => {
    const deleted = await post("delete", { name: "api" })
    expect(deleted.status, deleted.text).toBe(200)
    expect((await onHost(gw.port, domain, "/")).status).toBe(404)
    expect(fs.existsSync(path.join(gw.dataDir, "deployments", "shop-api"))).toBe(false)
  }, 60_000)
})
