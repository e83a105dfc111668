/**
 * Preparing uploaded apps to run (docs/deployments.md, "Preparing an app"): real npm against the
 * registry inside the real sandbox (bwrap, cgroups, socket rules; as root, as CI runs), a Go
 * server compiled here, Next.js's standalone shape, and the start.json each one gets.
 */
import { Effect, Exit } from "effect"
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AppBuildsOptions, type BuildRefused, findNodeTools, makeAppBuilds, type PrepareInput } from "../../../src/layers/deployments/build/AppBuilds.js"
import { npmErrorLine } from "../../../src/layers/deployments/build/NpmInstall.js"
import { defaultLimits, type DeploymentRecord } from "../../../src/layers/deployments/DeploymentRecord.js"
import { defaultSandboxOptions, launch } from "../../../src/layers/deployments/sandbox/Sandbox.js"

const sandbox = { ...defaultSandboxOptions(), cgroupParent: `portico-build-test-${process.pid}`, runtimeRoot: path.join(tmpdir(), `portico-build-run-${process.pid}`) }
const tools = findNodeTools()
const builds = (options: AppBuildsOptions = {}) => makeAppBuilds({ sandbox, ...options })
/** npm cannot run at all with this: a refusal that comes first proves npm never started. */
const noNpm = builds({ npmCli: "/usr/nonexistent/npm-cli.js" })

const msIntegrity = "sha512-6FlzubTLZG3J2a/NVCAleEhjzq5oxgHyaCU9yYXvcLsvoVaHJq/s5xXI6/XXP6tz7R9xAOtHnSO/tXtF3WRTlA=="
const msLock = (name: string) => ({
  name,
  version: "1.0.0",
  lockfileVersion: 3,
  requires: true,
  packages: {
    "": { name, version: "1.0.0", dependencies: { ms: "2.1.3" } },
    "node_modules/ms": { version: "2.1.3", resolved: "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz", integrity: msIntegrity, license: "MIT" }
  }
})

let root: string
let ports = 10200 + Math.floor(Math.random() * 9000)

const record = (type: DeploymentRecord["type"]): DeploymentRecord => {
  const port = ports++
  return {
    id: `d${port.toString(16).padStart(24, "0")}`,
    namespace: "ns",
    name: `app${port}`,
    type,
    status: "deploying",
    version: 1,
    domain: `app${port}.example.test`,
    homeNode: "node-1",
    port,
    artifact: "versions/1",
    contentCid: undefined,
    limits: defaultLimits
  } as unknown as DeploymentRecord
}

/** A version directory whose app/ holds `files` (root-owned, 0755 directories, 0644 files, as extraction leaves them). */
const version = (files: Record<string, string | Uint8Array>): string => {
  const versionDir = mkdtempSync(path.join(root, "v-"))
  chmodSync(versionDir, 0o750)
  const app = path.join(versionDir, "app")
  mkdirSync(app, { mode: 0o755 })
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(app, name)
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 })
    writeFileSync(file, content, { mode: 0o644 })
  }
  return versionDir
}

const run = (service: ReturnType<typeof builds>, input: Omit<PrepareInput, "record"> & { record?: DeploymentRecord }) =>
  Effect.runPromiseExit(service.prepare({ record: record(input.type), ...input }))

const refusal = (exit: Exit.Exit<unknown, BuildRefused>): BuildRefused => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a refusal, got ${JSON.stringify(exit.value)}`)
  const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (failure === undefined) throw new Error(`expected a failure, got ${String(exit.cause)}`)
  return failure
}

const startFile = (versionDir: string) => JSON.parse(readFileSync(path.join(versionDir, "start.json"), "utf8")) as { argv: Array<string>; entry_point: string }
const leftovers = (versionDir: string) => readdirSync(versionDir).filter((name) => name.startsWith(".install-"))

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error("the build suite runs as root (the install runs in the sandbox)")
  if (tools.node === undefined || tools.npmCli === undefined) throw new Error("node and npm must be installed under /usr")
  root = mkdtempSync(path.join(tmpdir(), "portico-builds-"))
  chmodSync(root, 0o755)
})

afterAll(() => {
  rmSync(root, { recursive: true, force: true })
  rmSync(sandbox.runtimeRoot, { recursive: true, force: true })
  for (const controller of ["memory", "cpu", "cpuacct", "pids", "unified", ""]) {
    const parent = path.join("/sys/fs/cgroup", controller, sandbox.cgroupParent)
    if (existsSync(parent)) rmdirSync(parent) // the parent, empty once every install is gone
  }
})

describe("Node.js: the server-side install", () => {
  const appJs = "require('ms'); require('http').createServer((q, s) => s.end('ok')).listen(process.env.PORT)\n"

  it("installs a dependency without a lockfile, runs no lifecycle script, ignores the upload's .npmrc", async () => {
    const versionDir = version({
      // the app's own scripts would fail the install if npm ran them
      "package.json": JSON.stringify({
        name: "with-ms",
        version: "1.0.0",
        main: "server.js",
        scripts: { preinstall: "exit 7", install: "exit 7", postinstall: "exit 7", prepare: "exit 7" },
        dependencies: { ms: "^2.1.3" },
        devDependencies: { "left-pad": "1.3.0" }
      }),
      // a registry that does not exist and scripts switched back on: read, this install fails
      ".npmrc": "registry=http://127.0.0.1:9/\nignore-scripts=false\n",
      "server.js": appJs
    })
    const exit = await run(builds(), { type: "nodejs", versionDir, skipInstall: false })
    expect(Exit.isSuccess(exit) ? exit.value : String(exit)).toEqual({ argv: [tools.node, "server.js"], entryPoint: "server.js" })
    const modules = path.join(versionDir, "app", "node_modules")
    expect(JSON.parse(readFileSync(path.join(modules, "ms", "package.json"), "utf8")).name).toBe("ms")
    // dev dependencies are not installed on the server (--omit=dev)
    expect(existsSync(path.join(modules, "left-pad"))).toBe(false)
    // root-owned with tidy modes, read-only to the app
    for (const entry of [modules, path.join(modules, "ms"), path.join(modules, "ms", "index.js")]) {
      const stat = statSync(entry)
      expect(stat.uid).toBe(0)
      expect(stat.mode & 0o7777).toBe(stat.isDirectory() ? 0o755 : 0o644)
    }
    expect(startFile(versionDir)).toEqual({ argv: [tools.node, "server.js"], entry_point: "server.js" })
    expect(leftovers(versionDir)).toEqual([])
  }, 120_000)

  it("leaves an app the sandbox can start by its start.json: npm start, the installed dependency readable by the app's uid", async () => {
    const server = "const ms = require('ms'); require('http').createServer((q, s) => s.end(String(ms('2h')) + ' ' + process.env.npm_lifecycle_event)).listen(Number(process.env.PORT), '127.0.0.1')\n"
    const versionDir = version({
      "package.json": JSON.stringify({ name: "runs", version: "1.0.0", scripts: { start: "node server.js" }, dependencies: { ms: "^2.1.3" } }),
      "server.js": server
    })
    const app = record("nodejs")
    expect(Exit.isSuccess(await run(builds(), { type: "nodejs", versionDir, skipInstall: false, record: app }))).toBe(true)
    const start = startFile(versionDir)
    expect(start.entry_point).toBe("npm start")
    const dirs = ["state", "cache"].map((name) => {
      const dir = path.join(versionDir, name)
      mkdirSync(dir, { mode: 0o700 })
      return dir
    })
    const handle = await Effect.runPromise(
      launch(
        {
          deploymentId: app.id,
          uid: 61_000_000 + app.port!,
          appDir: path.join(versionDir, "app"),
          stateDir: dirs[0]!,
          cacheDir: dirs[1]!,
          port: app.port!,
          env: { PORT: String(app.port) },
          argv: start.argv,
          limits: { memoryBytes: 512 * 1024 * 1024, cpus: 1, pids: 256 }
        },
        sandbox
      )
    )
    try {
      let answer = ""
      for (let i = 0; i < 100 && answer === ""; i++) {
        answer = await new Promise<string>((resolve) => {
          http.get({ host: "127.0.0.1", port: app.port, path: "/health" }, (res) => {
            let body = ""
            res.on("data", (c) => (body += c))
            res.on("end", () => resolve(body))
          }).on("error", () => setTimeout(() => resolve(""), 100))
        })
      }
      expect(answer).toBe("7200000 start")
    } finally {
      await handle.stop(2000)
    }
  }, 120_000)

  it("installs from the lockfile with npm ci", async () => {
    const versionDir = version({
      "package.json": JSON.stringify({ name: "locked", version: "1.0.0", dependencies: { ms: "2.1.3" } }),
      "package-lock.json": JSON.stringify(msLock("locked")),
      "index.js": appJs
    })
    const exit = await run(builds(), { type: "nodejs", versionDir, skipInstall: false })
    expect(Exit.isSuccess(exit)).toBe(true)
    expect(JSON.parse(readFileSync(path.join(versionDir, "app", "node_modules", "ms", "package.json"), "utf8")).version).toBe("2.1.3")
    expect(startFile(versionDir)).toEqual({ argv: [tools.node, "index.js"], entry_point: "index.js" })
  }, 120_000)

  it("refuses a lockfile out of step with package.json: INSTALL_FAILED with npm's reason, nothing in the app", async () => {
    const versionDir = version({
      "package.json": JSON.stringify({ name: "stale", version: "1.0.0", dependencies: { ms: "2.1.3", "left-pad": "1.3.0" } }),
      "package-lock.json": JSON.stringify(msLock("stale"))
    })
    const failure = refusal(await run(builds(), { type: "nodejs", versionDir, skipInstall: false }))
    expect([failure.status, failure.code]).toEqual([400, "INSTALL_FAILED"])
    expect(failure.reason).toContain("npm ci failed")
    expect(failure.hint).toMatch(/in sync/)
    expect(existsSync(path.join(versionDir, "app", "node_modules"))).toBe(false)
    expect(existsSync(path.join(versionDir, "start.json"))).toBe(false)
    expect(leftovers(versionDir)).toEqual([])
  }, 120_000)

  it("answers a package the registry does not have with INSTALL_FAILED naming it", async () => {
    const missing = `portico-no-such-package-${process.pid}-${Date.now()}`
    const versionDir = version({ "package.json": JSON.stringify({ name: "missing", version: "1.0.0", dependencies: { [missing]: "^1.0.0" } }) })
    const failure = refusal(await run(builds(), { type: "nodejs", versionDir, skipInstall: false }))
    expect([failure.status, failure.code]).toEqual([400, "INSTALL_FAILED"])
    expect(failure.hint).toContain(missing)
    expect(failure.hint).toMatch(/Not Found/)
    expect(existsSync(path.join(versionDir, "app", "node_modules"))).toBe(false)
  }, 120_000)

  it("stops an install at its time limit: INSTALL_FAILED, nothing left behind", async () => {
    const versionDir = version({ "package.json": JSON.stringify({ name: "slow", version: "1.0.0", dependencies: { ms: "^2.1.3" } }) })
    const started = Date.now()
    const failure = refusal(await run(builds({ installTimeoutMs: 200 }), { type: "nodejs", versionDir, skipInstall: false }))
    expect([failure.status, failure.code]).toEqual([400, "INSTALL_FAILED"])
    expect(failure.reason).toContain("did not finish")
    expect(Date.now() - started).toBeLessThan(20_000)
    expect(existsSync(path.join(versionDir, "app", "node_modules"))).toBe(false)
    expect(leftovers(versionDir)).toEqual([])
  }, 60_000)

  it("lets the install connect to the registry proxy only: a direct connection is refused by the kernel", async () => {
    // a stand-in for npm, run exactly where npm runs: it reports what it could reach and exits
    // non-zero, so the report comes back as the install's refusal
    const probe = [
      "const net = require('net')",
      "const reach = (host, port) => new Promise((done) => { const s = net.connect({ host, port }); s.once('connect', () => { s.destroy(); done('connected') }); s.once('error', (e) => done(e.code)) })",
      "const proxy = new URL(process.env.npm_config_https_proxy)",
      "const fs = require('fs')",
      "const seen = { project: fs.readdirSync('/var/lib/app/state').sort(), config: fs.readdirSync('/app').sort(), env: Object.keys(process.env).filter((k) => !/^(PATH|HOME|PWD|SHLVL|_|npm_config_\\w+)$/.test(k)), uid: process.getuid() }",
      "Promise.all([reach('203.0.113.80', 443), reach('127.0.0.1', Number(proxy.port) + 1), reach(proxy.hostname, Number(proxy.port))])",
      ".then(([direct, loopback, viaProxy]) => { console.log('npm error ' + JSON.stringify({ direct, loopback, viaProxy, ...seen })); process.exit(3) })"
    ].join("\n")
    const versionDir = version({
      "package.json": JSON.stringify({ name: "probe", version: "1.0.0", dependencies: { ms: "^2.1.3" } }),
      ".npmrc": "//registry.npmjs.org/:_authToken=tenant-secret\n",
      "server.js": "secret code\n"
    })
    const probeRecord = record("nodejs")
    const failure = refusal(await run(builds({ npmCli: `--eval=${probe}` }), { type: "nodejs", versionDir, skipInstall: false, record: probeRecord }))
    expect(failure.code).toBe("INSTALL_FAILED")
    const seen = JSON.parse(failure.hint ?? "")
    expect(seen).toMatchObject({ direct: "EPERM", loopback: "EPERM", viaProxy: "connected", uid: 61_000_000 + probeRecord.port! })
    // copies of package.json only (no lockfile here); our two empty npm configs; none of the gateway's environment
    expect(seen.project).toEqual(["package.json"])
    expect(seen.config).toEqual(["npmrc-global", "npmrc-user"])
    expect(seen.env).toEqual([])
  }, 60_000)

  it.each([
    ["git", { dependencies: { ms: "git+https://github.com/vercel/ms.git" } }, "ms"],
    ["GitHub shorthand", { dependencies: { shorty: "vercel/ms" } }, "shorty"],
    ["file", { dependencies: { local: "file:../other" } }, "local"],
    ["URL in overrides", { dependencies: { ms: "^2.1.3" }, overrides: { ms: "https://example.test/ms.tgz" } }, "ms"],
    ["workspaces", { dependencies: { ms: "^2.1.3" }, workspaces: ["packages/*"] }, "workspaces"],
    // npm resolves the whole tree before omitting dev dependencies: these are refused with no runtime dependency at all
    ["git devDependency alone", { devDependencies: { tool: "github:someone/tool" } }, "tool"],
    ["git override alone", { overrides: { ms: "git+https://github.com/vercel/ms.git" } }, "ms"],
    ["workspaces alone", { workspaces: ["packages/*"] }, "workspaces"]
  ])("refuses a %s dependency with 500 DEPENDENCY_REFUSED before npm runs", async (_, fields, named) => {
    const versionDir = version({ "package.json": JSON.stringify({ name: "refused", version: "1.0.0", ...fields }) })
    const failure = refusal(await run(noNpm, { type: "nodejs", versionDir, skipInstall: false }))
    expect([failure.status, failure.code]).toEqual([500, "DEPENDENCY_REFUSED"])
    expect(failure.reason).toContain(named)
    // the hint says what to do, not the reason again
    expect(failure.hint).toBe(`to use '${named}', upload the app with its node_modules installed (the server then installs nothing)`)
    expect(leftovers(versionDir)).toEqual([])
  })

  it("tells the caller when an install begins (its time limit), and not when nothing is installed", async () => {
    const calls: Array<number> = []
    const onInstall = (timeoutMs: number) => Effect.sync(() => void calls.push(timeoutMs))
    const installing = version({ "package.json": JSON.stringify({ name: "announced", version: "1.0.0", dependencies: { ms: "^2.1.3" } }) })
    // npm cannot run here: the install fails after it was announced
    await run(builds({ npmCli: "/usr/nonexistent/npm-cli.js", installTimeoutMs: 90_000 }), { type: "nodejs", versionDir: installing, skipInstall: false, onInstall })
    expect(calls).toEqual([90_000])
    const skipped = version({ "package.json": JSON.stringify({ name: "quiet", version: "1.0.0", dependencies: { ms: "^2.1.3" } }) })
    await run(noNpm, { type: "nodejs", versionDir: skipped, skipInstall: true, onInstall })
    const refused = version({ "package.json": JSON.stringify({ name: "refused", version: "1.0.0", dependencies: { ms: "github:vercel/ms" } }) })
    await run(noNpm, { type: "nodejs", versionDir: refused, skipInstall: false, onInstall })
    expect(calls).toEqual([90_000])
  })

  it("installs nothing for registry devDependencies alone, or without a package.json", async () => {
    const devOnly = version({ "package.json": JSON.stringify({ name: "dev-only", version: "1.0.0", devDependencies: { "left-pad": "1.3.0" } }) })
    expect(Exit.isSuccess(await run(noNpm, { type: "nodejs", versionDir: devOnly, skipInstall: false }))).toBe(true)
    expect(existsSync(path.join(devOnly, "app", "node_modules"))).toBe(false)
    const bare = version({ "index.js": "require('http').createServer((q, s) => s.end('ok')).listen(process.env.PORT)\n" })
    expect(Exit.isSuccess(await run(noNpm, { type: "nodejs", versionDir: bare, skipInstall: false }))).toBe(true)
  })

  it("refuses a lockfile entry resolved off the public registry", async () => {
    const lock = msLock("elsewhere")
    lock.packages["node_modules/ms"].resolved = "https://registry.example.test/ms/-/ms-2.1.3.tgz"
    const versionDir = version({
      "package.json": JSON.stringify({ name: "elsewhere", version: "1.0.0", dependencies: { ms: "2.1.3" } }),
      "package-lock.json": JSON.stringify(lock)
    })
    const failure = refusal(await run(noNpm, { type: "nodejs", versionDir, skipInstall: false }))
    expect([failure.status, failure.code]).toEqual([500, "DEPENDENCY_REFUSED"])
    expect(failure.reason).toContain("'ms'")
  })

  it("uses an uploaded node_modules as it is, and skip_install installs nothing", async () => {
    const uploaded = version({
      "package.json": JSON.stringify({ name: "bundled", version: "1.0.0", dependencies: { ms: "git+https://github.com/vercel/ms.git" } }),
      "node_modules/ms/index.js": "module.exports = 'uploaded'\n"
    })
    expect(Exit.isSuccess(await run(noNpm, { type: "nodejs", versionDir: uploaded, skipInstall: false }))).toBe(true)
    expect(readFileSync(path.join(uploaded, "app", "node_modules", "ms", "index.js"), "utf8")).toBe("module.exports = 'uploaded'\n")

    const skipped = version({ "package.json": JSON.stringify({ name: "skipped", version: "1.0.0", dependencies: { ms: "^2.1.3" } }) })
    expect(Exit.isSuccess(await run(noNpm, { type: "nodejs", versionDir: skipped, skipInstall: true }))).toBe(true)
    expect(existsSync(path.join(skipped, "app", "node_modules"))).toBe(false)
    expect(startFile(skipped)).toEqual({ argv: [tools.node, "index.js"], entry_point: "index.js" })
  })

  it("starts by npm start, main, or index.js (spec §4.8)", async () => {
    const npmStart = version({ "package.json": JSON.stringify({ name: "s", version: "1.0.0", main: "lib/x.js", scripts: { start: "node lib/x.js" } }) })
    await run(noNpm, { type: "nodejs", versionDir: npmStart, skipInstall: false })
    expect(startFile(npmStart)).toEqual({ argv: [tools.node, "/usr/nonexistent/npm-cli.js", "start", "--no-update-notifier", "--logs-max=0"], entry_point: "npm start" })

    const main = version({ "package.json": JSON.stringify({ name: "m", version: "1.0.0", main: "./lib/x.js" }) })
    await run(noNpm, { type: "nodejs", versionDir: main, skipInstall: false })
    expect(startFile(main)).toEqual({ argv: [tools.node, "lib/x.js"], entry_point: "lib/x.js" })

    const bare = version({ "index.js": "" })
    await run(noNpm, { type: "nodejs", versionDir: bare, skipInstall: false })
    expect(startFile(bare)).toEqual({ argv: [tools.node, "index.js"], entry_point: "index.js" })
  })

  it("refuses a package.json that is not JSON or whose main leaves the app (400)", async () => {
    for (const text of ["{ not json", JSON.stringify({ name: "x", main: "../outside.js" })]) {
      const versionDir = version({ "package.json": text })
      const failure = refusal(await run(noNpm, { type: "nodejs", versionDir, skipInstall: false }))
      expect([failure.status, failure.code]).toEqual([400, "VALIDATION_FAILED"])
      expect(existsSync(path.join(versionDir, "start.json"))).toBe(false)
    }
  })

  it("refuses package files past what the server reads, or that are not files, before reading them (400)", async () => {
    const bigPackage = version({ "package.json": "{}" })
    truncateSync(path.join(bigPackage, "app", "package.json"), 1024 * 1024 + 1)
    const bigLock = version({ "package.json": JSON.stringify({ name: "l", version: "1.0.0", dependencies: { "left-pad": "1.3.0" } }), "package-lock.json": "{}" })
    truncateSync(path.join(bigLock, "app", "package-lock.json"), 32 * 1024 * 1024 + 1)
    const directory = version({ "package.json/x": "" })
    for (const [versionDir, reason] of [[bigPackage, /^package\.json is 1048577 bytes, over the 1 MiB/], [bigLock, /^package-lock\.json is 33554433 bytes, over the 32 MiB/], [directory, /^package\.json is not a regular file/]] as const) {
      const failure = refusal(await run(noNpm, { type: "nodejs", versionDir, skipInstall: false }))
      expect([failure.status, failure.code]).toEqual([400, "VALIDATION_FAILED"])
      expect(failure.reason).toMatch(reason)
      expect(existsSync(path.join(versionDir, "start.json"))).toBe(false)
    }
  })

  it("reads the cause out of npm's error output", () => {
    const log = [
      "npm error code E404",
      "npm error 404 Not Found - GET https://registry.npmjs.org/nope - Not found",
      "npm error 404",
      "npm error 404  'nope@*' is not in this registry.",
      "npm error A complete log of this run can be found in: /var/lib/app/cache/npm/_logs/x.log"
    ].join("\n")
    expect(npmErrorLine(log)).toBe("Not Found - GET https://registry.npmjs.org/nope - Not found")
    expect(npmErrorLine("npm warn deprecated\n")).toBeUndefined()
  })
})

describe("Go", () => {
  let binaries: { amd64: Uint8Array; arm64: Uint8Array }

  beforeAll(() => {
    const src = mkdtempSync(path.join(root, "go-"))
    writeFileSync(path.join(src, "go.mod"), "module example.test/hello\n\ngo 1.21\n")
    writeFileSync(
      path.join(src, "main.go"),
      'package main\n\nimport (\n\t"net/http"\n\t"os"\n)\n\nfunc main() {\n\thttp.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })\n\thttp.ListenAndServe(":"+os.Getenv("PORT"), nil)\n}\n'
    )
    const build = (arch: string) => {
      const out = path.join(src, `app-${arch}`)
      execFileSync("go", ["build", "-o", out, "."], {
        cwd: src,
        env: { ...process.env, CGO_ENABLED: "0", GOOS: "linux", GOARCH: arch, GOFLAGS: "-mod=mod", GOPROXY: "off" },
        stdio: "pipe"
      })
      return readFileSync(out)
    }
    binaries = { amd64: build("amd64"), arm64: build("arm64") }
  }, 180_000)

  it("accepts an x86-64 ELF `app` and starts it as ./app", async () => {
    const versionDir = version({ app: binaries.amd64, "static/x.txt": "x" })
    const exit = await run(noNpm, { type: "go", versionDir, skipInstall: false })
    expect(Exit.isSuccess(exit) ? exit.value : String(exit)).toEqual({ argv: ["./app"], entryPoint: "app" })
    expect(startFile(versionDir)).toEqual({ argv: ["./app"], entry_point: "app" })
    // executable even though the upload's mode lost the bit
    expect(statSync(path.join(versionDir, "app", "app")).mode & 0o777).toBe(0o755)
  })

  it.each<[string, () => Record<string, string | Uint8Array>]>([
    ["missing", () => ({})],
    ["a shell script", () => ({ app: "#!/bin/sh\nexec sleep 1\n" })],
    ["an arm64 build", () => ({ app: binaries.arm64 })],
    ["a directory", () => ({ "app/main": "x" })]
  ])("refuses an `app` that is %s (400 with the build hint)", async (_, files) => {
    const versionDir = version(files())
    const failure = refusal(await run(noNpm, { type: "go", versionDir, skipInstall: false }))
    expect([failure.status, failure.code]).toEqual([400, "VALIDATION_FAILED"])
    expect(failure.hint).toContain("CGO_ENABLED=0 GOOS=linux GOARCH=amd64")
    expect(existsSync(path.join(versionDir, "start.json"))).toBe(false)
  })
})

describe("Next.js", () => {
  it("starts a standalone build's server.js with node", async () => {
    const versionDir = version({ "server.js": "require('next')\n", ".next/static/a.js": "", "public/favicon.ico": "" })
    const exit = await run(noNpm, { type: "nextjs", versionDir, skipInstall: false })
    expect(Exit.isSuccess(exit) ? exit.value : String(exit)).toEqual({ argv: [tools.node, "server.js"], entryPoint: "server.js" })
    expect(startFile(versionDir)).toEqual({ argv: [tools.node, "server.js"], entry_point: "server.js" })
  })

  it("refuses an upload without server.js (not standalone output)", async () => {
    const versionDir = version({ ".next/BUILD_ID": "x", "package.json": "{}" })
    const failure = refusal(await run(noNpm, { type: "nextjs", versionDir, skipInstall: false }))
    expect([failure.status, failure.code]).toEqual([400, "VALIDATION_FAILED"])
    expect(failure.hint).toContain("standalone")
  })
})
