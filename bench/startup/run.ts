/**
 * bench/startup: a gateway's start after a kill -9, to healthy, on embedded engines (the SQLite
 * registry, the in-memory cache, the embedded content engine), with a registry that has something
 * in it: STARTUP_NAMESPACES namespaces (100) with STARTUP_KEYS keys each (12) besides the owner's,
 * about 2,800 rows with their audit rows (fill.ts), and STARTUP_SITES static sites (3) plus
 * STARTUP_APPS Node.js apps (1 when run as root, the sandbox's need; else 0) deployed through the
 * CLI, which every start must bring back.
 *
 * Each run: SIGKILL to the running gateway's process (its pid alone, as `kill -9 <pid>` does; its
 * SQLite workers and apps are left to notice), then `portico serve` again as `npm start` runs it
 * (compiled), unpinned, timed from the spawn to: the "listening" line; the first 200 from
 * `/health` (healthy, the target: ≤ 1.5 s, issue 34); every deployed host answering 200
 * (resumed). The gateway's CPU seconds at healthy are printed beside the wall time (on a busy
 * machine the wall time stretches, the CPU much less). Median of STARTUP_RUNS (5).
 *
 * Then where the time goes: phases.mjs (each step of the start timed on its own, in one process
 * on the same data dir) and, with STARTUP_PROFILE=1 (default), one more start under `--cpu-prof`
 * summarised by self time per area (profile.ts). Knobs also: STARTUP_GATEWAY_NODE_ARGS (extra node
 * flags for the measured starts). Needs dist/ (built first if stale).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { freePort, sleep } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { median } from "../support/stats.js"
import { below, reported, rounds as roundsText, writeSummary } from "../support/summary.js"
import { summarise } from "./profile.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const num = (name: string, fallback: number) => Math.max(0, Math.round(Number(process.env[name] ?? fallback)))
const runs = Math.max(1, num("STARTUP_RUNS", 5))
const namespaceCount = Math.max(1, num("STARTUP_NAMESPACES", 100))
const keyCount = num("STARTUP_KEYS", 12)
const siteCount = num("STARTUP_SITES", 3)
const appCount = num("STARTUP_APPS", process.getuid?.() === 0 ? 1 : 0)
const profile = process.env.STARTUP_PROFILE !== "0"
const TARGET_S = 1.5
const TICKS = 100 // USER_HZ: /proc/<pid>/stat counts CPU in 1/100 s

/** Every process group started, killed at the end whatever happened. */
const groups: Array<number> = []
const killGroups = () => {
  for (const pid of groups) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // gone already
    }
  }
}
process.once("exit", killGroups)
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130))

const run = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv) => {
  const out = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8", env, timeout: 300_000 })
  if (out.status !== 0) throw new Error(`node ${args.join(" ")} failed (${out.status ?? out.signal}):\n${out.stdout}\n${out.stderr}`)
  return out.stdout
}

const status = (port: number, route: string, host?: string) =>
  new Promise<number>((resolve) => {
    const request = http.request({ host: "127.0.0.1", port, path: route, headers: host === undefined ? {} : { host } }, (response) => {
      response.resume()
      resolve(response.statusCode ?? 0)
    })
    request.on("error", () => resolve(0))
    request.setTimeout(5000, () => request.destroy())
    request.end()
  })

const cpuSeconds = (pid: number) => {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
    return (Number(fields[11]) + Number(fields[12])) / TICKS
  } catch {
    return Number.NaN
  }
}

interface Start {
  readonly child: ChildProcess
  readonly listening: number
  readonly healthy: number
  readonly resumed: number
  readonly cpu: number
}

/** Starts `portico serve` and waits for healthy and every host; times from the spawn. */
const start = async (dir: string, port: number, env: NodeJS.ProcessEnv, hosts: ReadonlyArray<string>, extra: ReadonlyArray<string>): Promise<Start> => {
  const log = fs.openSync(path.join(dir, "gateway.log"), "a")
  const started = performance.now()
  const child = spawn(process.execPath, [...extra, "--enable-source-maps", "bin/portico.mjs", "serve", "--port", String(port), "--data-dir", path.join(dir, "data")], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", log],
    detached: true
  })
  fs.closeSync(log)
  if (child.pid !== undefined) groups.push(child.pid)
  let listening = Number.NaN
  let text = ""
  child.stdout?.on("data", (d: Buffer) => {
    if (!Number.isNaN(listening)) return
    text += d.toString()
    if (text.includes('"msg":"listening"')) listening = performance.now() - started
  })
  const deadline = started + 60_000
  const until = async (probe: () => Promise<boolean>) => {
    while (!(await probe())) {
      if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}); see ${dir}/gateway.log`)
      if (performance.now() > deadline) throw new Error(`the gateway not ready after 60 s; see ${dir}/gateway.log`)
      await sleep(5)
    }
    return performance.now() - started
  }
  const healthy = await until(async () => (await status(port, "/health")) === 200)
  const cpu = cpuSeconds(child.pid ?? 0)
  const resumed = await until(async () => (await Promise.all(hosts.map((host) => status(port, "/", host)))).every((s) => s === 200))
  return { child, listening, healthy, resumed, cpu }
}

const kill9 = async (child: ChildProcess) => {
  if (child.exitCode === null && child.signalCode === null) {
    const gone = new Promise((resolve) => child.once("exit", resolve))
    child.kill("SIGKILL")
    await gone
  }
}

const writeSite = (dir: string, i: number) => {
  fs.mkdirSync(path.join(dir, "assets"), { recursive: true })
  fs.writeFileSync(path.join(dir, "index.html"), `<!doctype html><title>site ${i}</title><h1>site ${i}</h1>\n`)
  for (let f = 0; f < 20; f++) fs.writeFileSync(path.join(dir, "assets", `part-${f}.txt`), `${i}-${f} `.repeat(2000))
}

const APP = `const http = require("node:http")
http.createServer((req, res) => { res.setHeader("content-type", "application/json"); res.end('{"ok":true}') }).listen(Number(process.env.PORT), "0.0.0.0")
`

const main = async () => {
  startBackgroundLoad()
  run(["bin/portico.mjs", "--help"], process.env) // compiles dist/ first when it is stale
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-startup-"))
  const env: NodeJS.ProcessEnv = { ...process.env, PORTICO_SKIP_BUILD: "1", PORTICO_LOG_REQUESTS: "false", PORTICO_NODE_ID: "bench" }
  delete env.PORTICO_RQLITE_URL
  delete env.PORTICO_REDIS_URL
  let ok = false
  try {
    const key = run(["--import", "tsx", path.join(here, "fill.ts"), path.join(dir, "data"), String(namespaceCount), String(keyCount)], env).trim()
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    let gateway = await start(dir, port, env, [], [])
    const cliEnv = { ...env, PORTICO_URL: url, PORTICO_TOKEN: key }
    const hosts: Array<string> = []
    const deploy = (source: string, name: string, type: string, more: ReadonlyArray<string> = []) => {
      const out = run(["bin/portico.mjs", "deploy", source, "--name", name, "--type", type, ...more], cliEnv)
      const record = spawnSync("curl", ["-s", "-H", `authorization: Bearer ${key}`, `${url}/v1/deployments/get?name=${name}`], { encoding: "utf8" }).stdout
      const domain = (JSON.parse(record) as { domain?: string }).domain
      if (domain === undefined) throw new Error(`no domain for ${name}: ${out}\n${record}`)
      hosts.push(domain)
    }
    for (let i = 0; i < siteCount; i++) {
      const site = path.join(dir, `site-${i}`)
      writeSite(site, i)
      deploy(site, `site${i}`, "static")
    }
    for (let i = 0; i < appCount; i++) {
      const app = path.join(dir, `app-${i}`)
      fs.mkdirSync(app)
      fs.writeFileSync(path.join(app, "index.js"), APP)
      fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: `startup-app-${i}`, version: "1.0.0", main: "index.js" }))
      deploy(app, `app${i}`, "nodejs", ["--health-check", "/"])
    }
    process.stderr.write(`registry: ${namespaceCount} namespaces, ${namespaceCount * (keyCount + 1)} keys; deployed ${siteCount} static sites, ${appCount} Node.js apps\n`)

    const extra = (process.env.STARTUP_GATEWAY_NODE_ARGS ?? "").split(" ").filter((a) => a !== "")
    const starts: Array<Start> = []
    for (let r = 1; r <= runs; r++) {
      await kill9(gateway.child)
      gateway = await start(dir, port, env, hosts, extra)
      starts.push(gateway)
      process.stderr.write(
        `run ${r}: listening ${(gateway.listening / 1000).toFixed(2)} s, healthy ${(gateway.healthy / 1000).toFixed(2)} s (CPU ${gateway.cpu.toFixed(2)} s), every app answering ${(gateway.resumed / 1000).toFixed(2)} s\n`
      )
    }
    await kill9(gateway.child)

    // where the time goes: the phases, on the same data dir, no gateway running on it
    await sleep(500)
    // the gateway's own log lines come first on stdout; the phases are the last line
    const phaseLines = run([path.join(here, "phases.mjs"), path.join(root, "dist"), path.join(dir, "data"), String(await freePort()), ...hosts], env).trim().split("\n")
    const phases = JSON.parse(phaseLines[phaseLines.length - 1] ?? "{}") as Record<string, readonly [number, number] | null>
    let areas = ""
    if (profile) {
      const profileDir = path.join(dir, "profile")
      // to healthy only: the profile is of the start, and a run's apps are the measured runs' business
      const profiled = await start(dir, port, env, [], [`--cpu-prof`, `--cpu-prof-dir=${profileDir}`, "--cpu-prof-interval=250"])
      const exited = new Promise((resolve) => profiled.child.once("exit", resolve))
      profiled.child.kill("SIGTERM")
      await exited
      const file = fs.readdirSync(profileDir).find((f) => f.endsWith(".cpuprofile"))
      if (file !== undefined) {
        const summary = summarise(path.join(profileDir, file))
        areas =
          `CPU profile of one more start (healthy ${(profiled.healthy / 1000).toFixed(2)} s, then SIGTERM; ${summary.totalMs.toFixed(0)} ms sampled), self time by area:\n` +
          summary.areas.map(([area, ms]) => `  ${ms.toFixed(0).padStart(6)} ms  ${area}`).join("\n") + "\n"
      }
    }

    const med = (pick: (s: Start) => number) => median(starts.map(pick)) / 1000
    const healthy = med((s) => s.healthy)
    process.stdout.write(
      `\nbench/startup: ${runs} starts after kill -9; ${namespaceCount} namespaces, ${namespaceCount * (keyCount + 1)} keys, ${siteCount} static sites, ${appCount} Node.js apps\n` +
        `| measure (median) | seconds | runs |\n|---|---:|---|\n` +
        `| spawn → "listening" | ${med((s) => s.listening).toFixed(2)} | ${roundsText(starts.map((s) => s.listening / 1000))} |\n` +
        `| spawn → /health 200 (target <= ${TARGET_S} s) | ${healthy.toFixed(2)} | ${roundsText(starts.map((s) => s.healthy / 1000))} |\n` +
        `| gateway CPU at healthy | ${med((s) => s.cpu * 1000).toFixed(2)} | ${roundsText(starts.map((s) => s.cpu))} |\n` +
        `| spawn → every app answering | ${med((s) => s.resumed).toFixed(2)} | ${roundsText(starts.map((s) => s.resumed / 1000))} |\n` +
        `\nphases (phases.mjs, one process; wall / CPU ms): ${Object.entries(phases).map(([k, v]) => `${k} ${v === null ? "not reached in 30 s" : `${v[0].toFixed(0)} / ${v[1].toFixed(0)}`}`).join(", ")}\n` +
        areas
    )
    writeSummary("startup", `STARTUP_RUNS=${runs} STARTUP_NAMESPACES=${namespaceCount} STARTUP_KEYS=${keyCount} STARTUP_SITES=${siteCount} STARTUP_APPS=${appCount}`, [
      below("start after kill -9 to healthy, embedded engines (34)", "-", healthy, TARGET_S, "s", `runs ${roundsText(starts.map((s) => s.healthy / 1000))}; CPU ${med((s) => s.cpu * 1000).toFixed(2)} s`, true),
      reported("start after kill -9 to every app answering (34)", "-", med((s) => s.resumed), "s", `${siteCount} static, ${appCount} Node.js`)
    ])
    ok = true
  } finally {
    killGroups()
    if (ok) fs.rmSync(dir, { recursive: true, force: true })
    else process.stderr.write(`kept ${dir}\n`)
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
  process.exit(1)
})
