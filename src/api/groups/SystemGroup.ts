/** Health, status, version and the token key set: the open routes of spec §4.9 and §4.5. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Wire } from "../../domain/Errors.js"
import { UnixSeconds } from "../Wire.js"

export const CheckStatus = Schema.Literal("ok", "failing")

export const HealthReport = Schema.Struct({
  status: Schema.Literal("ok", "degraded"),
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

export class SystemGroup extends HttpApiGroup.make("system")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(HealthReport))
  .add(HttpApiEndpoint.get("healthV1", "/v1/health").addSuccess(HealthReport))
  .add(
    HttpApiEndpoint.get("statusPage", "/status")
      .addSuccess(StatusReport)
      .addSuccess(html, { status: 200 })
  )
  .add(HttpApiEndpoint.get("status", "/v1/status").addSuccess(StatusReport))
  .add(HttpApiEndpoint.get("version", "/v1/version").addSuccess(VersionReport))
  .add(HttpApiEndpoint.get("schemaStatus", "/v1/schema-status").addSuccess(SchemaStatus).addError(Wire.Unavailable))
  .add(HttpApiEndpoint.get("jwks", "/v1/auth/jwks").addSuccess(Jwks))
  .add(HttpApiEndpoint.get("wellKnownJwks", "/.well-known/jwks.json").addSuccess(Jwks)) {}
