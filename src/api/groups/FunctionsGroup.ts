/**
 * Serverless functions (spec §4.9 `/v1/functions`, `/v1/invoke/`; docs/functions.md): WebAssembly
 * modules in the original system's host-call ABI. Management is the control plane (§5.5); setting
 * a secret needs `secrets:write` as well; invoking needs the `invoke` grant, which signed-in
 * sessions and the runtime profile hold.
 *
 * `POST /v1/invoke/{namespace}/{target}` is open for functions marked public. A credential sent
 * there is gated as on any route (and must hold `invoke`); the invocation service then requires the
 * path's namespace to be the credential's (spec §1: no per-request namespace override).
 *
 * `GET /v1/functions/{name}/ws` is a WebSocket route (WebSocketRoute): the `upgrade` listener
 * answers it (src/api/Upgrades.ts) and src/layers/functions/FunctionSockets.ts serves the socket;
 * the same path without an upgrade is 400 BAD_REQUEST.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { FunctionRefusals, InvokeRefusals, wiresOf } from "../../domain/Errors.js"
import { FUNCTION_NAME_RULE, MEMORY_MB, SCHEDULES_MAX, TIMEOUT_SECONDS, TOPICS_MAX } from "../../domain/FunctionRules.js"
import { Authentication, OptionalAuthentication } from "../Gates.js"
import { integerQueries, QUERY_INTEGER_MAX, streamedBody } from "../OpenApiFacts.js"
import { NextCursor, pageQueryFields, TextKey } from "../Paging.js"
import { controlPlane, grant, grantIfCredential, secretsControl } from "../Policy.js"
import { BodyCap, RoutePolicy, WebSocketRoute } from "../RouteFacts.js"
import { QueryInteger, strict } from "../Wire.js"

const FunctionName = Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9-]{0,62}$/)).annotations({ description: FUNCTION_NAME_RULE })
const name = HttpApiSchema.param("name", FunctionName)
const Schedules = Schema.Array(Schema.String).pipe(Schema.maxItems(SCHEDULES_MAX)).annotations({
  description: "cron expressions (5 fields, or 6 with seconds first; UTC): the function runs once per slot across the cluster, with {trigger, schedule, at} as its input"
})
const Topics = Schema.Array(Schema.String).pipe(Schema.maxItems(TOPICS_MAX)).annotations({
  description:
    "topics (exact names) whose messages run the function, once per message across the cluster, with {trigger, topic, epoch, offset, timestamp, type, data, depth?} as its input"
})
const Env = Schema.Record({ key: Schema.String, value: Schema.String }).annotations({ description: "environment variables (get_env); sealed at rest" })

export const FunctionView = Schema.Struct({
  name: Schema.String,
  version: Schema.Int.annotations({ description: "the live version" }),
  cid: Schema.String.annotations({ description: "the live version's module in content storage" }),
  size: Schema.Int,
  memory_limit_mb: Schema.Int,
  timeout_seconds: Schema.Number,
  is_public: Schema.Boolean,
  env_vars: Env,
  cron_expressions: Schedules,
  pubsub_topics: Topics,
  created_at: Schema.Int,
  updated_at: Schema.Int
}).annotations({ identifier: "Function" })

const FunctionList = Schema.Struct({ functions: Schema.Array(FunctionView), next_cursor: NextCursor }).annotations({ identifier: "FunctionList" })
const Version = Schema.Struct({ version: Schema.Int, cid: Schema.String, size: Schema.Int, created_at: Schema.Int }).annotations({ identifier: "FunctionVersion" })
const Versions = Schema.Struct({ name: Schema.String, live: Schema.Int, versions: Schema.Array(Version) }).annotations({ identifier: "FunctionVersions" })
const Deleted = Schema.Struct({ status: Schema.Literal("deleted"), name: Schema.String })
const LogLine = Schema.Struct({ seq: Schema.Int, at: Schema.Int, request_id: Schema.String, level: Schema.String, message: Schema.String })
const Logs = Schema.Struct({ name: Schema.String, logs: Schema.Array(LogLine), next_before: Schema.NullOr(Schema.Int) }).annotations({ identifier: "FunctionLogs" })
const LogsQuery = strict(
  Schema.Struct({
    limit: Schema.optional(QueryInteger().pipe(Schema.between(1, 1000))),
    before: Schema.optional(QueryInteger().pipe(Schema.positive()))
  })
)
const SettingsChange = strict(
  Schema.Struct({
    memory_limit_mb: Schema.optional(Schema.Int.pipe(Schema.between(MEMORY_MB.min, MEMORY_MB.max))),
    timeout_seconds: Schema.optional(Schema.Int.pipe(Schema.between(TIMEOUT_SECONDS.min, TIMEOUT_SECONDS.max))),
    is_public: Schema.optional(Schema.Boolean),
    env_vars: Schema.optional(Env),
    cron_expressions: Schema.optional(Schedules),
    pubsub_topics: Schema.optional(Topics)
  })
).annotations({ identifier: "FunctionSettingsChange" })
const Rollback = strict(Schema.Struct({ version: Schema.Int.pipe(Schema.positive()) }))
const SecretKey = HttpApiSchema.param("key", Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/)))
const SecretValue = strict(Schema.Struct({ value: Schema.String }))
const SecretNames = Schema.Struct({ name: Schema.String, secrets: Schema.Array(Schema.Struct({ key: Schema.String, updated_at: Schema.Int })) })
const SecretSet = Schema.Struct({ status: Schema.Literal("ok"), key: Schema.String })

const deployForm = streamedBody({
  contentType: "multipart/form-data",
  schema: {
    type: "object",
    required: ["name", "wasm"],
    properties: {
      name: { type: "string", pattern: "^[a-z][a-z0-9-]{0,62}$", description: FUNCTION_NAME_RULE },
      memory_limit_mb: { type: "string", description: `${MEMORY_MB.min}-${MEMORY_MB.max}, default ${MEMORY_MB.default} (kept on a redeploy when absent)` },
      timeout_seconds: { type: "string", description: `${TIMEOUT_SECONDS.min}-${TIMEOUT_SECONDS.max}, default ${TIMEOUT_SECONDS.default}` },
      is_public: { type: "string", enum: ["true", "false"], description: "invocable without a credential at /v1/invoke/{namespace}/{name}" },
      metadata: { type: "string", description: "a JSON object; env_vars: an object of strings; cron_expressions: an array of schedules; pubsub_topics: an array of topics (a redeploy without either keeps the function's)" },
      wasm: { type: "string", format: "binary", description: "the module: a WASI command (exports _start and memory) importing only the host calls of docs/functions.md" }
    }
  },
  description: "multipart form: the fields, then the module in a part named wasm (413 past PORTICO_FUNCTIONS_MAX_MODULE_BYTES)"
})

const invokeBody = streamedBody({
  contentType: "application/octet-stream",
  schema: { type: "string", format: "binary" },
  description: "the function's input, as it reads it on stdin (any content type; 413 past PORTICO_FUNCTIONS_MAX_INPUT_BYTES, never truncated)"
})

const Answer = Schema.Unknown.annotations({
  description:
    "the function's output when it is JSON, as written; otherwise {request_id, output, status, duration_ms}. X-Request-Id and X-Duration-Ms headers on every 200; a 502 or 504 names the run's request id at the end of error"
})

const SocketQuery = strict(
  Schema.Struct({
    jwt: Schema.optional(Schema.String.annotations({ description: "the access token, for clients that cannot set Authorization on a handshake (browsers); never logged" }))
  })
)

const Upgraded = Schema.Void.annotations({
  description:
    "101 Switching Protocols: one instance of the function for this socket. Each client frame is a ws_frame entry; what an entry writes to stdout, and each ws_send, is a frame to the client (docs/functions.md \"Sockets\"). Refused before the upgrade like an invoke: 400 when the module exports no ws_frame"
})

export class FunctionsGroup extends HttpApiGroup.make("functions")
  .add(HttpApiEndpoint.post("deploy", "/v1/functions").addSuccess(FunctionView, { status: 201 }).annotate(BodyCap, "functionDeploy").annotateContext(deployForm))
  .add(HttpApiEndpoint.get("list", "/v1/functions").setUrlParams(strict(Schema.Struct(pageQueryFields(TextKey)))).addSuccess(FunctionList))
  .add(HttpApiEndpoint.get("get")`/v1/functions/${name}`.addSuccess(FunctionView))
  .add(HttpApiEndpoint.patch("change")`/v1/functions/${name}`.setPayload(SettingsChange).addSuccess(FunctionView))
  .add(HttpApiEndpoint.del("remove")`/v1/functions/${name}`.addSuccess(Deleted))
  .add(HttpApiEndpoint.get("versions")`/v1/functions/${name}/versions`.addSuccess(Versions))
  .add(HttpApiEndpoint.post("rollback")`/v1/functions/${name}/rollback`.setPayload(Rollback).addSuccess(FunctionView))
  .add(
    HttpApiEndpoint.get("logs")`/v1/functions/${name}/logs`
      .setUrlParams(LogsQuery)
      .addSuccess(Logs)
      .annotate(
        OpenApi.Transform,
        integerQueries({
          limit: { minimum: 1, maximum: 1000, description: "lines: an integer from 1 to 1000 (decimal digits)" },
          before: { minimum: 1, maximum: QUERY_INTEGER_MAX, description: "only lines before this one (decimal digits)" }
        })
      )
  )
  .add(HttpApiEndpoint.get("secrets")`/v1/functions/${name}/secrets`.addSuccess(SecretNames))
  .add(
    HttpApiEndpoint.put("putSecret")`/v1/functions/${name}/secrets/${SecretKey}`
      .setPayload(SecretValue)
      .addSuccess(SecretSet)
      .annotate(RoutePolicy, secretsControl)
  )
  .add(HttpApiEndpoint.del("deleteSecret")`/v1/functions/${name}/secrets/${SecretKey}`.addSuccess(SecretSet).annotate(RoutePolicy, secretsControl))
  .addError(wiresOf(FunctionRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, controlPlane) {}

export class InvokeGroup extends HttpApiGroup.make("invoke")
  .add(
    HttpApiEndpoint.post("invoke")`/v1/functions/${name}/invoke`
      .addSuccess(Answer)
      .annotate(BodyCap, "functionInvoke")
      .annotateContext(invokeBody)
      .middleware(Authentication)
      .annotate(RoutePolicy, grant("invoke"))
  )
  .add(
    HttpApiEndpoint.post("invokeIn")`/v1/invoke/${HttpApiSchema.param("namespace", Schema.String)}/${HttpApiSchema.param("target", Schema.String)}`
      .addSuccess(Answer)
      .annotate(BodyCap, "functionInvoke")
      .annotateContext(invokeBody)
      .middleware(OptionalAuthentication)
      .annotate(RoutePolicy, grantIfCredential("invoke"))
      .annotate(
        OpenApi.Description,
        "target is <name> or <name>@<version>. Without a credential: public functions only (404 otherwise). With one: it must hold invoke (403 GRANT_REQUIRED) and be of the path's namespace (403 FORBIDDEN)."
      )
      // the credential is optional: an anonymous call, or the bearer scheme
      .annotate(OpenApi.Override, { security: [{}, { bearer: [] }] })
  )
  .add(
    HttpApiEndpoint.get("ws")`/v1/functions/${name}/ws`
      .setUrlParams(SocketQuery)
      .addSuccess(Upgraded, { status: 101 })
      .annotate(WebSocketRoute, true)
      .middleware(Authentication)
      .annotate(RoutePolicy, grant("invoke"))
  )
  .addError(wiresOf(InvokeRefusals)) {}
