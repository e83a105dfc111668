/**
 * Serves the OpenAPI document at a path, as HttpApiBuilder.middlewareOpenApi does, with what only
 * the running gateway knows written in: the per-namespace rate-limit ceiling its operator set.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import { Effect } from "effect"
import { RateLimiter } from "../layers/ratelimit/RateLimiter.js"
import { withRateLimitCeiling } from "./OpenApiDocument.js"

/** The gateway's OpenAPI document: the API's, with this gateway's rate-limit ceiling. */
export const gatewayDocument = Effect.gen(function* () {
  const { api } = yield* HttpApi.Api
  const limiter = yield* RateLimiter
  return withRateLimitCeiling(OpenApi.fromApi(api) as unknown as Record<string, unknown>, limiter.namespaceCeiling)
})

export const openApiRoute = (path: `/${string}`) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function* () {
      const response = yield* HttpServerResponse.json(yield* gatewayDocument).pipe(Effect.orDie)
      yield* router.get(path, Effect.succeed(response))
    })
  )
