import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option, Stream } from "effect"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { createReadStream } from "node:fs"
import { fromRefusal, refusal } from "../../domain/Errors.js"
import { AppRepair } from "../../layers/deployments/AppRepair.js"
import { type ReplicaApplied, type ReplicaOrder as ReplicaOrderInput, type ReplicaRefused } from "../../layers/deployments/replicas/ReplicaHost.js"
import { Replicas } from "../../layers/deployments/replicas/Replicas.js"
import { stampText } from "../../layers/deployments/replicas/ReplicaRows.js"
import { type ReplicaOrder, replicaRefusal } from "../groups/ReplicaWire.js"
import { Deployments } from "../../layers/deployments/Deployments.js"
import { DatabaseBackups } from "../../layers/sql/DatabaseBackups.js"
import { toPrincipal } from "../../layers/sql/HomeNode.js"
import { LocalDatabases } from "../../layers/sql/LocalDatabases.js"
import { Cache } from "../../layers/cache/Cache.js"
import { NamespaceBackups } from "../../layers/namespaces/backup/NamespaceBackups.js"
import { PorticoConfig } from "../../layers/config/PorticoConfig.js"
import { SocketDirectory } from "../../layers/functions/SocketDirectory.js"
import { OperatorHealth } from "../../layers/operators/OperatorHealth.js"
import { Storage } from "../../layers/storage/Storage.js"
import { NodeLogs } from "../../layers/cluster/NodeLogs.js"
import { DatabaseMoves } from "../../layers/sql/DatabaseMoves.js"
import { SecretRotation } from "../../layers/nodes/SecretRotation.js"
import { Vault } from "../../layers/vault/Vault.js"
import { MediaServer } from "../../layers/webrtc/MediaServer.js"
import { socketOnly } from "./Refusals.js"
import { PorticoApi } from "../Api.js"
import { bodyOf } from "../NodeAdapter.js"
import { SHARE_ENVELOPE_HEADER } from "../groups/VaultWire.js"
import { shareGetResponse, storeFailed } from "../lane/VaultLane.js"
import { wholeBody } from "../node/LeanServerRequest.js"
import type { PutOutcome } from "../../layers/vault/Guardian.js"
import { backupWire, bind } from "./DatabaseHandlers.js"
import { deploymentView } from "./DeploymentsHandlers.js"
import { rawJson } from "./RawJson.js"
import { refusedOrDown } from "./Refusals.js"

const unavailable = (error: string) => refusal("UNAVAILABLE", error, "retry shortly", 5)

/** This node's vault store at work; its failure (a full disk) is 503, which the calling node counts as this one failing. */
const shareStore = <A,>(run: () => A) => Effect.try({ try: run, catch: storeFailed })

const toReplicaRefusal = (e: ReplicaRefused) => replicaRefusal(e.status, e.reason)
const targetOf = (p: { readonly deployment_id: string; readonly namespace: string; readonly name: string }) => ({ deploymentId: p.deployment_id, namespace: p.namespace, name: p.name })
const orderOf = (p: typeof ReplicaOrder.Type): ReplicaOrderInput => ({ ...targetOf(p), version: p.version, artifactVersion: p.artifact_version, cid: p.cid })
const replicaApplied = (applied: Effect.Effect<ReplicaApplied, ReplicaRefused>) => Effect.mapError(applied, toReplicaRefusal)

/**
 * The node-to-node routes. PeerGate has verified each call (overlay source, coordination MAC,
 * nonce) before its handler runs; the handlers do the work here.
 */
export const InternalHandlers = HttpApiBuilder.group(PorticoApi, "internal", (handlers) =>
  Effect.gen(function* () {
    const storage = yield* Storage
    const databases = yield* LocalDatabases
    const backups = yield* DatabaseBackups
    const deployments = yield* Deployments
    const cache = yield* Cache
    const health = yield* OperatorHealth
    const namespaceBackups = yield* NamespaceBackups
    const sockets = yield* SocketDirectory
    const config = yield* PorticoConfig
    const nodeLogs = yield* NodeLogs
    const moves = yield* DatabaseMoves
    const guardian = (yield* Vault).guardian
    const media = yield* MediaServer
    /** This node's media server's answer, or 503 when it is not up. */
    const mediaAnswer = <A,>(answer: Effect.Effect<A | undefined>) =>
      Effect.flatMap(answer, (a) => (a === undefined ? Effect.fail(unavailable("this node's media server is not up")) : Effect.succeed(a)))
    // this node's telemetry snapshot, under the spec's path and the one of releases before it
    const nodeSnapshot = Effect.map(Effect.mapError(health.here, () => unavailable("no check of this node answered")), (here) => ({
      ...here,
      namespaces: here.namespaces ?? null
    }))
    const rotation = yield* SecretRotation
    const apps = yield* AppRepair
    const replicas = yield* Replicas

    return handlers
      .handle("ping", () => Effect.succeed({ status: "ok" as const, node: config.nodeId }))
      .handle("namespaceRepair", ({ payload }) =>
        Effect.map(Effect.mapError(apps.repair(payload.namespace), refusedOrDown), (done) => ({ node: config.nodeId, namespace: payload.namespace, ...done }))
      )
      .handle("namespaceSpawn", ({ payload }) =>
        Effect.map(Effect.mapError(apps.spawn(payload.namespace, payload.name, payload.action), refusedOrDown), (state) => ({
          node: config.nodeId,
          namespace: payload.namespace,
          name: payload.name,
          state
        }))
      )
      .handle("secretsReencrypt", ({ payload }) =>
        Effect.map(Effect.mapError(rotation.receive(payload.generation, payload.sealed_root), refusedOrDown), (generation) => ({ generation }))
      )
      .handle("evict", ({ payload }) =>
        Effect.gen(function* () {
          return { evicted: yield* Effect.mapError(storage.evictHere(payload.cid), fromRefusal) }
        })
      )
      .handle("sqliteQuery", ({ payload }) =>
        Effect.gen(function* () {
          const caller = toPrincipal(payload.principal)
          return rawJson(
            yield* Effect.mapError(databases.queryHere(caller, payload.database_name, payload.query, bind(payload.params)), fromRefusal)
          )
        })
      )
      .handle("sqliteDelete", ({ payload }) =>
        Effect.gen(function* () {
          yield* Effect.mapError(databases.deleteHere(toPrincipal(payload.principal), payload.database_name), fromRefusal)
          return { name: payload.database_name, deleted: true as const }
        })
      )
      .handle("sqliteCopy", ({ payload }) =>
        Effect.gen(function* () {
          // the copy is a file of the request's scope, removed once its last byte is sent
          const copy = yield* Effect.mapError(namespaceBackups.copyHere(toPrincipal(payload.principal), payload.database_name), fromRefusal)
          return HttpServerResponse.stream(
            Stream.fromAsyncIterable(createReadStream(copy.file, { highWaterMark: 64 * 1024 }) as AsyncIterable<Uint8Array>, (e) => e),
            { contentType: "application/octet-stream", contentLength: copy.size }
          )
        })
      )
      .handle("sqliteHandoff", ({ payload }) =>
        Effect.gen(function* () {
          const copy = yield* Effect.mapError(moves.handOff(payload.namespace, payload.database_name, payload.to), fromRefusal)
          return HttpServerResponse.stream(
            Stream.fromAsyncIterable(createReadStream(copy.file, { highWaterMark: 64 * 1024 }) as AsyncIterable<Uint8Array>, (e) => e),
            { contentType: "application/octet-stream", contentLength: copy.size }
          )
        })
      )
      .handle("sqliteHandoffAbort", ({ payload }) =>
        Effect.as(Effect.mapError(moves.abort(payload.namespace, payload.database_name, payload.to), fromRefusal), { aborted: true as const })
      )
      .handle("wsList", ({ payload }) => Effect.succeed({ connections: sockets.here.list(payload.namespace, payload.function) }))
      .handle("wsSend", ({ payload }) =>
        Effect.succeed({ sent: sockets.here.send(payload.namespace, payload.id, new Uint8Array(Buffer.from(payload.data_base64, "base64"))) })
      )
      .handle("wsClose", ({ payload }) => Effect.succeed({ closed: sockets.here.close(payload.namespace, payload.id) }))
      // a share's bytes are the body, its order the envelope header (PeerGate checked the MAC over both)
      .handle("vaultSharePut", ({ headers }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.flatMap(Effect.orElseFail(wholeBody(request), storeFailed), (share) =>
            Effect.async<PutOutcome, ReturnType<typeof storeFailed>>((resume) =>
              guardian.putSoon({ ...headers[SHARE_ENVELOPE_HEADER], share }, false, (outcome) =>
                resume(outcome.outcome === "store failed" ? Effect.fail(storeFailed()) : Effect.succeed(outcome))
              )
            )
          )
        )
      )
      .handle("vaultShareGet", ({ payload }) => Effect.map(shareStore(() => guardian.get(payload)), shareGetResponse))
      .handle("vaultShareCount", ({ payload }) => shareStore(() => ({ shares: guardian.count(payload.namespace) })))
      .handle("vaultShareDrop", ({ payload }) => shareStore(() => ({ dropped: guardian.drop(payload.namespace) })))
      .handle("webrtcHealth", () => mediaAnswer(media.health))
      .handle("webrtcRooms", ({ payload }) => Effect.map(mediaAnswer(media.rooms(payload.namespace)), (rooms) => ({ rooms: [...rooms] })))
      .handle("webrtcControl", ({ payload }) =>
        Effect.map(mediaAnswer(media.control({ ns: payload.namespace, room: payload.room, user: payload.user, peer: payload.peer, action: payload.action })), (affected) => ({ affected }))
      )
      .handle("webrtcSignal", () => socketOnly("/v1/internal/webrtc/signal"))
      .handle("peerChannel", () => socketOnly("/v1/internal/channel"))
      .handle("cacheDropNamespace", ({ payload }) =>
        Effect.gen(function* () {
          return { dropped: yield* Effect.mapError(cache.dropNamespace(payload.namespace), () => unavailable("this node's cache did not answer")) }
        })
      )
      .handle("nodeLogs", ({ payload }) => Effect.succeed({ node: config.nodeId, lines: nodeLogs.tail(payload.lines) }))
      .handle("telemetry", () => nodeSnapshot)
      .handle("nodeSnapshot", () => nodeSnapshot)
      .handle("deploymentUpdate", ({ headers }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
          const { namespace, type } = headers["x-portico-forward-envelope"]
          const update = deployments.update(namespace, type, request.headers["content-type"] ?? "", bodyOf(request))
          return Effect.map(Effect.mapError(update, refusedOrDown), deploymentView)
        })
      )
      .handle("deploymentRollback", ({ payload }) =>
        Effect.map(Effect.mapError(deployments.rollback(payload.namespace, payload.name, payload.version), refusedOrDown), deploymentView)
      )
      .handle("deploymentEnvSet", ({ payload }) =>
        Effect.map(Effect.mapError(deployments.setEnv(payload.namespace, payload.name, { set: payload.set, unset: payload.unset }), refusedOrDown), (env) => ({
          name: payload.name,
          names: env.names,
          env_version: env.envVersion.toString(),
          restarted: env.restarted
        }))
      )
      .handle("deploymentDelete", ({ payload }) =>
        Effect.as(Effect.mapError(deployments.remove(payload.namespace, payload.name), refusedOrDown), { name: payload.name, deleted: true as const })
      )
      .handle("replicaSetup", ({ payload }) => replicaApplied(replicas.host.apply(orderOf(payload), true)))
      .handle("replicaUpdate", ({ payload }) => replicaApplied(replicas.host.apply(orderOf(payload), false)))
      .handle("replicaRollback", ({ payload }) => replicaApplied(replicas.host.apply(orderOf(payload), false)))
      .handle("replicaEnv", ({ payload }) =>
        Effect.map(Effect.mapError(replicas.host.env(targetOf(payload), BigInt(payload.env_version)), toReplicaRefusal), (done) => ({
          node: done.node,
          env_version: stampText(done.envVersion)
        }))
      )
      .handle("replicaTeardown", ({ payload }) => Effect.as(Effect.mapError(replicas.host.teardown(targetOf(payload)), toReplicaRefusal), { node: config.nodeId, removed: true as const }))
      .handle("sqliteBackup", ({ payload }) =>
        Effect.gen(function* () {
          return backupWire(yield* Effect.mapError(backups.backupHere(toPrincipal(payload.principal), payload.database_name), fromRefusal))
        })
      )
  })
)
