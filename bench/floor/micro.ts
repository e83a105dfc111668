/**
 * In-process cost of one request through each layer of the stack, without
 * sockets: `npx tsx bench/floor/micro.ts`. Every variant completes
 * synchronously, so the number is CPU per request (best of 4 × 40k).
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer, Runtime, Scope } from "effect"
import { ApiLive, TOKEN, Whoami, principals } from "./app.js"

const N = 40_000
const req = HttpServerRequest.fromWeb(
  new Request("http://127.0.0.1/v1/auth/whoami", { headers: { authorization: `Bearer ${TOKEN}` } })
)
type Env = HttpServerRequest.HttpServerRequest | Scope.Scope | HttpRouter.HttpRouter.DefaultServices
const time = <R>(name: string, rt: Runtime.Runtime<R>, eff: Effect.Effect<unknown, unknown, R | Env>) => {
  const ctx = Context.add(rt.context, HttpServerRequest.HttpServerRequest, req)
  const r2 = Runtime.make({ context: ctx, runtimeFlags: rt.runtimeFlags, fiberRefs: rt.fiberRefs })
  const run = Effect.scoped(eff) as Effect.Effect<unknown, unknown, R | HttpServerRequest.HttpServerRequest>
  let best = Number.POSITIVE_INFINITY
  for (let k = 0; k < 4; k++) {
    const t0 = performance.now()
    for (let i = 0; i < N; i++) Runtime.runFork(r2, run)
    best = Math.min(best, ((performance.now() - t0) * 1000) / N)
  }
  process.stdout.write(`${name.padEnd(44)} ${best.toFixed(1)} µs\n`)
}

const whoami = principals.get(TOKEN) ?? { namespace: "", subject: "", method: "", role: "", grants: [] }
const router = HttpRouter.empty.pipe(HttpRouter.get("/v1/auth/whoami", HttpServerResponse.json(whoami)))
const Api2 = HttpApi.make("x").add(HttpApiGroup.make("auth").add(HttpApiEndpoint.get("whoami", "/v1/auth/whoami").addSuccess(Whoami)))
const NoAuthLive = HttpApiBuilder.api(Api2).pipe(
  Layer.provide(HttpApiBuilder.group(Api2, "auth", (h) => h.handle("whoami", () => Effect.succeed(whoami))))
)

const build = (apiLayer: Layer.Layer<HttpApi.Api>, nodeContext: boolean) => {
  const base = apiLayer.pipe(Layer.provideMerge(Layer.mergeAll(HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer)))
  const layer = nodeContext ? Layer.merge(base, NodeHttpServer.layerContext) : base
  return Effect.runSync(Effect.scoped(Effect.gen(function* () {
    const ctx = yield* Layer.build(layer)
    return yield* Effect.provide(Effect.all([HttpApiBuilder.httpApp, Effect.runtime<never>()]), ctx)
  })))
}

time("fiber + Effect.scoped(Effect.void)", Runtime.defaultRuntime, Effect.void)
const routerApp = Effect.runSync(HttpRouter.toHttpApp(router))
time("HttpRouter, one route", Runtime.defaultRuntime, routerApp)
const [a2, r2] = build(NoAuthLive, false)
time("HttpApi, no middleware", r2, a2)
const [a3, r3] = build(ApiLive, false)
time("HttpApi + bearer HttpApiMiddleware", r3, a3)
const [a4, r4] = build(ApiLive, true)
time("HttpApi + bearer + NodeContext in context", r4, a4)
