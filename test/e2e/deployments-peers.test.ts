/**
 * A dynamic deployment on two gateways of one registry (docs/deployments.md, "Several gateways"),
 * both registry engines (one SQLite file in a shared data dir; rqlited): a Node.js app deployed
 * through node-a is homed there, and its update (the archive streamed on), rollback, environment
 * change and delete taken by node-b run on node-a; with node-a stopped, node-b answers those 503
 * HOME_NODE_UNREACHABLE with Retry-After, and a delete through node-b removes the records and
 * leaves a teardown that node-a carries out when it is back (its process and directory gone).
 * Runs as root (the sandbox).
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEFAULT_ARCHIVE_LIMITS } from "../../src/layers/deployments/Archive.js"
import { getOnHost, type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { deployForm } from "../support/deploymentFixture.js"
import { tarOf } from "../support/tarball.js"
import { waitFor } from "../support/wait.js"

const BASE = "peers.test"

/** The app: answers its version and GREETING. */
const appSource = (version: string) => `
const http = require("node:http")
http.createServer((req, res) => {
  if (req.url === "/health") { res.writeHead(200); return res.end("health") }
  res.writeHead(200, { "content-type": "application/json" })
  res.end(JSON.stringify({ version: ${JSON.stringify(version)}, greeting: process.env.GREETING ?? null }))
}).listen(Number(process.env.PORT))
`


/** Whether anything accepts a connection on 127.0.0.1:`port` (the app's own port on its node). */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
}

describe.each(["sqlite", "rqlite"] as const)("a deployment's changes taken by another gateway, registry on %s", (engine) => {
  let rqlited: RqlitedServer | undefined
  let a: Gateway
  let b: Gateway
  let portA: number
  let env: Record<string, string>
  let dataDirA: string
  let admin: string
  let domain = ""

  const startA = () =>
    startGateway({ port: portA, dataDir: dataDirA, env: { ...env, PORTICO_NODE_ID: `node-a`, PORTICO_PEERS: `node-b=${b?.url ?? "http://127.0.0.1:1"}` } })

  const upload = async (gw: Gateway, action: "upload" | "update", fields: Record<string, string>, archive: Buffer): Promise<Reply> => {
    const res = await fetch(`${gw.url}/v1/deployments/nodejs/${action}`, { method: "POST", body: deployForm(fields, archive), headers: { authorization: `Bearer ${admin}` } })
    const text = await res.text()
    return { status: res.status, headers: res.headers, text, body: JSON.parse(text) }
  }
  const post = (gw: Gateway, route: string, json: unknown) => gw.request("POST", `/v1/deployments/${route}`, { token: admin, json })
  const get = (gw: Gateway, route: string) => gw.request("GET", `/v1/deployments/${route}`, { token: admin })
  /** Teardowns owed to any node, read from the registry as it is stored. */
  const owedTeardowns = async (): Promise<number> => {
    if (rqlited === undefined) {
      const db = new Database(path.join(dataDirA, "registry.db"), { readonly: true, fileMustExist: true })
      try {
        return (db.prepare("SELECT COUNT(*) AS n FROM deployment_teardowns").get() as { n: number }).n
      } finally {
        db.close()
      }
    }
    const res = await fetch(`${rqlited.url}/db/query?level=strong&q=${encodeURIComponent("SELECT COUNT(*) FROM deployment_teardowns")}`)
    const answer = (await res.json()) as { results: Array<{ values?: Array<Array<number>> }> }
    return Number(answer.results[0]?.values?.[0]?.[0] ?? 0)
  }
  const served = async () => JSON.parse((await getOnHost(a.port, domain, "/")).body)

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      rqlited = await Effect.runPromise(startRqlited())
    }
    dataDirA = fs.mkdtempSync(path.join(testTmp(), "portico-peers-a-"))
    portA = await Effect.runPromise(freePort)
    env = {
      PORTICO_BASE_DOMAIN: BASE,
      PORTICO_APP_START_TIMEOUT_MS: "8000",
      PORTICO_SECRET: "33".repeat(32),
      ...(rqlited === undefined ? {} : { PORTICO_RQLITE_URL: rqlited.url })
    }
    // SQLite: one registry file in one data dir, two gateways on it; rqlite: a data dir each
    b = await startGateway({
      env: { ...env, PORTICO_NODE_ID: "node-b", PORTICO_PEERS: `node-a=http://127.0.0.1:${portA}` },
      ...(rqlited === undefined ? { dataDir: dataDirA } : {})
    })
    a = await startA()
    admin = (await a.cli(["namespace", "create", "shop"])).api_key
  }, 120_000)

  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("deploys through node-a, homed there", async () => {
    const created = await upload(a, "upload", { name: "api", skip_install: "true", env: JSON.stringify({ GREETING: "hello" }) }, tarOf({ "index.js": appSource("v1") }))
    expect(created.status, created.text).toBe(201)
    domain = created.body.domain
    expect(await served()).toMatchObject({ version: "v1", greeting: "hello" })
  }, 60_000)

  it("updates through node-b: the archive is streamed to node-a, which runs version 2", async () => {
    const updated = await upload(b, "update", { name: "api" }, tarOf({ "index.js": appSource("v2") }))
    expect(updated.status, updated.text).toBe(200)
    expect(updated.body).toMatchObject({ name: "api", version: 2, status: "active" })
    expect(await served()).toMatchObject({ version: "v2" })
    // node-a's own refusals (its install step's, here) come back through node-b as they came
    const gitDependency = JSON.stringify({ name: "api", dependencies: { left: "git+https://git.invalid/left.git" } })
    expectError(await upload(b, "update", { name: "api" }, tarOf({ "index.js": appSource("x"), "package.json": gitDependency })), 500, "DEPENDENCY_REFUSED")
  }, 60_000)

  it("refuses an update over the archive cap at node-b, with 413 before anything is forwarded", async () => {
    // announced, not sent: the front gateway answers from the Content-Length alone
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${b.url}/v1/deployments/nodejs/update`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${admin}`,
          "content-type": "multipart/form-data; boundary=x",
          "content-length": String(DEFAULT_ARCHIVE_LIMITS.maxCompressedBytes + 1024 * 1024)
        }
      })
      req.once("response", (res) => {
        let body = ""
        res.on("data", (c: Buffer) => (body += c.toString()))
        res.once("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.once("error", reject)
      req.write("--x\r\n")
    })
    expect(answer.status, answer.body).toBe(413)
    expect(JSON.parse(answer.body).code).toBe("PAYLOAD_TOO_LARGE")
    expect(await served()).toMatchObject({ version: "v2" })
  }, 30_000)

  it("rolls back through node-b on node-a", async () => {
    const rolled = await post(b, "rollback", { name: "api", version: 1 })
    expect(rolled.status, rolled.text).toBe(200)
    expect(rolled.body).toMatchObject({ version: 3, status: "active" })
    expect(await served()).toMatchObject({ version: "v1" })
    expectError(await post(b, "rollback", { name: "api", version: 99 }), 404, "NOT_FOUND")
  }, 60_000)

  it("changes the environment through node-b, restarting the app on node-a", async () => {
    const set = await post(b, "env/set", { name: "api", set: { GREETING: "from b" } })
    expect(set.status, set.text).toBe(200)
    expect(set.body).toMatchObject({ name: "api", names: ["GREETING"], restarted: true })
    expect(await served()).toMatchObject({ version: "v1", greeting: "from b" })
  }, 60_000)

  it("answers 503 HOME_NODE_UNREACHABLE with Retry-After while node-a is stopped, changing nothing", async () => {
    await a.stop()
    const refused = [
      await upload(b, "update", { name: "api" }, tarOf({ "index.js": appSource("v9") })),
      await post(b, "rollback", { name: "api", version: 2 }),
      await post(b, "env/set", { name: "api", set: { GREETING: "lost" } })
    ]
    for (const reply of refused) {
      expectError(reply, 503, "HOME_NODE_UNREACHABLE")
      expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0)
    }
    expect((await get(b, "get?name=api")).body).toMatchObject({ version: 3 })
    a = await startA()
    await waitFor("the app resumed on node-a", async () => (await getOnHost(a.port, domain, "/")).status === 200, 30_000)
    expect(await served()).toMatchObject({ version: "v1", greeting: "from b" })
  }, 120_000)

  it("deletes through node-b on node-a: the process stops and the directory goes", async () => {
    const port = (await get(b, "get?name=api")).body.port as number
    expect(await listening(port)).toBe(true)
    const deleted = await post(b, "delete", { name: "api" })
    expect(deleted.status, deleted.text).toBe(200)
    expect(await listening(port)).toBe(false)
    expect(await owedTeardowns()).toBe(0)
    expect(fs.existsSync(path.join(a.dataDir, "deployments", "shop-api"))).toBe(false)
    expectError(await get(a, "get?name=api"), 404, "NOT_FOUND")
  }, 60_000)

  it("a delete through node-b while node-a is stopped leaves a teardown node-a carries out when it is back", async () => {
    const created = await upload(a, "upload", { name: "gone", skip_install: "true" }, tarOf({ "index.js": appSource("g") }))
    expect(created.status, created.text).toBe(201)
    const dir = path.join(a.dataDir, "deployments", "shop-gone")
    expect(fs.existsSync(dir)).toBe(true)
    await a.stop()
    const deleted = await post(b, "delete", { name: "gone" })
    expect(deleted.status, deleted.text).toBe(200)
    expectError(await get(b, "get?name=gone"), 404, "NOT_FOUND")
    // the records are gone, the home node's directory not yet: it is node-a's to remove
    expect(fs.existsSync(dir)).toBe(true)
    expect(await owedTeardowns()).toBe(1)
    a = await startA()
    await waitFor("the owed teardown on node-a", () => !fs.existsSync(dir), 30_000)
    await waitFor("the teardown's row removed", async () => (await owedTeardowns()) === 0, 10_000)
    expect(await listening(created.body.port)).toBe(false)
    expect(a.logs()).not.toContain("owed teardown of deployment")
  }, 120_000)
})
