/**
 * bench/deploy: a deployed Node.js app's small JSON route through the gateway's host routing,
 * against the same app called directly on its port and nginx in front of it, side by side in the
 * same run; and the time from `portico deploy` of a 10 MB static site to the first 200 on its host
 * (reported). Targets (issue 38, which restates issue 23's): the gateway ≥ 0.9 of nginx in front
 * of the same app, and ≥ 0.7 of direct at concurrency 64 whenever nginx itself reaches 0.8 of
 * direct in that run (reported, not held, when it does not; held whatever nginx does when nginx
 * is left out).
 *
 * Layouts (DEPLOY_LAYOUT), the gateway being `portico serve` as `npm start` runs it (compiled,
 * embedded registry):
 * - `one-cpu` (default): the gateway pinned to CPU 0 and the app's sandboxed processes moved onto
 *   CPU 0 too once deployed, so both ways share one CPU's worth of server; wrk on CPU 1. The
 *   harshest view: a proxy on the app's own CPU is charged all its work against the app's.
 * - `free`: nothing pinned (gateway, app, wrk and this driver on both CPUs, as the kernel
 *   schedules them): a multi-core server, where the gateway and a single-threaded app each run
 *   on a CPU of their own, except that here wrk competes with them for the same two.
 * A third side, nginx in front of the same app (reference.ts), is measured in the same rounds: what
 * a proxy written in C gets here, the yardstick for what the hop itself costs on this machine.
 * Each side goes first in turn. Needs root (the sandbox), wrk, taskset, two CPUs and nginx
 * (Debian's nginx-light).
 *
 * Two more sides, the edge's Caddy over plain HTTP (edge.ts): the edge → the gateway → the app
 * (production's path today) and the edge → the app (what routing app hosts straight from the edge
 * would cost at best); reported, issue 38's numbers to choose by.
 *
 * Knobs: DEPLOY_LAYOUT (one-cpu), DEPLOY_REFERENCE (nginx; none leaves it out), DEPLOY_EDGE (none leaves the edge sides out), DEPLOY_ROUNDS (5), DEPLOY_DURATION (10 s per measurement),
 * DEPLOY_CONNECTIONS (64), DEPLOY_STATIC_ROUNDS (3), DEPLOY_PIN_APP (1; 0 leaves the app's
 * processes where the gateway started them, one-cpu layout only),
 * DEPLOY_GATEWAY_NODE_ARGS (extra node flags for the gateway only, e.g. "--cpu-prof
 * --cpu-prof-dir=/tmp/p"; summarise with bench/floor/profile-summary.ts).
 */
import { spawn, spawnSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { freePort, logTail, startPinned, stopAll, waitUntil } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { BENCH_APP } from "../support/app.js"
import { median } from "../support/stats.js"
import { atLeast, reported, rounds as roundsText, writeSummary } from "../support/summary.js"
import { caddyBinary, startEdgeSide } from "./edge.js"
import { startReference } from "./reference.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const num = (name: string, fallback: number) => Math.max(1, Math.round(Number(process.env[name] ?? fallback)))
const rounds = num("DEPLOY_ROUNDS", 5)
const layout = process.env.DEPLOY_LAYOUT === "free" ? "free" : "one-cpu"
/** Where wrk and this driver run. */
const clientCpus = layout === "free" ? "0,1" : "1"
const duration = num("DEPLOY_DURATION", 10)
const connections = num("DEPLOY_CONNECTIONS", 64)
const staticRounds = num("DEPLOY_STATIC_ROUNDS", 3)
const namespace = "deploybench"
const TARGET = 0.7
/** Issue 38: the gateway against nginx in front of the same app, same run. */
const NGINX_TARGET = 0.9
/** Issue 38: how near direct nginx must come for the gateway's own target against direct to hold. */
const NGINX_REACHES = 0.8

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void stopAll().then(() => process.exit(130)))
}

const run = (command: string, args: ReadonlyArray<string>, env?: NodeJS.ProcessEnv) => {
  const out = spawnSync(command, args, { cwd: root, encoding: "utf8", env: env ?? process.env, timeout: 300_000 })
  if (out.status !== 0) throw new Error(`${command} ${args.join(" ")} failed (${out.status ?? out.signal}):\n${out.stdout}\n${out.stderr}`)
  return out.stdout
}

/** Runs a command and answers its milliseconds (spawned, so the driver's clock keeps running). */
const timed = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv) =>
  new Promise<{ ms: number; stdout: string }>((resolve, reject) => {
    const started = performance.now()
    const child = spawn(command, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    child.on("exit", (code) =>
      code === 0 ? resolve({ ms: performance.now() - started, stdout }) : reject(new Error(`${command} ${args.join(" ")} exited ${code}:\n${stdout}\n${stderr}`))
    )
  })

/** One way of reaching the app: its URL, the headers wrk sends, the proxy's processes (none direct). */
interface Side {
  readonly name: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly pids: () => ReadonlyArray<string>
}

interface Sample {
  readonly rps: number
  readonly requests: number
  readonly non2xx: number
  readonly errors: number
}

const wrk = (url: string, headers: Readonly<Record<string, string>>, seconds: number): Sample => {
  const args = ["-c", clientCpus, "wrk", "-t1", `-c${connections}`, `-d${seconds}s`, "--timeout", "5s"]
  for (const [k, v] of Object.entries(headers)) args.push("-H", `${k}: ${v}`)
  args.push(url)
  const text = spawnSync("taskset", args, { encoding: "utf8", timeout: (seconds + 30) * 1000 }).stdout ?? ""
  const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text)
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1] ?? "0"),
    requests: Number(/(\d+) requests in/.exec(text)?.[1] ?? "0"),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? "0"),
    errors: errs === null ? 0 : errs.slice(1).reduce((a, b) => a + Number(b), 0)
  }
}

/** The pids of the deployment's cgroup (`<deployment id>-<port>`: the sandbox names it by both). */
const appPids = (deploymentId: string, port: number) => {
  const procs = ["/sys/fs/cgroup/portico", "/sys/fs/cgroup/pids/portico", "/sys/fs/cgroup/memory/portico"]
    .map((base) => path.join(base, `${deploymentId}-${port}`, "cgroup.procs"))
    .find((file) => fs.existsSync(file))
  if (procs === undefined) throw new Error(`no cgroup found for ${deploymentId}`)
  return fs.readFileSync(procs, "utf8").split("\n").filter((l) => l !== "")
}

/** Moves every process of the deployment's cgroup onto `cpus` (CPU 0: beside the gateway). */
const pinApp = (deploymentId: string, port: number, cpus: string) => {
  for (const pid of appPids(deploymentId, port)) spawnSync("taskset", ["-a", "-p", "-c", cpus, pid])
}

/**
 * CPU seconds (user + system) the processes have used: on a machine others load, throughput
 * moves with their load while CPU time per request barely does, so the report gives both.
 */
const TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100
const cpuSeconds = (pids: ReadonlyArray<string>) =>
  pids.reduce((sum, pid) => {
    try {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
      return sum + (Number(fields[11]) + Number(fields[12])) / TICKS
    } catch {
      return sum
    }
  }, 0)

const APP = BENCH_APP

/** A 10 MB static site: an index page and 40 files of 256 KiB of incompressible bytes. */
const writeStaticSite = (dir: string) => {
  fs.mkdirSync(path.join(dir, "assets"), { recursive: true })
  fs.writeFileSync(path.join(dir, "index.html"), "<!doctype html><title>bench</title><h1>bench</h1>\n")
  for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(dir, "assets", `blob-${i}.bin`), crypto.randomBytes(256 * 1024))
}

const probe = (target: string, headers: Readonly<Record<string, string>>) =>
  new Promise<{ status: number; body: string }>((resolve) => {
    const url = new URL(target)
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, headers }, (res) => {
      let body = ""
      res.on("data", (d: Buffer) => (body += d.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on("error", (error) => resolve({ status: 0, body: error.message }))
    req.end()
  })

const firstOk = async (gateway: string, host: string, deadlineMs: number) => {
  const started = performance.now()
  for (;;) {
    const status = await new Promise<number>((resolve) => {
      const url = new URL(gateway)
      const req = http.request(
        { host: url.hostname, port: url.port, path: "/", headers: { host } },
        (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        }
      )
      req.on("error", () => resolve(0))
      req.end()
    })
    if (status === 200) return
    if (performance.now() - started > deadlineMs) throw new Error(`${host} did not answer 200 within ${deadlineMs} ms (last ${status})`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const main = async () => {
  spawnSync("taskset", ["-a", "-p", "-c", clientCpus, String(process.pid)])
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-deploy-"))
  const dataDir = path.join(dir, "data")
  const env: NodeJS.ProcessEnv = { ...process.env, PORTICO_RATE_LIMIT: "false", PORTICO_LOG_REQUESTS: "false", PORTICO_NODE_ID: "bench" }
  delete env.PORTICO_RQLITE_URL
  try {
    const key = run(process.execPath, ["bin/portico.mjs", "namespace", "create", namespace, "--data-dir", dataDir, "--print", "api_key"], env).trim()
    const port = await freePort()
    const extra = (process.env.DEPLOY_GATEWAY_NODE_ARGS ?? "").split(" ").filter((a) => a !== "")
    const gateway = startPinned("gateway", dir, process.execPath, [...extra, "--enable-source-maps", "bin/portico.mjs", "serve", "--port", String(port), "--data-dir", dataDir], { env })
    await waitUntil(gateway, () => fs.readFileSync(gateway.log, "utf8").includes('"msg":"listening"'))
    // free: the gateway (and the apps it starts later, which inherit its CPUs) on both CPUs
    if (layout === "free") spawnSync("taskset", ["-a", "-p", "-c", "0,1", String(gateway.process.pid)])
    const url = `http://127.0.0.1:${port}`
    const cliEnv = { ...env, PORTICO_URL: url, PORTICO_TOKEN: key }
    const get = async (route: string) => {
      const response = await fetch(url + route, { headers: { authorization: `Bearer ${key}` } })
      if (!response.ok) throw new Error(`GET ${route}: ${response.status} ${await response.text()}`)
      return (await response.json()) as Record<string, unknown>
    }

    // the Node.js app, deployed by the CLI
    const appDir = path.join(dir, "app")
    fs.mkdirSync(appDir)
    fs.writeFileSync(path.join(appDir, "index.js"), APP)
    fs.writeFileSync(path.join(appDir, "package.json"), JSON.stringify({ name: "bench-app", version: "1.0.0", main: "index.js" }))
    await timed(process.execPath, ["bin/portico.mjs", "deploy", appDir, "--name", "api", "--type", "nodejs", "--health-check", "/"], cliEnv)
    const app = await get("/v1/deployments/get?name=api")
    const host = String(app["domain"])
    const appPort = Number(app["port"])
    if (layout === "free") pinApp(String(app["id"]), Number(app["port"]), "0,1")
    else if (process.env.DEPLOY_PIN_APP !== "0") pinApp(String(app["id"]), Number(app["port"]), "0")
    const through = `${url}/items`
    const direct = `http://127.0.0.1:${appPort}/items`

    // one request each way before measuring: a refusal is reported with its answer, not as a rate
    for (const [label, target, headers] of [["gateway", through, { host }], ["direct", direct, {}]] as const) {
      const answer = await probe(target, headers)
      if (answer.status !== 200) throw new Error(`${label} ${target} answered ${answer.status}: ${answer.body}\n${logTail(gateway)}`)
    }
    const reference = process.env.DEPLOY_REFERENCE === "none" ? undefined : await startReference(dir, await freePort(), appPort, layout)
    const withEdge = process.env.DEPLOY_EDGE !== "none" && fs.existsSync(caddyBinary)
    const edge = withEdge ? await startEdgeSide(dir, "edge", await freePort(), `127.0.0.1:${port}`, layout) : undefined
    const edgeApp = withEdge ? await startEdgeSide(dir, "edge-app", await freePort(), `127.0.0.1:${appPort}`, layout) : undefined
    const gatewayPids = [String(gateway.process.pid)]
    const appProcesses = appPids(String(app["id"]), Number(app["port"]))
    const sides: ReadonlyArray<Side> = [
      { name: "gateway", url: through, headers: { Host: host }, pids: () => gatewayPids },
      { name: "direct", url: direct, headers: {}, pids: () => [] },
      ...(reference === undefined ? [] : [{ name: "nginx", url: `${reference.url}/items`, headers: { Host: host }, pids: reference.pids }]),
      // the edge's hop is charged with the gateway's behind it
      ...(edge === undefined ? [] : [{ name: "edge", url: `${edge.url}/items`, headers: { Host: host }, pids: () => [...edge.pids(), ...gatewayPids] }]),
      ...(edgeApp === undefined ? [] : [{ name: "edge-app", url: `${edgeApp.url}/items`, headers: { Host: host }, pids: edgeApp.pids }])
    ]
    // rates, and CPU microseconds per request of the app and of the proxy in front of it
    const samples = new Map(sides.map((side) => [side.name, { rps: [] as Array<number>, app: [] as Array<number>, proxy: [] as Array<number> }]))
    for (const side of sides) wrk(side.url, side.headers, 2)
    for (let r = 1; r <= rounds; r++) {
      // each side goes first in turn
      const order = sides.map((_, i) => sides[(i + r - 1) % sides.length] as Side)
      for (const side of order) {
        const proxyPids = side.pids()
        const before = { proxy: cpuSeconds(proxyPids), app: cpuSeconds(appProcesses) }
        const s = wrk(side.url, side.headers, duration)
        const perRequest = (seconds: number) => (seconds * 1e6) / Math.max(1, s.requests)
        const used = { proxy: perRequest(cpuSeconds(proxyPids) - before.proxy), app: perRequest(cpuSeconds(appProcesses) - before.app) }
        if (s.non2xx + s.errors > 0) throw new Error(`${side.name}: ${s.non2xx} non-2xx, ${s.errors} socket errors\n${logTail(gateway)}`)
        const sample = samples.get(side.name) as { rps: Array<number>; app: Array<number>; proxy: Array<number> }
        sample.rps.push(s.rps)
        sample.app.push(used.app)
        sample.proxy.push(used.proxy)
        process.stdout.write(
          `round ${r} ${side.name.padEnd(8)} ${s.rps.toFixed(0).padStart(7)} req/s, CPU ${(used.app + used.proxy).toFixed(1)} µs/request (app ${used.app.toFixed(1)}, proxy ${used.proxy.toFixed(1)})\n`
        )
      }
    }
    const rps = (name: string) => samples.get(name)?.rps ?? []
    /** Per round: `name`'s rate over `anchor`'s. */
    const ratiosOf = (name: string, anchor: string) => rps(name).map((x, i) => x / (rps(anchor)[i] ?? 1))
    const ratios = ratiosOf("gateway", "direct")

    // the 10 MB static site: command to first 200 on its host
    const site = path.join(dir, "site")
    writeStaticSite(site)
    const deployMs: Array<number> = []
    for (let r = 1; r <= staticRounds; r++) {
      const name = `site${r}`
      const started = performance.now()
      await timed(process.execPath, ["bin/portico.mjs", "deploy", site, "--name", name, "--type", "static"], cliEnv)
      const record = await get(`/v1/deployments/get?name=${name}`)
      await firstOk(url, String(record["domain"]), 60_000)
      const ms = performance.now() - started
      deployMs.push(ms)
      process.stdout.write(`static deploy ${r}: ${ms.toFixed(0)} ms to the first 200\n`)
    }

    const ratio = median(ratios)
    const nginxDirect = reference === undefined ? undefined : median(ratiosOf("nginx", "direct"))
    const cpuOf = (name: string) => {
      const sample = samples.get(name)
      return sample === undefined ? "" : `${name} app ${median(sample.app).toFixed(1)} + proxy ${median(sample.proxy).toFixed(1)}`
    }
    const line = (name: string, anchor: string) => {
      const xs = ratiosOf(name, anchor)
      return `${name}/${anchor} per round ${xs.map((x) => x.toFixed(2)).join(" ")}, median ${median(xs).toFixed(2)}`
    }
    process.stdout.write(
      `\nNode.js JSON route, layout ${layout}, c=${connections}, ${duration}s x ${rounds} rounds: ` +
        sides.map((side) => `${side.name} ${median(rps(side.name)).toFixed(0)} req/s`).join(", ") + "\n" +
        `${line("gateway", "direct")} (target >= ${TARGET}: ${ratio >= TARGET ? "met" : "MISSED"})\n` +
        (reference === undefined ? "" : `${line("nginx", "direct")}; ${line("gateway", "nginx")}\n`) +
        (edge === undefined ? "" : `${line("edge", "direct")}; ${line("edge-app", "direct")}\n`) +
        (edge === undefined || reference === undefined ? "" : `${line("edge", "nginx")}; ${line("edge-app", "nginx")}\n`) +
        `CPU µs per request (medians): ${sides.map((side) => cpuOf(side.name)).join("; ")}\n` +
        `10 MB static site, command to first 200: median ${median(deployMs).toFixed(0)} ms (${deployMs.map((m) => m.toFixed(0)).join(", ")})\n`
    )
    writeSummary("deploy", `DEPLOY_LAYOUT=${layout} DEPLOY_ROUNDS=${rounds} DEPLOY_DURATION=${duration} DEPLOY_STATIC_ROUNDS=${staticRounds}`, [
      // issue 38's targets: >= 0.9 of nginx in front of the same app, same run; and >= 0.7 of the
      // app called directly whenever nginx itself reaches 0.8 of it (issue 23's target, which no
      // proxy reaches on this machine: docs/deployments.md, "Serving"). Without nginx the second
      // is held unconditionally.
      reference === undefined
        ? atLeast(`deployed app through the gateway, c=${connections}, ${layout} (38)`, "nginx in front of the same app", Number.NaN, NGINX_TARGET, "not measured: nginx is not installed (apt-get install nginx-light)")
        : atLeast(`deployed app through the gateway, c=${connections}, ${layout} (38)`, "nginx in front of the same app", median(ratiosOf("gateway", "nginx")), NGINX_TARGET, `rounds ${roundsText(ratiosOf("gateway", "nginx"))}`),
      nginxDirect === undefined || nginxDirect >= NGINX_REACHES
        ? atLeast(`deployed app through the gateway, c=${connections}, ${layout} (23, 38)`, "the app called directly on its port", ratio, TARGET, `rounds ${roundsText(ratios)}`)
        : reported(
            `deployed app through the gateway, c=${connections}, ${layout} (23, 38; held to >= ${TARGET} when nginx reaches ${NGINX_REACHES} of direct)`,
            "the app called directly on its port",
            ratio,
            "ratio",
            `rounds ${roundsText(ratios)}; nginx reached ${nginxDirect.toFixed(2)} of direct`
          ),
      ...(reference === undefined
        ? []
        : [reported(`nginx in front of the same app, ${layout}`, "the app called directly on its port", median(ratiosOf("nginx", "direct")), "ratio", `rounds ${roundsText(ratiosOf("nginx", "direct"))}`)]),
      ...(edge === undefined
        ? []
        : [
            reported(`the edge, then the gateway, in front of the same app, ${layout} (38)`, "the app called directly on its port", median(ratiosOf("edge", "direct")), "ratio", `rounds ${roundsText(ratiosOf("edge", "direct"))}`),
            reported(`the edge straight to the app, ${layout} (38)`, "the app called directly on its port", median(ratiosOf("edge-app", "direct")), "ratio", `rounds ${roundsText(ratiosOf("edge-app", "direct"))}`)
          ]),
      reported("10 MB static site, deploy to first 200 (23)", "-", median(deployMs) / 1000, "s", `runs ${roundsText(deployMs.map((m) => m / 1000))}`)
    ])
  } finally {
    await stopAll()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
  void stopAll().then(() => process.exit(1))
})
