/**
 * The operator plane (spec §4.9; docs/operators.md): invites and their redemption, the operator
 * list, the creators allowlist, the settings and the operator audit trail. Operator routes take a
 * wallet's session whose wallet is an operator (policy `operator`: an API key is 403
 * NOT_AN_OPERATOR); redeeming an invite takes any wallet's session (policy `wallet`). Namespace
 * removal is in NamespaceDeleteGroup.ts.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { OperatorRefusals, wiresOf } from "../../domain/Errors.js"
import { Wallet } from "../../domain/Names.js"
import { SETTING_VALUES, type SettingName } from "../../domain/OperatorSettings.js"
import { Authentication } from "../Gates.js"
import { operator, wallet } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { NameKeyedPage, NextCursor } from "../Paging.js"
import { integerQueries, QUERY_INTEGER_MAX } from "../OpenApiFacts.js"
import { NoMembers, QueryInteger, strict, UnixSeconds } from "../Wire.js"

/** rotate-secrets' answer (docs/cluster.md, "Root-secret rotation"). */
export const SecretsRotated = Schema.Struct({
  generation: Schema.Int.annotations({ description: "the root generation this node now seals with" }),
  reached: Schema.Array(Schema.String).annotations({ description: "live peers that took it now" }),
  unreached: Schema.Array(Schema.String).annotations({ description: "live peers that did not answer; they take it from the registry at their next heartbeat" })
}).annotations({ identifier: "SecretsRotated" })

export const MakeInvite = strict(
  Schema.Struct({
    expiry_seconds: Schema.optional(
      Schema.Int.pipe(Schema.between(1, 3600)).annotations({ description: "1-3600; default 3600 (one hour)" })
    )
  })
).annotations({ identifier: "MakeInvite" })

export const InviteMade = Schema.Struct({
  invite: Schema.String.annotations({ description: "inv_…, shown once; one wallet joins the operator list with it" }),
  expires_at: UnixSeconds
}).annotations({ identifier: "InviteMade" })

export const RedeemInvite = strict(Schema.Struct({ invite: Schema.String.pipe(Schema.maxLength(128)) })).annotations({ identifier: "RedeemInvite" })
export const Joined = Schema.Struct({ wallet: Schema.String, operator: Schema.Literal(true) }).annotations({ identifier: "OperatorJoined" })

export const OperatorList = Schema.Struct({
  operators: Schema.Array(
    Schema.Struct({
      wallet: Schema.String,
      added_at: UnixSeconds,
      added_by: Schema.String,
      source: Schema.Literal("registry", "config").annotations({ description: "config: named by PORTICO_OPERATORS (removed only there)" })
    })
  )
}).annotations({ identifier: "OperatorList" })

export const OperatorRemoved = Schema.Struct({ wallet: Schema.String, changed: Schema.Boolean }).annotations({ identifier: "OperatorRemoved" })

export const CreatorWallet = strict(Schema.Struct({ wallet: Wallet })).annotations({ identifier: "CreatorWallet" })
export const CreatorList = Schema.Struct({
  creators: Schema.Array(Schema.Struct({ wallet: Schema.String, added_at: UnixSeconds, added_by: Schema.String }))
}).annotations({ identifier: "CreatorList" })
export const CreatorChanged = Schema.Struct({ wallet: Schema.String, changed: Schema.Boolean }).annotations({ identifier: "CreatorChanged" })

export const SettingsView = Schema.Struct({
  settings: Schema.Record({ key: Schema.String, value: Schema.String })
}).annotations({ identifier: "OperatorSettings" })
export const SettingView = Schema.Struct({
  name: Schema.String,
  value: Schema.String.annotations({ description: "as stored: text, max-namespaces-per-wallet as its decimal digits" })
}).annotations({ identifier: "OperatorSetting" })

/**
 * A setting's two routes, `GET` and `PUT /v1/operator/settings/<name>`, the PUT's body `{value}`
 * under the setting's own rule (src/domain/OperatorSettings.ts), so the document states each
 * setting's values and a value outside them is 400 VALIDATION_FAILED before the handler. Fixed
 * paths rather than one `{name}` route: one route can state only one schema for every setting.
 */
const settingRoutes = <const Id extends string, const Name extends SettingName>(id: Id, name: Name) =>
  [
    HttpApiEndpoint.get(`get${id}`, `/v1/operator/settings/${name}`).addSuccess(SettingView),
    HttpApiEndpoint.put(`put${id}`, `/v1/operator/settings/${name}`)
      .setPayload(strict(Schema.Struct({ value: SETTING_VALUES[name] })).annotations({ identifier: `Set${id}` }))
      .addSuccess(SettingView)
  ] as const
const namespaceCreation = settingRoutes("NamespaceCreation", "namespace-creation")
const namespacesPerWallet = settingRoutes("MaxNamespacesPerWallet", "max-namespaces-per-wallet")
const autoUpdate = settingRoutes("AutoUpdate", "auto-update")
const updateChannel = settingRoutes("UpdateChannel", "update-channel")
const updateWindow = settingRoutes("UpdateWindow", "update-window")
const releaseRepo = settingRoutes("ReleaseRepo", "release-repo")

export const AuditQuery = strict(
  Schema.Struct({
    limit: Schema.optional(QueryInteger().pipe(Schema.between(1, 200))).annotations({ description: "1-200, default 50" }),
    after: Schema.optional(QueryInteger().pipe(Schema.positive())).annotations({ description: "the `next` of the page before" })
  })
)
export const OperatorAuditPage = Schema.Struct({
  entries: Schema.Array(
    Schema.Struct({
      id: Schema.Int,
      at: Schema.Int.annotations({ description: "Unix milliseconds" }),
      actor: Schema.String,
      action: Schema.String,
      target: Schema.String,
      detail: Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number) })
    })
  ),
  next: Schema.NullOr(Schema.Int)
}).annotations({ identifier: "OperatorAuditPage" })

const Check = Schema.Struct({
  ok: Schema.Boolean,
  latency_ms: Schema.Number,
  error: Schema.optional(Schema.String).annotations({ description: "the check's error text (the open health routes hide it)" })
})
/** What a node's health report and its telemetry snapshot share: the checks and the counts. */
const healthSummary = {
  status: Schema.Literal("ok", "degraded"),
  node: Schema.String,
  version: Schema.String,
  uptime_seconds: Schema.Int,
  registry_engine: Schema.String,
  namespaces: Schema.NullOr(Schema.Int).annotations({ description: "how many namespaces are hosted; null when the registry could not be read" }),
  checks: Schema.Record({ key: Schema.String, value: Check })
}

const HostedNamespace = Schema.Struct({
  name: Schema.String,
  owner: Schema.NullOr(Schema.String),
  created_at: UnixSeconds
}).annotations({ identifier: "HostedNamespace" })

const AppPort = Schema.Struct({
  port: Schema.Int,
  namespace: Schema.String,
  deployment: Schema.String.annotations({ description: "the deployment's name" }),
  deployment_id: Schema.String,
  status: Schema.String.annotations({ description: "the deployment record's status: a failed or stopped app keeps its port" })
}).annotations({ identifier: "AppPort" })

const NodePorts = Schema.Struct({
  gateway: Schema.NullOr(Schema.Struct({ host: Schema.String, port: Schema.Int })).annotations({
    description: "the gateway's own listening socket (HTTP API, apps' hosts and the proxy's WebSockets all on it)"
  }),
  app_range: Schema.Struct({ first: Schema.Int, last: Schema.Int }).annotations({ description: "where app ports are drawn from (PORTICO_APP_PORTS)" }),
  apps: Schema.NullOr(Schema.Array(AppPort)).annotations({
    description: "every app port of the deployment records homed on this node, by port (at most one per port of the range); null when the registry could not be read"
  })
}).annotations({ identifier: "NodePorts" })

const NodeHolding = Schema.Struct({
  node: Schema.String,
  status: Schema.Literal("active", "inactive", "stopped", "unregistered", "retired").annotations({
    description: "as GET /v1/network/peers says; unregistered also for a home node the membership does not know"
  }),
  internal_url: Schema.String,
  self: Schema.Boolean,
  namespaces: Schema.Array(Schema.String).annotations({ description: "namespaces with a node-local database or a deployment homed on the node, by name" }),
  apps: Schema.Array(AppPort).annotations({ description: "the app ports of the deployment records homed on the node, by port" })
}).annotations({ identifier: "NodeHolding" })

export const OperatorHealthView = Schema.Struct({
  ...healthSummary,
  hosted_namespaces: Schema.NullOr(Schema.Array(HostedNamespace)).annotations({
    description: "one page of the hosted namespaces, by name (limit, cursor); null when the registry could not be read"
  }),
  next_cursor: NextCursor,
  ports: NodePorts,
  nodes: Schema.NullOr(Schema.Array(NodeHolding)).annotations({
    description: "every node of the cluster (the membership's, and any home node it does not know) with the namespaces and app ports homed there; at most 10,000 rows of each are read; null when the registry could not be read"
  })
}).annotations({ identifier: "OperatorHealth" })

const Milliseconds = Schema.NullOr(Schema.Number)

/** The API's requests one node answered (src/layers/operators/RequestStats.ts). */
export const RequestFigures = Schema.Struct({
  answered: Schema.Int.annotations({ description: "API requests answered since the gateway started, every status (a client that left first counts as 499)" }),
  errors_4xx: Schema.Int.annotations({ description: "of them, answered 400-499" }),
  errors_5xx: Schema.Int.annotations({ description: "of them, answered 500-599" }),
  latency: Schema.Struct({
    window_seconds: Schema.Int.annotations({ description: "the seconds the figures cover: this one and those before it" }),
    answered: Schema.Int.annotations({ description: "answers within the window" }),
    p50_ms: Milliseconds.annotations({ description: "median time from arrival to the end of the answer, within the window; at most 9% above the true figure; null when nothing was answered" }),
    p99_ms: Milliseconds.annotations({ description: "99th percentile, as p50_ms" })
  })
}).annotations({ identifier: "RequestFigures" })

/** One node's telemetry snapshot: its health report's checks and counts with the process's figures. */
export const NodeSnapshot = Schema.Struct({
  ...healthSummary,
  at: Schema.Int.annotations({ description: "Unix milliseconds" }),
  memory_rss_bytes: Schema.Int,
  heap_used_bytes: Schema.Int,
  requests: Schema.optional(RequestFigures).annotations({
    description: "the API's requests this node answered; absent only from a node of an earlier release (during a rolling upgrade)"
  })
}).annotations({ identifier: "NodeSnapshot" })

export const TelemetryQuery = strict(
  Schema.Struct({
    interval: Schema.optional(QueryInteger().pipe(Schema.between(2, 60))).annotations({
      description: "seconds between snapshots, 2-60, default 5"
    })
  })
)

const walletParam = HttpApiSchema.param("wallet", Wallet)

export class OperatorGroup extends HttpApiGroup.make("operator")
  .add(HttpApiEndpoint.post("makeInvite", "/v1/operator/invites").setPayload(MakeInvite).addSuccess(InviteMade, { status: 201 }))
  .add(HttpApiEndpoint.post("redeemInvite", "/v1/operator/invites/redeem").setPayload(RedeemInvite).addSuccess(Joined).annotate(RoutePolicy, wallet))
  .add(HttpApiEndpoint.get("listOperators", "/v1/operator/operators").addSuccess(OperatorList))
  .add(HttpApiEndpoint.del("removeOperator")`/v1/operator/operators/${walletParam}`.addSuccess(OperatorRemoved))
  .add(HttpApiEndpoint.get("listCreators", "/v1/operator/creators").addSuccess(CreatorList))
  .add(HttpApiEndpoint.post("addCreator", "/v1/operator/creators").setPayload(CreatorWallet).addSuccess(CreatorChanged))
  .add(HttpApiEndpoint.del("removeCreator")`/v1/operator/creators/${walletParam}`.addSuccess(CreatorChanged))
  .add(HttpApiEndpoint.get("getSettings", "/v1/operator/settings").addSuccess(SettingsView))
  .add(namespaceCreation[0])
  .add(namespaceCreation[1])
  .add(namespacesPerWallet[0])
  .add(namespacesPerWallet[1])
  .add(autoUpdate[0])
  .add(autoUpdate[1])
  .add(updateChannel[0])
  .add(updateChannel[1])
  .add(updateWindow[0])
  .add(updateWindow[1])
  .add(releaseRepo[0])
  .add(releaseRepo[1])
  .add(HttpApiEndpoint.post("rotateSecrets", "/v1/operator/rotate-secrets").setPayload(NoMembers).addSuccess(SecretsRotated))
  .add(
    HttpApiEndpoint.get("operatorAudit", "/v1/operator/audit")
      .setUrlParams(AuditQuery)
      .addSuccess(OperatorAuditPage)
      .annotate(
        OpenApi.Transform,
        integerQueries({
          limit: { minimum: 1, maximum: 200, description: "entries per page: an integer from 1 to 200 (decimal digits); default 50" },
          after: { minimum: 1, maximum: QUERY_INTEGER_MAX, description: "the `next` of the page before (decimal digits)" }
        })
      )
  )
  .add(HttpApiEndpoint.get("operatorHealth", "/v1/operator/health").setUrlParams(NameKeyedPage).addSuccess(OperatorHealthView))
  .add(
    HttpApiEndpoint.get("telemetryStream", "/v1/operator/telemetry/stream")
      .setUrlParams(TelemetryQuery)
      .annotate(
        OpenApi.Transform,
        integerQueries({ interval: { minimum: 2, maximum: 60, description: "seconds between snapshots: an integer from 2 to 60 (decimal digits); default 5" } })
      )
      .addSuccess(
        HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
          description: "server-sent events (spec §6.2): `event: snapshot` (one JSON line) every interval, `event: error`, `: keepalive`; ends after 100 s"
        })
      )
  )
  .middlewareEndpoints(Authentication)
  .annotate(RoutePolicy, operator)
  .addError(wiresOf(OperatorRefusals)) {}
