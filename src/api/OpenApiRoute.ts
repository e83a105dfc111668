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

/**
 * The document is built on the route's first request and kept: walking every endpoint's schemas
 * costs about 0.2 s of CPU, which a gateway's start should not pay for a route few clients call.
 */
export const openApiRoute = (path: `/${string}`) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function* () {
      const context = yield* Effect.context<HttpApi.Api | RateLimiter>()
      const response = yield* Effect.cached(
        Effect.flatMap(gatewayDocument, (document) => HttpServerResponse.json(document)).pipe(Effect.orDie, Effect.provide(context))
      )
      yield* router.get(path, response)
    })
  )
