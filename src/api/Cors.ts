/**
 * Browsers and CORS (docs/api.md, "Browsers and CORS"): a page served from another origin may
 * call the API with `fetch` when the namespace admits that origin (`PUT /v1/namespace/cors`).
 *
 * Which namespace decides: the credential's, once the request's credential has been checked;
 * otherwise the one the host names (`ns-<namespace>.<base domain>`). A preflight carries no
 * credential, so only a namespace host can answer one with permission; elsewhere it answers 204
 * granting nothing, and the browser then does not send the request.
 *
 * Both request paths use this module: the HttpApi app through `corsMiddleware` (which also
 * answers preflights: the fast lane never takes OPTIONS), the listener's fast lane through
 * `laneHeaders`, which answers on the spot or says the origins must be read first (the lane then
 * leaves the request to the app, as it does whenever it cannot finish).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Option } from "effect"
import type * as http from "node:http"
import { PorticoConfig } from "../layers/config/PorticoConfig.js"
import { CorsOrigins } from "../layers/namespaces/CorsOrigins.js"
import { RateLimiter } from "../layers/ratelimit/RateLimiter.js"
import { rateLimited } from "./gate/Gate.js"
import { errorResponse } from "./ErrorResponses.js"
import { RequestMeta } from "./RequestMeta.js"

/** Every method a route is served with. */
const ALLOW_METHODS = "GET, HEAD, POST, PUT, DELETE"
/** What a client sends beyond the CORS-safelisted headers: credentials, bodies, ranges, storage capabilities. */
const ALLOW_HEADERS = "authorization, content-type, range, if-none-match, if-range, x-portico-fetch-cap, x-portico-revoke-key"
/** Answer headers a page may read beyond the CORS-safelisted ones. */
const EXPOSE_HEADERS = "retry-after, etag, content-range, accept-ranges, content-length, content-disposition, allow"
/** Seconds a browser may keep a preflight's answer. */
const MAX_AGE = "600"

/** Namespace names as the namespace host carries them (3-63 of a-z, 0-9 and inner hyphens). */
const namespaceLabel = /^[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])$/

/** The namespace a `Host` header names, `ns-<namespace>.<base domain>` with any port, or undefined. */
export const hostNamespace = (host: string | undefined, baseDomain: string): string | undefined => {
  if (host === undefined) return undefined
  const name = host.toLowerCase().replace(/:[0-9]{1,5}$/, "")
  const suffix = "." + baseDomain.toLowerCase()
  if (!name.startsWith("ns-") || !name.endsWith(suffix)) return undefined
  const label = name.slice(3, name.length - suffix.length)
  return namespaceLabel.test(label) ? label : undefined
}

/** Headers of an actual answer to an admitted origin. */
const admitted = (origin: string): Record<string, string> => ({
  "access-control-allow-origin": origin,
  "access-control-expose-headers": EXPOSE_HEADERS,
  vary: "Origin"
})

/** The answer differs by origin even where it grants nothing: a shared cache must keep them apart. */
const notAdmitted: Record<string, string> = { vary: "Origin" }

/** Adds `Origin` to a `Vary` the answer may have already. */
const withVary = (response: HttpServerResponse.HttpServerResponse, headers: Record<string, string>) => {
  const vary = response.headers["vary"]
  const merged = vary === undefined || vary === "" ? headers : { ...headers, vary: `${vary}, ${headers["vary"] ?? "Origin"}` }
  return HttpServerResponse.setHeaders(response, merged)
}

const preflightAnswer = (origin: string | undefined) =>
  HttpServerResponse.empty({
    status: 204,
    headers:
      origin === undefined
        ? { vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers" }
        : {
            "access-control-allow-origin": origin,
            "access-control-allow-methods": ALLOW_METHODS,
            "access-control-allow-headers": ALLOW_HEADERS,
            "access-control-max-age": MAX_AGE,
            vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
          }
  })

/**
 * The app's CORS: answers preflights itself (the routes never see OPTIONS from a browser), and
 * adds the headers to every other answer, refusals included, for a request with `Origin`.
 * `inner` is the app as the error envelope renders it, so refusals are answers here.
 */
export const corsMiddleware = Effect.gen(function* () {
  const config = yield* PorticoConfig
  const origins = yield* CorsOrigins
  const limiter = yield* RateLimiter
  // a preflight reaches no route, so no route's gate charges it: it is charged to its client
  // network here, as every request is, before it may cost a registry read
  const preflight = (request: HttpServerRequest.HttpServerRequest, origin: string) =>
    Effect.flatMap(
      // the listener charged it already when the headers arrived (src/api/BodyGuard.ts)
      RequestMeta.clientCharged(request) ? Effect.succeed({ allowed: true, retryAfterSeconds: 0 }) : limiter.checkClient(Option.getOrUndefined(request.remoteAddress)),
      (client) => {
        if (!client.allowed) {
          const limited = rateLimited(client.retryAfterSeconds, "network")
          return Effect.succeed(errorResponse(429, limited, limited.retryAfterSeconds))
        }
        const namespace = hostNamespace(request.headers["host"], config.baseDomain)
        if (namespace === undefined) return Effect.succeed(preflightAnswer(undefined))
        return Effect.map(admits(namespace, origin), (yes) => preflightAnswer(yes ? origin : undefined))
      }
    )
  // a registry that cannot answer grants nothing: the request itself still gets its answer
  const admits = (namespace: string, origin: string) =>
    Effect.map(Effect.orElseSucceed(origins.get(namespace), (): ReadonlyArray<string> => []), (list) => list.includes(origin))
  return <E, R>(inner: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const origin = request.headers["origin"]
      if (origin === undefined) return inner
      if (request.method === "OPTIONS" && request.headers["access-control-request-method"] !== undefined) {
        return preflight(request, origin)
      }
      return Effect.flatMap(inner, (response) => {
        const source = typeof request.source === "object" && request.source !== null ? request.source : request
        const namespace = RequestMeta.namespaceOfSource(source) ?? hostNamespace(request.headers["host"], config.baseDomain)
        if (namespace === undefined) return Effect.succeed(withVary(response, notAdmitted))
        return Effect.map(admits(namespace, origin), (yes) => withVary(response, yes ? admitted(origin) : notAdmitted))
      })
    })
})

/** No CORS headers: the request has no `Origin`. */
const none: Readonly<Record<string, string>> = {}

/**
 * The fast lane's CORS: the headers for an answer to the caller of `namespace`, or undefined
 * when the namespace's origins are not known on the spot (the lane then declines).
 */
export const laneCors = Effect.map(CorsOrigins, (origins) => (req: http.IncomingMessage, namespace: string, at: number): Readonly<Record<string, string>> | undefined => {
  const origin = req.headers["origin"]
  if (origin === undefined) return none
  const list = origins.now(namespace, at)
  if (list === undefined) return undefined
  return list.includes(origin) ? admitted(origin) : notAdmitted
})
