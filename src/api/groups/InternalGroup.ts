/**
 * Node-to-node routes (spec §4.10): never for clients. Each takes no credential: PeerGate checks
 * that the call comes from the cluster's private overlay and carries a coordination MAC over its
 * body (a streamed route's: over its envelope header), addressed to this node, seen once. Every
 * caller reaches them through the one client derived from this group
 * (src/layers/coordination/InternalClient.ts), so a route's path is written here only.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { CidParam } from "../../domain/ContentId.js"
import { NamespaceName } from "../../domain/Names.js"
import { BackupRefusals } from "../../domain/NamespaceBackup.js"
import { DeploymentRouteRefusals, SqlRefusals, StorageRefusals, Wire, wiresOf } from "../../domain/Errors.js"
import { ForwardedPrincipal } from "../../domain/Principal.js"
import { PeerGate } from "../Gates.js"
import { internalOnly } from "../OpenApiFacts.js"
import { internal } from "../Policy.js"
import { BodyCap, FastLaneRoute, RoutePolicy, WebSocketRoute } from "../RouteFacts.js"
import { NoMembers, strict } from "../Wire.js"
import { ControlAnswer, ControlOrder, MediaHealth, NodeRoomsAnswer, NodeRoomsOrder } from "./WebRtcWire.js"
import { BackupRecord, DatabaseDeleted, DatabaseName, QueryAnswer, SqlArgs } from "./DatabaseGroup.js"
import {
  Deployment,
  DeploymentDeleted,
  DeploymentEnvSet,
  DeploymentName,
  DeploymentTypeParam,
  EnvAssignments,
  updateForm
} from "./DeploymentsGroup.js"
import { NodeSnapshot } from "./OperatorGroup.js"
import { SocketEntry } from "../../domain/FunctionSockets.js"
import { NODE_LOG_LINES, SPAWN_ACTIONS } from "../../domain/NodeAdmin.js"
import { NamespaceRepaired, NodeLogLines } from "./NodeGroup.js"
import { ShareCount, ShareGetAnswer, ShareGetOrder, ShareNamespaceOrder, SharePutAnswer, SharePutHeaders, SharesDropped } from "./VaultWire.js"
import { ReplicaApplied, ReplicaEnvApplied, ReplicaEnvOrder, ReplicaOrder, replicaRefusals, ReplicaRemoved, ReplicaTeardownOrder } from "./ReplicaWire.js"

const SocketId = Schema.String.pipe(Schema.maxLength(256))

/** A root secret's generation (0: the root before any rotation). */
export const RootGeneration = Schema.Int.pipe(Schema.between(0, 1_000_000_000))

/**
 * A node-to-node WebSocket route: its envelope, in X-Portico-Forward-Envelope, is what the
 * coordination MAC covers; `upgraded` says what the socket carries once switched.
 */
const peerSocket = <const Name extends string>(name: Name, path: HttpApiEndpoint.PathSegment, upgraded: string) =>
  HttpApiEndpoint.get(name, path)
    .addSuccess(Schema.Void.annotations({ description: `101 Switching Protocols: ${upgraded}` }), { status: 101 })
    .addError(Wire.Unavailable)
    .addError(Wire.BadRequest)
    .annotate(WebSocketRoute, true)

const Forwarded = {
  principal: ForwardedPrincipal,
  database_name: DatabaseName
}

/** A node-local database query forwarded to the database's home node, with the caller the front gateway admitted. */
export const ForwardedQuery = strict(Schema.Struct({ ...Forwarded, query: Schema.String, params: SqlArgs }))

/** A node-local database being handed to node `to` (a node id). */
const Handoff = { namespace: NamespaceName, database_name: DatabaseName, to: Schema.String.pipe(Schema.maxLength(64)) }

/** A deployment change forwarded to its home node: the namespace the front gateway authorized. */
const ForwardedDeployment = { namespace: NamespaceName, name: DeploymentName }

/**
 * A forwarded update's envelope (`ENVELOPE_HEADER` of Coordination.ts, what its MAC covers): the
 * body is the update's multipart form, streamed as the front gateway reads it.
 */
export const UpdateEnvelope = Schema.Struct({ namespace: NamespaceName, name: DeploymentName, type: DeploymentTypeParam })

export const NamespaceSpawned = Schema.Struct({
  node: Schema.String,
  namespace: Schema.String,
  name: Schema.String,
  state: Schema.Literal("running", "started").annotations({ description: "running: it ran already (a start); started: started now" })
}).annotations({ identifier: "NamespaceSpawned" })

/** A replica route's refusals: `{error}` bodies, one class per status. */
const replicaRoute = <Name extends string, Payload, Success, Error, R, RE>(
  endpoint: HttpApiEndpoint.HttpApiEndpoint<Name, "POST", never, never, Payload, never, Success, Error, R, RE>
) =>
  endpoint
    .addError(replicaRefusals[0])
    .addError(replicaRefusals[1])
    .addError(replicaRefusals[2])
    .addError(replicaRefusals[3])
    .addError(replicaRefusals[4])

export class InternalGroup extends HttpApiGroup.make("internal")
  .add(
    // is this node there, and is it the node it was asked as (spec §4.10: "answers a status ok object")
    HttpApiEndpoint.post("ping", "/v1/internal/ping")
      .setPayload(NoMembers)
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok"), node: Schema.String }))
  )
  .add(
    // a rotated root secret pushed by the node that rotated it (docs/cluster.md, "Root-secret
    // rotation"): generation `generation`'s root sealed under the one before; v2 MAC only
    HttpApiEndpoint.post("secretsReencrypt", "/v1/internal/secrets/reencrypt")
      .setPayload(strict(Schema.Struct({ generation: RootGeneration, sealed_root: Schema.String.pipe(Schema.maxLength(256)) })))
      .addSuccess(Schema.Struct({ generation: RootGeneration }))
  )
  .add(
    HttpApiEndpoint.post("evict", "/v1/internal/storage/evict")
      .setPayload(strict(Schema.Struct({ cid: CidParam })))
      .addSuccess(Schema.Struct({ evicted: Schema.Boolean }))
  )
  .add(
    HttpApiEndpoint.post("sqliteQuery", "/v1/internal/sqlite/query")
      .setPayload(ForwardedQuery)
      .addSuccess(QueryAnswer)
      .annotate(BodyCap, "forwarded")
      .annotate(FastLaneRoute, "internal.sqlite.query")
  )
  .add(
    HttpApiEndpoint.post("sqliteDelete", "/v1/internal/sqlite/delete")
      .setPayload(strict(Schema.Struct(Forwarded)))
      .addSuccess(DatabaseDeleted)
      .annotate(BodyCap, "forwarded")
  )
  .add(
    HttpApiEndpoint.post("sqliteBackup", "/v1/internal/sqlite/backup")
      .setPayload(strict(Schema.Struct(Forwarded)))
      .addSuccess(BackupRecord, { status: 201 })
      .annotate(BodyCap, "forwarded")
  )
  .add(
    // a consistent copy of a database homed here, for a namespace backup taken on another node
    HttpApiEndpoint.post("sqliteCopy", "/v1/internal/sqlite/copy")
      .setPayload(strict(Schema.Struct(Forwarded)))
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .addError(wiresOf(BackupRefusals))
      .annotate(BodyCap, "forwarded")
  )
  .add(
    // a database homed here handed to the node taking it (src/layers/sql/DatabaseMoves.ts): its copy
    HttpApiEndpoint.post("sqliteHandoff", "/v1/internal/sqlite/handoff")
      .setPayload(strict(Schema.Struct(Handoff)))
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
  )
  .add(
    HttpApiEndpoint.post("sqliteHandoffAbort", "/v1/internal/sqlite/handoff/abort")
      .setPayload(strict(Schema.Struct(Handoff)))
      .addSuccess(Schema.Struct({ aborted: Schema.Literal(true) }))
  )
  .add(
    // a deleted namespace's entries in this node's own (embedded) cache
    HttpApiEndpoint.post("cacheDropNamespace", "/v1/internal/cache/drop-namespace")
      .setPayload(strict(Schema.Struct({ namespace: NamespaceName })))
      .addSuccess(Schema.Struct({ dropped: Schema.Int }))
  )
  .add(
    // this node's part of the operator telemetry snapshot (spec §6.2, §4.10 `/v1/internal/telemetry`)
    HttpApiEndpoint.post("telemetry", "/v1/internal/telemetry")
      .setPayload(NoMembers)
      .addSuccess(NodeSnapshot)
  )
  .add(
    // the same, under the path of releases before the spec's: kept for one release, so a node not
    // yet upgraded still answers its peers' snapshots; nothing of this release calls it
    HttpApiEndpoint.post("nodeSnapshot", "/v1/internal/operator/snapshot")
      .setPayload(NoMembers)
      .addSuccess(NodeSnapshot)
  )
  .add(
    // the last lines this node wrote, for an operator's GET /v1/node/logs on another node
    HttpApiEndpoint.post("nodeLogs", "/v1/internal/node/logs")
      .setPayload(strict(Schema.Struct({ lines: Schema.Int.pipe(Schema.between(1, NODE_LOG_LINES)) })))
      .addSuccess(NodeLogLines)
  )
  .add(
    // a dynamic deployment's update, rollback, environment change and delete run on its home node
    // (docs/deployments.md, "Several gateways"), forwarded by the gateway that took the request
    HttpApiEndpoint.post("deploymentUpdate", "/v1/internal/deployments/update")
      .setHeaders(Schema.Struct({ "x-portico-forward-envelope": Schema.parseJson(UpdateEnvelope) }))
      .addSuccess(Deployment)
      .annotate(BodyCap, "deployUpload")
      .annotateContext(updateForm)
  )
  .add(
    HttpApiEndpoint.post("deploymentRollback", "/v1/internal/deployments/rollback")
      .setPayload(strict(Schema.Struct({ ...ForwardedDeployment, version: Schema.Int.pipe(Schema.positive()) })))
      .addSuccess(Deployment)
  )
  .add(
    HttpApiEndpoint.post("deploymentEnvSet", "/v1/internal/deployments/env/set")
      .setPayload(
        strict(Schema.Struct({ ...ForwardedDeployment, set: Schema.optional(EnvAssignments), unset: Schema.optional(Schema.Array(Schema.String)) }))
      )
      .addSuccess(DeploymentEnvSet)
  )
  .add(
    HttpApiEndpoint.post("deploymentDelete", "/v1/internal/deployments/delete")
      .setPayload(strict(Schema.Struct(ForwardedDeployment)))
      .addSuccess(DeploymentDeleted)
  )
  .add(
    // a dynamic deployment's replicas (docs/deployments.md, "Replicas"), called by its home node
    // and the cluster's worker; refusals are `{error}` with a fitting status (spec §4.8)
    replicaRoute(HttpApiEndpoint.post("replicaSetup", "/v1/internal/deployments/replica/setup").setPayload(ReplicaOrder).addSuccess(ReplicaApplied))
  )
  .add(
    replicaRoute(HttpApiEndpoint.post("replicaUpdate", "/v1/internal/deployments/replica/update").setPayload(ReplicaOrder).addSuccess(ReplicaApplied))
  )
  .add(
    replicaRoute(HttpApiEndpoint.post("replicaRollback", "/v1/internal/deployments/replica/rollback").setPayload(ReplicaOrder).addSuccess(ReplicaApplied))
  )
  .add(
    replicaRoute(HttpApiEndpoint.post("replicaEnv", "/v1/internal/deployments/replica/env").setPayload(ReplicaEnvOrder).addSuccess(ReplicaEnvApplied))
  )
  .add(
    replicaRoute(HttpApiEndpoint.post("replicaTeardown", "/v1/internal/deployments/replica/teardown").setPayload(ReplicaTeardownOrder).addSuccess(ReplicaRemoved))
  )
  .add(
    // a namespace's apps on this node brought back to what the registry says (docs/cluster.md,
    // "Repair and spawn"), asked by an operator's `repair` command through any gateway
    HttpApiEndpoint.post("namespaceRepair", "/v1/internal/namespace/repair")
      .setPayload(strict(Schema.Struct({ namespace: NamespaceName })))
      .addSuccess(NamespaceRepaired)
  )
  .add(
    HttpApiEndpoint.post("namespaceSpawn", "/v1/internal/namespace/spawn")
      .setPayload(
        strict(
          Schema.Struct({
            namespace: NamespaceName,
            service: Schema.Literal("app").annotations({ description: "what to spawn: a deployed app (the only per-namespace process a node runs)" }),
            name: DeploymentName,
            action: Schema.Literal(...SPAWN_ACTIONS)
          })
        )
      )
      .addSuccess(NamespaceSpawned)
  )
  .add(
    // functions' client sockets held by this node (src/layers/functions/SocketDirectory.ts)
    HttpApiEndpoint.post("wsList", "/v1/serverless/ws/connections")
      .setPayload(strict(Schema.Struct({ namespace: NamespaceName, function: Schema.optional(Schema.String.pipe(Schema.maxLength(63))) })))
      .addSuccess(Schema.Struct({ connections: Schema.Array(SocketEntry) }))
  )
  .add(
    HttpApiEndpoint.post("wsSend", "/v1/serverless/ws/connections/send")
      .setPayload(strict(Schema.Struct({ namespace: NamespaceName, id: SocketId, data_base64: Schema.String })))
      .addSuccess(Schema.Struct({ sent: Schema.Boolean }))
      .annotate(BodyCap, "socketFrame")
  )
  .add(
    HttpApiEndpoint.post("wsClose", "/v1/serverless/ws/connections/close")
      .setPayload(strict(Schema.Struct({ namespace: NamespaceName, id: SocketId })))
      .addSuccess(Schema.Struct({ closed: Schema.Boolean }))
  )
  .add(
    // the vault's guardian on this node (docs/vault.md, "Guardians"): it checks the client's
    // signature again, so a share is stored or given out only for the identity's key. A share
    // goes as bytes: the put's body (its order in the envelope header, which the MAC covers with
    // the bytes' SHA-256), a get's found answer (its facts in X-Portico-Vault-Share), within the
    // push's cap. Both answered in the fast lane when it can (src/api/lane/VaultLane.ts).
    HttpApiEndpoint.post("vaultSharePut", "/v1/internal/vault/share/put")
      .setHeaders(SharePutHeaders)
      .addSuccess(SharePutAnswer)
      .annotate(BodyCap, "vaultPush")
      .annotate(FastLaneRoute, "internal.vault.share.put")
  )
  .add(
    HttpApiEndpoint.post("vaultShareGet", "/v1/internal/vault/share/get")
      .setPayload(ShareGetOrder)
      .addSuccess(ShareGetAnswer.annotations({ description: "none or refused; a share found is its bytes (application/octet-stream), its facts in X-Portico-Vault-Share" }))
      .annotate(FastLaneRoute, "internal.vault.share.get")
  )
  .add(HttpApiEndpoint.post("vaultShareCount", "/v1/internal/vault/share/count").setPayload(ShareNamespaceOrder).addSuccess(ShareCount))
  .add(HttpApiEndpoint.post("vaultShareDrop", "/v1/internal/vault/share/drop").setPayload(ShareNamespaceOrder).addSuccess(SharesDropped))
  // this node's media server (docs/webrtc.md, "Rooms across the cluster"): whether it is up, a
  // namespace's rooms on it, a kick or mute; 503 when it is not up
  .add(HttpApiEndpoint.post("webrtcHealth", "/v1/internal/webrtc/health").setPayload(NoMembers).addSuccess(MediaHealth).addError(Wire.Unavailable))
  .add(HttpApiEndpoint.post("webrtcRooms", "/v1/internal/webrtc/rooms").setPayload(NodeRoomsOrder).addSuccess(NodeRoomsAnswer).addError(Wire.Unavailable))
  .add(HttpApiEndpoint.post("webrtcControl", "/v1/internal/webrtc/control").setPayload(ControlOrder).addSuccess(ControlAnswer).addError(Wire.Unavailable))
  // a participant another gateway placed in a room on this node (its envelope: JoinEnvelope)
  .add(peerSocket("webrtcSignal", "/v1/internal/webrtc/signal", "the participant's signalling, relayed to this node's media server"))
  // a kept channel of this node's calls from the peer that opens it (docs/cluster.md, "Peer
  // channels"; its envelope: ChannelEnvelope); each frame then carries a MAC under the channel's own key
  .add(peerSocket("peerChannel", "/v1/internal/channel", "framed calls of the fast lane's internal routes, each under the channel's MAC"))
  .annotateEndpoints(OpenApi.Override, internalOnly)
  .addError(wiresOf(SqlRefusals))
  .addError(wiresOf(StorageRefusals))
  .addError(wiresOf(DeploymentRouteRefusals))
  // node to node (spec §4.10): no credential; the source and the coordination MAC over the body
  .middleware(PeerGate)
  .annotate(RoutePolicy, internal) {}
