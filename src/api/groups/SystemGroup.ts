/** Health, status, version and the token key set: the open routes of spec §4.9 and §4.5. */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Wire } from "../../domain/Errors.js"
import { Authentication, OpenGate } from "../Gates.js"
import { htmlToo } from "../OpenApiFacts.js"
import { authenticated, open } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { UnixSeconds } from "../Wire.js"

export const CheckStatus = Schema.Literal("ok", "failing")

export const HealthReport = Schema.Struct({
  status: Schema.Literal("ok", "degraded", "draining").annotations({
    description: "draining (answered with 503): an operator is taking this node out of service (POST /v1/node/command)"
  }),
  checks: Schema.Record({ key: Schema.String, value: CheckStatus })
}).annotations({ identifier: "HealthReport" })

export const StatusReport = Schema.Struct({
  status: Schema.Literal("ok", "degraded"),
  service: Schema.Literal("portico"),
  version: Schema.String,
  api: Schema.Literal("v1"),
  started_at: UnixSeconds,
  uptime_seconds: Schema.Int,
  capabilities: Schema.Array(Schema.String)
}).annotations({ identifier: "StatusReport", description: "Public view only: no addresses, ids, hostnames or error text" })

export const VersionReport = Schema.Struct({
  version: Schema.String,
  api: Schema.Literal("v1")
}).annotations({ identifier: "VersionReport" })

export const SchemaStatus = Schema.Struct({
  engine: Schema.Literal("sqlite", "rqlite"),
  status: Schema.Literal("current", "behind"),
  applied: Schema.Array(Schema.String),
  latest: Schema.String
}).annotations({ identifier: "SchemaStatus" })

export const PublicJwk = Schema.Struct({
  kty: Schema.String,
  crv: Schema.optional(Schema.String),
  x: Schema.optional(Schema.String),
  y: Schema.optional(Schema.String),
  kid: Schema.String,
  alg: Schema.String,
  use: Schema.optional(Schema.String)
}).annotations({ identifier: "PublicJwk" })

export const Jwks = Schema.Struct({ keys: Schema.Array(PublicJwk) }).annotations({ identifier: "Jwks" })

const html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html; charset=utf-8" }))

// health and status are open (spec §4.9); the schema status is the namespace's
export class SystemGroup extends HttpApiGroup.make("system")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(HealthReport).middleware(OpenGate))
  .add(HttpApiEndpoint.get("healthV1", "/v1/health").addSuccess(HealthReport).middleware(OpenGate))
  .add(
    HttpApiEndpoint.get("statusPage", "/status")
      .addSuccess(StatusReport)
      .addSuccess(html, { status: 200 })
      .middleware(OpenGate)
      .annotate(OpenApi.Transform, htmlToo)
  )
  .add(HttpApiEndpoint.get("status", "/v1/status").addSuccess(StatusReport).middleware(OpenGate))
  .add(HttpApiEndpoint.get("version", "/v1/version").addSuccess(VersionReport).middleware(OpenGate))
  .add(
    HttpApiEndpoint.get("schemaStatus", "/v1/schema-status")
      .addSuccess(SchemaStatus)
      .addError(Wire.Unavailable)
      .middleware(Authentication)
      .annotate(RoutePolicy, authenticated)
  )
  .add(HttpApiEndpoint.get("jwks", "/v1/auth/jwks").addSuccess(Jwks).middleware(OpenGate))
  .add(HttpApiEndpoint.get("wellKnownJwks", "/.well-known/jwks.json").addSuccess(Jwks).middleware(OpenGate))
  .annotate(RoutePolicy, open) {}
