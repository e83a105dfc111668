/**
 * The deployment sandbox (spec §2.7) against a hostile Node.js app (test/fixtures/sandbox): the
 * app runs as its own uid in a real bwrap sandbox with real cgroups and socket rules, tries every
 * way out, and keeps serving on PORT throughout. Runs as root (as CI does); a missing tool fails
 * the suite rather than skipping it. Local addresses only: a private (10.254.0.7) and a public
 * documentation address (198.51.100.7) are put on the loopback interface for the run.
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmdirSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { detectLayout } from "../../../src/layers/deployments/sandbox/Cgroups.js"
import { defaultSandboxOptions, launch, type SandboxHandle, sandboxPaths } from "../../../src/layers/deployments/sandbox/Sandbox.js"

const fixture = path.resolve(import.meta.dirname, "../../fixtures/sandbox/hostile-app.cjs")
const options = { ...defaultSandboxOptions(), cgroupParent: `portico-test-${process.pid}`, runtimeRoot: path.join(tmpdir(), `portico-sandbox-run-${process.pid}`) }
const privateHost = "10.254.0.7"
const publicHost = "198.51.100.7"
const uid = 61_000_123

const get = (port: number, route: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path: route, timeout: 60_000 }, (res) => {
        let body = ""
        res.on("data", (c) => (body += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      .on("error", reject)
  })

const serve = (host: string) =>
  new Promise<http.Server>((resolve) => {
    const server = http.createServer((_, res) => res.end("internal"))
    server.listen(0, host, () => resolve(server))
  })

const freePort = () => 10200 + Math.floor(Math.random() * 9000)

describe("deployment sandbox", () => {
  let root: string
  let handle: SandboxHandle
  let port: number
  const servers: Array<http.Server> = []
  const addresses: Array<string> = []

  beforeAll(async () => {
    if (process.getuid?.() !== 0) throw new Error("the sandbox suite runs as root (it creates cgroups and switches uid)")
    for (const tool of [options.bwrap, options.bpfHelper, "/usr/bin/setpriv", "/usr/sbin/ip"])
      if (!existsSync(tool)) throw new Error(`${tool} is missing: run scripts/engines.sh sandbox`)
    detectLayout()
    for (const address of [privateHost, publicHost]) {
      execFileSync("ip", ["addr", "add", `${address}/32`, "dev", "lo"])
      addresses.push(address)
    }
    root = mkdtempSync(path.join(tmpdir(), "portico-sandbox-"))
    chmodSync(root, 0o755)
    const dir = (name: string) => {
      const d = path.join(root, name)
      mkdirSync(d, { recursive: true, mode: 0o755 })
      chmodSync(d, 0o755)
      return d
    }
    const appDir = dir("apps/mine")
    copyFileSync(fixture, path.join(appDir, "server.cjs"))
    chmodSync(path.join(appDir, "server.cjs"), 0o644)
    writeFileSync(path.join(dir("apps/other"), "secret.js"), "other app's code", { mode: 0o644 })
    writeFileSync(path.join(dir("gateway-data"), "registry.db"), "platform data", { mode: 0o644 })
    const internal = await serve("127.0.0.1")
    const outbound = await serve(publicHost)
    const privateServer = await serve(privateHost)
    servers.push(internal, outbound, privateServer)
    expect((outbound.address() as AddressInfo).port).toBeGreaterThan(0)
    // the private server on the same port as the public one, so only the address differs
    privateServer.close()
    servers.push(await new Promise<http.Server>((resolve) => {
      const s = http.createServer((_, res) => res.end("private"))
      s.listen((outbound.address() as AddressInfo).port, privateHost, () => resolve(s))
    }))
    port = freePort()
    handle = await Effect.runPromise(
      launch(
        {
          deploymentId: `test-${process.pid}`,
          uid,
          appDir,
          stateDir: dir("state/mine"),
          cacheDir: dir("cache/mine"),
          port,
          env: {
            PORT: String(port),
            PORTICO_STATE_DIR: sandboxPaths.state,
            PORTICO_CACHE_DIR: sandboxPaths.cache,
            OTHER_APP_FILE: path.join(root, "apps/other/secret.js"),
            PLATFORM_DATA_FILE: path.join(root, "gateway-data/registry.db"),
            INTERNAL_PORT: String((internal.address() as AddressInfo).port),
            OUTBOUND_HOST: publicHost,
            PRIVATE_HOST: privateHost,
            OUTBOUND_PORT: String((outbound.address() as AddressInfo).port)
          },
          argv: ["/usr/bin/node", "server.cjs"],
          limits: { memoryBytes: 256 * 1024 * 1024, cpus: 1, pids: 64 },
          logFile: path.join(root, "app.log")
        },
        options
      )
    )
    const until = Date.now() + 15_000
    for (;;) {
      try {
        if ((await get(port, "/")).status === 200) break
      } catch (error) {
        if (Date.now() > until) throw new Error(`the app never served: ${String(error)}`)
      }
      await new Promise((r) => setTimeout(r, 100))
    }
  }, 60_000)

  afterAll(async () => {
    if (handle) {
      const exit = await handle.stop(2000)
      expect(exit.signal ?? exit.code).not.toBeUndefined()
    }
    for (const s of servers) s.close()
    for (const address of addresses) execFileSync("ip", ["addr", "del", `${address}/32`, "dev", "lo"])
    if (root) rmSync(root, { recursive: true, force: true })
    rmSync(options.runtimeRoot, { recursive: true, force: true })
    for (const controller of ["memory", "cpu", "cpuacct", "pids", "unified", ""]) {
      const parent = path.join("/sys/fs/cgroup", controller, options.cgroupParent)
      if (existsSync(parent)) rmdirSync(parent) // the parent, empty once the deployment is gone
    }
  }, 30_000)

  it("every escape fails while the app keeps serving on PORT", async () => {
    const answer = await get(port, "/escape")
    expect(answer.status, answer.body).toBe(200)
    const r = JSON.parse(answer.body)
    expect(r.uid).toBe(uid)
    expect(r.gid).toBe(uid)
    // files: nothing outside its own directories, its own code read-only
    expect(r.readOtherApp).toBe("ENOENT")
    expect(r.listOtherApp).toBe("ENOENT")
    expect(r.readPlatformData).toBe("ENOENT")
    expect(r.readShadow).toBe("ENOENT")
    expect(r.writeOwnCode).toBe("EROFS")
    expect(r.createInOwnDir).toBe("EROFS")
    expect(r.chmodOwnCode).toBe("EROFS")
    // private state and cache
    expect(r.stateFileMode).toBe("600")
    expect(r.stateDirMode).toBe("700")
    expect(r.cacheWrite).toBe("ok")
    // its own processes only
    expect(r.visibleProcesses).toBeLessThan(10)
    // sockets: only PORT, no UDP, no internal network, outbound open
    expect(r.bindOtherPort).toBe("EPERM")
    expect(r.bindAnyPort).toBe("EPERM")
    expect(r.udpSocket).toBe("EPERM")
    expect(r.internalRoute).toBe("EPERM")
    expect(r.internalRouteV6).toBe("EPERM")
    expect(r.privateNetwork).toBe("EPERM")
    expect(r.outbound).toBe("ok")
    // no way back to root
    expect(r.setuidRoot.exitCode ?? r.setuidRoot.error).not.toBe(0)
    // process count and memory by the cgroup
    expect(r.forks.refused).toBeGreaterThan(0)
    expect(r.memoryHog.signal).toBe("SIGKILL")
    expect(handle.usage().oomKills).toBeGreaterThanOrEqual(1)
    // still serving after all of it
    expect((await get(port, "/")).status).toBe(200)
  }, 120_000)

  it("reports usage from the cgroup", () => {
    const usage = handle.usage()
    expect(usage.cpuSeconds).toBeGreaterThan(0)
    expect(usage.memoryBytes).toBeGreaterThan(1024 * 1024)
    expect(usage.memoryBytes).toBeLessThanOrEqual(256 * 1024 * 1024)
    expect(usage.pids).toBeGreaterThan(0)
  })

  it("stop ends every process and removes the cgroups", async () => {
    const exit = await handle.stop(2000)
    expect(exit.code === 0 || exit.signal !== null || exit.code !== null).toBe(true)
    await expect(get(port, "/")).rejects.toThrow()
    expect(existsSync(path.join("/sys/fs/cgroup/unified", options.cgroupParent, `test-${process.pid}`))).toBe(false)
  })
})
