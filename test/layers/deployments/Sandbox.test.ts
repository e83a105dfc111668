/**
 * The deployment sandbox (spec §2.7) against a hostile Node.js app (test/fixtures/sandbox): the
 * app runs as its own uid in a real bwrap sandbox with real cgroups and socket rules, tries every
 * way out, and keeps serving on PORT throughout. Runs as root (as CI does); a missing tool fails
 * the suite rather than skipping it. Loopback addresses only: the refused ranges are the
 * sandbox's setting, here the usual internal ranges with loopback narrowed to 127.0.0.0/25, so
 * 127.0.0.7 stands for a private address (refused) and 127.0.0.200 for a public one (reachable).
 * The tenant's environment carries an LD_PRELOAD of a library that records every process loading
 * it: none of the launcher's root processes may.
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { detectLayout } from "../../../src/layers/deployments/sandbox/Cgroups.js"
import { defaultSandboxOptions, launch, type SandboxHandle, sandboxPaths } from "../../../src/layers/deployments/sandbox/Sandbox.js"
import { cidr, internalRanges } from "../../../src/layers/deployments/sandbox/SocketPolicy.js"

const fixtures = path.resolve(import.meta.dirname, "../../fixtures/sandbox")
const fixture = path.join(fixtures, "hostile-app.cjs")
const options = { ...defaultSandboxOptions(), cgroupParent: `portico-test-${process.pid}`, runtimeRoot: path.join(tmpdir(), `portico-sandbox-run-${process.pid}`) }
const privateHost = "127.0.0.7"
const publicHost = "127.0.0.200"
const refuse = [...internalRanges.filter((range) => range.address !== "127.0.0.0"), cidr("127.0.0.0/25")]
const hostSocket = `portico-host-${process.pid}`
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
  const servers: Array<http.Server | net.Server> = []
  let preloadMarker: string

  beforeAll(async () => {
    if (process.getuid?.() !== 0) throw new Error("the sandbox suite runs as root (it creates cgroups and switches uid)")
    for (const tool of [options.bwrap, options.bpfHelper, options.execHelper, "/usr/bin/setpriv"])
      if (!existsSync(tool)) throw new Error(`${tool} is missing: run scripts/engines.sh sandbox`)
    detectLayout()
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
    // raw system calls, as a native or Go app would make them
    execFileSync("gcc", ["-static", "-O2", "-o", path.join(appDir, "escape-probe"), path.join(fixtures, "escape-probe.c")])
    chmodSync(path.join(appDir, "escape-probe"), 0o755)
    // a library recording each process that loads it, where only the host can write
    preloadMarker = path.join(root, "preloaded-by")
    const preload = path.join(dir("tenant-written"), "record.so")
    execFileSync("gcc", ["-shared", "-fPIC", `-DMARKER="${preloadMarker}"`, "-o", preload, path.join(fixtures, "preload-marker.c")])
    chmodSync(preload, 0o755)
    // an abstract Unix socket held by a root process on the host
    const abstract = net.createServer((socket) => socket.end("host"))
    await new Promise<void>((resolve) => abstract.listen({ path: `\0${hostSocket}` }, resolve))
    servers.push(abstract)
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
          refuse,
          env: {
            LD_PRELOAD: preload,
            MULTI_LINE: "one\ntwo=2 'three' $FOUR",
            HOST_SOCKET: hostSocket,
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
    // the tenant's environment reaches the app unchanged, and no root process of the launcher
    expect(r.multiLine).toBe("one\ntwo=2 'three' $FOUR")
    expect(existsSync(preloadMarker) ? readFileSync(preloadMarker, "utf8") : "").not.toMatch(/uid=0 /)
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
    // the kernel's surface: host abstract sockets, namespaces, mounts, chroot, the key store, bpf,
    // io_uring, odd socket families, and a listen() that would pick a port of its own
    expect(r.kernel).toEqual({
      hostAbstractSocket: "EPERM",
      ownAbstractSocket: "ok",
      unshare: "EPERM",
      unshareUser: "EPERM",
      cloneNewUser: "EPERM",
      fork: "ok",
      mountTmpfs: "EPERM",
      chroot: "EPERM",
      addKey: "EPERM",
      keyctl: "EPERM",
      ioUring: "EPERM",
      bpf: "EPERM",
      afAlg: "EAFNOSUPPORT",
      listenUnbound: "EPERM",
      listenUnbound6: "EPERM"
    })
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
