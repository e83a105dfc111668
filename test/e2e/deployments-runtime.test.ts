/**
 * The app runtime through a real gateway, on both registry engines (docs/deployments.md, "The
 * runtime"): a Node.js deployment written in this process against the gateway's registry (record,
 * instance directory with its owner marker, version 1 with its start.json, as the upload and the
 * prepare step leave them) is resumed by the next gateway that starts on the data dir; its
 * `logs` and `stats` routes answer from the running app (lines 1-1000, 404 for an unknown name,
 * control plane only); it sees the gateway's own address as PORTICO_GATEWAY_URL; the gateway's
 * stop stops it. Runs as root (the sandbox).
 */
import { Context, Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PorticoConfig, testSettings } from "../../src/layers/config/PorticoConfig.js"
import { defaultLimits, type DeploymentRecord } from "../../src/layers/deployments/DeploymentRecord.js"
import { makeDeploymentStore } from "../../src/layers/deployments/DeploymentStore.js"
import { instanceName, makeInstanceDirs } from "../../src/layers/deployments/InstanceDirs.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { registryLayer } from "../../src/layers/registry/registryLayer.js"
import { Sealer } from "../../src/layers/secrets/Sealer.js"
import { type Gateway, mintKey, type Reply, startGateway } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { waitFor } from "../support/wait.js"

const fixture = path.resolve(import.meta.dirname, "../fixtures/runtime/app.cjs")

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body?.code, reply.text).toBe(code)
  expect(Object.keys(reply.body ?? {}).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
}

const answers = (port: number) =>
  new Promise<boolean>((resolve) => {
    http
      .get({ host: "127.0.0.1", port, path: "/health", agent: false, timeout: 2_000 }, (res) => {
        res.resume()
        resolve(res.statusCode === 200)
      })
      .on("error", () => resolve(false))
  })

/** A request on the app's host (fetch will not send a Host of our choosing). */
const onHost = (gatewayPort: number, host: string, route: string) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port: gatewayPort, path: route, headers: { host }, agent: false }, (res) => {
        let text = ""
        res.on("data", (c) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }))
      })
      .on("error", reject)
  })


/** The registry and sealer of the gateway's data dir, in this process. */
const registryOf = (dataDir: string, rqliteUrl: string | undefined) => {
  const settings = testSettings(
    dataDir,
    rqliteUrl === undefined ? {} : { registry: { engine: "rqlite", url: rqliteUrl, user: undefined, password: undefined as Redacted.Redacted | undefined } }
  )
  return ManagedRuntime.make(Layer.mergeAll(Sealer.Live, registryLayer(settings)).pipe(Layer.provideMerge(PorticoConfig.layer(settings))))
}

describe.each(["sqlite", "rqlite"] as const)("deployment runtime through the gateway, registry on %s", (engine) => {
  let gw: Gateway | undefined
  let engineServer: RqlitedServer | undefined
  let registry: ReturnType<typeof registryOf>
  let admin: string
  let runtimeKey: string
  let app: DeploymentRecord
  const env = (): Record<string, string> => ({
    PORTICO_BASE_DOMAIN: "runtime.test",
    ...(engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url })
  })

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    const first = await startGateway({ env: env() })
    admin = (await first.cli(["namespace", "create", "shop"])).api_key
    runtimeKey = await mintKey(first, admin, { profile: "runtime", label: "app" })
    const dataDir = first.dataDir
    const nodeId = fs.readFileSync(path.join(dataDir, "node-id"), "utf8").trim()
    await first.stop()

    // what an upload and its prepare step leave: the record, the claimed directory, version 1
    registry = registryOf(dataDir, engineServer?.url)
    const store = await registry.runPromise(
      Effect.map(Effect.context<RegistryStore | Sealer>(), (c) => {
        const firstPort = 10200 + Math.floor(Math.random() * 9000)
        return makeDeploymentStore(Context.get(c, RegistryStore), Context.get(c, Sealer), { ports: { first: firstPort, last: firstPort + 20 } })
      })
    )
    app = await Effect.runPromise(
      store.create({
        namespace: "shop",
        name: "blog",
        type: "nodejs",
        domain: "blog-rt0001.runtime.test",
        homeNode: nodeId,
        artifact: "versions/1",
        limits: { ...defaultLimits, memoryBytes: 256 * 1024 * 1024 },
        env: { GREETING: "resumed" },
        status: "active"
      })
    )
    await Effect.runPromise(store.create({ namespace: "shop", name: "site", type: "static", domain: "site-rt0001.runtime.test", homeNode: nodeId, artifact: "bafysite", status: "active" }))
    const dirs = makeInstanceDirs(path.join(dataDir, "deployments"), (instance) =>
      Effect.map(store.onNode(nodeId), (records) => records.filter((r) => instanceName(r.namespace, r.name) === instance).map((r) => r.id))
    )
    const claim = await Effect.runPromise(dirs.claim({ id: app.id, namespace: "shop", name: "blog" }))
    const appDir = path.join(claim.dir, "versions/1/app")
    fs.mkdirSync(appDir, { recursive: true, mode: 0o755 })
    fs.copyFileSync(fixture, path.join(appDir, "server.cjs"))
    fs.chmodSync(path.join(appDir, "server.cjs"), 0o644)
    fs.writeFileSync(path.join(claim.dir, "versions/1/start.json"), JSON.stringify({ argv: ["node", "server.cjs"], entry_point: "server.cjs" }))

    // the next gateway on this data dir resumes it
    gw = await startGateway({ env: env(), dataDir })
    await waitFor("the app resumed", () => answers(app.port ?? 0))
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
    await registry?.dispose()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("stats answer from the running app's cgroup, with the record's status and limit", async () => {
    const stats = await gw!.request("GET", "/v1/deployments/stats?name=blog", { token: admin })
    expect(stats.status, stats.text).toBe(200)
    expect(stats.body).toMatchObject({ name: "blog", status: "active", running: true, memory_limit_bytes: 256 * 1024 * 1024, restarts: 0 })
    expect(stats.body.pids).toBeGreaterThan(0)
    expect(stats.body.memory_bytes).toBeGreaterThan(0)
    expect(stats.body.memory_peak_bytes).toBeGreaterThanOrEqual(stats.body.memory_bytes)
    expect(stats.body.cpu_seconds).toBeGreaterThan(0)
    expect(Object.keys(stats.body).sort()).toEqual(
      ["cpu_seconds", "memory_bytes", "memory_limit_bytes", "memory_peak_bytes", "name", "pids", "restarts", "running", "status", "uptime_seconds"].sort()
    )
    // a static site runs nothing
    const site = await gw!.request("GET", "/v1/deployments/stats?name=site", { token: admin })
    expect(site.status, site.text).toBe(200)
    expect(site.body).toMatchObject({ name: "site", running: false, pids: 0, restarts: 0, uptime_seconds: 0 })
  })

  it("logs answer the last lines oldest first; the app sees the gateway's address", async () => {
    // through its host: the proxy reaches the resumed app
    const seen = await onHost(gw!.port, app.domain, "/env")
    expect(seen.status).toBe(200)
    expect(seen.body.env).toMatchObject({ PORTICO_GATEWAY_URL: gw!.url, GREETING: "resumed", PORT: String(app.port) })
    expect((await onHost(gw!.port, app.domain, "/log?count=30")).body).toEqual({ logged: 30 })
    await waitFor("the lines logged", async () => (await gw!.request("GET", "/v1/deployments/logs?name=blog&lines=1", { token: admin })).body?.lines?.[0] === "line 30 of 30")
    const three = await gw!.request("GET", "/v1/deployments/logs?name=blog&lines=3", { token: admin })
    expect(three.status, three.text).toBe(200)
    expect(three.body).toEqual({ name: "blog", lines: ["line 28 of 30", "line 29 of 30", "line 30 of 30"] })
    // the default is 100: the whole short log, the gateway's start line first
    const all = await gw!.request("GET", "/v1/deployments/logs?name=blog", { token: admin })
    expect(all.body.lines).toHaveLength(32)
    expect(all.body.lines[0]).toMatch(/^\[portico\] .* starting version 1: node server.cjs$/)
    expect(all.body.lines[1]).toMatch(/^app up/)
    expect((await gw!.request("GET", "/v1/deployments/logs?name=site", { token: admin })).body).toEqual({ name: "site", lines: [] })
  })

  it("refuses what the table refuses", async () => {
    for (const lines of ["0", "1001", "-1", "ten", ""])
      expectError(await gw!.request("GET", `/v1/deployments/logs?name=blog&lines=${lines}`, { token: admin }), 400, "VALIDATION_FAILED")
    expect((await gw!.request("GET", "/v1/deployments/logs?name=blog&lines=1000", { token: admin })).status).toBe(200)
    expectError(await gw!.request("GET", "/v1/deployments/logs?name=nope", { token: admin }), 404, "NOT_FOUND")
    expectError(await gw!.request("GET", "/v1/deployments/stats?name=nope", { token: admin }), 404, "NOT_FOUND")
    expectError(await gw!.request("GET", "/v1/deployments/stats?name=bad%20name", { token: admin }), 400, "VALIDATION_FAILED")
    expectError(await gw!.request("GET", "/v1/deployments/stats", { token: admin }), 400, "VALIDATION_FAILED")
    expectError(await gw!.request("GET", "/v1/deployments/logs?name=blog", { token: runtimeKey }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw!.request("GET", "/v1/deployments/stats?name=blog"), 401, "UNAUTHORIZED")
  })

  it("stops the app when the gateway stops", async () => {
    expect(await gw!.stop()).toBe(0)
    gw = undefined
    expect(await answers(app.port ?? 0)).toBe(false)
  })
})
