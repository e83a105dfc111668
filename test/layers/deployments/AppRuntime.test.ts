/**
 * The app runtime against a real Node.js app (test/fixtures/runtime/app.cjs) in the real sandbox
 * (bwrap, cgroups, socket rules), with the records in a real SQLite registry and real workload
 * tokens: a start answers once the app is healthy; the app sees the platform's environment and its
 * token file (its own, mode 0600) and reaches the gateway's address only; crashes and failing
 * health checks are restarted by policy (counted, events written), `never` is not; an app that
 * never gets healthy is 502 APP_START_FAILED with nothing left running; logs read the last lines
 * (across a rotation); stats come from the cgroup; stop is idempotent; the runtime's end stops
 * every app and a new runtime resumes the active ones. Runs as root, like the sandbox's suite.
 * The version directory and start.json are written here by hand (the prepare step's output).
 */
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { execFileSync } from "node:child_process"
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { defaultLimits, type DeploymentRecord, type RestartPolicy, sandboxUid } from "../../../src/layers/deployments/DeploymentRecord.js"
import { type DeploymentStoreService, makeDeploymentStore } from "../../../src/layers/deployments/DeploymentStore.js"
import { instanceName, type InstanceDirsService, makeInstanceDirs } from "../../../src/layers/deployments/InstanceDirs.js"
import { type AppRuntimeService, makeAppRuntime, sandboxUnavailable } from "../../../src/layers/deployments/runtime/AppRuntime.js"
import { defaultSandboxOptions } from "../../../src/layers/deployments/sandbox/Sandbox.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"
import { WorkloadTokens, type WorkloadTokensService } from "../../../src/layers/workload/WorkloadTokens.js"
import { waitFor } from "../../support/wait.js"

const fixture = path.resolve(import.meta.dirname, "../../fixtures/runtime/app.cjs")
const NODE = "runtime-test-node"
const sandbox = { ...defaultSandboxOptions(), cgroupParent: `portico-rt-test-${process.pid}`, runtimeRoot: path.join(tmpdir(), `portico-rt-run-${process.pid}`) }
const timing = {
  healthIntervalMs: 300,
  startTimeoutMs: 5_000,
  failureThreshold: 3,
  backoffFirstMs: 200,
  backoffMaxMs: 1_000,
  maxRestarts: 3,
  stopGraceMs: 1_000,
  logCheckMs: 200,
  logMaxBytes: 16 * 1024
}

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

const request = (port: number, route: string) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path: route, agent: false, timeout: 5_000 }, (res) => {
        let text = ""
        res.on("data", (c) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text === "" ? undefined : JSON.parse(text) }))
      })
      .on("error", reject)
  })

const answers = (port: number) => request(port, "/health").then(() => true, () => false)


/** Processes running as the uid (anywhere on the host). */
const processesOf = (uid: number): Array<string> => {
  try {
    return execFileSync("pgrep", ["-u", String(uid)], { encoding: "utf8" }).split("\n").filter(Boolean)
  } catch {
    return []
  }
}

describe("deployment app runtime", () => {
  let root: string
  /** The registry's and tokens' (the test's whole run); `scope` is the runtime's (a gateway's life). */
  let registryScope: Scope.CloseableScope
  let scope: Scope.CloseableScope
  let store: DeploymentStoreService
  let tokens: WorkloadTokensService
  let dirs: InstanceDirsService
  let runtime: AppRuntimeService
  let gateway: http.Server
  let gatewayPort: number
  const firstPort = 10200 + Math.floor(Math.random() * 9000)

  const makeRuntime = (runtimeScope: Scope.Scope) =>
    run(
      Scope.extend(
        makeAppRuntime(store, tokens, {
          nodeId: NODE,
          instances: { root: dirs.root, ownerOf: (instance) => dirs.ownerOf(instance) },
          sandbox,
          timing,
          publicUrl: `http://127.0.0.1:${gatewayPort}`
        }),
        runtimeScope
      )
    )

  /** A record and its instance directory with version 1 (the fixture app and its start.json). */
  const deploy = async (name: string, options: { restartPolicy?: RestartPolicy; mode?: string; startJson?: boolean } = {}) => {
    const record = await run(
      store.create({
        namespace: "shop",
        name,
        type: "nodejs",
        domain: `${name}.runtime.test`,
        homeNode: NODE,
        artifact: "versions/1",
        limits: { ...defaultLimits, memoryBytes: 256 * 1024 * 1024, restartPolicy: options.restartPolicy ?? "on-failure" },
        env: { GREETING: "hello\nworld", ...(options.mode === undefined ? {} : { MODE: options.mode }) },
        status: "active"
      })
    )
    const claim = await run(dirs.claim({ id: record.id, namespace: "shop", name }))
    const appDir = path.join(claim.dir, "versions/1/app")
    mkdirSync(appDir, { recursive: true, mode: 0o755 })
    copyFileSync(fixture, path.join(appDir, "server.cjs"))
    chmodSync(path.join(appDir, "server.cjs"), 0o644)
    if (options.startJson !== false)
      writeFileSync(path.join(claim.dir, "versions/1/start.json"), JSON.stringify({ argv: ["node", "server.cjs"], entry_point: "server.cjs" }))
    const env = (await run(store.environment("shop", record.id))).env
    return { record, instanceDir: claim.dir, env, port: record.port ?? 0, uid: sandboxUid(record) ?? 0 }
  }

  const statusOf = async (record: DeploymentRecord) => (await run(store.byId("shop", record.id))).pipe((o) => (o._tag === "Some" ? o.value.status : "gone"))
  const eventTypes = async (record: DeploymentRecord) =>
    (await run(store.events("shop", record.id, { limit: 100, after: undefined }))).items.map((e) => [e.type, e.detail] as const)

  beforeAll(async () => {
    const unavailable = sandboxUnavailable(sandbox)
    if (unavailable !== undefined) throw new Error(`the runtime suite needs the sandbox: ${unavailable} (run as root, scripts/engines.sh sandbox)`)
    root = mkdtempSync(path.join(tmpdir(), "portico-runtime-"))
    chmodSync(root, 0o755)
    registryScope = await run(Scope.make())
    scope = await run(Scope.make())
    const context = await run(Layer.buildWithScope(Layer.mergeAll(WorkloadTokens.Test, SqliteRegistryStore.Test), registryScope))
    tokens = Context.get(context, WorkloadTokens)
    store = makeDeploymentStore(Context.get(context, RegistryStore), makeSealer(new Uint8Array(32).fill(7)), {
      ports: { first: firstPort, last: firstPort + 40 }
    })
    dirs = makeInstanceDirs(path.join(root, "deployments"), (instance) =>
      Effect.map(store.onNode(NODE), (records) => records.filter((r) => instanceName(r.namespace, r.name) === instance).map((r) => r.id))
    )
    // stands for the gateway's public address: loopback, so the app reaches it only by its allow entry
    gateway = await new Promise<http.Server>((resolve) => {
      const server = http.createServer((_, res) => res.end("gateway"))
      server.listen(0, "127.0.0.1", () => resolve(server))
    })
    gatewayPort = (gateway.address() as AddressInfo).port
    runtime = await makeRuntime(scope)
  })

  afterAll(async () => {
    if (scope !== undefined) await run(Scope.close(scope, Exit.void))
    if (registryScope !== undefined) await run(Scope.close(registryScope, Exit.void))
    gateway?.close()
    if (root !== undefined) rmSync(root, { recursive: true, force: true })
    rmSync(sandbox.runtimeRoot, { recursive: true, force: true })
    // the test's cgroup parents, empty once every app is stopped
    for (const hierarchy of ["", "memory", "cpu", "cpuacct", "pids", "unified"]) {
      const parent = path.join("/sys/fs/cgroup", hierarchy, sandbox.cgroupParent)
      if (existsSync(parent)) rmdirSync(parent)
    }
  })

  it("starts the app, answers once healthy, and the app sees its environment, token and gateway only", async () => {
    const app = await deploy("envy")
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    expect(await answers(app.port)).toBe(true)
    const { body } = await request(app.port, "/env")
    expect(body.uid).toBe(app.uid)
    expect(body.env).toMatchObject({
      PORT: String(app.port),
      ENTRY_POINT: "server.cjs",
      PORTICO_ENTRYPOINT: "server.cjs",
      PORTICO_NAMESPACE: "shop",
      PORTICO_GATEWAY_URL: `http://127.0.0.1:${gatewayPort}`,
      PORTICO_STATE_DIR: "/var/lib/app/state",
      PORTICO_CACHE_DIR: "/var/lib/app/cache",
      PORTICO_TOKEN_FILE: "/run/portico/token",
      GREETING: "hello\nworld"
    })
    // the token file: the app reads it, it is the app's alone, and it authenticates as the deployment
    expect(body.tokenError).toBeUndefined()
    const tokenFile = path.join(app.instanceDir, "run", "token")
    const stat = statSync(tokenFile)
    expect([stat.uid, stat.mode & 0o777]).toEqual([app.uid, 0o600])
    expect(body.token.trim().split(".")).toHaveLength(3)
    // the gateway's public address is reachable although on loopback; another loopback port is not
    expect((await request(app.port, `/reach?port=${gatewayPort}`)).body).toEqual({ ok: true })
    const other = http.createServer((_, res) => res.end())
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", () => resolve()))
    expect((await request(app.port, `/reach?port=${(other.address() as AddressInfo).port}`)).body).toEqual({ error: "EPERM" })
    other.close()

    const stats = await run(runtime.stats(app.record.id))
    expect(stats).toMatchObject({ running: true, restarts: 0 })
    expect(stats?.pids).toBeGreaterThan(0)
    expect(stats?.memoryBytes).toBeGreaterThan(1024 * 1024)
    expect(stats?.cpuSeconds).toBeGreaterThan(0)
    expect(stats?.uptimeSeconds).toBeGreaterThanOrEqual(0)

    // a start of the running deployment replaces its process
    const before = body.boot
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: { ...app.env, GREETING: "again" } }))
    const after = (await request(app.port, "/env")).body
    expect(after.env.GREETING).toBe("again")
    expect(after.pid === before && after.token === body.token).toBe(false)
    expect(processesOf(app.uid).length).toBeGreaterThan(0)

    await run(runtime.stop(app.record.id))
    expect(await answers(app.port)).toBe(false)
    expect(processesOf(app.uid)).toEqual([])
    expect(await run(runtime.stats(app.record.id))).toMatchObject({ running: false, pids: 0, uptimeSeconds: 0 })
    // idempotent, and for a deployment never started
    await run(runtime.stop(app.record.id))
    await run(runtime.stop("d000000000000000000000000"))
  })

  it("logs(n) answers the last n lines oldest first, across a rotation of the log", async () => {
    const app = await deploy("chatty")
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    await request(app.port, "/log?count=5")
    await waitFor("the lines in the log", async () => (await run(runtime.logs(app.record.id, 1)))[0] === "line 5 of 5")
    expect(await run(runtime.logs(app.record.id, 3))).toEqual(["line 3 of 5", "line 4 of 5", "line 5 of 5"])
    // more than the cap: the log is rotated and the last lines still read in order
    await request(app.port, "/log?count=3000")
    const logFile = path.join(app.instanceDir, "logs", "app.log")
    await waitFor("a rotation", () => existsSync(`${logFile}.1`) && statSync(logFile).size < 16 * 1024)
    await request(app.port, "/log?count=2")
    await waitFor("the last lines", async () => (await run(runtime.logs(app.record.id, 1)))[0] === "line 2 of 2")
    const lines = await run(runtime.logs(app.record.id, 100))
    expect(lines).toHaveLength(100)
    expect(lines.slice(-3)).toEqual(["line 3000 of 3000", "line 1 of 2", "line 2 of 2"])
    expect(lines[0]).toBe("line 2903 of 3000")
    await run(runtime.stop(app.record.id))
  })

  it("restarts a crashed app under on-failure (counted, event), and a clean exit is not restarted", async () => {
    const app = await deploy("crashy")
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    const first = (await request(app.port, "/env")).body.boot
    await request(app.port, "/crash?code=3")
    await waitFor("a restart", async () => (await run(runtime.stats(app.record.id)))?.restarts === 1 && (await answers(app.port)))
    expect((await request(app.port, "/env")).body.boot).not.toBe(first)
    const restarted = (await eventTypes(app.record)).find(([type]) => type === "restarted")
    expect(restarted?.[1]).toMatchObject({ reason: "exited with code 3", attempt: 1 })
    expect(await run(runtime.logs(app.record.id, 1000))).toContainEqual(expect.stringMatching(/\[portico\] .* restarting in 200 ms/))
    // exit 0 under on-failure: not restarted, status stopped
    await request(app.port, "/crash?code=0")
    await waitFor("the status stopped", async () => (await statusOf(app.record)) === "stopped").catch(async (e) => {
      console.log((await run(runtime.logs(app.record.id, 50))).join("\n"), await statusOf(app.record))
      throw e
    })
    expect(await answers(app.port)).toBe(false)
    expect(await run(runtime.stats(app.record.id))).toMatchObject({ running: false, restarts: 1 })
  })

  it("does not restart under never: the status becomes failed", async () => {
    const app = await deploy("fragile", { restartPolicy: "never" })
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    await request(app.port, "/crash?code=1")
    await waitFor("the status failed", async () => (await statusOf(app.record)) === "failed")
    expect(await answers(app.port)).toBe(false)
    expect(await run(runtime.stats(app.record.id))).toMatchObject({ running: false, restarts: 0 })
    expect((await eventTypes(app.record)).map(([type]) => type)).not.toContain("restarted")
    expect(processesOf(app.uid)).toEqual([])
  })

  it("restarts even a clean exit under always, and gives up after the restarts in a row: status failed", async () => {
    const app = await deploy("flappy", { restartPolicy: "always", mode: "exit-soon" })
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    // 3 restarts (200, 400, 800 ms apart), then the supervisor gives up
    await waitFor("the status failed", async () => (await statusOf(app.record)) === "failed", 20_000)
    expect(await run(runtime.stats(app.record.id))).toMatchObject({ running: false, restarts: timing.maxRestarts })
    const events = await eventTypes(app.record)
    expect(events.filter(([type]) => type === "restarted").map(([, detail]) => [detail["attempt"], detail["delay_ms"]])).toEqual([
      [3, 800],
      [2, 400],
      [1, 200]
    ])
    expect(events.find(([type]) => type === "status_changed")?.[1]).toMatchObject({ reason: "gave up after 3 restarts: exited with code 0" })
    expect(processesOf(app.uid)).toEqual([])
  })

  it("restarts an app whose health checks keep failing", async () => {
    const app = await deploy("sickly")
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    const first = (await request(app.port, "/env")).body.boot
    await request(app.port, "/sick")
    await waitFor("a restart", async () => (await run(runtime.stats(app.record.id)))?.restarts === 1 && (await answers(app.port)))
    // the new process is healthy again
    expect((await request(app.port, "/health")).status).toBe(200)
    expect((await request(app.port, "/env")).body.boot).not.toBe(first)
    const events = await eventTypes(app.record)
    expect(events.find(([type]) => type === "health_check_failed")?.[1]).toMatchObject({ phase: "running", checks: 3 })
    expect(events.find(([type]) => type === "restarted")?.[1]).toMatchObject({ reason: "3 health checks failed in a row" })
    await run(runtime.stop(app.record.id))
  })

  it("answers 502 APP_START_FAILED for an app that never gets healthy, with nothing left running", async () => {
    const app = await deploy("never-well", { mode: "never-healthy" })
    const started = Date.now()
    const result = await run(Effect.either(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env })))
    expect(Date.now() - started).toBeGreaterThanOrEqual(timing.startTimeoutMs - 100)
    expect(result._tag === "Left" ? [result.left.status, result.left.code] : result).toEqual([502, "APP_START_FAILED"])
    expect(result._tag === "Left" ? result.left.reason : "").toContain("did not answer 200 on /health within 5 s")
    expect(await answers(app.port)).toBe(false)
    expect(processesOf(app.uid)).toEqual([])
    expect(await run(runtime.stats(app.record.id))).toMatchObject({ running: false })
    expect((await eventTypes(app.record)).find(([type]) => type === "health_check_failed")?.[1]).toMatchObject({ phase: "start" })
    // its log says so (the caller records the status; the log stays readable)
    expect((await run(runtime.logs(app.record.id, 5))).join("\n")).toContain("did not answer 200")
    // no start.json: refused the same way, with nothing launched
    const bare = await deploy("bare", { startJson: false })
    const refused = await run(Effect.either(runtime.start({ record: bare.record, instanceDir: bare.instanceDir, env: bare.env })))
    expect(refused._tag === "Left" ? [refused.left.code, refused.left.reason] : refused).toEqual([
      "APP_START_FAILED",
      "the app did not start: the version has no start command (start.json is missing)"
    ])
  })

  it("refuses to launch on a port another process of the host holds (its health checks would answer for the app)", async () => {
    const app = await deploy("squatted")
    const squatter = await new Promise<http.Server>((resolve) => {
      const server = http.createServer((_, res) => res.end("not the app"))
      server.listen(app.port, "127.0.0.1", () => resolve(server))
    })
    try {
      const refused = await run(Effect.either(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env })))
      expect(refused._tag === "Left" ? [refused.left.status, refused.left.code] : refused).toEqual([502, "APP_START_FAILED"])
      expect(refused._tag === "Left" ? refused.left.reason : "").toContain(`port ${app.port} is in use by another process`)
      expect(processesOf(app.uid)).toEqual([])
    } finally {
      await new Promise((resolve) => squatter.close(resolve))
    }
    // once the port is free the same deployment starts
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    expect(await answers(app.port)).toBe(true)
    await run(runtime.stop(app.record.id))
  })

  it("starts and stops from an uninterruptible region (a caller's undo): the supervisor stays interruptible", async () => {
    const app = await deploy("undoing")
    // a fork inherits its caller's region: were the supervisor uninterruptible, its health race
    // could not drop its loser, so this start would never answer, nor could a stop end it
    await run(Effect.uninterruptible(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env })))
    expect(await answers(app.port)).toBe(true)
    await run(Effect.uninterruptible(runtime.stop(app.record.id)))
    expect(processesOf(app.uid)).toEqual([])
  })

  it("stops every app when the runtime ends, and a new runtime resumes this node's active ones", async () => {
    const app = await deploy("phoenix")
    await run(runtime.start({ record: app.record, instanceDir: app.instanceDir, env: app.env }))
    expect(await answers(app.port)).toBe(true)
    // the gateway's end
    await run(Scope.close(scope, Exit.void))
    expect(await answers(app.port)).toBe(false)
    expect(processesOf(app.uid)).toEqual([])

    // a new gateway over the same registry: a fresh runtime, resumed when it listens
    scope = await run(Scope.make())
    runtime = await makeRuntime(scope)
    await run(runtime.listening(gatewayPort))
    await waitFor("phoenix resumed", () => answers(app.port), 20_000)
    expect((await request(app.port, "/env")).body.env.GREETING).toBe("hello\nworld")
    // the active deployment without a start command is marked failed; the stopped and failed ones stay down
    await waitFor("bare marked failed", async () => {
      const bare = (await run(store.get("shop", "bare")))
      return bare._tag === "Some" && bare.value.status === "failed"
    })
    const crashy = await run(store.get("shop", "crashy"))
    expect(crashy._tag === "Some" && crashy.value.port !== undefined ? await answers(crashy.value.port) : "no record").toBe(false)
    await run(runtime.stop(app.record.id))
  })
})
