/**
 * One benchmark target per process: `node --import tsx bench/floor/server.ts <kind> <port>`.
 * Prints `READY <port>` on stdout once listening, so the runner knows when to load it.
 */
import { HttpApiBuilder, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Runtime } from "effect"
import * as http from "node:http"
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

switch (kind) {
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
