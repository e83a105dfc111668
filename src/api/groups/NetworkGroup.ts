/**
 * The cluster's topology for operators (spec §4.9 `/v1/network/*`; docs/cluster.md): the nodes the
 * membership knows (src/layers/cluster/Membership.ts), each with its status by the registry's
 * clock. Operator routes: a wallet's session whose wallet is an operator.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { OperatorRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { operator } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { UnixSeconds } from "../Wire.js"

export const NetworkPeer = Schema.Struct({
  node: Schema.String,
  status: Schema.Literal("active", "inactive", "stopped", "unregistered", "retired").annotations({
    description:
      "active: a heartbeat within PORTICO_NODE_TTL_MS (by the registry's clock); stopped: it stopped cleanly; inactive: silent past the TTL without a clean stop (dead, hung or cut off); unregistered: a PORTICO_PEERS seed with no row (a node of an older release, or not started); retired: it left the cluster (POST /v1/node/leave)"
  }),
  draining: Schema.Boolean.annotations({ description: "an operator asked it to drain (POST /v1/node/command): it takes no new node-local databases and its health routes answer 503" }),
  internal_url: Schema.String.annotations({ description: "where other nodes reach it (its seed URL when it is one); empty when it listens on a wildcard address and has no PORTICO_INTERNAL_URL" }),
  version: Schema.NullOr(Schema.String),
  joined_at: Schema.NullOr(UnixSeconds),
  last_seen: Schema.NullOr(UnixSeconds),
  age_ms: Schema.NullOr(Schema.Int).annotations({ description: "milliseconds since its last heartbeat, by the registry's clock" }),
  self: Schema.Boolean.annotations({ description: "the node answering" }),
  seed: Schema.Boolean.annotations({ description: "named in this node's PORTICO_PEERS" })
}).annotations({ identifier: "NetworkPeer" })

export const NetworkPeers = Schema.Struct({
  node: Schema.String.annotations({ description: "the node answering" }),
  peers: Schema.Array(NetworkPeer)
}).annotations({ identifier: "NetworkPeers" })

export class NetworkGroup extends HttpApiGroup.make("network")
  .add(HttpApiEndpoint.get("peers", "/v1/network/peers").addSuccess(NetworkPeers))
  .addError(wiresOf(OperatorRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, operator) {}
