/**
 * One benchmark target per process: `node --import tsx bench/floor/server.ts <kind> <port>`.
 * Prints `READY <port>` on stdout once listening, so the runner knows when to load it.
 */
import { HttpApiBuilder, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Runtime } from "effect"
import Database from "better-sqlite3"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fastRuntimeLayer, makeRequestListener } from "../../src/api/NodeAdapter.js"
import { ApiLive, principals } from "./app.js"

const kind = process.argv[2] ?? "bare"
const port = Number(process.argv[3] ?? "0")
const host = "127.0.0.1"
const ready = () => process.stdout.write(`READY ${port}\n`)

const startBare = () => {
  const server = http.createServer((req, res) => {
    const auth = req.headers.authorization
    const p = auth !== undefined && auth.startsWith("Bearer ") ? principals.get(auth.slice(7)) : undefined
    if (p === undefined) {
      res.writeHead(401, { "content-type": "application/json" })
      res.end(`{"_tag":"Unauthorized","error":"unauthorized"}`)
      return
    }
    const body = JSON.stringify(p)
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
    res.end(body)
  })
  server.listen(port, host, ready)
  // an explicit exit lets --cpu-prof write its profile
  process.on("SIGTERM", () => process.exit(0))
}

const official = (settings: boolean) => {
  const Serve = HttpApiBuilder.serve().pipe(Layer.provide(ApiLive))
  const Ready = Layer.effectDiscard(Effect.flatMap(HttpServer.HttpServer, () => Effect.sync(ready)))
  const Main = Layer.mergeAll(Serve, Ready).pipe(
    Layer.provide(NodeHttpServer.layer(http.createServer, { port, host }))
  )
  const App = settings ? Main.pipe(Layer.provide(fastRuntimeLayer)) : Main
  NodeRuntime.runMain(Layer.launch(App))
}

const startLean = () => {
  const program = Effect.gen(function* () {
    const app = yield* HttpApiBuilder.httpApp
    const runtime = yield* Effect.runtime<HttpRouter.HttpRouter.DefaultServices>()
    const listener = makeRequestListener(app, runtime, { maxBodyBytes: 1024 * 1024 })
    const server = http.createServer(listener)
    yield* Effect.async<void>((resume) => {
      server.listen(port, host, () => resume(Effect.void))
    })
    ready()
    return yield* Effect.never
  })
  NodeRuntime.runMain(
    program.pipe(
      // one build so the groups register their routes in the same Router the app reads
      Effect.provide(
        ApiLive.pipe(
          Layer.provideMerge(Layer.mergeAll(HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer)),
          Layer.merge(NodeHttpServer.layerContext),
          Layer.provide(fastRuntimeLayer)
        )
      )
    )
  )
}

/** The lean adapter around a plain Effect (no HttpApi): what the adapter and a fiber cost on their own. */
const startLeanPlain = () => {
  const app = Effect.flatMap(HttpServerRequest.HttpServerRequest, (req) => {
    const auth = req.headers.authorization
    const p = auth !== undefined && auth.startsWith("Bearer ") ? principals.get(auth.slice(7)) : undefined
    return p === undefined
      ? HttpServerResponse.json({ _tag: "Unauthorized", error: "unauthorized" }, { status: 401 })
      : HttpServerResponse.json(p)
  }).pipe(Effect.orDie)
  const listener = makeRequestListener(app, Runtime.defaultRuntime, { maxBodyBytes: 1024 * 1024 })
  http.createServer(listener).listen(port, host, ready)
  process.on("SIGTERM", () => process.exit(0))
}

/**
 * Reference: bare node:http doing the least any API-key check must do without a cache of keys
 * (revocation at once): parse the key, read its row from SQLite (WAL, a read-only connection,
 * one prepared statement), HMAC the secret, compare in constant time, check expiry and
 * revocation. The ceiling of `gateway-key` while every request reads its key.
 */
const startBareKeycheck = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-keycheck-"))
  const file = path.join(dir, "registry.db")
  const writer = new Database(file)
  writer.pragma("journal_mode = WAL")
  writer.exec(
    "CREATE TABLE api_keys (id TEXT PRIMARY KEY, namespace TEXT NOT NULL, hash TEXT NOT NULL, role TEXT NOT NULL, scopes TEXT NOT NULL, label TEXT, created_at INTEGER NOT NULL, created_by TEXT, expires_at INTEGER, revoked_at INTEGER)"
  )
  const hmacKey = crypto.randomBytes(32)
  const hash = (value: string) => crypto.createHmac("sha256", hmacKey).update(value, "utf8").digest("base64url")
  const id = "key_aaaaaaaaaaaaaaaa"
  const secret = crypto.randomBytes(32).toString("base64url")
  writer
    .prepare("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    .run(id, "ns", hash(`${id}:${secret}`), "admin", JSON.stringify(["cache"]), "bench", Date.now(), "bench", null, null)
  const reader = new Database(file, { readonly: true, fileMustExist: true })
  const byId = reader.prepare(
    "SELECT id, namespace, hash, role, scopes, label, created_at, created_by, expires_at, revoked_at FROM api_keys WHERE id = ?"
  )
  const pattern = /^Bearer (portico_(key_[a-z2-7]{16})_([A-Za-z0-9_-]{43}))$/
  const refuse = (res: http.ServerResponse) => {
    res.writeHead(401, { "content-type": "application/json" })
    res.end(`{"error":"unauthorized","code":"INVALID_API_KEY"}`)
  }
  const server = http.createServer((req, res) => {
    const m = pattern.exec(req.headers.authorization ?? "")
    const row = m === null ? undefined : (byId.get(m[2]) as Record<string, string | number | null> | undefined)
    if (m === null || row === undefined) return refuse(res)
    const expected = Buffer.from(String(row["hash"]))
    const presented = Buffer.from(hash(`${m[2]}:${m[3]}`))
    const now = Date.now()
    if (
      expected.length !== presented.length || !crypto.timingSafeEqual(expected, presented) || row["revoked_at"] !== null ||
      (row["expires_at"] !== null && Number(row["expires_at"]) <= now)
    ) return refuse(res)
    const body = JSON.stringify({
      namespace: row["namespace"],
      subject: `key:${row["id"]}`,
      method: "api_key",
      role: row["role"],
      grants: JSON.parse(String(row["scopes"]))
    })
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
    res.end(body)
  })
  server.listen(port, host, () => process.stdout.write(`HEADER authorization: Bearer portico_${id}_${secret}\nREADY ${port}\n`))
  process.on("SIGTERM", () => {
    fs.rmSync(dir, { recursive: true, force: true })
    process.exit(0)
  })
}

switch (kind) {
  case "bare-keycheck":
    startBareKeycheck()
    break
  case "lean-plain":
    startLeanPlain()
    break
  case "bare":
    startBare()
    break
  case "official":
    official(false)
    break
  case "settings":
    official(true)
    break
  case "lean":
    startLean()
    break
  default:
    process.stderr.write(`unknown kind ${kind}\n`)
    process.exit(2)
}
