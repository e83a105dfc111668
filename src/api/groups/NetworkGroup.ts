/**
 * The cluster's topology for operators (spec §4.9 `/v1/network/*`; docs/cluster.md): the nodes the
 * membership knows (src/layers/cluster/Membership.ts), each with its status by the registry's
 * clock; this node's view of the registry, cache, storage and peers; connecting a node by its
 * address and forgetting it (src/layers/network/Network.ts). Operator routes: a wallet's session
 * whose wallet is an operator.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { NetworkRefusals, OperatorRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { operator } from "../Policy.js"
import { BodyCap, RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"

export const NetworkPeer = Schema.Struct({
  node: Schema.String,
  status: Schema.Literal("active", "inactive", "stopped", "unregistered", "retired").annotations({
    description:
      "active: a heartbeat within PORTICO_NODE_TTL_MS (by the registry's clock); stopped: it stopped cleanly; inactive: silent past the TTL without a clean stop (dead, hung or cut off); unregistered: a PORTICO_PEERS seed with no row (a node of an older release, or not started); retired: it left the cluster (POST /v1/node/leave)"
  }),
  draining: Schema.Boolean.annotations({ description: "an operator asked it to drain (POST /v1/node/command): it takes no new node-local databases and its health routes answer 503" }),
  internal_url: Schema.String.annotations({ description: "where other nodes reach it (its seed URL when it is one); empty when it listens on a wildcard address and has no PORTICO_INTERNAL_URL" }),
  public_url: Schema.String.annotations({ description: "where its clients reach it (its PORTICO_PUBLIC_URL); empty when it set none" }),
  version: Schema.NullOr(Schema.String),
  joined_at: Schema.NullOr(UnixSeconds),
  last_seen: Schema.NullOr(UnixSeconds),
  age_ms: Schema.NullOr(Schema.Int).annotations({ description: "milliseconds since its last heartbeat, by the registry's clock" }),
  self: Schema.Boolean.annotations({ description: "the node answering" }),
  seed: Schema.Boolean.annotations({ description: "named in this node's PORTICO_PEERS" }),
  connected: Schema.Boolean.annotations({
    description: "connected by POST /v1/network/connect on this node (kept in its data directory until disconnected): internal_url is the address dialled there"
  })
}).annotations({ identifier: "NetworkPeer" })

export const NetworkPeers = Schema.Struct({
  node: Schema.String.annotations({ description: "the node answering" }),
  peers: Schema.Array(NetworkPeer)
}).annotations({ identifier: "NetworkPeers" })

export const NetworkStatus = Schema.Struct({
  node: Schema.String.annotations({ description: "the node answering" }),
  version: Schema.String,
  registry: Schema.Struct({
    engine: Schema.Literal("sqlite", "rqlite"),
    ok: Schema.Boolean.annotations({ description: "the registry answered a read within 2 s" }),
    leader: Schema.NullOr(Schema.String).annotations({ description: "rqlite's leader's node id; null on the embedded registry, or when rqlite named none" }),
    voters: Schema.Array(Schema.Struct({ id: Schema.String, leader: Schema.Boolean, reachable: Schema.Boolean })).annotations({
      description: "rqlite's voters by rqlite node id (rqlite's /nodes; its Raft address when rqlited runs without -node-id); empty on the embedded registry"
    })
  }),
  cache: Schema.Struct({ engine: Schema.Literal("memory", "redis"), ok: Schema.Boolean.annotations({ description: "the cache answered a ping within 2 s" }) }),
  storage: Schema.Struct({ engine: Schema.Literal("embedded", "kubo") }),
  peers: Schema.Struct({
    total: Schema.Int.annotations({ description: "every other node the membership knows, live or not" }),
    active: Schema.Int.annotations({ description: "the live peers: active, or seeds and connected nodes not known stale" }),
    reachable: Schema.Int.annotations({ description: "the live peers that answered POST /v1/internal/ping as themselves within 2 s" })
  })
}).annotations({ identifier: "NetworkStatus" })

export const NetworkConnect = Schema.Struct({
  multiaddr: Schema.String.pipe(Schema.maxLength(1024)).annotations({
    description: "/ip4/<address>/tcp/<port>/p2p/<node id>, or /ip6/… or /dns/<host name>/…: where the node answers and the node id it must answer as",
    examples: ["/ip4/127.0.0.1/tcp/8080/p2p/node-2f1c0a9e4b7d"]
  })
}).annotations({ identifier: "NetworkConnect" })

export const NetworkConnected = Schema.Struct({
  node: Schema.String,
  internal_url: Schema.String.annotations({ description: "where the node was reached, and is called from now on by this node" })
}).annotations({ identifier: "NetworkConnected" })

export const NetworkDisconnect = Schema.Struct({ peer_id: Schema.String.pipe(Schema.maxLength(128)) }).annotations({ identifier: "NetworkDisconnect" })

export const NetworkDisconnected = Schema.Struct({
  peer_id: Schema.String,
  disconnected: Schema.Boolean.annotations({ description: "false: the node was not connected (nothing changed)" })
}).annotations({ identifier: "NetworkDisconnected" })

export class NetworkGroup extends HttpApiGroup.make("network")
  .add(HttpApiEndpoint.get("peers", "/v1/network/peers").addSuccess(NetworkPeers))
  .add(HttpApiEndpoint.get("status", "/v1/network/status").addSuccess(NetworkStatus))
  .add(
    HttpApiEndpoint.post("connect", "/v1/network/connect")
      .setPayload(strict(NetworkConnect))
      .addSuccess(NetworkConnected)
      .addError(wiresOf(NetworkRefusals))
      .annotate(BodyCap, "networkConnect")
  )
  .add(
    HttpApiEndpoint.post("disconnect", "/v1/network/disconnect")
      .setPayload(strict(NetworkDisconnect))
      .addSuccess(NetworkDisconnected)
      .annotate(BodyCap, "networkConnect")
  )
  .addError(wiresOf(OperatorRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, operator) {}
