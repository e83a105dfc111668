/**
 * Serves the OpenAPI document at a path, as HttpApiBuilder.middlewareOpenApi does, with what only
 * the running gateway knows written in: the per-namespace rate-limit ceiling its operator set.
 */
import { HttpApi, HttpApiBuilder, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect } from "effect"
import { RateLimiter } from "../layers/ratelimit/RateLimiter.js"
import { withRateLimitCeiling } from "./OpenApiDocument.js"

export const openApiRoute = (path: `/${string}`) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function* () {
      const { api } = yield* HttpApi.Api
      const limiter = yield* RateLimiter
      const spec = withRateLimitCeiling(OpenApi.fromApi(api) as unknown as Record<string, unknown>, limiter.namespaceCeiling)
      const response = yield* HttpServerResponse.json(spec).pipe(Effect.orDie)
      yield* router.get(path, Effect.succeed(response))
    })
  )
