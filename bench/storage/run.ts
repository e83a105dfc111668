/**
 * Content storage benchmark, side by side in one run, each gateway route against its anchor:
 *
 *   1. Upload MB/s of a STORAGE_MIB (256) MiB file: `POST /v1/storage/upload` (multipart/form-data,
 *      one field `file`, streamed from disk by a node:http client with a computed Content-Length)
 *      through a real gateway process (embedded content engine, blocks in `<dataDir>/blocks`),
 *      against the anchor: the same `ipfs-unixfs-importer` call with the same options
 *      (unixfs-v1-2025: CIDv1, raw leaves, 1 MiB fixed chunks, balanced 1024 links) writing into
 *      an empty `FsBlockstore`, reading the same file with fs.createReadStream, in a child process
 *      (bench/storage/anchor.ts). Both must give the same CID. Gateway time: request start to the
 *      answer read; anchor time: file open to the importer's last entry (measured in the child).
 *      Each process, after one 32 MiB warm-up, takes two measured uploads of fresh content, the
 *      same two files on both sides: the `second` is a running server's upload, and its ratio is
 *      the one held to the target (>= 0.8); the `first` is reported beside it. Why both: the
 *      gateway's first large upload also pays for V8 compiling its upload path (HTTP parsing,
 *      the form parser, the chunker; about 100-150 ms of TurboFan on the one CPU the process has
 *      here), which a 32 MiB warm-up does not finish and which a gateway pays once, not per upload;
 *      the anchor's path is a few functions. A larger warm-up would hide the first upload's cost
 *      instead of showing it.
 *   2. Peak RSS growth of the gateway process during each measured upload: /proc/<pid>/status
 *      VmRSS sampled every 20 ms, max minus the value just before the upload (VmHWM before and
 *      after is printed too, it catches a peak shorter than 20 ms). Target < 64 MiB for the
 *      largest, which is the first upload's (the second reuses what the first allocated). The
 *      anchor process's own growth (same sampling, by itself) is printed for reference.
 *   3. Get MB/s: `GET /v1/storage/get/<cid>` of the second upload's content through the gateway
 *      against a bare node:http server piping the same file (fs.createReadStream(file).pipe(res),
 *      with Content-Length). A node client reads and discards the body; 3 gets per side per round,
 *      the best counts. Reported, no target; so is the gateway's RSS growth over the gets.
 *
 * Every round writes new random content (so the gateway's blockstore holds none of its blocks and
 * the anchor gets fresh directories), starts a fresh gateway process over the same data dir
 * (rate limit and request log off; warmed up with one 32 MiB upload and no get, since a get grows
 * the heap and would hide the upload's growth) and a fresh anchor importer, runs one side's two
 * uploads then the other's, then the get pair, anchor and gateway order swapped every round,
 * with `sync` before each measured run so one side's dirty
 * pages are not written back during the other's, then 640 MiB written and deleted (`warmPages`)
 * so both sides' block writes take pages the machine has touched already. The gateway, the
 * anchor importer and the anchor server run on CPU 0 (`taskset -c 0`); this driver, which is the
 * HTTP client and the RSS sampler, pins itself to CPU 1. The storage routes take a signed-in
 * wallet's access token (the namespace owner's, signed in every round). Each server's CPU time
 * (user + system, all threads, from /proc/<pid>/stat or process.cpuUsage) is printed beside its
 * wall time. The summary is the median over rounds (RSS: the largest growth seen). Every read is checked: same CID on both
 * sides, and one get per side per round hashed against the file's sha256.
 *
 *   npx tsx bench/storage/run.ts
 *
 * Needs taskset and two CPUs. Knobs: STORAGE_MIB file size in MiB (256), STORAGE_ROUNDS (4),
 * STORAGE_GATEWAY_NODE_ARGS extra node flags for the gateway process (a CPU profile, a GC trace),
 * STORAGE_KEEP_LOGS=1 keeps the temp dir's logs (a GC trace goes to the gateway's log) after a success.
 * Everything it writes goes to a temp dir under os.tmpdir(), removed at the end; on failure the
 * logs stay there (the content file and the blocks are removed anyway, they are large).
 */
import { type HDNodeWallet, Wallet } from "ethers"
import { spawnSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { alive, type Child, freePort, logTail, sleep, startPinned, stop, stopAll, waitUntil } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { median } from "../support/stats.js"
import { atLeast, below, reported, rounds as roundsText, writeSummary } from "../support/summary.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const MiB = 1024 * 1024
const mib = Math.max(1, Math.round(Number(process.env.STORAGE_MIB ?? 256)))
const rounds = Math.max(1, Math.round(Number(process.env.STORAGE_ROUNDS ?? 4)))
const bytes = mib * MiB
const warmupBytes = Math.min(32, mib) * MiB
const GETS = 3
/** The two measured uploads of each side in a round: the first after the warm-up, then the second. */
const UPLOADS = ["first", "second"] as const
type Which = (typeof UPLOADS)[number]
const RSS_TARGET = 64 * MiB
const UPLOAD_TARGET = 0.8
const namespace = "storagebench"

// ---- child processes (as in bench/sql/run.ts) --------------------------------------------

/** Starts `node --import tsx <args>` pinned to CPU 0 (see bench/support/children.ts). */
const startNode = (name: string, dir: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, pipes = false): Child =>
  startPinned(name, dir, process.execPath, ["--import", "tsx", ...args], { env, pipeStdout: pipes, pipeStdin: pipes })

/** What an interrupted run leaves behind: set by main once it has a temp dir. */
let discard: () => void = () => {}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void stopAll().then(() => {
      discard()
      process.exit(130)
    })
  })
}

/** This process is the client: CPU 1, every thread (the libuv pool threads it starts later inherit it). */
const pinSelf = () => {
  const run = spawnSync("taskset", ["-a", "-p", "-c", "1", String(process.pid)], { encoding: "utf8" })
  if (run.status !== 0) throw new Error(`taskset -p failed (${run.status ?? run.signal}): ${run.stderr}`)
}

/** Flushes dirty pages, so the last run's writes are not written back during the next one. */
const syncDisks = () => {
  spawnSync("sync")
}

/**
 * Writes and deletes 640 MiB, so that the page cache pages the next side's block writes take are
 * ones the machine has touched already. Why: on this VM a page the guest has not touched for a
 * while costs a fault in the host on first use, charged as system time to the process writing.
 * Without this, the anchor's deleted blocks left the gateway warm pages when it went second and
 * none when it went first: the gateway's system time per upload swung 0.3-0.8 s with the order,
 * and the upload ratio 0.6-1.1 (docs/performance.md, 2026-11-25 sixth session).
 */
const warmPages = (dir: string) => {
  const file = path.join(dir, "pages.bin")
  const zeros = Buffer.alloc(MiB)
  const fd = fs.openSync(file, "w")
  try {
    for (let i = 0; i < 640; i++) fs.writeSync(fd, zeros)
  } finally {
    fs.closeSync(fd)
    fs.rmSync(file, { force: true })
  }
}

// ---- memory --------------------------------------------------------------------------------

const procStatus = (pid: number, field: "VmRSS" | "VmHWM") => {
  const text = fs.readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1]
  if (kb === undefined) throw new Error(`no ${field} in /proc/${pid}/status`)
  return Number(kb) * 1024
}

const ticksPerSecond = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

/** CPU seconds (user + system, every thread) `pid` has used so far. */
const cpuSeconds = (pid: number) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
}

interface RssGrowth {
  readonly base: number
  readonly peak: number
  readonly samples: number
}

/** Samples VmRSS of `pid` every 20 ms until the returned stop is called. */
const sampleRss = (pid: number) => {
  const base = procStatus(pid, "VmRSS")
  let peak = base
  let samples = 1
  const take = () => {
    try {
      peak = Math.max(peak, procStatus(pid, "VmRSS"))
      samples++
    } catch {
      // the process went away; its exit is reported elsewhere
    }
  }
  const timer = setInterval(take, 20)
  return (): RssGrowth => {
    clearInterval(timer)
    take()
    return { base, peak, samples }
  }
}

// ---- content -------------------------------------------------------------------------------

/** Writes `size` fresh random bytes to `file` (every MiB drawn anew); answers their sha256. */
const writeRandom = (file: string, size: number) => {
  const buffer = Buffer.allocUnsafe(MiB)
  const hash = crypto.createHash("sha256")
  const fd = fs.openSync(file, "w")
  try {
    for (let offset = 0; offset < size; offset += MiB) {
      const view = buffer.subarray(0, Math.min(MiB, size - offset))
      crypto.randomFillSync(view)
      hash.update(view)
      fs.writeSync(fd, view)
    }
  } finally {
    fs.closeSync(fd)
  }
  return hash.digest("hex")
}

// ---- gateway -------------------------------------------------------------------------------

interface Gateway {
  readonly url: string
  readonly pid: number
  readonly wallet: HDNodeWallet
  readonly child: Child
}

const gatewayEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, PORTICO_RATE_LIMIT: "false", PORTICO_LOG_REQUESTS: "false", PORTICO_NODE_ID: "bench" }
  // embedded registry and embedded content engine
  delete env.PORTICO_RQLITE_URL
  delete env.PORTICO_STORAGE_KUBO_URL
  delete env.PORTICO_STORAGE_CLUSTER_URL
  if (bytes > 1024 * MiB) env.PORTICO_STORAGE_MAX_UPLOAD_BYTES = String(bytes)
  const stored = rounds * (warmupBytes + UPLOADS.length * bytes)
  if (stored > 9 * 1024 * MiB) env.PORTICO_STORAGE_QUOTA_BYTES = String(2 * stored)
  return env
}

/** Creates the namespace, owned by a fresh wallet, in the gateway's data dir (before any gateway runs). */
const createNamespace = (dataDir: string) => {
  const wallet = Wallet.createRandom()
  const created = spawnSync(
    process.execPath,
    ["--import", "tsx", "src/main.ts", "namespace", "create", namespace, "--owner", wallet.address, "--data-dir", dataDir],
    { cwd: root, env: gatewayEnv(), encoding: "utf8" }
  )
  if (created.status !== 0) throw new Error(`namespace create failed (${created.status}): ${created.stderr}`)
  const line = created.stdout.trim().split("\n").pop() ?? ""
  if (!line.includes(`"namespace":"${namespace}"`)) throw new Error(`namespace create printed ${line}`)
  return wallet
}

/** `portico serve` on CPU 0 over `dataDir`; ready when it prints its listening line. */
const startGateway = async (dir: string, dataDir: string, name: string, wallet: HDNodeWallet): Promise<Gateway> => {
  const port = await freePort()
  // STORAGE_GATEWAY_NODE_ARGS: extra node flags for the gateway only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/p"
  const nodeArgs = (process.env.STORAGE_GATEWAY_NODE_ARGS ?? "").split(" ").filter((a) => a !== "")
  const child = startNode(name, dir, [...nodeArgs, "src/main.ts", "serve", "--port", String(port), "--data-dir", dataDir], gatewayEnv())
  let listening: number | undefined
  await waitUntil(child, () => {
    const found = fs
      .readFileSync(child.log, "utf8")
      .split("\n")
      .find((l) => l.includes('"msg":"listening"'))
    if (found !== undefined) listening = (JSON.parse(found) as { port: number }).port
    return listening !== undefined
  })
  const pid = child.process.pid ?? 0
  const comm = fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim()
  if (comm !== "node") throw new Error(`pid ${pid} is ${comm}, not the gateway's node`)
  return { url: `http://127.0.0.1:${listening}`, pid, wallet, child }
}

const stopGateway = async (child: Child) => {
  if (!alive(child.process)) throw new Error(`${child.name} exited during the runs (${child.process.exitCode ?? child.process.signalCode})\n${logTail(child)}`)
  await stop(child.process, 10_000)
}

const postJson = async (url: string, body: unknown) => {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  const text = await response.text()
  if (!response.ok) throw new Error(`${url} answered ${response.status}: ${text}`)
  return JSON.parse(text) as Record<string, unknown>
}

/** A fresh access token of the namespace owner's wallet. */
const signIn = async (gateway: Gateway) => {
  const challenge = await postJson(`${gateway.url}/v1/auth/challenge`, { wallet: gateway.wallet.address, namespace })
  const message = String(challenge.message)
  const verified = await postJson(`${gateway.url}/v1/auth/verify`, { message, signature: await gateway.wallet.signMessage(message) })
  if (typeof verified.access_token !== "string") throw new Error(`verify answered no access_token: ${JSON.stringify(verified)}`)
  return `Bearer ${verified.access_token}`
}

// ---- client --------------------------------------------------------------------------------

interface Uploaded {
  readonly cid: string
  readonly size: number
  readonly ms: number
}

/** Streams `file` as the multipart field `file`; the body's length is known up front. */
const upload = (url: string, authorization: string, file: string) =>
  new Promise<Uploaded>((resolve, reject) => {
    const size = fs.statSync(file).size
    const boundary = `----portico-bench-${crypto.randomBytes(12).toString("hex")}`
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`
    )
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
    const started = performance.now()
    const request = http.request(
      `${url}/v1/storage/upload`,
      {
        method: "POST",
        agent: false,
        headers: {
          authorization,
          "content-type": `multipart/form-data; boundary=${boundary}`,
          "content-length": String(head.length + size + tail.length)
        }
      },
      (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("error", reject)
        response.on("end", () => {
          const ms = performance.now() - started
          const text = Buffer.concat(chunks).toString("utf8")
          if (response.statusCode !== 200) return reject(new Error(`upload answered ${response.statusCode}: ${text}`))
          const answer = JSON.parse(text) as { Cid?: unknown; Size?: unknown }
          if (typeof answer.Cid !== "string" || typeof answer.Size !== "number") return reject(new Error(`upload answered ${text}`))
          resolve({ cid: answer.Cid, size: answer.Size, ms })
        })
      }
    )
    const source = fs.createReadStream(file, { highWaterMark: MiB })
    // a server refusing the upload answers early and closes: give its answer time to arrive,
    // it says more than the EPIPE the rest of the body meets (the first settlement wins)
    request.on("error", (e) => {
      source.destroy()
      setTimeout(() => reject(e), 1000)
    })
    request.write(head)
    source.on("error", (e) => {
      request.destroy(e)
      reject(e)
    })
    source.on("end", () => request.end(tail))
    source.pipe(request, { end: false })
  })

interface Got {
  readonly bytes: number
  readonly ms: number
  readonly sha256: string | undefined
}

/** Reads the whole answer, counting (and with `hash`, hashing) the bytes and dropping them. */
const get = (url: string, authorization: string | undefined, hash = false) =>
  new Promise<Got>((resolve, reject) => {
    const started = performance.now()
    const headers: Record<string, string> = authorization === undefined ? {} : { authorization }
    const request = http.get(url, { agent: false, headers }, (response) => {
      if (response.statusCode !== 200) {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("end", () => reject(new Error(`${url} answered ${response.statusCode}: ${Buffer.concat(chunks).toString("utf8").slice(0, 500)}`)))
        return
      }
      const digest = hash ? crypto.createHash("sha256") : undefined
      let count = 0
      response.on("data", (chunk: Buffer) => {
        count += chunk.length
        digest?.update(chunk)
      })
      response.on("error", reject)
      response.on("end", () => resolve({ bytes: count, ms: performance.now() - started, sha256: digest?.digest("hex") }))
    })
    request.on("error", reject)
  })

// ---- anchor --------------------------------------------------------------------------------

interface AnchorImport {
  readonly cid: string
  readonly size: number
  readonly ms: number
  readonly cpuMs: number
  readonly rssBase: number
  readonly rssPeak: number
}

/** The anchor importer process: warmed up on start, then one measured import per `run`. */
const startAnchorImporter = async (dir: string, warmupFile: string) => {
  const warmupDir = path.join(dir, "anchor-warmup-blocks")
  fs.rmSync(warmupDir, { recursive: true, force: true })
  const child = startNode("anchor-import", dir, [path.join(here, "anchor.ts"), "import", warmupFile, warmupDir], process.env, true)
  const lines: Array<string> = []
  let waiting: (() => void) | undefined
  let partial = ""
  child.process.stdout?.on("data", (d: Buffer) => {
    partial += d.toString()
    const parts = partial.split("\n")
    partial = parts.pop() ?? ""
    lines.push(...parts.filter((l) => l.trim() !== ""))
    waiting?.()
  })
  child.process.once("exit", () => waiting?.())
  const nextLine = async (): Promise<string> => {
    while (lines.length === 0) {
      if (!alive(child.process)) throw new Error(`anchor import exited (${child.process.exitCode ?? child.process.signalCode})\n${logTail(child)}`)
      await new Promise<void>((resolve) => (waiting = resolve))
      waiting = undefined
    }
    return lines.shift() as string
  }
  const ready = await nextLine()
  if (ready !== "READY") throw new Error(`anchor import printed ${ready}`)
  return {
    run: async (file: string, blocks: string): Promise<AnchorImport> => {
      child.process.stdin?.write(`${file}\t${blocks}\n`)
      return JSON.parse(await nextLine()) as AnchorImport
    },
    close: async () => {
      child.process.stdin?.end()
      await new Promise<void>((resolve) => (alive(child.process) ? child.process.once("close", () => resolve()) : resolve()))
      if (child.process.exitCode !== 0) throw new Error(`anchor import failed (${child.process.exitCode ?? child.process.signalCode})\n${logTail(child)}`)
    }
  }
}

const startAnchorServer = async (dir: string, file: string) => {
  const port = await freePort()
  const child = startNode("anchor-server", dir, [path.join(here, "anchor.ts"), "serve", String(port), file], process.env)
  await waitUntil(child, () => fs.readFileSync(child.log, "utf8").includes("READY"))
  return { url: `http://127.0.0.1:${port}/content`, pid: child.process.pid ?? 0 }
}

// ---- report --------------------------------------------------------------------------------

const mbps = (ms: number) => bytes / 1e6 / (ms / 1000)
const mibText = (n: number) => `${(n / MiB).toFixed(1)} MiB`
const growth = (g: RssGrowth) => g.peak - g.base

/** One measured upload of each side: the gateway's and the anchor's import of the same file. */
interface UploadPair {
  readonly gateway: Uploaded
  readonly gatewayCpu: number
  readonly anchor: AnchorImport
  readonly rss: RssGrowth
  /** VmHWM after the upload minus before it: > 0 when the upload set a new peak. */
  readonly hwm: number
}

interface RoundResult {
  readonly round: number
  readonly order: string
  readonly cids: ReadonlyArray<string>
  readonly uploads: Record<Which, UploadPair>
  readonly getGateway: ReadonlyArray<number>
  readonly getAnchor: ReadonlyArray<number>
  readonly getGatewayCpu: number
  readonly getAnchorCpu: number
  /** The whole get phase, from before the first (checked) get to after the last timed one. */
  readonly getRss: RssGrowth
}

const report = (results: ReadonlyArray<RoundResult>) => {
  const out: Array<string> = []
  const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`
  out.push(
    `\n${UPLOADS.length} x ${mib} MiB of fresh random content per round, ${rounds} round(s); a fresh gateway and anchor importer per round ` +
      `(warm-up: one ${warmupBytes / MiB} MiB upload each), then the ${UPLOADS.join(" and ")} measured upload of each`
  )
  out.push(`gateway and anchors on CPU 0, client on CPU 1; MB = 10^6 bytes; CPU = user + system seconds of the server process, all threads\n`)
  out.push("| round | order | step | gateway MB/s (time, CPU) | anchor MB/s (time, CPU) | ratio | gateway RSS growth | anchor RSS growth |")
  out.push("|---:|---|---|---:|---:|---:|---:|---:|")
  for (const r of results) {
    for (const which of UPLOADS) {
      const u = r.uploads[which]
      const gu = mbps(u.gateway.ms)
      const au = mbps(u.anchor.ms)
      out.push(
        `| ${r.round} | ${r.order} | upload, ${which} | ${gu.toFixed(0)} (${seconds(u.gateway.ms)}, ${u.gatewayCpu.toFixed(2)}) | ` +
          `${au.toFixed(0)} (${seconds(u.anchor.ms)}, ${(u.anchor.cpuMs / 1000).toFixed(2)}) | ${(gu / au).toFixed(2)} | ` +
          `${mibText(growth(u.rss))} (from ${mibText(u.rss.base)}, ${u.rss.samples} samples; VmHWM +${mibText(u.hwm)}) | ` +
          `${mibText(u.anchor.rssPeak - u.anchor.rssBase)} (from ${mibText(u.anchor.rssBase)}) |`
      )
    }
    const gg = Math.max(...r.getGateway.map(mbps))
    const ag = Math.max(...r.getAnchor.map(mbps))
    const list = (xs: ReadonlyArray<number>) => xs.map((ms) => mbps(ms).toFixed(0)).join("/")
    out.push(
      `| ${r.round} | ${r.order} | get, best of ${GETS} (${list(r.getGateway)} vs ${list(r.getAnchor)}) | ${gg.toFixed(0)} (CPU ${(r.getGatewayCpu / GETS).toFixed(2)}/get) | ` +
        `${ag.toFixed(0)} (CPU ${(r.getAnchorCpu / GETS).toFixed(2)}/get) | ${(gg / ag).toFixed(2)} | ${mibText(growth(r.getRss))} (from ${mibText(r.getRss.base)}) | - |`
    )
  }
  out.push(`\nCIDs (gateway = anchor in every upload): ${results.map((r) => r.cids.join(", ")).join("; ")}`)

  const uploadG = (which: Which) => median(results.map((r) => mbps(r.uploads[which].gateway.ms)))
  const uploadA = (which: Which) => median(results.map((r) => mbps(r.uploads[which].anchor.ms)))
  const uploadRatio = (which: Which) => median(results.map((r) => r.uploads[which].anchor.ms / r.uploads[which].gateway.ms))
  const all = results.flatMap((r) => UPLOADS.map((which) => r.uploads[which]))
  const rssG = Math.max(...all.map((u) => growth(u.rss)))
  const rssA = Math.max(...all.map((u) => u.anchor.rssPeak - u.anchor.rssBase))
  const best = (xs: ReadonlyArray<number>) => Math.max(...xs.map(mbps))
  const getG = median(results.map((r) => best(r.getGateway)))
  const getA = median(results.map((r) => best(r.getAnchor)))
  const getRatio = median(results.map((r) => best(r.getGateway) / best(r.getAnchor)))
  const getRss = Math.max(...results.map((r) => growth(r.getRss)))
  out.push("\n| metric | gateway | anchor | ratio (median of rounds) | target | met |")
  out.push("|---|---:|---:|---:|---:|---|")
  out.push(
    `| upload MB/s, second upload of each process (median) | ${uploadG("second").toFixed(0)} | ${uploadA("second").toFixed(0)} | ${uploadRatio("second").toFixed(2)} | >= ${UPLOAD_TARGET} | ${uploadRatio("second") >= UPLOAD_TARGET ? "yes" : "no"} |`
  )
  out.push(
    `| upload MB/s, first upload after the ${warmupBytes / MiB} MiB warm-up (median; reported) | ${uploadG("first").toFixed(0)} | ${uploadA("first").toFixed(0)} | ${uploadRatio("first").toFixed(2)} | - | - |`
  )
  out.push(`| peak RSS growth during an upload (max of all uploads) | ${mibText(rssG)} | ${mibText(rssA)} | - | < ${mibText(RSS_TARGET)} | ${rssG < RSS_TARGET ? "yes" : "no"} |`)
  out.push(`| get MB/s (median of best of ${GETS}) | ${getG.toFixed(0)} | ${getA.toFixed(0)} | ${getRatio.toFixed(2)} | - | - |`)
  out.push(`| peak RSS growth during the gets (max of rounds; reported) | ${mibText(getRss)} | - | - | - | - |`)
  process.stdout.write(out.join("\n") + "\n")
  const anchor = "ipfs-unixfs-importer in-process, same options"
  const perRound = (which: Which) => roundsText(results.map((r) => r.uploads[which].anchor.ms / r.uploads[which].gateway.ms))
  writeSummary("storage", `STORAGE_ROUNDS=${rounds} STORAGE_MIB=${mib}`, [
    atLeast("upload, a running gateway's second (6)", anchor, uploadRatio("second"), UPLOAD_TARGET, `rounds ${perRound("second")}; first upload ${uploadRatio("first").toFixed(2)}`),
    below("upload RSS growth (6)", "-", rssG / MiB, RSS_TARGET / MiB, "MiB", "largest growth of any upload"),
    reported("storage get against node:http piping the file", "node:http piping the file", getRatio, "ratio", `gateway ${getG.toFixed(0)} MB/s, anchor ${getA.toFixed(0)} MB/s`)
  ])
}

// ---- main ----------------------------------------------------------------------------------

/**
 * One round on a fresh gateway: two uploads per side (the first after the warm-up, then the
 * second, each of fresh content, the same file on both sides), then the get pair, in `sides` order.
 */
const runRound = async (
  dir: string,
  round: number,
  gateway: Gateway,
  anchorServer: { readonly url: string; readonly pid: number },
  files: { readonly first: string; readonly content: string; readonly warmup: string }
): Promise<RoundResult> => {
  // the second upload's content is the one the gets read (the anchor server serves `content`)
  const contents: Record<Which, string> = { first: files.first, second: files.content }
  writeRandom(files.first, bytes)
  const sha256 = writeRandom(files.content, bytes)
  const authorization = await signIn(gateway)
  await upload(gateway.url, authorization, files.warmup) // JIT warm-up; no get, which would grow the heap first
  const sides = round % 2 === 1 ? (["anchor", "gateway"] as const) : (["gateway", "anchor"] as const)

  const gatewayRuns: Partial<Record<Which, Omit<UploadPair, "anchor">>> = {}
  const anchorRuns: Partial<Record<Which, AnchorImport>> = {}
  for (const side of sides) {
    const anchor = side === "anchor" ? await startAnchorImporter(dir, files.warmup) : undefined
    for (const which of UPLOADS) {
      syncDisks()
      warmPages(dir)
      if (anchor !== undefined) {
        const blocks = path.join(dir, `anchor-blocks-${round}-${which}`)
        const imported = await anchor.run(contents[which], blocks)
        anchorRuns[which] = imported
        process.stderr.write(`round ${round} upload ${which} anchor: ${mbps(imported.ms).toFixed(0)} MB/s ${imported.cid}\n`)
        fs.rmSync(blocks, { recursive: true, force: true })
      } else {
        const hwm = procStatus(gateway.pid, "VmHWM")
        const cpu = cpuSeconds(gateway.pid)
        const stop = sampleRss(gateway.pid)
        let uploaded: Uploaded
        let rss: RssGrowth
        try {
          uploaded = await upload(gateway.url, authorization, contents[which])
        } finally {
          rss = stop()
        }
        gatewayRuns[which] = { gateway: uploaded, gatewayCpu: cpuSeconds(gateway.pid) - cpu, rss, hwm: procStatus(gateway.pid, "VmHWM") - hwm }
        process.stderr.write(`round ${round} upload ${which} gateway: ${mbps(uploaded.ms).toFixed(0)} MB/s ${uploaded.cid}, RSS +${mibText(growth(rss))}\n`)
      }
    }
    await anchor?.close()
  }
  const pair = (which: Which): UploadPair => {
    const g = gatewayRuns[which]
    const a = anchorRuns[which]
    if (g === undefined || a === undefined) throw new Error("a side did not run")
    if (g.gateway.cid !== a.cid) throw new Error(`CIDs of the ${which} upload differ: gateway ${g.gateway.cid}, anchor ${a.cid}`)
    if (g.gateway.size !== bytes || a.size !== bytes) throw new Error(`sizes differ from ${bytes}: gateway ${g.gateway.size}, anchor ${a.size}`)
    return { ...g, anchor: a }
  }
  const uploads = { first: pair("first"), second: pair("second") }
  const uploadGateway = uploads.second.gateway

  // gets: one checked (hashed) read per side first, which also warms the path; then GETS timed
  const gatewayGet = `${gateway.url}/v1/storage/get/${uploadGateway.cid}`
  const stopGetRss = sampleRss(gateway.pid)
  let getRss: RssGrowth | undefined
  const getGateway: Array<number> = []
  const getAnchor: Array<number> = []
  let getGatewayCpu = 0
  let getAnchorCpu = 0
  try {
    for (const [name, url, auth] of [["gateway", gatewayGet, authorization], ["anchor", anchorServer.url, undefined]] as const) {
      const checked = await get(url, auth, true)
      if (checked.bytes !== bytes || checked.sha256 !== sha256) {
        throw new Error(`${name} get answered ${checked.bytes} bytes, sha256 ${checked.sha256}, expected ${sha256}`)
      }
    }
    for (const side of sides) {
      syncDisks()
      const pid = side === "gateway" ? gateway.pid : anchorServer.pid
      const cpu = cpuSeconds(pid)
      for (let i = 0; i < GETS; i++) {
        const got = side === "gateway" ? await get(gatewayGet, authorization) : await get(anchorServer.url, undefined)
        if (got.bytes !== bytes) throw new Error(`${side} get answered ${got.bytes} bytes`)
        ;(side === "gateway" ? getGateway : getAnchor).push(got.ms)
      }
      if (side === "gateway") getGatewayCpu = cpuSeconds(pid) - cpu
      else getAnchorCpu = cpuSeconds(pid) - cpu
      const list = side === "gateway" ? getGateway : getAnchor
      process.stderr.write(`round ${round} get ${side}: ${list.map((ms) => mbps(ms).toFixed(0)).join(", ")} MB/s\n`)
    }
  } finally {
    getRss = stopGetRss()
  }
  return {
    round,
    order: `${sides[0]} first`,
    cids: UPLOADS.map((which) => uploads[which].gateway.cid),
    uploads,
    getGateway,
    getAnchor,
    getGatewayCpu,
    getAnchorCpu,
    getRss
  }
}

const main = async () => {
  if (os.cpus().length < 2) throw new Error("needs two CPUs (servers on CPU 0, client on CPU 1)")
  pinSelf()
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-storage-bench-"))
  const files = { first: path.join(dir, "content-first.bin"), content: path.join(dir, "content.bin"), warmup: path.join(dir, "warmup.bin") }
  const dataDir = path.join(dir, "gateway")
  let ok = false
  discard = () => {
    for (const entry of fs.readdirSync(dir)) {
      if (entry.endsWith(".bin") || /-blocks(-\d+(-[a-z]+)?)?$/.test(entry)) fs.rmSync(path.join(dir, entry), { recursive: true, force: true })
    }
    fs.rmSync(path.join(dataDir, "blocks"), { recursive: true, force: true })
    process.stderr.write(`kept ${dir} (logs and the gateway's registry; content and blocks removed)\n`)
  }
  try {
    const wallet = createNamespace(dataDir)
    const anchorServer = await startAnchorServer(dir, files.content)
    writeRandom(files.warmup, warmupBytes)
    process.stderr.write(`data in ${dir}; anchor server at ${anchorServer.url}\n`)
    const results: Array<RoundResult> = []
    for (let round = 1; round <= rounds; round++) {
      // a fresh process per round: the gets of a round grow the heap, which would hide the
      // next round's upload growth
      const gateway = await startGateway(dir, dataDir, `gateway-${round}`, wallet)
      results.push(await runRound(dir, round, gateway, anchorServer, files))
      await stopGateway(gateway.child)
    }
    report(results)
    ok = true
  } finally {
    await stopAll()
    if (ok && process.env.STORAGE_KEEP_LOGS !== "1") fs.rmSync(dir, { recursive: true, force: true })
    else discard()
  }
}

main().catch((e: unknown) => {
  process.stderr.write((e instanceof Error ? e.message : String(e)) + "\n")
  process.exit(1)
})
