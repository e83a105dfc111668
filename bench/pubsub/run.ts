/**
 * bench/pubsub (issue 35 "Speed", docs/pubsub.md): one publisher over keep-alive HTTP, 200
 * WebSocket subscribers of one topic on one gateway, 256-byte payloads. Side by side in one run,
 * rounds alternating which side goes first:
 *
 *   - the gateway (`portico serve` as `npm start` runs it, embedded registry, rate limits and
 *     request log off, an owner key) on its embedded bus, against the bare anchor
 *     (bench/pubsub/anchor.ts: node:http + ws, the same fan-out and envelope, no rules);
 *   - the same with the Redis engine (PORTICO_PUBSUB_REDIS_URL), against the anchor relaying
 *     through the same Redis (ioredis PUBLISH, one subscriber connection).
 *
 * Targets: delivered messages per second (messages × subscribers over the time from the first
 * publish to the last delivery) ≥ 0.5 of the anchor's, median of the per-round ratios; p99
 * publish-to-receive ≤ 3 × the anchor's (median of the per-round ratios of p99s). Reported:
 * `redis-benchmark PUBLISH` on the same machine, and the gateway's RSS per idle subscriber with
 * PUBSUB_IDLE (10000) sockets open on its embedded bus (spread over 100 topics).
 *
 * Layout: the servers (gateway, anchor) pinned to CPU 0; this driver, redis-server and the
 * client processes (bench/pubsub/clients.ts, one per side, the same code) on CPU 1.
 *
 * Knobs: PUBSUB_ROUNDS (5), PUBSUB_MESSAGES (2000 per round), PUBSUB_SUBSCRIBERS (200),
 * PUBSUB_IN_FLIGHT (16 publishes at a time), PUBSUB_IDLE (10000), PUBSUB_ENGINES ("embedded,redis").
 * Needs taskset, two CPUs, redis-server and redis-benchmark (`scripts/engines.sh redis`).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { startRedis } from "../../test/support/redis.js"
import { alive, freePort, logTail, startPinned, stopAll, waitUntil } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { pinSelf, vmRss } from "../support/processes.js"
import { median } from "../support/stats.js"
import { atLeast, below, reported, rounds as roundsText, writeSummary } from "../support/summary.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const rounds = Math.max(1, Number(process.env.PUBSUB_ROUNDS ?? 5))
const messages = Math.max(10, Number(process.env.PUBSUB_MESSAGES ?? 2000))
const subscribers = Math.max(1, Number(process.env.PUBSUB_SUBSCRIBERS ?? 200))
const inFlight = Math.max(1, Number(process.env.PUBSUB_IN_FLIGHT ?? 16))
const idle = Math.max(0, Number(process.env.PUBSUB_IDLE ?? 10_000))
const engines = (process.env.PUBSUB_ENGINES ?? "embedded,redis").split(",").filter((e) => e === "embedded" || e === "redis")
const THROUGHPUT_TARGET = 0.5
const P99_TARGET = 3

interface RunResult {
  readonly ms: number
  readonly delivered: number
  readonly p50: number
  readonly p99: number
}

/** A clients process (clients.ts) on this driver's CPU; `ask` sends a command and reads its answer. */
const startClients = (dir: string, name: string) => {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(here, "clients.ts")], {
    cwd: root,
    stdio: ["pipe", "pipe", fs.openSync(path.join(dir, `${name}.log`), "a")]
  })
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const ask = async <A>(command: Record<string, unknown>): Promise<A> => {
    child.stdin!.write(JSON.stringify(command) + "\n")
    const line = await lines.next()
    if (line.done === true) throw new Error(`${name} exited`)
    const answer = JSON.parse(line.value) as A & { error?: string }
    if (answer.error !== undefined) throw new Error(`${name}: ${answer.error}`)
    return answer
  }
  return { child, ask }
}

const startGateway = async (dir: string, dataDir: string, extraEnv: Record<string, string>) => {
  const port = await freePort()
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORTICO_RATE_LIMIT: "false",
    PORTICO_LOG_REQUESTS: "false",
    PORTICO_PUBSUB_SOCKETS_PER_USER: String(Math.max(subscribers, idle) + 10),
    PORTICO_PUBSUB_SOCKETS_PER_NODE: String(Math.max(subscribers, idle) + 10),
    ...extraEnv
  }
  delete env.PORTICO_REDIS_URL
  const child = startPinned(`gateway-${extraEnv["PORTICO_PUBSUB_REDIS_URL"] === undefined ? "embedded" : "redis"}`, dir, process.execPath, [
    "--enable-source-maps",
    "bin/portico.mjs",
    "serve",
    "--port",
    String(port),
    "--data-dir",
    dataDir
  ], { env })
  await waitUntil(child, () => fs.readFileSync(child.log, "utf8").includes('"msg":"listening"'))
  return { child, url: `http://127.0.0.1:${port}` }
}

const startAnchor = async (dir: string, redisUrl: string | undefined) => {
  const port = await freePort()
  const child = startPinned(`anchor-${redisUrl === undefined ? "embedded" : "redis"}`, dir, process.execPath, ["--import", "tsx", path.join(here, "anchor.ts")], {
    env: { ...process.env, ANCHOR_PORT: String(port), ...(redisUrl === undefined ? {} : { ANCHOR_REDIS_URL: redisUrl }) }
  })
  await waitUntil(child, () => fs.readFileSync(child.log, "utf8").includes("listening"))
  return { child, url: `http://127.0.0.1:${port}` }
}

const redisBenchmark = (port: number) => {
  const run = spawnSync("redis-benchmark", ["-p", String(port), "-q", "-n", "100000", "-c", "16", "-d", "256", "PUBLISH", "bench", "x".repeat(256)], { encoding: "utf8" })
  const rate = /([\d.]+) requests per second/.exec(run.stdout)?.[1]
  return rate === undefined ? NaN : Number(rate)
}

const main = async () => {
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-pubsub-"))
  const dataDir = path.join(dir, "data")
  const redis = await Effect.runPromise(startRedis({ maxmemory: "256mb" }))
  const clients: Array<ChildProcess> = []
  try {
    const created = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts", "namespace", "create", "bench", "--data-dir", dataDir], { cwd: root, encoding: "utf8" })
    if (created.status !== 0) throw new Error(`namespace create failed: ${created.stderr}`)
    const token = String((JSON.parse(created.stdout.trim().split("\n").pop() ?? "{}") as { api_key?: string }).api_key)
    const results = []
    const table: Array<string> = []
    let idlePerSocket = NaN
    for (const engine of engines) {
      const redisUrl = engine === "redis" ? redis.url : undefined
      const gateway = await startGateway(dir, dataDir, redisUrl === undefined ? {} : { PORTICO_PUBSUB_REDIS_URL: redisUrl })
      const anchor = await startAnchor(dir, redisUrl)
      const gw = startClients(dir, `clients-gateway-${engine}`)
      const an = startClients(dir, `clients-anchor-${engine}`)
      clients.push(gw.child, an.child)
      await gw.ask({ cmd: "open", url: gateway.url, query: "/v1/pubsub/ws?topic=bench", count: subscribers, token })
      await an.ask({ cmd: "open", url: anchor.url, query: "/ws?topic=bench", count: subscribers })
      const runOn = (side: "gateway" | "anchor", count = messages) =>
        side === "gateway"
          ? gw.ask<RunResult>({ cmd: "run", url: gateway.url, path: "/v1/pubsub/publish", topic: "bench", messages: count, inFlight, token })
          : an.ask<RunResult>({ cmd: "run", url: anchor.url, path: "/publish", topic: "bench", messages: count, inFlight })
      await runOn("gateway", Math.ceil(messages / 4))
      await runOn("anchor", Math.ceil(messages / 4))
      const ratios: Array<number> = []
      const p99Ratios: Array<number> = []
      for (let r = 0; r < rounds; r++) {
        for (const c of [gateway.child, anchor.child]) if (!alive(c.process)) throw new Error(`${c.name} exited\n${logTail(c)}`)
        const order = r % 2 === 0 ? (["anchor", "gateway"] as const) : (["gateway", "anchor"] as const)
        const got: Partial<Record<"gateway" | "anchor", RunResult>> = {}
        for (const side of order) got[side] = await runOn(side)
        const g = got.gateway!
        const a = got.anchor!
        const gRate = g.delivered / (g.ms / 1000)
        const aRate = a.delivered / (a.ms / 1000)
        ratios.push(gRate / aRate)
        p99Ratios.push(g.p99 / a.p99)
        console.error(
          `${engine} round ${r + 1}: gateway ${gRate.toFixed(0)}/s p50 ${g.p50.toFixed(1)} p99 ${g.p99.toFixed(1)} ms; anchor ${aRate.toFixed(0)}/s p50 ${a.p50.toFixed(1)} p99 ${a.p99.toFixed(1)} ms; ratio ${(gRate / aRate).toFixed(2)}, p99 × ${(g.p99 / a.p99).toFixed(2)}`
        )
      }
      const ratio = median(ratios)
      const p99 = median(p99Ratios)
      table.push(`| ${engine} | delivered messages/s | ${ratio.toFixed(2)} | >= ${THROUGHPUT_TARGET} | ${ratio >= THROUGHPUT_TARGET ? "yes" : "no"} | ${roundsText(ratios)} |`)
      table.push(`| ${engine} | p99 publish to receive, × the anchor's | ${p99.toFixed(2)} | <= ${P99_TARGET} | ${p99 <= P99_TARGET ? "yes" : "no"} | ${roundsText(p99Ratios)} |`)
      results.push(
        atLeast(`pub/sub delivered messages/s, ${engine} (35)`, `node:http + ws fan-out${engine === "redis" ? " through the same Redis" : ""}, same clients`, ratio, THROUGHPUT_TARGET, `rounds ${roundsText(ratios)}`),
        below(`pub/sub p99 publish to receive, ${engine}, × the anchor's (35)`, "the same anchor", p99, P99_TARGET, "×", `rounds ${roundsText(p99Ratios)}`, true)
      )
      await gw.ask({ cmd: "close" })
      await an.ask({ cmd: "close" })
      if (engine === "embedded" && idle > 0) {
        // idle sockets: RSS before and after opening them, each after the gateway settled
        await new Promise((r) => setTimeout(r, 2000))
        const before = vmRss(gateway.child.process.pid!)
        const per = Math.ceil(idle / 100)
        for (let t = 0; t < 100 && t * per < idle; t++) await gw.ask({ cmd: "open", url: gateway.url, query: `/v1/pubsub/ws?topic=idle${t}`, count: Math.min(per, idle - t * per), token })
        await new Promise((r) => setTimeout(r, 3000))
        idlePerSocket = (vmRss(gateway.child.process.pid!) - before) / idle
        await gw.ask({ cmd: "close" })
      }
      for (const c of [gw.child, an.child]) c.stdin!.end()
      await stopAll()
    }
    const publishRate = redisBenchmark(redis.port)
    console.log(`bench/pubsub: ${subscribers} subscribers, ${messages} messages of 256 bytes per round, ${inFlight} in flight, ${rounds} rounds`)
    console.log("| engine | measure | gateway / anchor | target | met | rounds |")
    console.log("|---|---|---:|---|---|---|")
    for (const row of table) console.log(row)
    console.log(`redis-benchmark PUBLISH (256 bytes, 16 clients): ${publishRate.toFixed(0)}/s`)
    console.log(`gateway RSS per idle subscriber (${idle} sockets, embedded bus): ${(idlePerSocket / 1024).toFixed(1)} KiB`)
    results.push(
      reported("redis-benchmark PUBLISH, 256 bytes, 16 clients", "-", publishRate, "/s", "the machine's Redis, beside the pub/sub rows"),
      reported(`pub/sub gateway RSS per idle subscriber (${idle} sockets)`, "-", idlePerSocket / 1024, "KiB", "embedded bus, 100 topics")
    )
    writeSummary("pubsub", `PUBSUB_ROUNDS=${rounds} PUBSUB_MESSAGES=${messages} PUBSUB_SUBSCRIBERS=${subscribers}`, results)
    fs.rmSync(dir, { recursive: true, force: true })
  } finally {
    for (const c of clients) c.kill("SIGKILL")
    await stopAll()
    await Effect.runPromise(redis.stop)
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exitCode = 1
})
