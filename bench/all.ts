/**
 * The bench guard (issue 34): runs every bench in a short mode, one after the other, and prints one
 * table of every target of docs/performance.md (and the push, deploy, proxy, pub/sub and start-up
 * targets of issues 22, 23, 24, 35, 36, 37, 39 and 34) with its value and met / not met, then the numbers reported beside
 * them. Run it before resolving an issue and put its table in the note.
 *
 *   npm run bench                   short mode, quiet machine
 *   npm run bench -- --load         the same beside a CPU-bound busy loop (bench/support/load.ts)
 *   npm run bench -- --only sql,startup
 *   npm run bench -- --full         each bench with its own defaults (the long runs)
 *
 * Each bench runs as `tsx bench/<name>/run.ts` in a process group of its own, with
 * `BENCH_SUMMARY=<run dir>/<name>.json` (bench/support/summary.ts) and the short knobs below,
 * unless the same variable is set in the environment already (an operator's knob wins). Its
 * output goes to `<run dir>/<name>.log`; the table is printed and written to `<run dir>/table.md`.
 * A bench whose tools are missing is listed as not run, with what it needs; one that fails or runs
 * over BENCH_TIMEOUT seconds (600) is listed as failed, with its log's last line. Exit status 1
 * when any bench was not run or failed, else 0 (unmet targets are in the table, not the status).
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { hasRqlited } from "../test/support/rqlited.js"
import type { BenchSummary, TargetResult } from "./support/summary.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "..")

interface Bench {
  readonly name: string
  /** The knobs of the short mode: a few rounds each, the whole guard under 15 minutes on 2 CPUs. */
  readonly short: Readonly<Record<string, string>>
  /** What it needs that is missing, if anything. */
  readonly missing: () => ReadonlyArray<string>
}

const onPath = (command: string) => spawnSync("sh", ["-c", `command -v ${command}`]).status === 0
const need = (...commands: ReadonlyArray<string>) => () => commands.filter((c) => !onPath(c)).map((c) => `${c} on PATH`)
const root_ = () => (process.getuid?.() === 0 ? [] : ["root"])

/** In the order of docs/performance.md's table, then the issues' own targets. */
const benches: ReadonlyArray<Bench> = [
  {
    name: "floor",
    short: { FLOOR_TARGETS: "bare,gateway-key,gateway-jwt", FLOOR_ROUNDS: "2", FLOOR_DURATION: "4", FLOOR_WARMUP: "1" },
    missing: need("wrk", "taskset")
  },
  { name: "cache", short: { CACHE_ROUNDS: "2", CACHE_DURATION: "3" }, missing: need("wrk", "taskset", "redis-server", "redis-benchmark") },
  {
    name: "sql",
    short: { SQL_ROUNDS: "3", SQL_DURATION: "2" },
    missing: () => [...need("wrk", "taskset")(), ...(hasRqlited() ? [] : ["rqlited (bash scripts/engines.sh rqlite)"])]
  },
  { name: "storage", short: { STORAGE_ROUNDS: "2", STORAGE_MIB: "64" }, missing: need("taskset") },
  { name: "push", short: { PUSH_ROUNDS: "3" }, missing: need("taskset") },
  {
    name: "deploy",
    // nginx in front of the same app is the anchor of issue 38's target: where it is not installed
    // the bench still runs, and that row says it was not measured
    short: { DEPLOY_ROUNDS: "2", DEPLOY_DURATION: "4", DEPLOY_STATIC_ROUNDS: "1", ...(onPath("nginx") ? {} : { DEPLOY_REFERENCE: "none" }) },
    missing: () => [...root_(), ...need("wrk", "taskset")()]
  },
  { name: "proxy", short: { PROXY_ROUNDS: "2", PROXY_BYTES: String(64 * 1024 * 1024) }, missing: () => [...root_(), ...need("microsocks", "taskset")()] },
  {
    name: "pubsub",
    short: { PUBSUB_ROUNDS: "3", PUBSUB_MESSAGES: "1000", PUBSUB_IDLE: "10000" },
    missing: need("taskset", "redis-server", "redis-benchmark")
  },
  {
    name: "functions",
    short: { FUNCTIONS_ROUNDS: "3", FUNCTIONS_DURATION: "3", FUNCTIONS_COLD: "7", FUNCTIONS_RUNAWAY: "5" },
    missing: need("taskset", "go")
  },
  {
    name: "cluster",
    short: { CLUSTER_ROUNDS: "3", CLUSTER_DURATION: "3" },
    missing: () => [...need("taskset")(), ...(hasRqlited() ? [] : ["rqlited (bash scripts/engines.sh rqlite)"])]
  },
  {
    name: "vault",
    short: { VAULT_ROUNDS: "3", VAULT_DURATION: "3" },
    missing: () => [...need("taskset")(), ...(hasRqlited() ? [] : ["rqlited (bash scripts/engines.sh rqlite)"])]
  },
  { name: "webrtc", short: { WEBRTC_ROUNDS: "3", WEBRTC_DURATION: "3", WEBRTC_JOINS: "100" }, missing: need("wrk", "taskset", "turnserver") },
  { name: "auth", short: { AUTH_N: "200" }, missing: () => [] },
  { name: "startup", short: { STARTUP_RUNS: "3" }, missing: () => [] }
]

const args = process.argv.slice(2)
const flag = (name: string) => args.includes(`--${name}`)
const onlyAt = args.indexOf("--only")
const only = onlyAt >= 0 ? (args[onlyAt + 1] ?? "").split(",") : undefined
const load = flag("load") || process.env.BENCH_LOAD === "1"
const full = flag("full")
const timeoutS = Math.max(60, Number(process.env.BENCH_TIMEOUT ?? 600))

interface Outcome {
  readonly bench: Bench
  readonly status: "ok" | "not run" | "failed"
  readonly why: string
  readonly seconds: number
  readonly summary: BenchSummary | undefined
}

const lastLine = (file: string) => {
  try {
    const lines = fs.readFileSync(file, "utf8").trim().split("\n")
    return (lines[lines.length - 1] ?? "").slice(0, 200)
  } catch {
    return ""
  }
}

const runBench = (bench: Bench, dir: string): Promise<Outcome> =>
  new Promise((resolve) => {
    const missing = bench.missing()
    if (missing.length > 0) return resolve({ bench, status: "not run", why: `needs ${missing.join(", ")}`, seconds: 0, summary: undefined })
    const summaryFile = path.join(dir, `${bench.name}.json`)
    const log = path.join(dir, `${bench.name}.log`)
    const fd = fs.openSync(log, "w")
    const knobs = full ? {} : Object.fromEntries(Object.entries(bench.short).filter(([k]) => process.env[k] === undefined))
    const env = { ...process.env, ...knobs, BENCH_SUMMARY: summaryFile, BENCH_LOAD: load ? "1" : "0" }
    const started = performance.now()
    process.stderr.write(`[bench] ${bench.name} ${Object.entries(knobs).map(([k, v]) => `${k}=${v}`).join(" ")} (log ${log})\n`)
    const child = spawn(process.execPath, ["--import", "tsx", path.join(here, bench.name, "run.ts")], { cwd: root, env, stdio: ["ignore", fd, fd], detached: true })
    fs.closeSync(fd)
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
    }, timeoutS * 1000)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      // what the bench left in its group (servers, the busy loop) goes with it
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
      } catch {
        // the group is empty
      }
      const seconds = (performance.now() - started) / 1000
      const summary = fs.existsSync(summaryFile) ? (JSON.parse(fs.readFileSync(summaryFile, "utf8")) as BenchSummary) : undefined
      const failed = code !== 0 || summary === undefined
      const why = signal === "SIGKILL" && seconds >= timeoutS ? `over ${timeoutS} s` : `exit ${code ?? signal}: ${lastLine(log)}`
      process.stderr.write(`[bench] ${bench.name} ${failed ? `failed (${why})` : "done"} in ${seconds.toFixed(0)} s\n`)
      resolve({ bench, status: failed ? "failed" : "ok", why: failed ? why : "", seconds, summary })
    })
  })

const valueText = (r: TargetResult) => {
  if (!Number.isFinite(r.value)) return "-"
  switch (r.unit) {
    case "ratio":
      return r.value.toFixed(2)
    case "×":
      return `${r.value.toFixed(2)}×`
    case "MiB":
      return `${r.value.toFixed(1)} MiB`
    case "s":
      return `${r.value.toFixed(2)} s`
    default:
      return `${r.value.toFixed(0)} ${r.unit}`
  }
}

const cell = (text: string) => text.replace(/\|/g, "\\|")

const table = (outcomes: ReadonlyArray<Outcome>, totalSeconds: number) => {
  const rev = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).stdout.trim()
  const loadText = load ? "one busy-loop process, unpinned, during every round" : "none"
  const out: Array<string> = [
    `## Bench guard, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${rev}`,
    "",
    `Mode: ${full ? "full (each bench's defaults)" : "short"}. Background load: ${loadText}. Machine: ${os.cpus().length} CPUs, load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(" ")} at the end. Took ${(totalSeconds / 60).toFixed(1)} min.`,
    "",
    "| target (issue) | bench | anchor | value | target | met | detail |",
    "|---|---|---|---:|---|---|---|"
  ]
  const reportedRows: Array<string> = ["", "Reported beside them, no target:", "", "| what | bench | anchor | value | detail |", "|---|---|---|---:|---|"]
  let met = 0
  let targets = 0
  for (const o of outcomes) {
    if (o.summary === undefined) {
      out.push(`| every target of ${o.bench.name} | ${o.bench.name} | - | - | - | ${o.status}: ${cell(o.why)} | - |`)
      continue
    }
    for (const r of o.summary.results) {
      if (r.goal === undefined) {
        reportedRows.push(`| ${cell(r.target)} | ${o.bench.name} | ${cell(r.anchor)} | ${valueText(r)} | ${cell(r.detail)} |`)
        continue
      }
      targets++
      if (r.met === true) met++
      out.push(`| ${cell(r.target)} | ${o.bench.name} | ${cell(r.anchor)} | ${valueText(r)} | ${cell(r.goal)} | ${r.met === true ? "met" : "**not met**"} | ${cell(r.detail)} |`)
    }
  }
  out.push("", `${met} of ${targets} targets met; ${outcomes.filter((o) => o.status !== "ok").length} bench(es) not run or failed.`)
  const knobs = outcomes.filter((o) => o.summary !== undefined).map((o) => `${o.bench.name}: ${o.summary?.settings ?? ""} (${o.seconds.toFixed(0)} s)`)
  return [...out, ...reportedRows, "", "Settings: " + knobs.join("; ") + "."].join("\n") + "\n"
}

/** wrk is most benches' client: installed as `npm run engines` installs it (the Debian package) when missing. */
const ensureWrk = () => {
  if (onPath("wrk")) return
  process.stderr.write("[bench] wrk missing: bash scripts/engines.sh wrk\n")
  spawnSync("bash", [path.join(root, "scripts/engines.sh"), "wrk"], { cwd: root, stdio: "inherit" })
}

const main = async () => {
  ensureWrk()
  const unknown = only?.filter((n) => !benches.some((b) => b.name === n)) ?? []
  if (unknown.length > 0) throw new Error(`no bench named ${unknown.join(", ")} (benches: ${benches.map((b) => b.name).join(", ")})`)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-all-"))
  const started = performance.now()
  const outcomes: Array<Outcome> = []
  for (const bench of benches.filter((b) => only === undefined || only.includes(b.name))) outcomes.push(await runBench(bench, dir))
  const text = table(outcomes, (performance.now() - started) / 1000)
  fs.writeFileSync(path.join(dir, "table.md"), text)
  process.stdout.write(`\n${text}\n(table and logs in ${dir})\n`)
  process.exitCode = outcomes.every((o) => o.status === "ok") ? 0 : 1
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`)
  process.exit(1)
})
