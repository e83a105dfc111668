/**
 * bench/functions (issue 36): a Go function that parses its JSON input and makes one host call
 * (`cache_get`), invoked through the gateway (`POST /v1/functions/bench/invoke`, an admin key,
 * embedded engines, `portico serve` as `npm start` runs it) and through the anchor (anchor.ts: a
 * bare node:http server instantiating the same compiled module in-process per request and
 * answering the host call itself), side by side in one run, rounds alternating which goes first.
 *
 * Targets:
 *   - warm invokes per second through the gateway >= 0.5 of the anchor's (median of the rounds;
 *     p99 latency of both reported), at FUNCTIONS_CONCURRENCY requests in flight (default 2x CPUs)
 *   - the first call after deploying a module (a fresh CID, so nothing is cached) <= 150 ms
 *     (median of FUNCTIONS_COLD tries, each a new module)
 *   - a function that loops forever, with a 1 s deadline, answered within 10% of it (the largest
 *     of FUNCTIONS_RUNAWAY tries, default 20)
 *
 * Layout: the gateway (and its function runner, which inherits the pinning) and the anchor each
 * on CPU 0, one at a time measured; this driver, the client, on CPU 1. Knobs: FUNCTIONS_ROUNDS
 * (5), FUNCTIONS_DURATION (seconds per side per round, 5), FUNCTIONS_CONCURRENCY,
 * FUNCTIONS_COLD (5), FUNCTIONS_RUNAWAY (20).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { WASM_PAGE_BYTES } from "../../src/domain/WasmBinary.js"
import { goFunction, watModule } from "../../test/support/functions.js"
import { alive, freePort, logTail, startPinned, stop, stopAll, waitUntil } from "../support/children.js"
import { pinSelf } from "../support/processes.js"
import { startBackgroundLoad } from "../support/load.js"
import { median } from "../support/stats.js"
import { atLeast, below, reported, rounds as roundsText, writeSummary } from "../support/summary.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const int = (name: string, fallback: number) => Math.max(1, Math.round(Number(process.env[name] ?? fallback)))
const rounds = int("FUNCTIONS_ROUNDS", 5)
const durationS = int("FUNCTIONS_DURATION", 5)
const concurrency = int("FUNCTIONS_CONCURRENCY", 2 * os.availableParallelism())
const coldTries = int("FUNCTIONS_COLD", 5)
const runawayTries = int("FUNCTIONS_RUNAWAY", 20)
const THROUGHPUT_TARGET = 0.5
const COLD_TARGET_MS = 150
const RUNAWAY_DEADLINE_MS = 1000
const MEMORY_MB = 64
const namespace = "fnbench"
const input = JSON.stringify({ key: "greeting", items: Array.from({ length: 64 }, (_, i) => i) })

for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stopAll().then(() => process.exit(130)))

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })

/** One POST; its status, body and milliseconds. */
const post = (url: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; text: string; ms: number }>((resolve, reject) => {
    const started = performance.now()
    const req = http.request(url, { method: "POST", agent, headers: { "content-length": String(Buffer.byteLength(body)), ...headers } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), ms: performance.now() - started }))
    })
    req.on("error", reject)
    req.end(body)
  })

/** `concurrency` clients posting `input` for `durationS`; requests per second and latency p99. */
const load = async (url: string, headers: Record<string, string>) => {
  const latencies: Array<number> = []
  const until = performance.now() + durationS * 1000
  const started = performance.now()
  const client = async () => {
    while (performance.now() < until) {
      const answer = await post(url, input, headers)
      if (answer.status !== 200) throw new Error(`${url} answered ${answer.status}: ${answer.text.slice(0, 300)}`)
      latencies.push(answer.ms)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client))
  const seconds = (performance.now() - started) / 1000
  latencies.sort((a, b) => a - b)
  return { rps: latencies.length / seconds, p99: latencies[Math.floor(latencies.length * 0.99)] ?? 0 }
}

/** The module with a custom section of random bytes appended: the same code under a new CID. */
const fresh = (wasm: Uint8Array): Uint8Array => {
  const name = new TextEncoder().encode("bench")
  const payload = new Uint8Array(16)
  crypto.getRandomValues(payload)
  const body = [name.length, ...name, ...payload]
  return new Uint8Array([...wasm, 0, body.length, ...body])
}

const main = async () => {
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-functions-"))
  const dataDir = path.join(dir, "data")
  const wasm = goFunction("bench")
  const moduleFile = path.join(dir, "bench.wasm")
  fs.writeFileSync(moduleFile, wasm)
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, PORTICO_RATE_LIMIT: "false", PORTICO_LOG_REQUESTS: "false", PORTICO_NODE_ID: "bench" }
    delete env.PORTICO_RQLITE_URL
    delete env.PORTICO_REDIS_URL
    const created = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts", "namespace", "create", namespace, "--data-dir", dataDir], {
      cwd: root,
      env,
      encoding: "utf8"
    })
    if (created.status !== 0) throw new Error(`namespace create failed: ${created.stderr}`)
    const key = String((JSON.parse(created.stdout) as { api_key: string }).api_key)
    const auth = { authorization: `Bearer ${key}` }

    const gatewayPort = await freePort()
    const gateway = startPinned("gateway", dir, process.execPath, ["--enable-source-maps", "bin/portico.mjs", "serve", "--port", String(gatewayPort), "--data-dir", dataDir], { env })
    await waitUntil(gateway, () => fs.readFileSync(gateway.log, "utf8").includes('"msg":"listening"'))
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`
    const deploy = async (name: string, bytes: Uint8Array, fields: Record<string, string> = {}) => {
      const form = new FormData()
      form.append("name", name)
      for (const [k, v] of Object.entries(fields)) form.append(k, v)
      form.append("wasm", new Blob([bytes]), `${name}.wasm`)
      const res = await fetch(`${gatewayUrl}/v1/functions`, { method: "POST", headers: auth, body: form })
      if (res.status !== 201) throw new Error(`deploy of ${name} answered ${res.status}: ${await res.text()}`)
    }
    await deploy("bench", wasm, { memory_limit_mb: String(MEMORY_MB) })

    const anchorPort = await freePort()
    const anchor = startPinned("anchor", dir, process.execPath, ["--import", "tsx", path.join(here, "anchor.ts"), "serve", String(anchorPort), moduleFile, String((MEMORY_MB * 1024 * 1024) / WASM_PAGE_BYTES)], {
      env,
      pipeStdout: true
    })
    const ready = await readline.createInterface({ input: anchor.process.stdout! })[Symbol.asyncIterator]().next()
    if (ready.value !== "READY") throw new Error(`the anchor did not start\n${logTail(anchor)}`)
    const anchorUrl = `http://127.0.0.1:${anchorPort}/`
    const gatewayInvoke = `${gatewayUrl}/v1/functions/bench/invoke`

    const side = async (which: "gateway" | "anchor") => {
      if (which === "gateway" && !alive(gateway.process)) throw new Error(`the gateway exited\n${logTail(gateway)}`)
      return which === "gateway" ? load(gatewayInvoke, auth) : load(anchorUrl, {})
    }
    // warm-up: both compile their paths and the gateway starts its runner
    await side("gateway")
    await side("anchor")
    const ratios: Array<number> = []
    const results: Array<{ g: { rps: number; p99: number }; a: { rps: number; p99: number } }> = []
    for (let r = 0; r < rounds; r++) {
      const first = r % 2 === 0 ? "anchor" : "gateway"
      const one = await side(first)
      const two = await side(first === "anchor" ? "gateway" : "anchor")
      const [g, a] = first === "gateway" ? [one, two] : [two, one]
      results.push({ g, a })
      ratios.push(g.rps / a.rps)
      console.error(`round ${r + 1}: gateway ${g.rps.toFixed(0)}/s p99 ${g.p99.toFixed(1)} ms, anchor ${a.rps.toFixed(0)}/s p99 ${a.p99.toFixed(1)} ms, ratio ${(g.rps / a.rps).toFixed(2)}`)
    }

    // the first call after a deploy: a module the runner has never compiled
    const cold: Array<number> = []
    for (let i = 0; i < coldTries; i++) {
      const name = `cold-${i}`
      await deploy(name, fresh(wasm))
      const answer = await post(`${gatewayUrl}/v1/functions/${name}/invoke`, input, auth)
      if (answer.status !== 200) throw new Error(`the cold call answered ${answer.status}: ${answer.text}`)
      cold.push(answer.ms)
    }

    // a function that loops forever, stopped at its 1 s deadline
    await deploy("runaway", await watModule(`(module (memory (export "memory") 1) (func (export "_start") (loop $l (br $l))))`), { timeout_seconds: "1" })
    const runaway: Array<number> = []
    for (let i = 0; i < runawayTries; i++) {
      const answer = await post(`${gatewayUrl}/v1/functions/runaway/invoke`, "", auth)
      if (answer.status !== 504) throw new Error(`the runaway answered ${answer.status}: ${answer.text}`)
      runaway.push(answer.ms)
    }

    const ratio = median(ratios)
    const gRps = median(results.map((x) => x.g.rps))
    const aRps = median(results.map((x) => x.a.rps))
    const gP99 = median(results.map((x) => x.g.p99))
    const aP99 = median(results.map((x) => x.a.p99))
    const coldMs = median(cold)
    const runawayMax = Math.max(...runaway)
    console.log(`bench/functions: ${rounds} rounds of ${durationS} s per side, ${concurrency} in flight, module ${(wasm.length / 1024 / 1024).toFixed(1)} MiB`)
    console.log("| measure | gateway | anchor | ratio | target | met |")
    console.log("|---|---:|---:|---:|---|---|")
    console.log(`| warm invokes per second (median) | ${gRps.toFixed(0)} | ${aRps.toFixed(0)} | ${ratio.toFixed(2)} | >= ${THROUGHPUT_TARGET} | ${ratio >= THROUGHPUT_TARGET ? "yes" : "no"} |`)
    console.log(`| p99 latency, ms (median of rounds) | ${gP99.toFixed(1)} | ${aP99.toFixed(1)} | ${(gP99 / aP99).toFixed(2)}x | - | - |`)
    console.log(`| first call after a deploy, ms (median of ${coldTries}) | ${coldMs.toFixed(0)} | - | - | <= ${COLD_TARGET_MS} | ${coldMs <= COLD_TARGET_MS ? "yes" : "no"} |`)
    console.log(`| runaway loop answered, ms (largest of ${runawayTries}, 1 s deadline) | ${runawayMax.toFixed(0)} | - | - | <= ${RUNAWAY_DEADLINE_MS * 1.1} | ${runawayMax <= RUNAWAY_DEADLINE_MS * 1.1 ? "yes" : "no"} |`)
    writeSummary("functions", `FUNCTIONS_ROUNDS=${rounds} FUNCTIONS_DURATION=${durationS} FUNCTIONS_CONCURRENCY=${concurrency}`, [
      atLeast("functions: warm invoke throughput (36)", "bare node:http instantiating the module per request", ratio, THROUGHPUT_TARGET, `rounds ${roundsText(ratios)}`),
      reported("functions: warm invoke p99, gateway over anchor (36)", "same rounds", gP99 / aP99, "×", `gateway ${gP99.toFixed(1)} ms, anchor ${aP99.toFixed(1)} ms`),
      below("functions: first call after a deploy (36)", "-", coldMs, COLD_TARGET_MS, "ms", `tries ${roundsText(cold, 0)}; module ${(wasm.length / 1024 / 1024).toFixed(1)} MiB`, true),
      below("functions: runaway loop stopped, 1 s deadline (36)", "-", runawayMax, RUNAWAY_DEADLINE_MS * 1.1, "ms", `largest of ${runawayTries}; median ${median(runaway).toFixed(0)} ms`, true)
    ])
    await stop(anchor.process, 5000)
    await stop(gateway.process, 10_000)
    fs.rmSync(dir, { recursive: true, force: true })
  } finally {
    agent.destroy()
    await stopAll()
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exitCode = 1
})
