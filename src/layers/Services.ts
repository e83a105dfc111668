/**
 * The platform services wired together, each on the engine the settings select. The CLI uses
 * this without the HTTP stack; the gateway puts its routes on top.
 */
import { AcmeChallenges } from "./edge/AcmeChallenges.js"
import { AcmeDns } from "./edge/AcmeDns.js"
import { EdgeAccess } from "./edge/EdgeAccess.js"
import { TlsCheck } from "./edge/TlsCheck.js"
import { TlsStore } from "./edge/TlsStore.js"
import { Layer } from "effect"
import { Audit } from "./audit/Audit.js"
import { Cache } from "./cache/Cache.js"
import { MemoryCacheStore } from "./cache/MemoryCacheStore.js"
import { RedisCacheStore } from "./cache/RedisCacheStore.js"
import { Authenticator } from "./auth/Authenticator.js"
import { PorticoConfig, type PorticoSettings } from "./config/PorticoConfig.js"
import { Health } from "./health/Health.js"
import { ApiKeys } from "./keys/ApiKeys.js"
import { CorsOrigins } from "./namespaces/CorsOrigins.js"
import { Namespaces } from "./namespaces/Namespaces.js"
import { OperatorAudit } from "./operators/OperatorAudit.js"
import { Operators } from "./operators/Operators.js"
import { RateLimiter } from "./ratelimit/RateLimiter.js"
import { registryLayer } from "./registry/registryLayer.js"
import { Sealer } from "./secrets/Sealer.js"
import { Sessions } from "./sessions/Sessions.js"
import { SessionPolicy } from "./sessions/SessionPolicy.js"
import { Devices } from "./devices/Devices.js"
import { KeyRing } from "./tokens/KeyRing.js"
import { ClusterSql } from "./sql/ClusterSql.js"
import { ClusterSqlStore } from "./sql/ClusterSqlStore.js"
import { LocalDatabases } from "./sql/LocalDatabases.js"
import { SqliteWorkers } from "./sql/SqliteWorkers.js"
import { TransferSlot } from "./transfer/TransferSlot.js"
import { Coordination } from "./coordination/Coordination.js"
import { ContentIndex } from "./storage/ContentIndex.js"
import { EmbeddedContentEngine } from "./storage/EmbeddedContentEngine.js"
import { KuboContentEngine } from "./storage/KuboContentEngine.js"
import { Evictor } from "./storage/Evictor.js"
import { FetchCaps } from "./storage/FetchCaps.js"
import { Storage } from "./storage/Storage.js"
import { DatabaseBackups } from "./sql/DatabaseBackups.js"
import * as path from "node:path"
import { GuardedFetch } from "./egress/GuardedFetch.js"
import { PushCredentials } from "./push/PushCredentials.js"
import { PushStore } from "./push/PushStore.js"
import { PushRegistrations } from "./push/Registrations.js"
import { PlatformRelay } from "./push/PlatformRelay.js"
import { RelayCallReceiver } from "./push/RelayCallReceiver.js"
import { RelayPublisherLive } from "./push/RelayPublisherLive.js"
import { PushSender } from "./push/PushSender.js"
import { WorkloadTokens } from "./workload/WorkloadTokens.js"
import { InstanceDirs } from "./deployments/InstanceDirs.js"
import { DeploymentLocks } from "./deployments/DeploymentLocks.js"
import { DeploymentDomains } from "./deployments/DeploymentDomains.js"
import { DeploymentStore } from "./deployments/DeploymentStore.js"
import { AppBuilds } from "./deployments/build/AppBuilds.js"
import { AppRuntime } from "./deployments/runtime/AppRuntime.js"
import { AppHosts } from "./deployments/serving/AppHosts.js"
import { Deployments } from "./deployments/Deployments.js"
import { NamespaceBackups } from "./namespaces/backup/NamespaceBackups.js"
import { NamespaceCreation } from "./namespaces/NamespaceCreation.js"
import { NamespaceTeardown } from "./namespaces/NamespaceTeardown.js"
import { OperatorHealth } from "./operators/OperatorHealth.js"
import { MemoryPubSubEngine } from "./pubsub/MemoryPubSubEngine.js"
import { PubSub } from "./pubsub/PubSub.js"
import { RedisPubSubEngine } from "./pubsub/RedisPubSubEngine.js"
import { FunctionRunner } from "./functions/FunctionRunner.js"
import { Functions } from "./functions/Functions.js"
import { FunctionStore } from "./functions/FunctionStore.js"
import { SocketDirectory } from "./functions/SocketDirectory.js"
import { Membership } from "./cluster/Membership.js"
import { Network } from "./network/Network.js"
import { NodeHeartbeat } from "./cluster/NodeHeartbeat.js"
import { NodeEnrolment } from "./nodes/NodeEnrolment.js"
import { NodeInvites } from "./nodes/NodeInvites.js"
import { Replicas } from "./deployments/replicas/Replicas.js"
import { AppRepair } from "./deployments/AppRepair.js"
import { NodeRepair } from "./nodes/NodeRepair.js"
import { NodeAdmin } from "./nodes/NodeAdmin.js"
import { NodeLogs } from "./cluster/NodeLogs.js"
import { ClusterWorker } from "./nodes/ClusterWorker.js"
import { SecretRotation } from "./nodes/SecretRotation.js"
import { sealerCaughtUp } from "./secrets/RootChain.js"
import { DatabaseMoves } from "./sql/DatabaseMoves.js"
import { Invocations } from "./functions/Invocations.js"
import { FunctionSchedules } from "./functions/Schedules.js"
import { FunctionTopicTriggers } from "./functions/TopicTriggers.js"
import { Vault } from "./vault/Vault.js"
import { WebRtc } from "./webrtc/WebRtc.js"
import { KeptReads } from "./registry/KeptReads.js"
import { MediaServer } from "./webrtc/MediaServer.js"
import { RoomEvents } from "./webrtc/RoomEvents.js"
import { Rooms } from "./webrtc/Rooms.js"

export interface ServicesOptions {
  /**
   * Where tenant SQL runs: worker processes (the default, and the gateway's only choice), or
   * `in-process` for tests that must start no process (SqliteWorkers.inProcess: the worker's
   * code in the caller's thread, with no statement timeout).
   */
  readonly sqliteWorkers?: "processes" | "in-process" | undefined
}

export const servicesLayer = (settings: PorticoSettings, options: ServicesOptions = {}) => {
  // the sealer past the registry's newest root generation (secrets/RootChain.ts) before anything opens a value
  const core = sealerCaughtUp.pipe(
    Layer.provideMerge(registryLayer(settings)),
    Layer.provideMerge(PorticoConfig.layer(settings)),
    // what a gateway on a networked registry keeps of credentials' rows, one for all (KeptReads.ts)
    Layer.provideMerge(KeptReads.Live)
  )
  // the cluster's membership (docs/cluster.md), which the internal client finds nodes through
  const membership = Membership.Live.pipe(Layer.provideMerge(core))
  const registry = Layer.mergeAll(Audit.Live, OperatorAudit.Live, ApiKeys.Live, KeyRing.Live, Health.Live, Coordination.Live).pipe(Layer.provideMerge(membership))
  const namespaceSettings = Layer.mergeAll(CorsOrigins.Live, Operators.Live, NodeInvites.Live).pipe(Layer.provideMerge(registry))
  const sessions = Layer.mergeAll(Namespaces.Live, Sessions.Live, SessionPolicy.Live).pipe(Layer.provideMerge(namespaceSettings))
  const namespaces = Devices.Live.pipe(Layer.provideMerge(sessions))
  const liveness = Layer.mergeAll(Sessions.Liveness, WorkloadTokens.Liveness).pipe(Layer.provideMerge(namespaces))
  const cacheStore =
    settings.cache.redisUrl === undefined
      ? MemoryCacheStore.layer(settings.cache.maxBytesPerNamespace)
      : RedisCacheStore.layer({ url: settings.cache.redisUrl, overrides: Object.fromEntries(settings.cache.redisOverrides) })
  const cache = Cache.Live.pipe(Layer.provide(cacheStore))
  const pubsubSettings = settings.pubsub
  const history = { size: pubsubSettings.historySize, maxAgeMs: pubsubSettings.historySeconds * 1000 }
  const pubsubEngine =
    pubsubSettings.redisUrl === undefined
      ? MemoryPubSubEngine.layer({ history, historyBytesPerNamespace: pubsubSettings.historyBytesPerNamespace })
      : RedisPubSubEngine.layer({ url: pubsubSettings.redisUrl, history, publishTimeoutMs: pubsubSettings.publishTimeoutMs })
  const pubsub = PubSub.Live.pipe(Layer.provide(pubsubEngine), Layer.provide(RateLimiter.MessageBudget))
  const workerSettings = {
    workers: settings.sql.workers,
    timeoutMs: settings.sql.timeoutMs,
    maxQueue: 1024,
    worker: { maxResultBytes: settings.sql.maxResultBytes, busyTimeoutMs: 5000, maxOpen: 256 }
  }
  const workers = options.sqliteWorkers === "in-process" ? SqliteWorkers.inProcess(workerSettings) : SqliteWorkers.layer(workerSettings)
  const cluster = settings.storage.cluster
  const engine =
    cluster === undefined
      ? EmbeddedContentEngine.layer({ directory: path.join(settings.dataDir, "blocks"), nodeId: settings.nodeId })
      : KuboContentEngine.layer({ kuboUrl: cluster.kuboUrl, clusterUrl: cluster.clusterUrl })
  const index = Layer.mergeAll(ContentIndex.Live, engine)
  const storage = Layer.mergeAll(Storage.Live, FetchCaps.Live).pipe(
    Layer.provideMerge(Evictor.Live.pipe(Layer.provideMerge(index))),
    Layer.provideMerge(index)
  )
  const sqlBase = Layer.mergeAll(LocalDatabases.Live, ClusterSqlStore.Live, TransferSlot.Live).pipe(Layer.provideMerge(workers))
  const sql = Layer.mergeAll(ClusterSql.Live, DatabaseBackups.Live, DatabaseMoves.Live).pipe(
    Layer.provideMerge(sqlBase),
    Layer.provide(storage)
  )
  // the relay publisher (RelayPublisher) and the relay route's receiver over this node's platform relay
  const relay = Layer.mergeAll(RelayPublisherLive, RelayCallReceiver.Live).pipe(
    Layer.provideMerge(Layer.mergeAll(PushStore.Live, GuardedFetch.Live, PlatformRelay.Live))
  )
  // sends go through the gateway's one APNs client (PushSender.ApnsLive: PORTICO_APNS_URL when set)
  const push = Layer.mergeAll(PushCredentials.Live, PushRegistrations.Live, PushSender.Live).pipe(
    Layer.provideMerge(relay),
    Layer.provide(PushSender.ApnsLive)
  )
  // custom domains over the deployment store (stateless over the registry and the sealer)
  const domains = DeploymentDomains.Live.pipe(Layer.provide(DeploymentStore.Live))
  // deployment records, the per-deployment lock and the instance directories (the deployments
  // service itself sits above the host table, in the gateway)
  const deploymentRecords = Layer.mergeAll(InstanceDirs.Live, DeploymentLocks.Live).pipe(Layer.provideMerge(DeploymentStore.Live))
  // the app runtime (supervisors of this node's apps) over the records, directories and tokens
  const runtime = AppRuntime.Live.pipe(Layer.provideMerge(deploymentRecords), Layer.provide(WorkloadTokens.Live))
  // real-time media: the settings and TURN credentials, this node's media server (started by the
  // gateway once it listens) and the rooms on every node's (docs/webrtc.md)
  const media = Layer.mergeAll(WebRtc.Live, Rooms.Live).pipe(Layer.provideMerge(MediaServer.Live))
  // functions: the control plane over the registry and content storage, and invocations over the
  // runner and the services their host calls reach
  const functions = Invocations.Live.pipe(
    Layer.provideMerge(SocketDirectory.Live),
    Layer.provideMerge(Functions.Live),
    Layer.provideMerge(FunctionStore.Live),
    Layer.provide(Layer.mergeAll(FunctionRunner.Live, cacheStore, pubsub, sql, storage, push, media))
  )
  return Layer.mergeAll(Authenticator.Live, WorkloadTokens.Live, cache, pubsub, sql, storage, push, domains, runtime, AppBuilds.Live, media, functions).pipe(
    // pub/sub charges each message to the namespace budget the gates draw on: one limiter for both
    Layer.provideMerge(RateLimiter.Live.pipe(Layer.provideMerge(liveness)))
  )
}

/**
 * What the gateway serves with: `servicesLayer`, and above it the services only a running gateway
 * has (the CLI's registry commands build `servicesLayer` alone). The gateway (src/api/Gateway.ts)
 * builds this and wires no service of its own.
 */
export const gatewayServicesLayer = (settings: PorticoSettings, options: ServicesOptions = {}) =>
  // node administration, over this node's heartbeat and the log it keeps
  Layer.mergeAll(NodeAdmin.Live, NodeRepair.Live).pipe(
    // namespace creation over HTTP, which waits for a deletion of the same name; functions'
    // schedules and topic triggers, this node's heartbeat, its log and its turn at the cluster's
    // background work, which running gateways only have
    Layer.provideMerge(Layer.mergeAll(NamespaceCreation.Live, FunctionSchedules, FunctionTopicTriggers, NodeHeartbeat.Live, NodeEnrolment.Live, NodeLogs.Live, ClusterWorker.Live, SecretRotation.Live)),
    // what operators see of this gateway's health (its checks over the services below), and of
    // the cluster's network (connecting nodes by address)
    Layer.provideMerge(Layer.mergeAll(OperatorHealth.Live, Network.Live)),
    // the TLS edge's calls on this node: its token, its certificate storage, its challenge records
    Layer.provideMerge(Layer.mergeAll(EdgeAccess.Live, TlsStore.Live, TlsCheck.Live, AcmeDns.Live.pipe(Layer.provideMerge(AcmeChallenges.Live)))),
    // namespace deletion, over every service a namespace holds something in (its apps too)
    Layer.provideMerge(NamespaceTeardown.Live),
    // the vault: this node's guardian and the push and pull over every node's (docs/vault.md);
    // real-time media's participant events (docs/webrtc.md)
    Layer.provideMerge(Layer.mergeAll(Vault.Live, RoomEvents.Live)),
    // namespace backup and restore, over the stores a namespace's data is in
    Layer.provideMerge(NamespaceBackups.Live),
    // the deployments service, over the host table it refreshes after each change, and the repair
    // of a namespace's apps on this node
    Layer.provideMerge(Layer.mergeAll(Deployments.Live, AppRepair.Live)),
    // replicas of dynamic apps: this node's part as a replica and as a home node
    Layer.provideMerge(Replicas.Live),
    // the deployed apps' host table, beside the services so deployment routes can refresh it
    Layer.provideMerge(AppHosts.Live),
    Layer.provideMerge(servicesLayer(settings, options))
  )
