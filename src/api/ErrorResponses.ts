/**
 * Turns every failure that leaves the API into the one error envelope `{error, code, hint?}`:
 * our tagged errors with their status (and `Retry-After`), schema failures as 400, unreadable
 * bodies as 400, unknown routes as 404 or 405, and anything else as a generic 500 whose detail
 * goes to the log only.
 */
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Effect, Option } from "effect"
import { type ApiError, Code, type ErrorBody, envelopeText, isApiError, statusOf } from "../domain/Errors.js"
import { BodyNotUtf8 } from "./node/LeanServerRequest.js"
import { routeIndex } from "./gate/RouteIndex.js"
import { MAX_PATH_PARAM_LENGTH } from "./Wire.js"
import { replicaAnswerOf } from "./groups/ReplicaWire.js"

/** A refusal as it goes on the wire, whichever request path answers it (the app or the fast lane). */
export interface Refusal {
  readonly status: number
  /** The envelope's JSON text. */
  readonly body: string
  /** Seconds, sent as `Retry-After`. */
  readonly retryAfter: number | undefined
}

/** The one encoder of refusals: the status of the error's class, its envelope, `Retry-After` where it carries one. */
export const refusalOf = (error: ApiError): Refusal => ({
  status: statusOf(error),
  body: envelopeText(error),
  retryAfter: "retryAfterSeconds" in error ? error.retryAfterSeconds : undefined
})

const asResponse = (refusal: Refusal) =>
  HttpServerResponse.text(refusal.body, {
    status: refusal.status,
    contentType: "application/json",
    headers: refusal.retryAfter === undefined ? undefined : { "retry-after": String(refusal.retryAfter) }
  })

/** The envelope as a response, with `Retry-After` when given. */
export const errorResponse = (status: number, body: ErrorBody, retryAfterSeconds?: number) =>
  asResponse({ status, body: envelopeText(body), retryAfter: retryAfterSeconds })

/** The methods a path is served with (RouteIndex.ts): 404 when none, 405 when others. */
export const allowedMethods = (path: string): ReadonlyArray<string> => routeIndex().allowedMethods(path)

const fixedMethods = (path: string): ReadonlyArray<string> => routeIndex().fixedMethods(path)

const methodNotAllowed = (method: string, path: string, methods: ReadonlyArray<string>) =>
  errorResponse(405, {
    error: `method ${method} not allowed on ${quoted(path)}`,
    code: Code.METHOD_NOT_ALLOWED,
    hint: "allowed: " + methods.join(", ")
  }).pipe(HttpServerResponse.setHeader("allow", methods.join(", ")))

/** Whether a segment is past the router's cap on a parameter, counted decoded as the router does. */
const hasOverlongSegment = (path: string): boolean =>
  path.length > MAX_PATH_PARAM_LENGTH &&
  path.split("/").some((segment) => segment.length > MAX_PATH_PARAM_LENGTH && decodedLength(segment) > MAX_PATH_PARAM_LENGTH)

const decodedLength = (segment: string): number => {
  try {
    return decodeURIComponent(segment).length
  } catch {
    return segment.length
  }
}

/** A path as quoted back in a message: the route's shape is enough, a 16 KiB path is not. */
const quoted = (path: string) => (path.length > 120 ? path.slice(0, 120) + "…" : path)

const notFoundOrNotAllowed = (request: HttpServerRequest.HttpServerRequest) => {
  const path = request.url.split("?")[0] ?? "/"
  const methods = allowedMethods(path)
  if (methods.includes(request.method) && hasOverlongSegment(path)) {
    // the route exists for this method, yet the router did not take the path: a parameter past
    // its cap, which no route accepts (every id, CID and name is far shorter)
    return errorResponse(400, {
      error: "a path parameter is too long",
      code: Code.VALIDATION_FAILED,
      hint: `a path segment is at most ${MAX_PATH_PARAM_LENGTH} characters`
    })
  }
  if (methods.includes(request.method) && path.includes("%")) {
    // the route exists for this method, yet the router did not take the path: a parameter it
    // could not decode (`%ff`)
    return errorResponse(400, {
      error: "a path parameter is not valid percent-encoded UTF-8",
      code: Code.VALIDATION_FAILED,
      hint: "percent-encode path parameters as UTF-8"
    })
  }
  if (methods.length > 0) return methodNotAllowed(request.method, path, methods)
  return errorResponse(404, { error: "no such route", code: Code.ROUTE_NOT_FOUND, hint: "see /v1/openapi.json" })
}

/** Keeps parser messages useful but bounded; they never contain server state, only the input's shape. */
const clip = (s: string) => (s.length > 600 ? s.slice(0, 600) + "…" : s)

/**
 * A schema refusal as the member it is about and what is wrong with it (`name: at most 255
 * characters`), one line per issue, rather than the schema tree with its internal type names.
 */
const describeIssues = (error: HttpApiError.HttpApiDecodeError): string => {
  // An optional member is the union of its schema and Undefined, so a wrong value fails both
  // branches; "Expected undefined" is never what the client meant to send, so it is left out.
  const real = error.issues.filter((issue) => !(issue._tag === "Type" && issue.message.startsWith("Expected undefined,")))
  const lines = (real.length > 0 ? real : error.issues).slice(0, 5).map((issue) => {
    const at = issue.path.map(String).join(".")
    // a large integer in the body is read as a bigint, which the schema's text writes with an
    // `n`: the client wrote a plain integer, so that is what it reads back
    const message = (issue.message.split("\n")[0] ?? issue.message).replace(/\bactual (-?\d+)n\b/g, "actual $1")
    return at === "" ? message : `${at}: ${message}`
  })
  return lines.length === 0 ? error.message : lines.join("; ")
}

/** A schema refusal's `error` text, whichever path decoded it (the app, or the `upgrade` listener). */
export const describeDecodeError = (error: HttpApiError.HttpApiDecodeError): string => clip(describeIssues(error))

export const renderFailure = (
  cause: Cause.Cause<unknown>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function* () {
    // Failures may arrive wrapped (sequential, or as a defect from a body reader): classify the
    // most significant error the cause holds.
    {
      const error = Cause.squash(cause)
      if (isApiError(error) || error instanceof HttpApiError.HttpApiDecodeError) {
        // `DELETE /v1/namespace/members/transfer` reaches `DELETE …/members/:wallet`, whose
        // parameter it can never be: the path is the fixed route's, which has no such method.
        // Whatever that sibling refused first (its gate, its parameter), the answer is 405.
        const request = yield* HttpServerRequest.HttpServerRequest
        const path = request.url.split("?")[0] ?? "/"
        const fixed = fixedMethods(path)
        if (fixed.length > 0 && !fixed.includes(request.method)) return methodNotAllowed(request.method, path, fixed)
      }
      if (isApiError(error)) return asResponse(refusalOf(error))
      // the replica routes' refusals are `{error}` alone (spec §4.8)
      const replica = replicaAnswerOf(error)
      if (replica !== undefined) return HttpServerResponse.text(replica.body, { status: replica.status, contentType: "application/json" })
      if (error instanceof HttpApiError.HttpApiDecodeError) {
        return errorResponse(400, {
          error: describeDecodeError(error),
          code: Code.VALIDATION_FAILED,
          hint: "check the request against /v1/openapi.json"
        })
      }
      if (error instanceof HttpServerError.RouteNotFound) {
        return notFoundOrNotAllowed(yield* HttpServerRequest.HttpServerRequest)
      }
      if (error instanceof HttpServerError.RequestError && error.cause instanceof BodyNotUtf8) {
        return errorResponse(400, {
          error: "the request body is not valid UTF-8",
          code: Code.MALFORMED_JSON,
          hint: "send JSON encoded as UTF-8 (RFC 8259); bytes that are not UTF-8 are refused, never replaced"
        })
      }
      if (error instanceof HttpServerError.RequestError) {
        return errorResponse(400, {
          error: "the request body could not be read as JSON",
          code: Code.MALFORMED_JSON,
          hint: "send one JSON value with no repeated members, Content-Type: application/json"
        })
      }
    }
    // Interrupted by shutdown or a departed client: whoever is still listening may retry.
    if (Cause.isInterruptedOnly(cause)) {
      return errorResponse(503, { error: "request interrupted", code: Code.UNAVAILABLE, hint: "retry" })
    }
    yield* Effect.logError("unhandled failure", cause)
    return errorResponse(500, { error: "internal error", code: Code.INTERNAL })
  }).pipe(Effect.catchAllCause(() => Effect.succeed(errorResponse(500, { error: "internal error", code: Code.INTERNAL }))))
