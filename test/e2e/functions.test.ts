/**
 * Functions through a real gateway on embedded engines (docs/functions.md): deploy (refusals
 * named before anything is stored), list, get, settings, versions, rollback, delete, secrets,
 * logs; invoke over both routes with the host calls a Go function makes; and a hostile module
 * (busy loop, memory growth, a trap, huge output) stopped while another tenant's function answers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { deployForm, goFunction, inputLogger, openFunctionSocket, watModule } from "../support/functions.js"
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { ensureDist, errorLines, runPortico } from "../support/cli.js"
import { type Gateway, mintKey, startGateway } from "../support/gateway.js"
import { Effect } from "effect"
import { freePort } from "../support/process.js"
import { hasRedisServer, type RedisServer, redisMissingMessage, startRedis } from "../support/redis.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { IN_NETNS, type StorageEngine, storageEngines } from "../support/storageEngines.js"

/** Every process below `pid`, by the parent each names in /proc/<pid>/stat. */
const descendants = (pid: number): Array<number> => {
  const parents = new Map<number, number>()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]))
    } catch {
      // gone meanwhile
    }
  }
  const found: Array<number> = []
  let frontier = [pid]
  while (frontier.length > 0) {
    frontier = [...parents].filter(([, parent]) => frontier.includes(parent)).map(([child]) => child)
    found.push(...frontier)
  }
  return found
}

/** Triggers read every 300 ms rather than 5 s, so the trigger cases wait less. */
const triggerRefresh = { PORTICO_FUNCTIONS_TRIGGER_REFRESH_MS: "300" }

describe("functions on embedded engines", () => {
  let gw: Gateway
  let owner: string
  let runtimeKey: string
  let otherOwner: string
  let hello: Uint8Array
  let kitchen: Uint8Array

  const deployWith = async (token: string, form: FormData) => {
    const res = await fetch(`${gw.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form })
    return { status: res.status, body: (await res.json()) as Record<string, unknown> }
  }
  const deploy = (token: string, fields: Record<string, string>, wasm: Uint8Array | undefined) => deployWith(token, deployForm(fields, wasm))
  const invoke = async (path: string, body: string | Uint8Array, token?: string) => {
    const res = await fetch(`${gw.url}${path}`, {
      method: "POST",
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      body
    })
    const text = await res.text()
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: res.status, text, json: json as Record<string, unknown>, headers: res.headers }
  }

  beforeAll(async () => {
    hello = goFunction("hello")
    kitchen = goFunction("kitchen")
    gw = await startGateway({ env: { ...triggerRefresh, PORTICO_FUNCTIONS_MAX_INPUT_BYTES: "65536", PORTICO_FUNCTIONS_MAX_OUTPUT_BYTES: "65536" } })
    owner = (await gw.cli(["namespace", "create", "fnapp"])).api_key
    otherOwner = (await gw.cli(["namespace", "create", "fnother"])).api_key
    runtimeKey = await mintKey(gw, owner, { profile: "runtime", label: "app" })
  }, 180_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("deploys a Go function and invokes it: JSON out as written, the request id and duration headers, host calls answered", async () => {
    const deployed = await deploy(owner, { name: "hello", metadata: JSON.stringify({ env_vars: { GREETING: "hi" } }) }, hello)
    expect(deployed.status, JSON.stringify(deployed.body)).toBe(201)
    expect(deployed.body).toMatchObject({ name: "hello", version: 1, memory_limit_mb: 64, timeout_seconds: 30, is_public: false, env_vars: { GREETING: "hi" } })
    const first = await invoke("/v1/functions/hello/invoke", JSON.stringify({ name: "ada" }), runtimeKey)
    expect(first.status, first.text).toBe(200)
    expect(first.json).toMatchObject({ message: "hi, ada", hits: 1, wallet: "fnapp" })
    expect(first.json["request_id"]).toBe(first.headers.get("x-request-id"))
    expect(Number(first.headers.get("x-duration-ms"))).toBeGreaterThan(0)
    const second = await invoke("/v1/functions/hello/invoke", JSON.stringify({ name: "bob" }), runtimeKey)
    expect(second.json).toMatchObject({ message: "hi, bob", hits: 2 })
  }, 60_000)

  it("refuses a deploy before storing anything: no module, not WebAssembly, an import not offered (named), no _start, a bad setting, a bad name", async () => {
    const unknownImport = await watModule(`(module (import "env" "launch_missiles" (func (param i32))) (memory (export "memory") 1) (func (export "_start")))`)
    const noStart = await watModule(`(module (memory (export "memory") 1) (func (export "main")))`)
    const cases: Array<[Record<string, string>, Uint8Array | undefined, number, string, RegExp]> = [
      [{ name: "x" }, undefined, 400, "BAD_REQUEST", /no wasm part/],
      [{ name: "x" }, new TextEncoder().encode("not wasm at all"), 400, "BAD_REQUEST", /not a WebAssembly module/],
      [{ name: "x" }, unknownImport, 400, "BAD_REQUEST", /env\.launch_missiles/],
      [{ name: "x" }, noStart, 400, "BAD_REQUEST", /_start/],
      [{ name: "x", memory_limit_mb: "300" }, hello, 400, "VALIDATION_FAILED", /memory_limit_mb/],
      [{ name: "x", timeout_seconds: "0" }, hello, 400, "VALIDATION_FAILED", /timeout_seconds/],
      [{ name: "x", memory_limit_mb: "1" }, hello, 400, "BAD_REQUEST", /memory at start/],
      [{ name: "Bad_Name" }, hello, 400, "VALIDATION_FAILED", /name/],
      // a field the form does not have, or metadata with a member it does not take, is refused, never ignored
      [{ name: "x", memroy_limit_mb: "32" }, hello, 400, "VALIDATION_FAILED", /^memroy_limit_mb: is not a field/],
      [{ name: "x", metadata: '{"env_vars":{},"envvars":{}}' }, hello, 400, "VALIDATION_FAILED", /^metadata\.envvars: is unexpected/]
    ]
    for (const [fields, wasm, status, code, message] of cases) {
      const answer = await deploy(owner, fields, wasm)
      expect([answer.status, answer.body["code"]], JSON.stringify(answer.body)).toEqual([status, code])
      expect(String(answer.body["error"])).toMatch(message)
    }
    // a field given twice is refused, not taken last-wins; so is a setting sent as a file
    const twice = deployForm({ name: "x" }, hello)
    twice.append("name", "x2")
    const twiceAnswer = await deployWith(owner, twice)
    expect([twiceAnswer.status, twiceAnswer.body["code"], twiceAnswer.body["error"]]).toEqual([400, "VALIDATION_FAILED", "name: is given twice"])
    const asFile = deployForm({ name: "x" }, hello)
    asFile.append("metadata", new Blob(['{"env_vars":{"A":"1"}}']), "meta.json")
    const asFileAnswer = await deployWith(owner, asFile)
    expect([asFileAnswer.status, asFileAnswer.body["code"]]).toEqual([400, "VALIDATION_FAILED"])
    expect(String(asFileAnswer.body["error"])).toMatch(/^metadata: send it as a text field/)
    const listed = await gw.request("GET", "/v1/functions", { token: owner })
    expect((listed.body as { functions: Array<{ name: string }> }).functions.map((f) => f.name)).not.toContain("x")
    const runtimeDeploy = await deploy(runtimeKey, { name: "y" }, hello)
    expect(runtimeDeploy.status).toBe(403)
  }, 60_000)

  it("runs the host calls of the original ABI: SQL through the guard, secrets, the function's cache map, publish, push, fetch, nested invoke", async () => {
    expect((await deploy(owner, { name: "kitchen" }, kitchen)).status).toBe(201)
    const k = (body: unknown) => invoke("/v1/functions/kitchen/invoke", JSON.stringify(body), runtimeKey)
    expect((await k({ op: "exec", sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", args: "[]" })).status).toBe(200)
    const inserted = await k({ op: "exec", sql: "INSERT INTO notes (body) VALUES (?)", args: JSON.stringify(["first"]) })
    expect(inserted.json).toMatchObject({ rows_affected: 1, last_insert_id: 1 })
    expect((await k({ op: "query", sql: "SELECT id, body FROM notes", args: "[]" })).json).toEqual([{ id: 1, body: "first" }])
    // the guard: nobody is exempt, the call answers 0 (null here)
    expect((await k({ op: "query", sql: "SELECT * FROM functions", args: "[]" })).text).toBe("null")
    const secret = await gw.request("PUT", "/v1/functions/kitchen/secrets/API_TOKEN", { token: owner, json: { value: "s3cret" } })
    expect(secret.status, secret.text).toBe(200)
    expect((await k({ op: "secret", key: "API_TOKEN" })).json).toEqual({ value: "s3cret" })
    expect((await gw.request("GET", "/v1/functions/kitchen/secrets", { token: owner })).body).toMatchObject({ secrets: [{ key: "API_TOKEN" }] })
    expect((await k({ op: "cache", key: "greeting", value: "hello" })).json).toEqual({ value: "hello" })
    // the function's map is the platform's: no HTTP grant reaches it
    const overHttp = await gw.request("POST", "/v1/cache/get", { token: owner, json: { dmap: "_portico/functions", key: "greeting" } })
    expect(overHttp.status).toBe(403)
    expect((await k({ op: "publish", topic: "rooms/a", data: "hi" })).json).toEqual({ published: 1 })
    expect((await k({ op: "publish", topic: "_portico/x", data: "hi" })).json).toEqual({ published: 0 })
    // no push configured for the namespace: the host's 0 (docs/push.md, "Function host")
    expect((await k({ op: "push", user: "nobody", msg: JSON.stringify({ title: "t", body: "b" }) })).text).toBe("null")
    // the egress guard holds: loopback is not a public address
    const fetched = await k({ op: "fetch", url: `${gw.url}/health` })
    expect(fetched.json).toMatchObject({ status: 0 })
    const nested = await k({ op: "invoke", name: "hello", data: JSON.stringify({ name: "nest" }) })
    expect(JSON.parse(String(nested.json["answer"]))).toMatchObject({ message: "hi, nest" })
  }, 60_000)

  it("answers plain output in the envelope, and a non-zero exit 502 FUNCTION_FAILED with its stderr in the logs", async () => {
    const text = await invoke("/v1/functions/kitchen/invoke", JSON.stringify({ op: "text" }), runtimeKey)
    expect(text.json).toMatchObject({ output: "plain text, not JSON", status: "ok", request_id: expect.any(String), duration_ms: expect.any(Number) })
    const exit = await invoke("/v1/functions/kitchen/invoke", JSON.stringify({ op: "exit", code: 3 }), runtimeKey)
    expect([exit.status, exit.json["code"]]).toEqual([502, "FUNCTION_FAILED"])
    expect(String(exit.json["error"])).toMatch(/code 3 \(request [0-9a-f-]{36}\)$/)
    const failedRun = /\(request ([0-9a-f-]{36})\)$/.exec(String(exit.json["error"]))![1]
    let lines: Array<{ message: string; level: string; request_id?: string }> = []
    for (let i = 0; i < 40 && !lines.some((l) => l.message === "exiting on request"); i++) {
      await new Promise((r) => setTimeout(r, 100))
      lines = ((await gw.request("GET", "/v1/functions/kitchen/logs", { token: owner })).body as { logs: typeof lines }).logs
    }
    expect(lines).toContainEqual(expect.objectContaining({ level: "error", message: "exiting on request", request_id: failedRun }))
  }, 60_000)

  it("invokes under /v1/invoke/<namespace>/<name>: public functions without a credential, others 404; a credential only in its own namespace", async () => {
    expect((await invoke("/v1/invoke/fnapp/hello", "{}")).status).toBe(404)
    const changed = await gw.request("PATCH", "/v1/functions/hello", { token: owner, json: { is_public: true } })
    expect(changed.status, changed.text).toBe(200)
    const anonymous = await invoke("/v1/invoke/fnapp/hello", JSON.stringify({ name: "anon" }))
    expect(anonymous.status, anonymous.text).toBe(200)
    expect(anonymous.json).toMatchObject({ message: "hi, anon", wallet: "" })
    expect((await invoke("/v1/invoke/fnapp/hello", "{}", otherOwner)).json).toMatchObject({ code: "FORBIDDEN" })
    // a credential sent there is gated as on any route
    expect((await invoke("/v1/invoke/fnapp/hello", "{}", "portico_key_not_a_key")).status).toBe(401)
    expect((await invoke("/v1/invoke/fnapp/hello@1", JSON.stringify({ name: "v1" }), runtimeKey)).status).toBe(200)
    expect((await invoke("/v1/invoke/fnapp/hello@9", "{}", runtimeKey)).status).toBe(404)
    expect((await invoke("/v1/invoke/fnother/hello", "{}")).status).toBe(404)
  }, 60_000)

  it("serves a socket with one instance of its function: ws_open's greeting, frames in order to the same instance, ws_send, ws_close, and each way it ends", async () => {
    const chat = goFunction("chat", { reactor: true })
    expect((await deploy(owner, { name: "chat", timeout_seconds: "1" }, chat)).status).toBe(201)
    const open = async (name: string, token: string | undefined) => {
      const opened = await openFunctionSocket(gw.url, name, token)
      if (!("ws" in opened)) throw new Error(`refused ${opened.status} ${JSON.stringify(opened.body)}`)
      return opened
    }
    const a = await open("chat", runtimeKey)
    const b = await open("chat", owner)
    const hello = await a.next()
    expect(hello).toMatchObject({ type: "hello", wallet: "fnapp" })
    expect(hello.id).toMatch(/^[^.]+\.[\w-]+$/)
    const helloB = await b.next()
    // one instance per socket: each counts its own frames
    expect(await a.ask({ op: "echo", text: "one" })).toEqual({ echo: "one", frames: 1 })
    expect(await a.ask({ op: "echo", text: "two" })).toEqual({ echo: "two", frames: 2 })
    expect(await b.ask({ op: "echo", text: "b" })).toEqual({ echo: "b", frames: 1 })
    // frames sent together are taken in order
    for (let i = 0; i < 20; i++) a.ws.send(JSON.stringify({ op: "echo", text: String(i) }))
    for (let i = 0; i < 20; i++) expect(await a.next()).toEqual({ echo: String(i), frames: 3 + i })
    // ws_send to another socket of the namespace, and to every socket of the function
    expect(await a.ask({ op: "send", target: helloB.id, text: "psst" })).toEqual({ sent: 1 })
    expect(await b.next()).toBe("psst")
    // the entry's own ws_send reaches its socket before what the entry writes
    expect(await a.ask({ op: "broadcast", text: "all" })).toBe("all")
    expect(await a.next()).toEqual({ clients: 2, sent: 2 })
    expect(await b.next()).toBe("all")
    // another namespace's socket is one that does not exist
    await deploy(otherOwner, { name: "chat" }, chat)
    const other = await open("chat", otherOwner)
    const otherHello = await other.next()
    expect(await a.ask({ op: "send", target: otherHello.id, text: "x" })).toEqual({ sent: 0 })
    expect(await a.ask({ op: "kick", target: otherHello.id })).toEqual({ kicked: 0 })
    other.ws.close()
    // ws_disconnect closes the socket 1000; ws_close runs when a client leaves
    expect(await a.ask({ op: "kick", target: helloB.id })).toEqual({ kicked: 1 })
    expect((await b.closed).code).toBe(1000)
    let lines: Array<{ message: string }> = []
    for (let i = 0; i < 50 && !lines.some((l) => l.message === `closed ${helloB.id}`); i++) {
      await new Promise((r) => setTimeout(r, 100))
      lines = ((await gw.request("GET", "/v1/functions/chat/logs", { token: owner })).body as { logs: typeof lines }).logs
    }
    expect(lines.map((l) => l.message)).toContain(`closed ${helloB.id}`)
    // an entry past the timeout ends the instance: 1011 with the catalogue's code
    const looping = await open("chat", runtimeKey)
    await looping.next()
    looping.ws.send(JSON.stringify({ op: "loop" }))
    const timedOut = await looping.closed
    expect(timedOut.code).toBe(1011)
    expect(timedOut.reason).toMatch(/^FUNCTION_TIMEOUT/)
    // a panic is a non-zero exit: 1011 FUNCTION_FAILED; os.Exit(0) ends the socket 1000
    const panicking = await open("chat", runtimeKey)
    await panicking.next()
    panicking.ws.send(JSON.stringify({ op: "panic" }))
    expect(await panicking.closed).toMatchObject({ code: 1011, reason: expect.stringMatching(/^FUNCTION_FAILED/) })
    const exiting = await open("chat", runtimeKey)
    await exiting.next()
    exiting.ws.send(JSON.stringify({ op: "exit" }))
    expect((await exiting.closed).code).toBe(1000)
    // a frame over the cap (PORTICO_FUNCTIONS_MAX_INPUT_BYTES, 64 KiB here) closes 1009
    const big = await open("chat", runtimeKey)
    await big.next()
    big.ws.send("x".repeat(70_000))
    expect((await big.closed).code).toBe(1009)
    // a is still served by its own instance
    expect(await a.ask({ op: "echo", text: "still" })).toEqual({ echo: "still", frames: 28 })
    a.ws.close()
    expect((await a.closed).code).toBe(1005)
  }, 120_000)

  it("refuses a socket before the upgrade as an invoke is refused: credential, grant, no such function, a module without ws_frame; the route without an upgrade is 400", async () => {
    const refusedWith = async (name: string, token: string | undefined) => {
      const opened = await openFunctionSocket(gw.url, name, token)
      if ("ws" in opened) {
        opened.ws.close()
        throw new Error("the socket opened")
      }
      return [opened.status, opened.body.code]
    }
    const cacheOnly = await mintKey(gw, owner, { scopes: ["cache"], label: "cache only" })
    expect(await refusedWith("chat", undefined)).toEqual([401, "UNAUTHORIZED"])
    expect(await refusedWith("chat", cacheOnly)).toEqual([403, "GRANT_REQUIRED"])
    expect(await refusedWith("nothing-here", runtimeKey)).toEqual([404, "NOT_FOUND"])
    // a command has no ws_frame: 400 before the upgrade; a socket function has no _start: 400 on invoke
    expect((await deploy(owner, { name: "command-only" }, hello)).status).toBe(201)
    expect(await refusedWith("command-only", runtimeKey)).toEqual([400, "BAD_REQUEST"])
    const invoked = await invoke("/v1/functions/chat/invoke", "{}", runtimeKey)
    expect([invoked.status, invoked.json["code"]], invoked.text).toEqual([400, "BAD_REQUEST"])
    expect(String(invoked.json["error"])).toMatch(/_start/)
    const plain = await gw.request("GET", "/v1/functions/chat/ws", { token: runtimeKey })
    expect([plain.status, (plain.body as { code: string }).code]).toEqual([400, "BAD_REQUEST"])
  }, 60_000)

  it("keeps versions, rolls back to one as a new version, and deletes", async () => {
    expect((await deploy(owner, { name: "hello" }, hello)).body).toMatchObject({ version: 2, is_public: true, env_vars: { GREETING: "hi" } })
    const rolled = await gw.request("POST", "/v1/functions/hello/rollback", { token: owner, json: { version: 1 } })
    expect(rolled.body).toMatchObject({ version: 3 })
    const versions = (await gw.request("GET", "/v1/functions/hello/versions", { token: owner })).body as { live: number; versions: Array<{ version: number }> }
    expect(versions.live).toBe(3)
    expect(versions.versions.map((v) => v.version)).toEqual([3, 2, 1])
    expect((await gw.request("DELETE", "/v1/functions/hello", { token: owner })).body).toEqual({ status: "deleted", name: "hello" })
    expect((await invoke("/v1/functions/hello/invoke", "{}", runtimeKey)).status).toBe(404)
    expect((await gw.request("GET", "/v1/functions/hello", { token: owner })).status).toBe(404)
  }, 60_000)

  it("runs a schedule once per slot across two gateways on one registry, with its input; a redeploy keeps it, a change empties it", async () => {
    // logs its input: {trigger, schedule, at}
    const logger = await inputLogger()
    const refused = await deploy(owner, { name: "ticker", metadata: JSON.stringify({ cron_expressions: ["* * * *"] }) }, logger)
    expect([refused.status, refused.body["code"]]).toEqual([400, "VALIDATION_FAILED"])
    const second = await startGateway({ dataDir: gw.dataDir, env: triggerRefresh })
    try {
      const deployed = await deploy(owner, { name: "ticker", metadata: JSON.stringify({ cron_expressions: ["* * * * * *"] }) }, logger)
      expect(deployed.body).toMatchObject({ cron_expressions: ["* * * * * *"] })
      // a redeploy without schedules keeps them
      expect((await deploy(owner, { name: "ticker" }, logger)).body).toMatchObject({ version: 2, cron_expressions: ["* * * * * *"] })
      await new Promise((r) => setTimeout(r, 4500))
    } finally {
      await second.stop()
    }
    const off = await gw.request("PATCH", "/v1/functions/ticker", { token: owner, json: { cron_expressions: [] } })
    expect(off.body).toMatchObject({ cron_expressions: [] })
    await new Promise((r) => setTimeout(r, 1000))
    const lines = (((await gw.request("GET", "/v1/functions/ticker/logs?limit=1000", { token: owner })).body) as { logs: Array<{ message: string }> }).logs
    const runs = lines.map((l) => JSON.parse(l.message) as { trigger: string; schedule: string; at: string })
    expect(runs.length).toBeGreaterThanOrEqual(3)
    expect(runs.every((r) => r.trigger === "cron" && r.schedule === "* * * * * *")).toBe(true)
    // once per slot: no second appears twice, though two gateways ticked
    expect(new Set(runs.map((r) => r.at)).size).toBe(runs.length)
    // the change reached the scheduler: nothing fires once the schedules are gone
    await new Promise((r) => setTimeout(r, 1000))
    const settled = (((await gw.request("GET", "/v1/functions/ticker/logs?limit=1000", { token: owner })).body) as { logs: Array<unknown> }).logs.length
    await new Promise((r) => setTimeout(r, 2500))
    expect((((await gw.request("GET", "/v1/functions/ticker/logs?limit=1000", { token: owner })).body) as { logs: Array<unknown> }).logs.length).toBe(settled)
  }, 90_000)

  it("runs a function for each message of its topics with the frame as input, and ends a chain of functions publishing to their own topic at the depth bound", async () => {
    // logs its input, then publishes "hi" on the topic "loop"
    const looper = await watModule(`(module
      (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
      (import "env" "log_info" (func $log (param i32 i32)))
      (import "env" "pubsub_publish" (func $pub (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 1)
      (data (i32.const 32) "loop")
      (data (i32.const 40) "hi")
      (func (export "_start")
        (i32.store (i32.const 0) (i32.const 64)) (i32.store (i32.const 4) (i32.const 4096))
        (drop (call $read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
        (call $log (i32.const 64) (i32.load (i32.const 8)))
        (drop (call $pub (i32.const 32) (i32.const 4) (i32.const 40) (i32.const 2)))))`)
    const refused = await deploy(owner, { name: "looper", metadata: JSON.stringify({ pubsub_topics: ["bad topic"] }) }, looper)
    expect([refused.status, refused.body["code"]]).toEqual([400, "VALIDATION_FAILED"])
    const deployed = await deploy(owner, { name: "looper", metadata: JSON.stringify({ pubsub_topics: ["loop"] }) }, looper)
    expect(deployed.body).toMatchObject({ pubsub_topics: ["loop"] })
    // the triggers are read every 300 ms here
    await new Promise((r) => setTimeout(r, 800))
    const published = await gw.request("POST", "/v1/pubsub/publish", { token: runtimeKey, json: { topic: "loop", data_base64: Buffer.from("go").toString("base64") } })
    expect(published.status, published.text).toBe(200)
    type Line = { level: string; message: string }
    let lines: Array<Line> = []
    for (let i = 0; i < 50 && !lines.some((l) => l.level === "error"); i++) {
      await new Promise((r) => setTimeout(r, 200))
      lines = (((await gw.request("GET", "/v1/functions/looper/logs?limit=1000", { token: owner })).body) as { logs: Array<Line> }).logs
    }
    const runs = lines.filter((l) => l.level === "info").map((l) => JSON.parse(l.message) as { trigger: string; topic: string; data: string; depth?: number })
    // the route's message (no depth), then the function's own at depths 1-5; the one at 6 runs nothing
    expect(runs.map((r) => r.depth ?? 0).sort()).toEqual([0, 1, 2, 3, 4, 5])
    expect(runs.every((r) => r.trigger === "pubsub" && r.topic === "loop")).toBe(true)
    expect(runs.find((r) => r.depth === undefined)?.data).toBe(Buffer.from("go").toString("base64"))
    expect(lines.filter((l) => l.level === "error").map((l) => l.message)).toEqual([expect.stringMatching(/^pubsub loop: a chain of 6 topic triggers is deeper than 5/)])
    await gw.request("PATCH", "/v1/functions/looper", { token: owner, json: { pubsub_topics: [] } })
  }, 60_000)

  it("stops a hostile module at its deadline (busy loop, growth past its memory), traps and oversized output and input, while another tenant's function answers", async () => {
    const loop = await watModule(`(module (memory (export "memory") 1) (func (export "_start") (loop $l (br $l))))`)
    const grow = await watModule(
      `(module (memory (export "memory") 1) (func (export "_start") (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable))`
    )
    const trap = await watModule(`(module (memory (export "memory") 1) (func (export "_start") unreachable))`)
    const flood = await watModule(`(module
      (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 2)
      (func (export "_start") (i32.store (i32.const 0) (i32.const 64)) (i32.store (i32.const 4) (i32.const 65536))
        (loop $l (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))) (br $l))))`)
    for (const [name, wasm] of [["loop", loop], ["grow", grow], ["trap", trap], ["flood", flood]] as const) {
      const answer = await deploy(otherOwner, { name, timeout_seconds: "1", memory_limit_mb: "2" }, wasm)
      expect(answer.status, JSON.stringify(answer.body)).toBe(201)
    }
    const started = performance.now()
    const [looped, answered] = await Promise.all([
      invoke("/v1/functions/loop/invoke", "", otherOwner),
      (async () => {
        await new Promise((r) => setTimeout(r, 200))
        return invoke("/v1/functions/kitchen/invoke", JSON.stringify({ op: "echo" }), runtimeKey)
      })()
    ])
    const took = performance.now() - started
    expect([looped.status, looped.json["code"]]).toEqual([504, "FUNCTION_TIMEOUT"])
    expect(took).toBeLessThan(3000)
    expect(answered.status).toBe(200)
    const grown = await invoke("/v1/functions/grow/invoke", "", otherOwner)
    expect([grown.status, grown.json["code"]]).toEqual([502, "FUNCTION_FAILED"])
    const trapped = await invoke("/v1/functions/trap/invoke", "", otherOwner)
    expect([trapped.status, trapped.json["code"]]).toEqual([502, "FUNCTION_FAILED"])
    expect(String(trapped.json["error"])).toMatch(/unreachable/)
    const flooded = await invoke("/v1/functions/flood/invoke", "", otherOwner)
    expect([flooded.status, flooded.json["code"]]).toEqual([502, "FUNCTION_FAILED"])
    const big = await invoke("/v1/functions/kitchen/invoke", new Uint8Array(65537), runtimeKey)
    expect([big.status, big.json["code"]]).toEqual([413, "PAYLOAD_TOO_LARGE"])
    // after all of it the runner still answers
    expect((await invoke("/v1/functions/kitchen/invoke", JSON.stringify({ op: "echo" }), runtimeKey)).status).toBe(200)
    // the runner runs tenant code as nobody, in a jail without the data directory or a network (RunnerJail.ts)
    const runner = descendants(gw.pid).find((pid) => {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8")
      return cmdline.includes("functionRunner") && cmdline.startsWith(process.execPath)
    })
    expect(runner, "the gateway's function runner").toBeDefined()
    const status = readFileSync(`/proc/${runner}/status`, "utf8")
    expect(status).toMatch(/^Uid:\s+65534\s+65534\s+65534\s+65534$/m)
    // portico-sandbox-exec's seccomp filter is on it, and it can gain no privilege
    expect(status).toMatch(/^Seccomp:\s+2$/m)
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m)
    expect(status).toMatch(/^CapEff:\s+0+$/m)
    expect(existsSync(path.join(gw.dataDir, "secret.key")) || existsSync(path.join(gw.dataDir, "registry.db"))).toBe(true)
    // absent in the jail (under /tmp, the jail's own), or an empty tmpfs (inside the checkout)
    const inJail = `/proc/${runner}/root${gw.dataDir}`
    expect(existsSync(inJail) ? readdirSync(inJail) : []).toEqual([])
    expect(readFileSync(`/proc/${runner}/net/dev`, "utf8")).not.toMatch(/eth|ens|enp/)
  }, 60_000)
})

describe("functions from the bundle (as npm start runs)", () => {
  let gw: Gateway
  afterAll(async () => {
    await gw?.stop()
  })

  it("starts the runner and its threads from dist/bundle and answers an invoke", async () => {
    ensureDist()
    // room for two builds of the hello function (about 3.3 MB each), not three
    gw = await startGateway({ bundled: true, env: { PORTICO_STORAGE_QUOTA_BYTES: String(8 * 1024 * 1024) } })
    const owner = (await gw.cli(["namespace", "create", "fnbundle"])).api_key
    const form = deployForm({ name: "hello" }, goFunction("hello"))
    const deployed = await fetch(`${gw.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: form })
    expect(deployed.status, await deployed.clone().text()).toBe(201)
    const invoked = await gw.request("POST", "/v1/functions/hello/invoke", { token: owner, body: JSON.stringify({ name: "bundle" }) })
    expect(invoked.status, invoked.text).toBe(200)
    expect(invoked.body).toMatchObject({ message: "hello, bundle" })

    // the CLI: a Go function's directory built here and deployed, invoked, listed; one-line refusals
    const portico = (args: ReadonlyArray<string>) => runPortico(args, { env: { PORTICO_URL: gw.url, PORTICO_TOKEN: owner } })
    const helloDir = fileURLToPath(new URL("../fixtures/functions/hello/", import.meta.url))
    const deployedByCli = await portico(["functions", "deploy", helloDir, "--name", "greeter", "--public", "--env", "GREETING=yo"])
    expect(deployedByCli.code, deployedByCli.stderr).toBe(0)
    expect(deployedByCli.stdout.trim()).toBe("greeter version 1 (64 MB, 30 s, public)")
    expect(errorLines(deployedByCli)).toContain("building: go build (GOOS=wasip1 GOARCH=wasm)")
    const invokedByCli = await portico(["functions", "invoke", "greeter", "--data", JSON.stringify({ name: "cli" })])
    expect(JSON.parse(invokedByCli.stdout)).toMatchObject({ message: "yo, cli" })
    expect((await portico(["functions", "list"])).stdout).toContain("greeter version 1")
    expect((await portico(["functions", "deploy", "/no/such/dir", "--name", "x"])).code).toBe(2)
    const dir = mkdtempSync(path.join(tmpdir(), "portico-fn-cli-"))
    const bad = path.join(dir, "bad.wasm")
    writeFileSync(bad, await watModule(`(module (import "env" "launch_missiles" (func)) (memory (export "memory") 1) (func (export "_start")))`))
    const refused = await portico(["functions", "deploy", bad, "--name", "bad"])
    expect(refused.code).toBe(1)
    expect(errorLines(refused).join("\n")).toMatch(/env\.launch_missiles.*BAD_REQUEST/)
    // a deploy the namespace's storage quota refuses leaves nothing behind
    const overQuota = await fetch(`${gw.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: deployForm({ name: "third" }, goFunction("kitchen")) })
    expect(overQuota.status).toBe(413)
    expect((await gw.request("GET", "/v1/functions/third", { token: owner })).status).toBe(404)
    expect((await gw.request("GET", "/v1/functions/third/versions", { token: owner })).status).toBe(404)
    expect((await portico(["functions", "delete", "greeter"])).code).toBe(0)
  }, 180_000)

  it("holds a namespace's invocation slot until its run ends, not until its caller goes away: aborted calls do not let more runs in than the cap", async () => {
    ensureDist()
    const capped = await startGateway({ bundled: true, env: { PORTICO_FUNCTIONS_NAMESPACE_CONCURRENCY: "2" } })
    try {
      const owner = (await capped.cli(["namespace", "create", "fnslots"])).api_key
      const loop = await watModule(`(module (memory (export "memory") 1) (func (export "_start") (loop $l (br $l))))`)
      const deployed = await fetch(`${capped.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: deployForm({ name: "spin", timeout_seconds: "4" }, loop) })
      expect(deployed.status, await deployed.clone().text()).toBe(201)
      const call = (signal?: AbortSignal) => fetch(`${capped.url}/v1/functions/spin/invoke`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: "", signal })
      // two calls take the namespace's two slots; their callers go away while the runs go on
      const callers = [new AbortController(), new AbortController()]
      const gone = callers.map((c) => call(c.signal).then(() => "answered", () => "aborted"))
      await new Promise((r) => setTimeout(r, 500))
      for (const c of callers) c.abort()
      expect(await Promise.all(gone)).toEqual(["aborted", "aborted"])
      await new Promise((r) => setTimeout(r, 200))
      // the two runs still hold the runner: a third call is over the cap
      const third = await call()
      expect(third.status, await third.clone().text()).toBe(429)
      expect(third.headers.get("retry-after")).toBe("1")
      expect(((await third.json()) as { code: string }).code).toBe("RATE_LIMITED")
      // once the runs have ended at their deadline the slots are free again
      await new Promise((r) => setTimeout(r, 4500))
      const after = await call()
      expect([after.status, ((await after.json()) as { code: string }).code]).toEqual([504, "FUNCTION_TIMEOUT"])
    } finally {
      await capped.stop()
    }
  }, 120_000)

  it("pages a function's logs with before/next_before, the last page's next_before null even when that page is full", async () => {
    ensureDist()
    const logged = await startGateway({ bundled: true })
    try {
      const owner = (await logged.cli(["namespace", "create", "fnlogs"])).api_key
      const deployed = await fetch(`${logged.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: deployForm({ name: "logger" }, await inputLogger()) })
      expect(deployed.status, await deployed.clone().text()).toBe(201)
      for (const word of ["one", "two", "three", "four"]) {
        expect((await logged.request("POST", "/v1/functions/logger/invoke", { token: owner, body: word })).status).toBe(200)
      }
      type Page = { logs: Array<{ seq: number; message: string }>; next_before: number | null }
      const page = async (query: string) => {
        const reply = await logged.request("GET", `/v1/functions/logger/logs?${query}`, { token: owner })
        expect(reply.status, reply.text).toBe(200)
        return reply.body as Page
      }
      // lines are written in batches off the invocation's path
      for (let tries = 0; (await page("limit=1000")).logs.length < 4; tries++) {
        expect(tries).toBeLessThan(50)
        await new Promise((r) => setTimeout(r, 100))
      }
      const first = await page("limit=2")
      expect(first.logs.map((l) => l.message)).toEqual(["four", "three"])
      expect(first.next_before).toBe(first.logs[1]!.seq)
      const second = await page(`limit=2&before=${first.next_before}`)
      expect(second.logs.map((l) => l.message)).toEqual(["two", "one"])
      expect(second.next_before).toBeNull()
      const whole = await page("limit=4")
      expect(whole.logs).toHaveLength(4)
      expect(whole.next_before).toBeNull()
      expect((await page("limit=3")).next_before).not.toBeNull()
    } finally {
      await logged.stop()
    }
  }, 120_000)
})

/**
 * Functions on the cluster engines, across two gateways: the registry on rqlited, the namespace's
 * cluster SQL on another, the cache on Redis and the modules on Kubo with IPFS Cluster. Kubo and
 * IPFS Cluster run only in the loopback-only network namespace functions.cluster.test.ts starts.
 */
if (process.env[IN_NETNS] === "1") {
  describe("functions on the cluster engines: rqlite, Redis, Kubo and IPFS Cluster, two gateways", () => {
    let a: Gateway
    let b: Gateway
    let owner: string
    let runtimeKey: string
    let engine: StorageEngine
    let registry: RqlitedServer
    let sqlStore: RqlitedServer
    let redis: RedisServer

    const invokeOn = async (gw: Gateway, name: string, body: unknown) => {
      const res = await fetch(`${gw.url}/v1/functions/${name}/invoke`, { method: "POST", headers: { authorization: `Bearer ${runtimeKey}` }, body: JSON.stringify(body) })
      const text = await res.text()
      return { status: res.status, text, json: JSON.parse(text) as any }
    }

    beforeAll(async () => {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      if (!hasRedisServer()) throw new Error(redisMissingMessage())
      const kubo = storageEngines().find(([name]) => name === "kubo")
      if (kubo === undefined) throw new Error("the kubo engine runs only inside the network namespace of functions.cluster.test.ts")
      ;[engine, registry, sqlStore, redis] = await Promise.all([kubo[1](), Effect.runPromise(startRqlited()), Effect.runPromise(startRqlited()), Effect.runPromise(startRedis())])
      const [portA, portB] = [await Effect.runPromise(freePort), await Effect.runPromise(freePort)]
      const shared = {
        ...engine.env,
        PORTICO_RQLITE_URL: registry.url,
        PORTICO_SQL_RQLITE_URLS: `fncluster=${sqlStore.url}`,
        PORTICO_REDIS_URL: redis.url,
        PORTICO_SECRET: "22".repeat(32)
      }
      ;[a, b] = await Promise.all([
        startGateway({ port: portA, env: { ...shared, PORTICO_NODE_ID: "node-a", PORTICO_PEERS: `node-b=http://127.0.0.1:${portB}` } }),
        startGateway({ port: portB, env: { ...shared, PORTICO_NODE_ID: "node-b", PORTICO_PEERS: `node-a=http://127.0.0.1:${portA}` } })
      ])
      owner = (await a.cli(["namespace", "create", "fncluster"])).api_key
      runtimeKey = await mintKey(a, owner, { profile: "runtime", label: "app" })
    }, 240_000)
    afterAll(async () => {
      await Promise.allSettled([a?.stop(), b?.stop()])
      await engine?.stop()
      for (const server of [registry, sqlStore, redis]) if (server !== undefined) await Effect.runPromise(server.stop)
    }, 120_000)

    it("deploys on one gateway and runs on the other from Kubo: SQL on rqlite through the guard, the cache on Redis shared", async () => {
      const deployed = await fetch(`${a.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: deployForm({ name: "kitchen" }, goFunction("kitchen")) })
      const body = (await deployed.json()) as { cid: string }
      expect(deployed.status, JSON.stringify(body)).toBe(201)
      expect(await engine.holds(a, body.cid)).toBe(true)
      // b's runner never saw the module: it reads it from content storage
      expect((await invokeOn(b, "kitchen", { op: "exec", sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", args: "[]" })).status).toBe(200)
      expect((await invokeOn(b, "kitchen", { op: "exec", sql: "INSERT INTO notes (body) VALUES (?)", args: JSON.stringify(["on b"]) })).json).toMatchObject({ rows_affected: 1 })
      expect((await invokeOn(a, "kitchen", { op: "query", sql: "SELECT body FROM notes", args: "[]" })).json).toEqual([{ body: "on b" }])
      // the rows are in the namespace's rqlite store, asked directly
      const direct = await fetch(`${sqlStore.url}/db/query?q=${encodeURIComponent("SELECT body FROM notes")}`)
      expect(JSON.stringify(await direct.json())).toContain("on b")
      expect((await invokeOn(a, "kitchen", { op: "query", sql: "SELECT * FROM function_secrets", args: "[]" })).text).toBe("null")
      expect((await invokeOn(a, "kitchen", { op: "cache", key: "k", value: "from a" })).json).toEqual({ value: "from a" })
      expect((await invokeOn(b, "kitchen", { op: "cache", key: "k2", value: "from b" })).json).toEqual({ value: "from b" })
    }, 120_000)

    it("lets a function on one node reach sockets held by the other through the internal connection routes", async () => {
      const deployed = await fetch(`${b.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: deployForm({ name: "chat" }, goFunction("chat", { reactor: true })) })
      expect(deployed.status).toBe(201)
      const open = async (gw: Gateway) => {
        const opened = await openFunctionSocket(gw.url, "chat", runtimeKey)
        if (!("ws" in opened)) throw new Error(`refused ${opened.status} ${JSON.stringify(opened.body)}`)
        return { socket: opened, id: (await opened.next()).id as string }
      }
      const onA = await open(a)
      const onB = await open(b)
      expect(onA.id.startsWith("node-a.")).toBe(true)
      expect(onB.id.startsWith("node-b.")).toBe(true)
      // a's instance lists both nodes' sockets and writes to b's through node-b's internal route
      expect(await onA.socket.ask({ op: "broadcast", text: "to all" })).toBe("to all")
      expect(await onA.socket.next()).toEqual({ clients: 2, sent: 2 })
      expect(await onB.socket.next()).toBe("to all")
      expect(await onB.socket.ask({ op: "send", target: onA.id, text: "from b" })).toEqual({ sent: 1 })
      expect(await onA.socket.next()).toBe("from b")
      // the internal routes are behind the coordination MAC: a client cannot call them
      const forged = await fetch(`${b.url}/v1/serverless/ws/connections/send`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ namespace: "fncluster", id: onB.id, data_base64: "aGk=" })
      })
      expect([forged.status, ((await forged.json()) as { code: string }).code]).toEqual([403, "COORDINATION_REFUSED"])
      expect(await onA.socket.ask({ op: "kick", target: onB.id })).toEqual({ kicked: 1 })
      expect((await onB.socket.closed).code).toBe(1000)
      onA.socket.ws.close()
      await onA.socket.closed
    }, 120_000)
  })
}
