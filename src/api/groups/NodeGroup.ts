/**
 * Node administration for operators (spec §4.9 `/v1/node/*`; docs/cluster.md, "Node
 * administration"): invites that admit a node, a node's status and log, drain, and leave. Any
 * gateway answers for any node of the cluster, asking it over the overlay. Operator routes: a
 * wallet's session whose wallet is an operator.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { NodeRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { operator } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { integerQueries } from "../OpenApiFacts.js"
import { QueryInteger, strict, UnixSeconds } from "../Wire.js"
import { NODE_COMMANDS, NODE_LOG_LINES } from "../../domain/NodeAdmin.js"
import { NamespaceName } from "../../domain/Names.js"
import { NetworkPeer } from "./NetworkGroup.js"

/** A node id as PORTICO_NODE_ID names it. */
export const NodeId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/),
  Schema.annotations({ description: "1-64 of A-Z, a-z, 0-9, '.', '_', '-', starting with a letter or digit" })
)

export const EnrollNode = strict(
  Schema.Struct({
    node_id: Schema.optional(NodeId.annotations({ description: "the only node the invite admits; any node id when absent" })),
    expiry_seconds: Schema.optional(Schema.Int.pipe(Schema.between(1, 3600)).annotations({ description: "1-3600; default 3600 (one hour)" }))
  })
).annotations({ identifier: "EnrollNode" })

export const NodeInviteMade = Schema.Struct({
  invite: Schema.String.annotations({
    description: "pjoin_…, shown once: `portico serve --join <invite>` on the new node. It names this node's internal URL; the token in it is never sent"
  }),
  expires_at: UnixSeconds,
  node_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "NodeInviteMade" })

const NodeQuery = { node: Schema.optional(NodeId.annotations({ description: "the node asked about; the node answering when absent" })) }

export const NodeStatus = Schema.Struct({
  ...NetworkPeer.fields,
  reachable: Schema.Boolean.annotations({ description: "it answered for its snapshot within 3 s" }),
  runs_cluster_worker: Schema.Boolean.annotations({ description: "it holds the lease of the cluster's one background worker (docs/cluster.md)" }),
  error: Schema.NullOr(Schema.String).annotations({ description: "why there is no snapshot" }),
  snapshot: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
    description: "the node's telemetry snapshot as it answered (NodeSnapshot: checks, namespaces, memory)"
  })
}).annotations({ identifier: "NodeStatus" })

export const NodeLogLines = Schema.Struct({
  node: Schema.String,
  lines: Schema.Array(Schema.String).annotations({ description: "its last lines of output, oldest first (JSON lines, each cut at 4 KiB)" })
}).annotations({ identifier: "NodeLogLines" })

/** What a repair of a namespace's apps on one node did. */
export const NamespaceRepaired = Schema.Struct({
  node: Schema.String,
  namespace: Schema.String,
  running: Schema.Array(Schema.String).annotations({ description: "apps this node ran already" }),
  started: Schema.Array(Schema.String).annotations({ description: "apps the repair started" }),
  failed: Schema.Array(Schema.Struct({ name: Schema.String, reason: Schema.String })).annotations({
    description: "apps that did not start, with why; their status is failed with that reason"
  })
}).annotations({ identifier: "NamespaceRepaired" })

export const NodeCommandRequest = strict(
  Schema.Struct({
    node: NodeId,
    command: Schema.Literal(...NODE_COMMANDS).annotations({
      description:
        "drain: take no new node-local databases and answer the health routes with 503 (a load balancer takes it out); undrain: back in service; repair: start the apps homed on the node that should run there and do not (active, or failed past their restarts)"
    }),
    namespace: Schema.optional(
      NamespaceName.annotations({ description: "repair only: the one namespace to repair; every namespace with an app homed on the node when absent" })
    )
  })
).pipe(
  Schema.filter((c) => c.namespace === undefined || c.command === "repair" || "namespace is for the repair command only")
).annotations({ identifier: "NodeCommandRequest" })

export const NodeCommandDone = Schema.Struct({
  node: Schema.String,
  command: Schema.Literal(...NODE_COMMANDS),
  draining: Schema.Boolean,
  namespace: Schema.optional(Schema.String),
  repaired: Schema.optional(Schema.Array(NamespaceRepaired).annotations({ description: "repair only: what was done in each namespace" }))
}).annotations({
  identifier: "NodeCommandDone"
})

export const LeaveRequest = strict(
  Schema.Struct({
    node: NodeId,
    force: Schema.optional(
      Schema.Boolean.annotations({ description: "retire it even with what cannot move: the databases of a node that does not answer, its deployments" })
    )
  })
).annotations({ identifier: "LeaveRequest" })

export const NodeLeft = Schema.Struct({
  node: Schema.String,
  retired: Schema.Literal(true),
  moved: Schema.Array(Schema.Struct({ namespace: Schema.String, database: Schema.String, to: Schema.String })).annotations({
    description: "the node-local databases now homed on the node that answered"
  }),
  lost: Schema.Struct({ databases: Schema.Int, deployments: Schema.Int }).annotations({ description: "what stayed on the retired node (non-zero only with force)" })
}).annotations({ identifier: "NodeLeft" })

export class NodeGroup extends HttpApiGroup.make("node")
  .add(HttpApiEndpoint.post("enroll", "/v1/node/enroll").setPayload(EnrollNode).addSuccess(NodeInviteMade, { status: 201 }))
  .add(HttpApiEndpoint.get("status", "/v1/node/status").setUrlParams(strict(Schema.Struct(NodeQuery))).addSuccess(NodeStatus))
  .add(
    HttpApiEndpoint.get("logs", "/v1/node/logs")
      .setUrlParams(
        strict(
          Schema.Struct({
            ...NodeQuery,
            lines: Schema.optional(QueryInteger().pipe(Schema.between(1, NODE_LOG_LINES)).annotations({ description: `1-${NODE_LOG_LINES}, default 100` }))
          })
        )
      )
      .addSuccess(NodeLogLines)
      .annotate(
        OpenApi.Transform,
        integerQueries({ lines: { minimum: 1, maximum: NODE_LOG_LINES, description: `lines: an integer from 1 to ${NODE_LOG_LINES} (decimal digits); default 100` } })
      )
  )
  .add(HttpApiEndpoint.post("command", "/v1/node/command").setPayload(NodeCommandRequest).addSuccess(NodeCommandDone))
  .add(HttpApiEndpoint.post("leave", "/v1/node/leave").setPayload(LeaveRequest).addSuccess(NodeLeft))
  .addError(wiresOf(NodeRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, operator) {}
