/**
 * CPU per request through the real gateway listener, in process, no sockets:
 * `npx tsx bench/floor/inproc.ts [N]` (INPROC_ONLY=whoami|sql|rqlite|cache, INPROC_FAST_LANE=false). Drives `gatewayListener` with minimal stand-ins for node's
 * request and response (what the adapter reads and writes), so a change to the request path can
 * be measured in seconds and without the machine's socket noise. The socket's own cost (writev,
 * the HTTP parser) is not in these numbers; the floor run (run.ts) has it.
 */
import { Effect } from "effect"
import { EventEmitter } from "node:events"
import * as fs from "node:fs"
import type * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { gatewayListener } from "../../src/api/Gateway.js"
import { testSettings } from "../../src/layers/config/PorticoConfig.js"
import { Namespaces } from "../../src/layers/namespaces/Namespaces.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { Layer } from "effect"

const N = Number(process.argv[2] ?? "20000")

class FakeRequest extends EventEmitter {
  readonly socket = { remoteAddress: "127.0.0.1", bytesRead: 0, destroyed: false, destroy() {} }
  /** As node's: true once the whole body has been read. */
  complete = false
  constructor(readonly method: string, public url: string, readonly headers: Record<string, string>) {
    super()
  }
  resume() {}
  unpipe() {}
}

class FakeResponse extends EventEmitter {
  headersSent = false
  writableEnded = false
  shouldKeepAlive = true
  status = 0
  body = ""
  constructor(private readonly done: (r: FakeResponse) => void) {
    super()
  }
  writeHead(status: number) {
    this.status = status
    this.headersSent = true
    return this
  }
  setHeader() {}
  writeContinue() {}
  write(chunk: unknown) {
    this.body += String(chunk)
    return true
  }
  end(chunk?: unknown) {
    if (chunk !== undefined) this.body += typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString()
    this.writableEnded = true
    this.done(this)
  }
  destroy() {}
}

type Listener = (req: http.IncomingMessage, res: http.ServerResponse) => void

const oneRequest = (listener: Listener, method: string, url: string, headers: Record<string, string>, body?: string) =>
  new Promise<FakeResponse>((resolve) => {
    const h = body === undefined ? headers : { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }
    const req = new FakeRequest(method, url, h)
    // node emits the request's `close` once its answer is out (the body guard's release waits for it)
    const res = new FakeResponse((r) => {
      req.emit("close")
      resolve(r)
    })
    listener(req as unknown as http.IncomingMessage, res as unknown as http.ServerResponse)
    if (body !== undefined) {
      req.emit("data", Buffer.from(body))
      req.complete = true
      req.emit("end")
    }
  })

/** Best of 5 rounds of N requests, 64 in flight (as the floor run's connections), and one at a time. */
const measure = async (name: string, listener: Listener, method: string, url: string, headers: Record<string, string>, body?: string) => {
  const first = await oneRequest(listener, method, url, headers, body)
  if (first.status !== 200) throw new Error(`${name}: ${first.status} ${first.body}`)
  const run = async (inFlight: number, count: number) => {
    let best = Number.POSITIVE_INFINITY
    let bestCpu = Number.POSITIVE_INFINITY
    for (let round = 0; round < 5; round++) {
      const t0 = performance.now()
      const c0 = process.cpuUsage()
      let next = 0
      const worker = async () => {
        while (next++ < count) await oneRequest(listener, method, url, headers, body)
      }
      await Promise.all(Array.from({ length: inFlight }, worker))
      best = Math.min(best, ((performance.now() - t0) * 1000) / count)
      const cpu = process.cpuUsage(c0)
      bestCpu = Math.min(bestCpu, (cpu.user + cpu.system) / count)
    }
    return [best, bestCpu] as const
  }
  const [wide, wideCpu] = await run(64, N)
  const [single] = await run(1, Math.ceil(N / 10))
  process.stdout.write(
    `${name.padEnd(24)} ${wide.toFixed(1)} µs/request at 64 in flight (process CPU ${wideCpu.toFixed(1)} µs), ${single.toFixed(1)} µs one at a time\n`
  )
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-inproc-"))
const rqliteUrl = process.env.INPROC_RQLITE // an rqlited to serve namespace "bench"'s cluster SQL store
// INPROC_FAST_LANE=false serves every request through the HttpApi app (src/api/FastLane.ts)
const base = testSettings(dataDir, { port: 0, logRequests: false, fastLane: process.env.INPROC_FAST_LANE !== "false" })
const settings = rqliteUrl === undefined ? base : { ...base, sql: { ...base.sql, rqlite: new Map([["bench", rqliteUrl]]) } }

const program = Effect.gen(function* () {
  const created = yield* Effect.flatMap(Namespaces, (ns) => ns.create("bench", undefined, "bench")).pipe(
    Effect.provide(Layer.orDie(servicesLayer(settings)))
  )
  const listener = yield* gatewayListener(settings)
  const auth = { authorization: `Bearer ${created.ownerKey.apiKey}` }
  yield* Effect.promise(async () => {
    await oneRequest(listener, "POST", "/v1/cache/put", auth, JSON.stringify({ dmap: "bench", key: "hot", value: "x".repeat(100) }))
    await measure("GET /v1/auth/whoami", listener, "GET", "/v1/auth/whoami", auth)
    if (process.env.INPROC_ONLY === "whoami") return
    if (rqliteUrl !== undefined) {
      const table = `t${Date.now()}`
      await oneRequest(listener, "POST", "/v1/rqlite/create-table", auth, JSON.stringify({ schema: `CREATE TABLE ${table} (id INTEGER PRIMARY KEY, name TEXT)` }))
      await oneRequest(listener, "POST", "/v1/rqlite/exec", auth, JSON.stringify({ sql: `INSERT INTO ${table} VALUES (42, 'x')` }))
      await measure("POST /v1/rqlite/query", listener, "POST", "/v1/rqlite/query", auth, JSON.stringify({ sql: `SELECT * FROM ${table} WHERE id = ?`, args: [42] }))
    }
    if (process.env.INPROC_ONLY === "rqlite") return
    if (process.env.INPROC_ONLY !== "cache") {
    await oneRequest(listener, "POST", "/v1/db/sqlite/create", auth, JSON.stringify({ database_name: "bench" }))
    await oneRequest(listener, "POST", "/v1/db/sqlite/query", auth, JSON.stringify({ database_name: "bench", query: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)" }))
    await oneRequest(listener, "POST", "/v1/db/sqlite/query", auth, JSON.stringify({ database_name: "bench", query: "INSERT INTO t VALUES (42, 'x')" }))
    await measure("POST /v1/db/sqlite/query", listener, "POST", "/v1/db/sqlite/query", auth, JSON.stringify({ database_name: "bench", query: "SELECT * FROM t WHERE id = ?", params: [42] }))
    if (process.env.INPROC_ONLY === "sql") return
    }
    await measure("POST /v1/cache/get", listener, "POST", "/v1/cache/get", auth, JSON.stringify({ dmap: "bench", key: "hot" }))
    await measure("POST /v1/cache/put", listener, "POST", "/v1/cache/put", auth, JSON.stringify({ dmap: "bench", key: "hot", value: "y".repeat(100) }))
  })
}).pipe(Effect.scoped)

Effect.runPromise(program).then(
  () => fs.rmSync(dataDir, { recursive: true, force: true }),
  (e: unknown) => {
    process.stderr.write(String(e) + "\n")
    process.exit(1)
  }
)
