/**
 * bench/proxy: 256 MiB through a tunnel (`GET /v1/proxy/tunnel`, binary WebSocket frames) to a
 * local destination via the SOCKS server, against the same transfer through the SOCKS server
 * alone (a SOCKS5 connection from this driver with the `socks` package, the client the gateway
 * itself uses), in the same run (issue 24 "Speed", docs/proxy.md "Speed").
 *
 * Targets: the tunnel's throughput ≥ 0.7 of the SOCKS server's alone (median of the per-round
 * ratios), the gateway's RSS growth during a transfer under 64 MiB (peak over the value just
 * before it, the largest of every transfer, warm-up included).
 *
 * Both directions are measured: down (the destination sends PROXY_BYTES as fast as the socket
 * takes them and ends the stream; timed to the last byte read) and up (the client sends
 * PROXY_BYTES, respecting back-pressure; timed to the destination's one-byte answer that all have
 * arrived). The destination (destination.ts, a child) listens on port 443 of two random loopback
 * addresses, named `source.portico-bench` and `sink.portico-bench` only in the SOCKS server's
 * hosts file (test/support/socksServer.ts: microsocks in a mount namespace of its own, root), so
 * the gateway's destination rules pass them and the name, not an address, goes through SOCKS.
 *
 * Layout (two CPUs), as bench/push's (what is compared on CPU 0, the server both sides meet on
 * CPU 1): microsocks and the destination on CPU 1, started from there; this driver, the client of
 * both sides, then moves to CPU 0, where the gateway (`portico serve` as `npm start` runs it,
 * compiled, on an embedded registry, signed in as the namespace owner's wallet session) is pinned.
 * Both sides meet the same SOCKS server and destination on the same CPU and have the same client
 * process; the tunnel's own costs (the gateway's work, the client's framing and masking, as a
 * real client pays it) all land on CPU 0 beside the client, so none of them is free and none slows
 * the SOCKS server. Before the rounds each side takes one unmeasured warm-up transfer each way.
 * Rounds alternate which side goes first. Each transfer's CPU seconds per process (gateway,
 * microsocks, destination, client) are printed, read from /proc/<pid>/stat.
 *
 * Knobs: PROXY_BYTES (268435456), PROXY_ROUNDS (5), PROXY_CHUNK (client frame size when sending,
 * 262144), PROXY_GATEWAY_NODE_ARGS (extra node flags for the gateway only, e.g.
 * "--cpu-prof --cpu-prof-dir=/tmp/p"), PROXY_CLIENT_MASK=zero (diagnosis: the client's frames
 * masked with zeros, which ws skips at both ends, to see what masking costs; browsers mask for
 * real), PROXY_CLIENT_CPU=1 (the client on CPU 1 with microsocks and the destination instead, the
 * gateway alone on CPU 0: the first layout, see docs/proxy.md). Needs taskset, two CPUs, unshare
 * and root (the SOCKS server's hosts file, port 443), microsocks (`scripts/engines.sh socks`).
 */
import { type HDNodeWallet, Wallet } from "ethers"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { SocksClient } from "socks"
import { WebSocket } from "ws"
import { startSocksServer } from "../../test/support/socksServer.js"
import { alive, freePort, logTail, startPinned, stop, stopAll, waitUntil } from "../support/children.js"
import { pinSelf, sampleRss } from "../support/processes.js"
import { startBackgroundLoad } from "../support/load.js"
import { median } from "../support/stats.js"
import { atLeast, below, rounds as roundsText, writeSummary } from "../support/summary.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const MiB = 1024 * 1024
const bytes = Math.max(1, Math.round(Number(process.env.PROXY_BYTES ?? 256 * MiB)))
const rounds = Math.max(1, Math.round(Number(process.env.PROXY_ROUNDS ?? 5)))
const clientChunk = Math.max(1024, Math.min(MiB, Math.round(Number(process.env.PROXY_CHUNK ?? 256 * 1024))))
/** Diagnosis only: a client that masks with zeros, so neither it nor the gateway spends CPU on masking. */
const zeroMask = process.env.PROXY_CLIENT_MASK === "zero"
const namespace = "proxybench"
const THROUGHPUT_TARGET = 0.7
const RSS_TARGET = 64 * MiB
const SOURCE = "source.portico-bench"
const SINK = "sink.portico-bench"
/** The client's send buffer is kept under this, as a well-behaved sender does. */
const CLIENT_HIGH_WATER = 4 * MiB

type Direction = "down" | "up"

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void stopAll().then(() => process.exit(130)))
}

/** The CPU the driver (the client of both sides) runs on once microsocks and the destination have started on CPU 1. */
const clientCpu = process.env.PROXY_CLIENT_CPU === "1" ? "1" : "0"


/** CPU seconds (user + system, all threads) a process has used so far, from /proc. */
const cpuSeconds = (pid: number) => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** Where the CPU went during one transfer: seconds per process, read before and after. */
const cpuOf = (pids: Readonly<Record<string, number>>) => {
  const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]))
  return () => Object.entries(pids).map(([name, pid]) => `${name} ${(cpuSeconds(pid) - (before[name] ?? 0)).toFixed(2)}s`).join(", ")
}

const json = async (url: string, init: RequestInit = {}) => {
  const response = await fetch(url, init)
  const text = await response.text()
  if (response.status !== 200) throw new Error(`${init.method ?? "GET"} ${url} answered ${response.status}: ${text.slice(0, 500)}`)
  return JSON.parse(text) as Record<string, unknown>
}

const randomLoopback = () => `127.${100 + Math.floor(Math.random() * 100)}.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`

/** The destination child; inherits this driver's CPU (1). */
const startDestination = async (dir: string, sourceAddress: string, sinkAddress: string) => {
  const log = fs.openSync(path.join(dir, "destination.log"), "a")
  const child = spawn(process.execPath, ["--import", "tsx", path.join(here, "destination.ts"), sourceAddress, sinkAddress], {
    cwd: root,
    env: { ...process.env, DEST_BYTES: String(bytes) },
    stdio: ["pipe", "pipe", log]
  })
  fs.closeSync(log)
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const first = await lines.next()
  if (first.done === true || first.value !== "ready") throw new Error(`the destination did not start: ${fs.readFileSync(path.join(dir, "destination.log"), "utf8")}`)
  return {
    pid: child.pid ?? 0,
    stop: async () => {
      child.stdin!.end()
      if (child.exitCode === null) await new Promise((r) => child.once("exit", r))
    }
  }
}

const startGateway = async (dir: string, dataDir: string, env: NodeJS.ProcessEnv) => {
  const port = await freePort()
  const extra = (process.env.PROXY_GATEWAY_NODE_ARGS ?? "").split(" ").filter((a) => a !== "")
  // what `npm start` runs: the compiled gateway (bin/portico.mjs compiles src/ first when stale)
  const child = startPinned("gateway", dir, process.execPath, [...extra, "--enable-source-maps", "bin/portico.mjs", "serve", "--port", String(port), "--data-dir", dataDir], { env })
  await waitUntil(child, () => fs.readFileSync(child.log, "utf8").includes('"msg":"listening"'))
  return { child, port, url: `http://127.0.0.1:${port}`, pid: child.process.pid ?? 0 }
}

const signIn = async (url: string, wallet: HDNodeWallet) => {
  const post = (route: string, body: unknown) => json(url + route, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  const challenge = await post("/v1/auth/challenge", { wallet: wallet.address, namespace })
  const text = String(challenge["message"])
  const verified = await post("/v1/auth/verify", { message: text, signature: await wallet.signMessage(text) })
  return String(verified["access_token"])
}

const payload = Buffer.alloc(clientChunk)
for (let i = 0; i < payload.length; i++) payload[i] = (i * 17 + 3) & 0xff

/** Sends `bytes` through `write`, waiting on `wait` whenever `full` says the sender's buffer is full. */
const sendAll = async (write: (b: Buffer) => void, full: () => boolean, wait: () => Promise<void>) => {
  let sent = 0
  while (sent < bytes) {
    const n = Math.min(payload.length, bytes - sent)
    write(n === payload.length ? payload : payload.subarray(0, n))
    sent += n
    if (full()) await wait()
  }
}

/** One transfer through the tunnel; answers its milliseconds (from the socket's open to the last byte). */
const throughTunnel = (port: number, token: string, direction: Direction) =>
  new Promise<number>((resolve, reject) => {
    const host = direction === "down" ? SOURCE : SINK
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/proxy/tunnel?host=${host}&port=443`, {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
      ...(zeroMask ? { generateMask: (mask: Buffer) => void mask.fill(0) } : {})
    })
    let started = 0
    let received = 0
    let done = false
    const finish = (error?: Error) => {
      if (done) return
      done = true
      const ms = performance.now() - started
      ws.terminate()
      if (error !== undefined) reject(error)
      else resolve(ms)
    }
    ws.on("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => finish(new Error(`the tunnel was refused ${res.statusCode}: ${text}`)))
    })
    ws.on("error", (e) => finish(e))
    ws.on("close", (code, reason) => finish(new Error(`the tunnel closed (${code} ${reason.toString()}) after ${received} of ${direction === "down" ? bytes : 1} bytes`)))
    ws.on("message", (data: Buffer) => {
      received += data.length
      if (received >= (direction === "down" ? bytes : 1)) finish()
    })
    ws.on("open", () => {
      started = performance.now()
      if (direction === "up") {
        const drained = () =>
          new Promise<void>((r) => {
            const check = () => (ws.bufferedAmount < CLIENT_HIGH_WATER / 4 || done ? r() : setImmediate(check))
            check()
          })
        // ws has no drain event of its own: the underlying socket's drain tells when to look again
        const socket = (ws as unknown as { _socket: net.Socket })._socket
        const wait = () => new Promise<void>((r) => socket.once("drain", () => void drained().then(r)))
        sendAll((b) => ws.send(b, { binary: true }), () => ws.bufferedAmount > CLIENT_HIGH_WATER, wait).catch(finish)
      }
    })
  })

/** The same transfer through the SOCKS server alone, the name resolved there. */
const throughSocks = async (socksPort: number, direction: Direction) => {
  const { socket } = await SocksClient.createConnection({
    proxy: { host: "127.0.0.1", port: socksPort, type: 5 },
    command: "connect",
    destination: { host: direction === "down" ? SOURCE : SINK, port: 443 },
    timeout: 10_000
  })
  return new Promise<number>((resolve, reject) => {
    const started = performance.now()
    let received = 0
    let done = false
    const finish = (error?: Error) => {
      if (done) return
      done = true
      const ms = performance.now() - started
      socket.destroy()
      if (error !== undefined) reject(error)
      else resolve(ms)
    }
    socket.on("error", (e) => finish(e))
    socket.on("close", () => finish(new Error(`the SOCKS stream closed after ${received} bytes`)))
    socket.on("data", (data: Buffer) => {
      received += data.length
      if (received >= (direction === "down" ? bytes : 1)) finish()
    })
    if (direction === "up") {
      sendAll(
        (b) => socket.write(b),
        () => socket.writableLength > CLIENT_HIGH_WATER,
        () => new Promise<void>((r) => socket.once("drain", () => r()))
      ).catch(finish)
    }
  })
}

const mibps = (ms: number) => bytes / MiB / (ms / 1000)

const main = async () => {
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-proxy-"))
  const dataDir = path.join(dir, "data")
  const sourceAddress = randomLoopback()
  let sinkAddress = randomLoopback()
  while (sinkAddress === sourceAddress) sinkAddress = randomLoopback()
  const destination = await startDestination(dir, sourceAddress, sinkAddress)
  const socks = await startSocksServer({ hosts: { [SOURCE]: sourceAddress, [SINK]: sinkAddress } })
  // both children inherited CPU 1; the driver moves only itself
  if (clientCpu !== "1") pinSelf(clientCpu)
  try {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORTICO_RATE_LIMIT: "false",
      PORTICO_LOG_REQUESTS: "false",
      PORTICO_NODE_ID: "bench",
      PORTICO_PROXY_SOCKS_URL: socks.url
    }
    delete env.PORTICO_RQLITE_URL
    const owner = Wallet.createRandom()
    const created = spawnSync(
      process.execPath,
      ["--import", "tsx", "src/main.ts", "namespace", "create", namespace, "--owner", owner.address, "--data-dir", dataDir],
      { cwd: root, env, encoding: "utf8" }
    )
    if (created.status !== 0) throw new Error(`namespace create failed: ${created.stderr}`)
    const gateway = await startGateway(dir, dataDir, env)
    const token = await signIn(gateway.url, owner)

    const microsocks = Number(spawnSync("pgrep", ["-f", `^microsocks -i 127.0.0.1 -p ${socks.port}$`], { encoding: "utf8" }).stdout.trim().split("\n")[0])
    const pids = { gateway: gateway.pid, microsocks, destination: destination.pid, client: process.pid }
    let rssPeak = 0
    const tunnel = async (direction: Direction) => {
      if (!alive(gateway.child.process)) throw new Error(`the gateway exited\n${logTail(gateway.child)}`)
      const growth = sampleRss(gateway.pid)
      const cpu = cpuOf(pids)
      const ms = await throughTunnel(gateway.port, token, direction)
      rssPeak = Math.max(rssPeak, growth())
      return { ms, cpu: cpu() }
    }
    const alone = async (direction: Direction) => {
      const cpu = cpuOf(pids)
      const ms = await throughSocks(socks.port, direction)
      return { ms, cpu: cpu() }
    }

    for (const direction of ["down", "up"] as const) {
      const warm = { tunnel: await tunnel(direction), socks: await alone(direction) }
      console.error(`warm-up ${direction}: tunnel ${warm.tunnel.ms.toFixed(0)} ms, SOCKS alone ${warm.socks.ms.toFixed(0)} ms`)
    }
    const results: Record<Direction, { tunnel: Array<number>; socks: Array<number>; ratios: Array<number> }> = {
      down: { tunnel: [], socks: [], ratios: [] },
      up: { tunnel: [], socks: [], ratios: [] }
    }
    for (let r = 0; r < rounds; r++) {
      for (const direction of ["down", "up"] as const) {
        let t: { ms: number; cpu: string }
        let s: { ms: number; cpu: string }
        if (r % 2 === 0) {
          s = await alone(direction)
          t = await tunnel(direction)
        } else {
          t = await tunnel(direction)
          s = await alone(direction)
        }
        const row = results[direction]
        const [tRate, sRate] = [mibps(t.ms), mibps(s.ms)]
        row.tunnel.push(tRate)
        row.socks.push(sRate)
        row.ratios.push(tRate / sRate)
        console.error(
          `round ${r + 1} ${direction}: tunnel ${t.ms.toFixed(0)} ms (${tRate.toFixed(0)} MiB/s; CPU ${t.cpu}), SOCKS alone ${s.ms.toFixed(0)} ms (${sRate.toFixed(0)} MiB/s; CPU ${s.cpu}), ratio ${(tRate / sRate).toFixed(2)}`
        )
      }
    }
    const line = (direction: Direction, label: string) => {
      const row = results[direction]
      const ratio = median(row.ratios)
      return [label, median(row.tunnel).toFixed(0), median(row.socks).toFixed(0), ratio.toFixed(2), `>= ${THROUGHPUT_TARGET}`, ratio >= THROUGHPUT_TARGET ? "yes" : "no"]
    }
    const rows = [
      line("down", `MiB/s, ${bytes / MiB} MiB destination → client (median)`),
      line("up", `MiB/s, ${bytes / MiB} MiB client → destination (median)`),
      ["gateway RSS growth during a transfer (max, warm-ups included)", `${(rssPeak / MiB).toFixed(1)} MiB`, "-", "-", "< 64 MiB", rssPeak < RSS_TARGET ? "yes" : "no"]
    ]
    console.log(
      `bench/proxy: ${bytes / MiB} MiB, ${rounds} rounds (per-round ratios down ${results.down.ratios.map((x) => x.toFixed(2)).join(" / ")}; up ${results.up.ratios.map((x) => x.toFixed(2)).join(" / ")})`
    )
    console.log("| measure | tunnel | SOCKS alone | ratio | target | met |")
    console.log("|---|---:|---:|---:|---|---|")
    for (const row of rows) console.log(`| ${row.join(" | ")} |`)
    const anchor = "the same transfer through the SOCKS server alone"
    writeSummary("proxy", `PROXY_ROUNDS=${rounds} PROXY_BYTES=${bytes / MiB} MiB`, [
      atLeast("tunnel throughput, destination → client (24)", anchor, median(results.down.ratios), THROUGHPUT_TARGET, `rounds ${roundsText(results.down.ratios)}`),
      atLeast("tunnel throughput, client → destination (24)", anchor, median(results.up.ratios), THROUGHPUT_TARGET, `rounds ${roundsText(results.up.ratios)}`),
      below("tunnel, gateway RSS growth (24)", "-", rssPeak / MiB, RSS_TARGET / MiB, "MiB", "largest of every transfer, warm-ups included")
    ])
    const seen = socks.connections().map((c) => c.host)
    if (!seen.every((h) => h === SOURCE || h === SINK)) throw new Error(`the SOCKS server saw other hosts: ${[...new Set(seen)].join(", ")}`)
    await stop(gateway.child.process, 10_000)
    fs.rmSync(dir, { recursive: true, force: true })
  } finally {
    await stopAll()
    await socks.stop()
    await destination.stop()
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exitCode = 1
})
