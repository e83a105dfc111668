/**
 * Node administration for operators (spec §4.9 `/v1/node/*`; docs/cluster.md): invites that admit
 * a node. Operator routes: a wallet's session whose wallet is an operator.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { NodeJoinRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { operator } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"

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

export class NodeGroup extends HttpApiGroup.make("node")
  .add(HttpApiEndpoint.post("enroll", "/v1/node/enroll").setPayload(EnrollNode).addSuccess(NodeInviteMade, { status: 201 }))
  .addError(wiresOf(NodeJoinRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, operator) {}
