/**
 * Every error the gateway answers, in one place. Each class is a tagged error carrying the wire
 * body `{error, code, hint?}`; its HTTP status is annotated on the class, and `ErrorBody` is the
 * wire schema: the `_tag` used to tell classes apart never reaches the client.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/** The one error body every route answers with. */
export const ErrorBody = Schema.Struct({
  error: Schema.String.annotations({ description: "What went wrong, for a human" }),
  code: Schema.String.annotations({ description: "Stable machine-readable code" }),
  hint: Schema.optional(Schema.String.annotations({ description: "How to fix or retry" }))
}).annotations({ identifier: "ErrorBody" })
export type ErrorBody = typeof ErrorBody.Type

const fields = {
  error: Schema.String,
  code: Schema.String,
  hint: Schema.optional(Schema.String)
}

/**
 * Builds the wire schema of an error class: the class on the type side, `ErrorBody` on the wire,
 * annotated with its status so HttpApi picks the status and OpenAPI documents the body.
 */
const wire = <C extends Schema.Schema.AnyNoContext & { readonly identifier: string }>(
  cls: C,
  status: number,
  tag: string
) =>
  Schema.transform(ErrorBody, cls as Schema.Schema<Schema.Schema.Type<C>, { readonly _tag: string } & ErrorBody>, {
    strict: false,
    decode: (body) => ({ _tag: tag, ...body }),
    encode: (value) => {
      const { _tag, ...body } = value as { readonly _tag: string } & ErrorBody
      return body
    }
  }).annotations(HttpApiSchema.annotations({ status }))

type Body = { readonly error: string; readonly code: string; readonly hint?: string | undefined }

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {}
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {}
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", fields) {}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {}
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  ...fields,
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {}
export class Internal extends Schema.TaggedError<Internal>()("Internal", fields) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  ...fields,
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {}

/** Wire schemas to declare on endpoints (`.addError(Wire.BadRequest)`). */
export const Wire = {
  BadRequest: wire(BadRequest, 400, "BadRequest"),
  Unauthorized: wire(Unauthorized, 401, "Unauthorized"),
  Forbidden: wire(Forbidden, 403, "Forbidden"),
  NotFound: wire(NotFound, 404, "NotFound"),
  MethodNotAllowed: wire(MethodNotAllowed, 405, "MethodNotAllowed"),
  Conflict: wire(Conflict, 409, "Conflict"),
  PayloadTooLarge: wire(PayloadTooLarge, 413, "PayloadTooLarge"),
  RateLimited: Schema.transform(ErrorBody, RateLimited, {
    strict: true,
    decode: (body) => ({ _tag: "RateLimited" as const, ...body, retryAfterSeconds: undefined }),
    encode: ({ error, code, hint }) => ({ error, code, hint })
  }).annotations(HttpApiSchema.annotations({ status: 429 })),
  Internal: wire(Internal, 500, "Internal"),
  Unavailable: Schema.transform(ErrorBody, Unavailable, {
    strict: true,
    decode: (body) => ({ _tag: "Unavailable" as const, ...body, retryAfterSeconds: undefined }),
    encode: ({ error, code, hint }) => ({ error, code, hint })
  }).annotations(HttpApiSchema.annotations({ status: 503 }))
} as const

/** Every API error, for the union a handler may fail with. */
export type ApiError =
  | BadRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | MethodNotAllowed
  | Conflict
  | PayloadTooLarge
  | RateLimited
  | Internal
  | Unavailable

/** HTTP status of each error tag: the adapter uses it for errors raised outside HttpApi. */
export const statusOf: Record<ApiError["_tag"], number> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  Conflict: 409,
  PayloadTooLarge: 413,
  RateLimited: 429,
  Internal: 500,
  Unavailable: 503
}

/** The machine codes, named once. Spec §7 codes keep their spelling. */
export const Code = {
  VALIDATION_FAILED: "VALIDATION_FAILED",
  MALFORMED_JSON: "MALFORMED_JSON",
  BAD_REQUEST: "BAD_REQUEST",
  /** node's parser refused the request line or headers (431, 408): no route saw it */
  HEADERS_TOO_LARGE: "HEADERS_TOO_LARGE",
  REQUEST_TIMEOUT: "REQUEST_TIMEOUT",
  UNAUTHORIZED: "UNAUTHORIZED",
  INVALID_TOKEN: "INVALID_TOKEN",
  INVALID_API_KEY: "INVALID_API_KEY",
  FORBIDDEN: "FORBIDDEN",
  GRANT_REQUIRED: "GRANT_REQUIRED",
  CONTROL_PLANE_REQUIRED: "CONTROL_PLANE_REQUIRED",
  OWNER_REQUIRED: "OWNER_REQUIRED",
  NOT_AN_OPERATOR: "NOT_AN_OPERATOR",
  TRANSFER_REFUSED: "TRANSFER_REFUSED",
  NOT_FOUND: "NOT_FOUND",
  ROUTE_NOT_FOUND: "ROUTE_NOT_FOUND",
  METHOD_NOT_ALLOWED: "METHOD_NOT_ALLOWED",
  CONFLICT: "CONFLICT",
  NAMESPACE_EXISTS: "NAMESPACE_EXISTS",
  PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  RATE_LIMITED: "RATE_LIMITED",
  SQL_NOT_ALLOWED: "SQL_NOT_ALLOWED",
  SQL_ERROR: "SQL_ERROR",
  STATEMENT_TIMEOUT: "STATEMENT_TIMEOUT",
  TRANSACTION_FAILED: "TRANSACTION_FAILED",
  DATABASE_EXISTS: "DATABASE_EXISTS",
  HOME_NODE_UNREACHABLE: "HOME_NODE_UNREACHABLE",
  /**
   * An internal route refused the calling node's coordination (source, MAC, time, replay). Only
   * gateways see it: the front gateway answers its client 503 HOME_NODE_UNREACHABLE instead.
   */
  COORDINATION_REFUSED: "COORDINATION_REFUSED",
  SESSION_REQUIRED: "SESSION_REQUIRED",
  RANGE_NOT_SATISFIABLE: "RANGE_NOT_SATISFIABLE",
  FETCH_CAP_NOT_ALONE: "FETCH_CAP_NOT_ALONE",
  FETCH_CAP_MISSING: "FETCH_CAP_MISSING",
  FETCH_CAP_INVALID: "FETCH_CAP_INVALID",
  FETCH_CAP_REVOKED: "FETCH_CAP_REVOKED",
  FETCH_CAP_DEVICE_REQUIRED: "FETCH_CAP_DEVICE_REQUIRED",
  FETCH_CAP_REVOKE_KEY_INVALID: "FETCH_CAP_REVOKE_KEY_INVALID",
  FETCH_CAP_UNAVAILABLE: "FETCH_CAP_UNAVAILABLE",
  INTERNAL: "INTERNAL",
  UNAVAILABLE: "UNAVAILABLE"
} as const

/** Shorthands that keep call sites on one line. */
export const badRequest = (error: string, hint?: string, code: string = Code.BAD_REQUEST) =>
  new BadRequest(body(error, code, hint))
export const unauthorized = (error: string, code: string = Code.UNAUTHORIZED, hint?: string) =>
  new Unauthorized(body(error, code, hint))
export const forbidden = (error: string, code: string = Code.FORBIDDEN, hint?: string) =>
  new Forbidden(body(error, code, hint))
export const notFound = (error: string, code: string = Code.NOT_FOUND, hint?: string) =>
  new NotFound(body(error, code, hint))
export const conflict = (error: string, code: string = Code.CONFLICT, hint?: string) =>
  new Conflict(body(error, code, hint))
export const unavailable = (error: string, retryAfterSeconds = 1) =>
  new Unavailable({ ...body(error, Code.UNAVAILABLE, "retry shortly"), retryAfterSeconds })
export const internal = () => new Internal(body("internal error", Code.INTERNAL, undefined))

const body = (error: string, code: string, hint: string | undefined): Body =>
  hint === undefined ? { error, code } : { error, code, hint }

/**
 * The API error for a service's refusal that carries its own status (sign-in and cache rules
 * speak in statuses so they stay HTTP-free beyond a number).
 */
export const refusal = (status: 400 | 401 | 403 | 404 | 413, error: string, code: string, hint?: string) => {
  const b = body(error, code, hint)
  switch (status) {
    case 400:
      return new BadRequest(b)
    case 401:
      return new Unauthorized(b)
    case 403:
      return new Forbidden(b)
    case 404:
      return new NotFound(b)
    case 413:
      return new PayloadTooLarge(b)
  }
}

export type RefusalStatus = 400 | 401 | 403 | 404 | 409 | 413 | 429 | 503

/** `refusal` for services that may also answer conflict, busy (429) or retry later (503). */
export const wideRefusal = (status: RefusalStatus, error: string, code: string, hint?: string, retryAfterSeconds = 1) => {
  switch (status) {
    case 409:
      return new Conflict(body(error, code, hint))
    case 429:
      return new RateLimited({ ...body(error, code, hint), retryAfterSeconds })
    case 503:
      return new Unavailable({ ...body(error, code, hint), retryAfterSeconds })
    default:
      return refusal(status, error, code, hint)
  }
}
