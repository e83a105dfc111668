/**
 * Uploads cut mid-request (docs/deployments.md, "The deployments service"): the deployments
 * service over real components (a SQLite registry, the embedded content store, the instance
 * directories, the install and the runtime in the real sandbox) with its upload fiber interrupted
 * as the listener does when the client's connection closes. At each stage (the archive, the
 * prepare's install, the start) a first upload leaves nothing (no record, directory, version,
 * content reference, process or port) and an update leaves the deployment as it was; and a first
 * upload's setup holds its deployment's lock, so an update or delete sent meanwhile waits for it.
 * Runs as root (the sandbox). The install's npm is a stand-in that never ends (an install stalled
 * on the registry), run by the real install code where npm runs.
 */
import { Context, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testSettings } from "../../../src/layers/config/PorticoConfig.js"
import { makeAppBuilds } from "../../../src/layers/deployments/build/AppBuilds.js"
import { type DeploymentRecord, sandboxUid } from "../../../src/layers/deployments/DeploymentRecord.js"
import { type DeploymentLocksService, makeDeploymentLocks } from "../../../src/layers/deployments/DeploymentLocks.js"
import { type DeploymentsService, makeDeployments } from "../../../src/layers/deployments/Deployments.js"
import { type DeploymentStoreService, makeDeploymentStore } from "../../../src/layers/deployments/DeploymentStore.js"
import { instanceName, makeInstanceDirs } from "../../../src/layers/deployments/InstanceDirs.js"
import { makeAppRuntime, sandboxUnavailable } from "../../../src/layers/deployments/runtime/AppRuntime.js"
import { defaultSandboxOptions } from "../../../src/layers/deployments/sandbox/Sandbox.js"
import { makeAppHosts } from "../../../src/layers/deployments/serving/AppHosts.js"
import { RegistryStore, type RegistryStoreService } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"
import { ContentIndex, type ContentIndexService } from "../../../src/layers/storage/ContentIndex.js"
import { Storage } from "../../../src/layers/storage/Storage.js"
import { WorkloadTokens } from "../../../src/layers/workload/WorkloadTokens.js"
import { waitFor } from "../../support/wait.js"
import { tarOf } from "../../support/tarball.js"

const NODE = "uploads-test-node"
const sandbox = { ...defaultSandboxOptions(), cgroupParent: `portico-up-test-${process.pid}`, runtimeRoot: path.join(tmpdir(), `portico-up-run-${process.pid}`) }
const timing = {
  healthIntervalMs: 300,
  // long enough that a never-healthy app is still starting when the test cuts the upload
  startTimeoutMs: 30_000,
  failureThreshold: 3,
  backoffFirstMs: 200,
  backoffMaxMs: 1_000,
  maxRestarts: 3,
  stopGraceMs: 1_000,
  logCheckMs: 200,
  logMaxBytes: 16 * 1024
}
/** Where npm's entry script goes: a script that never ends, run exactly where npm runs. */
const stalledNpm = "--eval=setInterval(() => {}, 1 << 30)"

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)

/**
 * The app: answers its version and a mark of this process; with `sick`, or once a file `sick` is
 * in its directory (the test writes it there), its health path never answers 200; with CRASH=1 in
 * its environment it exits at once.
 */
const appSource = (version: string, sick = false) => `
if (process.env.CRASH === "1") process.exit(1)
const boot = Math.random().toString(36).slice(2)
require("node:http").createServer((req, res) => {
  if (req.url === "/health") { res.writeHead(${sick} || require("node:fs").existsSync("sick") ? 503 : 200); return res.end() }
  res.end(JSON.stringify({ version: ${JSON.stringify(version)}, boot }))
}).listen(Number(process.env.PORT))
`

/** An app's archive; `slow` adds 1 MiB that does not compress, so a body cut halfway is cut in the archive. */
const appTar = (version: string, options: { sick?: boolean; install?: boolean } = {}) =>
  tarOf({
    "index.js": appSource(version, options.sick),
    ...(options.install === true ? { "package.json": JSON.stringify({ name: "app", version: "1.0.0", dependencies: { ms: "^2.1.3" } }) } : {}),
    "blob.bin": randomBytes(1024 * 1024)
  })

/** A site of `files` small pages: storing them takes a while, so a cut lands while they are stored. */
const siteTar = (files: number, tag: string) =>
  tarOf(Object.fromEntries(Array.from({ length: files }, (_, i) => [`page${i}.html`, `<p>${tag} ${i} ${randomBytes(8).toString("hex")}</p>`])))

interface Body {
  readonly contentType: string
  readonly body: AsyncIterable<Uint8Array>
  /** Sends the rest after a cut (a client that went on after all). */
  readonly release: () => void
}

/**
 * The multipart form as the gateway's listener hands it over; with `cut`, only the head and the
 * first half of the archive arrive, then nothing more until `release` (a client gone quiet).
 */
const formBody = async (fields: Record<string, string>, archive: Buffer, cut = false): Promise<Body> => {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  form.append("archive", new Blob([archive]), "archive.tar.gz")
  const request = new Request("http://upload.test/", { method: "POST", body: form })
  const bytes = Buffer.from(await request.arrayBuffer())
  const at = cut ? bytes.indexOf(archive.subarray(0, 64)) + Math.floor(archive.length / 2) : bytes.length
  let release = () => {}
  const gate = new Promise<void>((resolve) => (release = resolve))
  const body = async function* () {
    for (let i = 0; i < at; i += 64 * 1024) yield bytes.subarray(i, Math.min(at, i + 64 * 1024))
    if (at === bytes.length) return
    await gate
    yield bytes.subarray(at)
  }
  return { contentType: request.headers.get("content-type") ?? "", body: body(), release }
}

/** Processes running as the uid (anywhere on the host). */
const processesOf = (uid: number): Array<string> => {
  try {
    return execFileSync("pgrep", ["-u", String(uid)], { encoding: "utf8" }).split("\n").filter(Boolean)
  } catch {
    return []
  }
}

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port })
    socket.once("connect", () => (socket.destroy(), resolve(true)))
    socket.once("error", () => resolve(false))
  })

const served = (port: number) =>
  new Promise<{ version: string; boot: string }>((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path: "/", agent: false, timeout: 5_000 }, (res) => {
        let text = ""
        res.on("data", (c) => (text += c))
        res.on("end", () => resolve(JSON.parse(text)))
      })
      .on("error", reject)
  })

let root: string
let registryScope: Scope.CloseableScope
let scope: Scope.CloseableScope
let store: DeploymentStoreService
let registry: RegistryStoreService
let index: ContentIndexService
let locks: DeploymentLocksService
let deployments: DeploymentsService

const dirOf = (name: string) => path.join(root, "deployments", instanceName("shop", name))
/** A directory's entries; none when it is not there (yet, or any more). */
const entries = (dir: string): Array<string> => (existsSync(dir) ? readdirSync(dir) : [])
/** Whether the archive is being unpacked into `dir` (its partial directory is there). */
const unpackingIn = (dir: string) => entries(dir).some((f) => f.startsWith(".app.partial-"))
const staging = () => path.join(root, "deploy-staging")
const recordOf = async (name: string) => Option.getOrUndefined(await run(store.get("shop", name)))
const refsOf = async (name: string) =>
  (await run(registry.query({ sql: "SELECT cid FROM content_refs WHERE namespace = 'shop' AND kind = 'deployment' AND ref = ? ORDER BY cid", params: [name] }))).map((r) => String(r["cid"]))

/** Forks the upload (or update) as a request fiber; answers the fiber. */
const send = (action: "upload" | "update", type: DeploymentRecord["type"], body: Body) =>
  Effect.runFork(action === "upload" ? deployments.upload("shop", type, body.contentType, body.body) : deployments.update("shop", type, body.contentType, body.body))

/** Interrupts the request fiber as the listener does when the client's connection closes. */
const cut = async (fiber: Fiber.RuntimeFiber<unknown, unknown>) => {
  const exit = await run(Fiber.interrupt(fiber))
  expect(Exit.isInterrupted(exit), String(exit)).toBe(true)
}

/** Nothing of the first upload `seen` is left: record, directory, process, port, lock, content, staging. */
const expectNothingLeft = async (seen: DeploymentRecord) => {
  expect(await recordOf(seen.name)).toBeUndefined()
  expect(Option.isNone(await run(store.byId("shop", seen.id)))).toBe(true)
  expect(existsSync(dirOf(seen.name))).toBe(false)
  if (seen.port !== undefined) {
    expect(processesOf(sandboxUid(seen) ?? 0)).toEqual([])
    expect(await listening(seen.port)).toBe(false)
    const rows = await run(registry.query({ sql: "SELECT id FROM deployments WHERE home_node = ? AND port = ?", params: [NODE, seen.port] }))
    expect(rows).toEqual([])
  }
  expect(locks.busy()).toEqual([])
  expect(await refsOf(seen.name)).toEqual([])
  expect(entries(staging())).toEqual([])
}

/** The record once the upload has written it (the setup under way). */
const written = async (name: string): Promise<DeploymentRecord> => {
  await waitFor(`the record of ${name}`, async () => (await recordOf(name)) !== undefined, 30_000, 20)
  return (await recordOf(name)) as DeploymentRecord
}

/** The name takes a good first upload again, which is then deleted. */
const uploadsAgain = async (name: string) => {
  const again = await run(deployments.upload("shop", "nodejs", ...bodyArgs(await formBody({ name, skip_install: "true" }, appTar("again")))))
  expect(again).toMatchObject({ name, status: "active", version: 1 })
  expect((await served(again.port ?? 0)).version).toBe("again")
  await run(deployments.remove("shop", name))
  await expectNothingLeft(again)
}
const bodyArgs = (body: Body) => [body.contentType, body.body] as const

beforeAll(async () => {
  const unavailable = sandboxUnavailable(sandbox)
  if (unavailable !== undefined) throw new Error(`the uploads suite needs the sandbox: ${unavailable} (run as root, scripts/engines.sh sandbox)`)
  root = mkdtempSync(path.join(tmpdir(), "portico-uploads-"))
  chmodSync(root, 0o755)
  const config = testSettings(root, { nodeId: NODE, baseDomain: "uploads.test" })
  registryScope = await run(Scope.make())
  scope = await run(Scope.make())
  const context = await run(Layer.buildWithScope(Layer.mergeAll(SqliteRegistryStore.Test, WorkloadTokens.Test, Storage.Test, ContentIndex.Test), registryScope))
  registry = Context.get(context, RegistryStore)
  index = Context.get(context, ContentIndex)
  const first = 10200 + Math.floor(Math.random() * 9000)
  store = makeDeploymentStore(registry, makeSealer(new Uint8Array(32).fill(9)), { ports: { first, last: first + 40 } })
  const instances = makeInstanceDirs(path.join(root, "deployments"), (instance) =>
    Effect.map(store.onNode(NODE), (records) => records.filter((r) => instanceName(r.namespace, r.name) === instance).map((r) => r.id))
  )
  locks = makeDeploymentLocks()
  const runtime = await run(
    Scope.extend(
      makeAppRuntime(store, Context.get(context, WorkloadTokens), {
        nodeId: NODE,
        instances: { root: instances.root, ownerOf: (instance) => instances.ownerOf(instance) },
        sandbox,
        timing,
        publicUrl: "http://127.0.0.1:9"
      }),
      scope
    )
  )
  const hosts = (await run(makeAppHosts(registry, config.baseDomain))).service
  deployments = makeDeployments({
    config,
    store,
    locks,
    instances,
    hosts,
    storage: Context.get(context, Storage),
    index,
    registry,
    runtime,
    builds: makeAppBuilds({ sandbox, npmCli: stalledNpm })
  })
})

afterAll(async () => {
  if (scope !== undefined) await run(Scope.close(scope, Exit.void))
  if (registryScope !== undefined) await run(Scope.close(registryScope, Exit.void))
  if (root !== undefined) rmSync(root, { recursive: true, force: true })
  rmSync(sandbox.runtimeRoot, { recursive: true, force: true })
  for (const hierarchy of ["", "memory", "cpu", "cpuacct", "pids", "unified"]) {
    const parent = path.join("/sys/fs/cgroup", hierarchy, sandbox.cgroupParent)
    if (existsSync(parent)) rmdirSync(parent)
  }
})

describe("a dynamic first upload cut mid-request leaves nothing, and the name uploads again", () => {
  it("cut during the archive", async () => {
    const body = await formBody({ name: "cut-archive", skip_install: "true" }, appTar("v1"), true)
    const fiber = send("upload", "nodejs", body)
    const seen = await written("cut-archive")
    expect(seen.status).toBe("deploying")
    await waitFor("the archive being unpacked", () => unpackingIn(path.join(dirOf("cut-archive"), "versions/1")), 10_000, 20)
    await cut(fiber)
    await expectNothingLeft(seen)
    await uploadsAgain("cut-archive")
  }, 60_000)

  it("cut during the prepare's install", async () => {
    const fiber = send("upload", "nodejs", await formBody({ name: "cut-install" }, appTar("v1", { install: true })))
    const seen = await written("cut-install")
    await waitFor("the install running", () => processesOf(sandboxUid(seen) ?? 0).length > 0, 30_000, 50)
    expect(entries(path.join(dirOf("cut-install"), "versions/1")).some((f) => f.startsWith(".install-"))).toBe(true)
    await cut(fiber)
    await expectNothingLeft(seen)
    await uploadsAgain("cut-install")
  }, 60_000)

  it("cut during the start", async () => {
    const fiber = send("upload", "nodejs", await formBody({ name: "cut-start", skip_install: "true" }, appTar("v1", { sick: true })))
    const seen = await written("cut-start")
    await waitFor("the app running, not yet healthy", () => processesOf(sandboxUid(seen) ?? 0).length > 0, 30_000, 50)
    expect(existsSync(path.join(dirOf("cut-start"), "versions/1/start.json"))).toBe(true)
    expect((await recordOf("cut-start"))?.status).toBe("deploying")
    await cut(fiber)
    await expectNothingLeft(seen)
    await uploadsAgain("cut-start")
  }, 60_000)
})

describe("an update cut mid-request leaves the deployment as it was", () => {
  let live: DeploymentRecord
  let boot: string

  beforeAll(async () => {
    live = await run(deployments.upload("shop", "nodejs", ...bodyArgs(await formBody({ name: "live", skip_install: "true" }, appTar("v1")))))
    boot = (await served(live.port ?? 0)).boot
  }, 60_000)

  /** Version 1 current and the only one, active, served by the same process (`untouched`) or a v1 started again. */
  const expectAsBefore = async (untouched: boolean) => {
    expect(await recordOf("live")).toMatchObject({ id: live.id, version: 1, artifact: "versions/1", status: "active", port: live.port })
    expect((await run(store.versions("shop", live.id))).map((v) => v.version)).toEqual([1])
    expect(readdirSync(path.join(dirOf("live"), "versions"))).toEqual(["1"])
    const now = await served(live.port ?? 0)
    expect(now.version).toBe("v1")
    if (untouched) expect(now.boot).toBe(boot)
    else boot = now.boot
    expect(locks.busy()).toEqual([])
  }

  it("cut during the archive: the old process serves on, untouched", async () => {
    const fiber = send("update", "nodejs", await formBody({ name: "live", skip_install: "true" }, appTar("v2"), true))
    await waitFor("the archive being unpacked", () => unpackingIn(path.join(dirOf("live"), "versions/2")), 10_000, 20)
    await cut(fiber)
    await expectAsBefore(true)
  }, 60_000)

  it("cut during the install: the install is stopped, the old process serves on", async () => {
    // the install runs as the deployment's uid, beside the app's own process
    const app = processesOf(sandboxUid(live) ?? 0)
    const fiber = send("update", "nodejs", await formBody({ name: "live" }, appTar("v2", { install: true })))
    await waitFor("the install running", () => processesOf(sandboxUid(live) ?? 0).length > app.length, 30_000, 50)
    expect(entries(path.join(dirOf("live"), "versions/2")).some((f) => f.startsWith(".install-"))).toBe(true)
    await cut(fiber)
    expect(processesOf(sandboxUid(live) ?? 0)).toEqual(app)
    await expectAsBefore(true)
  }, 60_000)

  it("cut during the new version's start: it is stopped and version 1 started again", async () => {
    const fiber = send("update", "nodejs", await formBody({ name: "live", skip_install: "true" }, appTar("v2", { sick: true })))
    // version 2's process answers in place of version 1's, never healthy: the start is waiting on it
    await waitFor("version 2 starting", () => served(live.port ?? 0).then((now) => now.version === "v2", () => false), 30_000, 50)
    await cut(fiber)
    await expectAsBefore(false)
  }, 90_000)

  it("a rollback cut during the older version's start: version 2 is started again and stays current", async () => {
    const updated = await run(deployments.update("shop", "nodejs", ...bodyArgs(await formBody({ name: "live", skip_install: "true" }, appTar("v2")))))
    expect(updated).toMatchObject({ version: 2, status: "active" })
    // version 1 will not get healthy again
    writeFileSync(path.join(dirOf("live"), "versions/1/app/sick"), "")
    const fiber = Effect.runFork(deployments.rollback("shop", "live", 1))
    await waitFor("version 1 starting", () => served(live.port ?? 0).then((now) => now.version === "v1", () => false), 30_000, 50)
    await cut(fiber)
    expect(await recordOf("live")).toMatchObject({ version: 2, artifact: "versions/2", status: "active" })
    expect((await run(store.versions("shop", live.id))).map((v) => v.version).sort()).toEqual([1, 2])
    expect((await served(live.port ?? 0)).version).toBe("v2")
    expect(locks.busy()).toEqual([])
  }, 90_000)

  it("an environment change cut once written is finished: an app that does not start with it is recorded failed", async () => {
    const before = await run(store.environment("shop", live.id))
    const fiber = Effect.runFork(deployments.setEnv("shop", "live", { set: { CRASH: "1" } }))
    await waitFor("the environment written", async () => (await run(store.environment("shop", live.id))).version !== before.version, 10_000, 5)
    await run(Fiber.interrupt(fiber))
    // not `active` with nothing running: the restart ran to its end and its failure is recorded
    expect((await run(store.environment("shop", live.id))).env).toEqual({ CRASH: "1" })
    expect(await recordOf("live")).toMatchObject({ version: 2, status: "failed" })
    expect(await listening(live.port ?? 0)).toBe(false)
    expect(locks.busy()).toEqual([])
  }, 60_000)
})

describe("a first upload's setup holds the deployment's lock", () => {
  it("an update sent meanwhile waits for the setup to end, then applies after it", async () => {
    const first = await formBody({ name: "raced", skip_install: "true" }, appTar("v1"), true)
    const upload = send("upload", "nodejs", first)
    await written("raced")
    await waitFor("the archive being unpacked", () => unpackingIn(path.join(dirOf("raced"), "versions/1")), 10_000, 20)
    const update = send("update", "nodejs", await formBody({ name: "raced", skip_install: "true" }, appTar("v2")))
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    // the update waits: nothing of version 2 while version 1 is being unpacked
    expect(Option.isNone(await run(Fiber.poll(update)))).toBe(true)
    expect(await recordOf("raced")).toMatchObject({ version: 1, status: "deploying" })
    expect(existsSync(path.join(dirOf("raced"), "versions/2"))).toBe(false)
    first.release()
    expect(await run(Fiber.join(upload))).toMatchObject({ version: 1, status: "active" })
    const updated = await run(Fiber.join(update))
    expect(updated).toMatchObject({ version: 2, status: "active" })
    expect((await served(updated.port ?? 0)).version).toBe("v2")
    const events = (await run(store.events("shop", updated.id, { limit: 100, after: undefined }))).items.map((e) => e.type).reverse()
    // each start says what it waits for before the write it leads to
    expect(events).toEqual(["created", "starting", "status_changed", "starting", "updated"])
    await run(deployments.remove("shop", "raced"))
    await expectNothingLeft(updated)
  }, 90_000)

  it("a delete sent meanwhile waits for the setup, then deletes the deployment it made", async () => {
    const first = await formBody({ name: "doomed", skip_install: "true" }, appTar("v1"), true)
    const upload = send("upload", "nodejs", first)
    await written("doomed")
    await waitFor("the archive being unpacked", () => unpackingIn(path.join(dirOf("doomed"), "versions/1")), 10_000, 20)
    const removal = Effect.runFork(deployments.remove("shop", "doomed"))
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect(Option.isNone(await run(Fiber.poll(removal)))).toBe(true)
    // the directory is not released under the unpacking
    expect(unpackingIn(path.join(dirOf("doomed"), "versions/1"))).toBe(true)
    first.release()
    const created = await run(Fiber.join(upload))
    expect(created).toMatchObject({ version: 1, status: "active" })
    await run(Fiber.join(removal))
    await expectNothingLeft(created)
  }, 90_000)

  it("a delete waiting on a setup that is cut answers 404: the upload left nothing to delete", async () => {
    const upload = send("upload", "nodejs", await formBody({ name: "gone", skip_install: "true" }, appTar("v1"), true))
    const seen = await written("gone")
    await waitFor("the archive being unpacked", () => unpackingIn(path.join(dirOf("gone"), "versions/1")), 10_000, 20)
    const removal = Effect.runFork(deployments.remove("shop", "gone"))
    await new Promise((resolve) => setTimeout(resolve, 300))
    await cut(upload)
    const exit = await run(Fiber.await(removal))
    expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit).toMatchObject({ code: "NOT_FOUND" })
    await expectNothingLeft(seen)
  }, 60_000)
})

describe("a static site cut mid-request gives back what it stored", () => {
  it("a first upload cut during the archive stores nothing and leaves no staging", async () => {
    const fiber = send("upload", "static", await formBody({ name: "half" }, tarOf({ "index.html": "<p>hi</p>", "big.bin": randomBytes(1024 * 1024) }), true))
    await waitFor("the archive being unpacked", () => entries(staging()).some((d) => entries(path.join(staging(), d)).length > 0), 10_000, 20)
    await cut(fiber)
    expect(await recordOf("half")).toBeUndefined()
    expect(await refsOf("half")).toEqual([])
    expect(readdirSync(staging())).toEqual([])
  })

  it("a first upload cut while its files are stored releases their references: the namespace's usage is as before", async () => {
    const usage = await run(index.usage("shop"))
    const fiber = send("upload", "static", await formBody({ name: "many" }, siteTar(1500, "first")))
    await waitFor("the files being stored", async () => (await refsOf("many")).length > 0, 30_000, 5)
    await cut(fiber)
    expect(await recordOf("many")).toBeUndefined()
    expect(await refsOf("many")).toEqual([])
    expect(await run(index.usage("shop"))).toBe(usage)
    expect(readdirSync(staging())).toEqual([])
  }, 60_000)

  it("an update cut while its files are stored releases only what it added: version 1 and its references as they were", async () => {
    const site = await run(deployments.upload("shop", "static", ...bodyArgs(await formBody({ name: "site" }, siteTar(20, "v1")))))
    const refs = await refsOf("site")
    const usage = await run(index.usage("shop"))
    const fiber = send("update", "static", await formBody({ name: "site" }, siteTar(1500, "v2")))
    await waitFor("the new files being stored", async () => (await refsOf("site")).length > refs.length, 30_000, 5)
    await cut(fiber)
    expect(await recordOf("site")).toMatchObject({ version: 1, artifact: site.artifact })
    expect(await refsOf("site")).toEqual(refs)
    expect(await run(index.usage("shop"))).toBe(usage)
    expect(locks.busy()).toEqual([])
  }, 60_000)
})
