/**
 * Cache benchmark, side by side in one run: gateway get/put (embedded engine, API key) against a
 * bare node:http server doing the same JSON work over a Map, and redis-benchmark GET/SET on the
 * same machine; then memory per entry of the embedded engine against Redis `used_memory`.
 *
 *   npx tsx bench/cache/run.ts   (needs wrk and redis-server/redis-benchmark; CACHE_DURATION=8, CACHE_ROUNDS=2)
 */
import { Redis } from "ioredis"
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { startBackgroundLoad } from "../support/load.js"
import { median } from "../support/stats.js"
import { atLeast, reported, writeSummary } from "../support/summary.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const duration = Number(process.env.CACHE_DURATION ?? 8)
const value = JSON.stringify("v".repeat(98)) // 100 bytes of JSON

interface Sample {
  readonly rps: number
  readonly p50: string
  readonly p99: string
}

const lua = (route: string, body: string) => {
  const file = path.join(os.tmpdir(), `cache-bench-${route.replace(/\W/g, "")}.lua`)
  fs.writeFileSync(file, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/json"\n`)
  return file
}

const wrk = (url: string, auth: string, script: string): Sample => {
  const out = spawnSync("taskset", ["-c", "1", "wrk", "-t1", "-c64", `-d${duration}s`, "--latency", "-s", script, "-H", `authorization: ${auth}`, url], {
    encoding: "utf8"
  }).stdout
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0),
    p50: /^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? "?",
    p99: /^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? "?"
  }
}

const start = (kind: string, port: number) =>
  new Promise<{ child: ChildProcess; auth: string }>((resolve, reject) => {
    const child = spawn("taskset", ["-c", "0", process.execPath, "--max-semi-space-size=64", "--import", "tsx", path.join(here, "servers.ts"), kind, String(port)], {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"]
    })
    let buf = ""
    child.stdout?.on("data", (d: Buffer) => {
      buf += d.toString()
      if (buf.includes("READY")) resolve({ child, auth: /^HEADER authorization: (.*)$/m.exec(buf)?.[1] ?? "" })
    })
    child.once("exit", (code) => reject(new Error(`${kind} exited ${code}`)))
  })

const main = async () => {
  startBackgroundLoad()
  const get = lua("get", JSON.stringify({ dmap: "bench", key: "hot" }))
  const put = lua("put", `{"dmap":"bench","key":"hot","value":${value}}`)
  const rows: Array<[string, Sample]> = []
  let port = 19400
  // rounds alternate the two targets, so a slow minute of this shared machine hits both
  const rounds = Number(process.env.CACHE_ROUNDS ?? 2)
  const kinds = process.env.CACHE_ONLY === "memory" ? [] : Array.from({ length: rounds }, () => ["bare", "gateway"]).flat()
  for (const kind of kinds) {
    const { child, auth } = await start(kind, ++port)
    try {
      wrk(`http://127.0.0.1:${port}/v1/cache/get`, auth, get) // warm-up
      rows.push([`${kind} get`, wrk(`http://127.0.0.1:${port}/v1/cache/get`, auth, get)])
      rows.push([`${kind} put`, wrk(`http://127.0.0.1:${port}/v1/cache/put`, auth, put)])
    } finally {
      child.kill("SIGTERM")
    }
  }
  // Redis on the same machine, pinned like the servers above.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cache-bench-redis-"))
  const redis = spawn("taskset", ["-c", "0", "redis-server", "--port", "19499", "--save", "", "--appendonly", "no", "--dir", dir], { stdio: "ignore" })
  await new Promise((r) => setTimeout(r, 500))
  const rb = spawnSync("taskset", ["-c", "1", "redis-benchmark", "-p", "19499", "-t", "get,set", "-c", "64", "-n", "400000", "-d", "100", "-q"], { encoding: "utf8" }).stdout
  process.stdout.write("\nredis-benchmark -c 64 -d 100:\n" + rb.replace(/\r/g, "\n").split("\n").filter((l) => /requests per second/.test(l)).join("\n") + "\n")

  // Memory per entry: 1e6 entries of 100-byte values, key "key:<i>", dmap "bench".
  const N = 1_000_000
  const client = new Redis({ port: 19499, lazyConnect: false })
  const before = Number(/used_memory:(\d+)/.exec(await client.info("memory"))?.[1] ?? 0)
  for (let i = 0; i < N; i += 10_000) {
    const pipe = client.pipeline()
    for (let j = i; j < i + 10_000; j++) pipe.set(`pc:5:{bench}:5:bench:key:${j}`, value)
    await pipe.exec()
  }
  const after = Number(/used_memory:(\d+)/.exec(await client.info("memory"))?.[1] ?? 0)
  await client.quit()
  redis.kill("SIGTERM")
  const embedded = JSON.parse(
    spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", path.join(here, "memory.ts")], { cwd: root, encoding: "utf8" }).stdout
  ) as { readonly heapPerEntry: number; readonly rssPerEntry: number }

  process.stdout.write(`\nwrk -t1 -c64 ${duration}s, server on CPU 0, load on CPU 1 (${rounds} rounds each)\n| target | req/s | p50 | p99 |\n|---|---:|---:|---:|\n`)
  for (const [name, s] of rows) process.stdout.write(`| ${name} | ${s.rps.toFixed(0)} | ${s.p50} | ${s.p99} |\n`)
  const rpsOf = (name: string) => rows.filter(([n]) => n === name).map(([, s]) => s.rps)
  // each gateway round against the bare round just before it, and the medians of both
  const ratios = (op: string) => {
    const bare = rpsOf(`bare ${op}`)
    const perRound = rpsOf(`gateway ${op}`).map((g, i) => (g / (bare[i] ?? Number.NaN)).toFixed(2)).join(" / ")
    return `${(median(rpsOf(`gateway ${op}`)) / median(bare)).toFixed(2)} (rounds ${perRound})`
  }
  if (rows.length > 0) process.stdout.write(`\ngateway/bare, medians: get ${ratios("get")}, put ${ratios("put")}\n`)
  process.stdout.write(
    `memory per entry (1e6 x 100 B): embedded ${embedded.heapPerEntry.toFixed(0)} B heap, ` +
      `${embedded.rssPerEntry.toFixed(0)} B RSS growth; Redis ${((after - before) / N).toFixed(0)} B (used_memory)\n`
  )
  const anchor = "bare node:http, the same JSON work over a Map"
  const perRound = (op: string) => {
    const bare = rpsOf(`bare ${op}`)
    return rpsOf(`gateway ${op}`).map((g, i) => (g / (bare[i] ?? Number.NaN)).toFixed(2)).join(" ")
  }
  const ratioOf = (op: string) => median(rpsOf(`gateway ${op}`)) / median(rpsOf(`bare ${op}`))
  const rgb = (name: string) => Number(new RegExp(`${name}: ([\\d.]+) requests per second`).exec(rb.replace(/\r/g, "\n"))?.[1] ?? Number.NaN)
  writeSummary("cache", `CACHE_ROUNDS=${rounds} CACHE_DURATION=${duration}`, [
    ...(rows.length > 0
      ? [
          atLeast("cache get (4)", anchor, ratioOf("get"), 0.6, `rounds ${perRound("get")}`),
          reported("cache put (4)", anchor, ratioOf("put"), "ratio", `rounds ${perRound("put")}`),
          reported("cache get against redis-benchmark GET", "redis-benchmark GET, -c 64 -d 100", median(rpsOf("gateway get")) / rgb("GET"), "ratio", `gateway ${median(rpsOf("gateway get")).toFixed(0)}/s, Redis ${rgb("GET").toFixed(0)}/s`)
        ]
      : []),
    reported("cache memory per 100-byte entry", "Redis used_memory", embedded.rssPerEntry, "B", `embedded ${embedded.heapPerEntry.toFixed(0)} B heap, ${embedded.rssPerEntry.toFixed(0)} B RSS; Redis ${((after - before) / N).toFixed(0)} B`)
  ])
}

main().catch((e: unknown) => {
  process.stderr.write(String(e) + "\n")
  process.exit(1)
})
