/**
 * Publish/subscribe's settings (docs/pubsub.md "Settings"), read from `PORTICO_PUBSUB_*`. Every
 * limit has a default; a value the gateway could not work with is refused at start.
 */
import { Config, ConfigError, Effect, Option } from "effect"
import { between } from "./IntegerSetting.js"

export interface PubSubSettings {
  /**
   * The engine: Redis at this URL (`PORTICO_PUBSUB_REDIS_URL`, else `PORTICO_REDIS_URL`, the
   * cache's), shared by every gateway on it; undefined: the embedded bus of this gateway alone.
   */
  readonly redisUrl: string | undefined
  /** A message's decoded payload (`PORTICO_PUBSUB_MAX_MESSAGE_BYTES`, default 256 KiB, at most 4 MiB). */
  readonly maxMessageBytes: number
  /** Messages in one publish-batch (`PORTICO_PUBSUB_BATCH_MAX`, default 100). */
  readonly batchMax: number
  /** A publish-batch's body (`PORTICO_PUBSUB_BATCH_MAX_BYTES`, default 16 MiB); 413 past it. */
  readonly batchMaxBytes: number
  /**
   * Bytes queued to one socket and not yet taken by its client (`PORTICO_PUBSUB_SOCKET_QUEUE_BYTES`,
   * default 4 MiB, at least two of the largest frames): past it the socket is closed as a slow consumer.
   */
  readonly socketQueueBytes: number
  /** Topics one socket subscribes to (`PORTICO_PUBSUB_TOPICS_PER_SOCKET`, default 64). */
  readonly topicsPerSocket: number
  /** Open sockets per user or key on this gateway (`PORTICO_PUBSUB_SOCKETS_PER_USER`, default 32). */
  readonly socketsPerUser: number
  /** Open sockets on this gateway (`PORTICO_PUBSUB_SOCKETS_PER_NODE`, default 20000). */
  readonly socketsPerNode: number
  /** A publish waits this long for the engine (`PORTICO_PUBSUB_PUBLISH_TIMEOUT_MS`, default 10000); then 503. */
  readonly publishTimeoutMs: number
  /** A socket is pinged this often (`PORTICO_PUBSUB_PING_INTERVAL_MS`, default 30000). */
  readonly pingIntervalMs: number
  /** A socket silent this long is closed (`PORTICO_PUBSUB_DEAD_PEER_MS`, default 75000, more than the ping interval). */
  readonly deadPeerMs: number
  /** Messages kept per topic for resuming subscribers (`PORTICO_PUBSUB_HISTORY_SIZE`, default 100; 0: none). */
  readonly historySize: number
  /** How long they are kept (`PORTICO_PUBSUB_HISTORY_SECONDS`, default 300; 0: none). */
  readonly historySeconds: number
  /** The embedded bus's history bytes per namespace (`PORTICO_PUBSUB_HISTORY_MAX_BYTES`, default 64 MiB). */
  readonly historyBytesPerNamespace: number
  /** A present member's entry lives this long unless its socket refreshes it (`PORTICO_PUBSUB_PRESENCE_TTL_MS`, default 45000). */
  readonly presenceTtlMs: number
  /**
   * How often open sockets' credentials are checked for revocation (`PORTICO_PUBSUB_REVOCATION_CHECK_MS`,
   * default 3000, at most 9000 so a revoked credential's sockets close within spec §8's 10 s).
   */
  readonly revocationCheckMs: number
}

const KiB = 1024
const MiB = 1024 * KiB

export const defaultPubSubSettings: PubSubSettings = {
  redisUrl: undefined,
  maxMessageBytes: 256 * KiB,
  batchMax: 100,
  batchMaxBytes: 16 * MiB,
  socketQueueBytes: 4 * MiB,
  topicsPerSocket: 64,
  socketsPerUser: 32,
  socketsPerNode: 20_000,
  publishTimeoutMs: 10_000,
  pingIntervalMs: 30_000,
  deadPeerMs: 75_000,
  historySize: 100,
  historySeconds: 300,
  historyBytesPerNamespace: 64 * MiB,
  presenceTtlMs: 45_000,
  revocationCheckMs: 3_000
}

/** The largest frame a message makes: its base64 and the frame's own members (topic, position). */
export const largestFrameBytes = (maxMessageBytes: number): number => Math.ceil(maxMessageBytes / 3) * 4 + 512

/**
 * The settings from the environment, each defaulting to `defaultPubSubSettings`; `joinedRedisUrl`
 * is the Redis a join handed this node, used when the environment names none.
 */
export const pubSubConfig = (joinedRedisUrl?: string) => Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const d = defaultPubSubSettings
  const own = yield* env(Config.option(Config.string("PUBSUB_REDIS_URL")))
  const shared = yield* env(Config.option(Config.string("REDIS_URL")))
  const url = Option.orElse(own, () => shared).pipe(
    Option.orElse(() => Option.fromNullable(joinedRedisUrl)),Option.map((u) => u.trim()), Option.filter((u) => u !== ""))
  if (Option.isSome(url) && !/^rediss?:\/\//.test(url.value)) {
    return yield* Effect.fail(ConfigError.InvalidData(["PORTICO", "PUBSUB_REDIS_URL"], "expected redis://host:port or rediss://host:port"))
  }
  const settings: PubSubSettings = {
    redisUrl: Option.getOrUndefined(url),
    maxMessageBytes: yield* env(between("PUBSUB_MAX_MESSAGE_BYTES", d.maxMessageBytes, 1, 4 * MiB)),
    batchMax: yield* env(between("PUBSUB_BATCH_MAX", d.batchMax, 1, 10_000)),
    batchMaxBytes: yield* env(between("PUBSUB_BATCH_MAX_BYTES", d.batchMaxBytes, 1 * KiB, 256 * MiB)),
    socketQueueBytes: yield* env(between("PUBSUB_SOCKET_QUEUE_BYTES", d.socketQueueBytes, 16 * KiB, 1024 * MiB)),
    topicsPerSocket: yield* env(between("PUBSUB_TOPICS_PER_SOCKET", d.topicsPerSocket, 1, 10_000)),
    socketsPerUser: yield* env(between("PUBSUB_SOCKETS_PER_USER", d.socketsPerUser, 1, 1_000_000)),
    socketsPerNode: yield* env(between("PUBSUB_SOCKETS_PER_NODE", d.socketsPerNode, 1, 10_000_000)),
    publishTimeoutMs: yield* env(between("PUBSUB_PUBLISH_TIMEOUT_MS", d.publishTimeoutMs, 10, 120_000)),
    pingIntervalMs: yield* env(between("PUBSUB_PING_INTERVAL_MS", d.pingIntervalMs, 50, 3_600_000)),
    deadPeerMs: yield* env(between("PUBSUB_DEAD_PEER_MS", d.deadPeerMs, 100, 7_200_000)),
    historySize: yield* env(between("PUBSUB_HISTORY_SIZE", d.historySize, 0, 100_000)),
    historySeconds: yield* env(between("PUBSUB_HISTORY_SECONDS", d.historySeconds, 0, 86_400)),
    historyBytesPerNamespace: yield* env(between("PUBSUB_HISTORY_MAX_BYTES", d.historyBytesPerNamespace, 0, 64 * 1024 * MiB)),
    presenceTtlMs: yield* env(between("PUBSUB_PRESENCE_TTL_MS", d.presenceTtlMs, 300, 3_600_000)),
    revocationCheckMs: yield* env(between("PUBSUB_REVOCATION_CHECK_MS", d.revocationCheckMs, 100, 9_000))
  }
  const refused = (name: string, why: string) => Effect.fail(ConfigError.InvalidData(["PORTICO", name], why))
  if (settings.deadPeerMs <= settings.pingIntervalMs) {
    return yield* refused("PUBSUB_DEAD_PEER_MS", "must be longer than PORTICO_PUBSUB_PING_INTERVAL_MS, or every socket would be closed between pings")
  }
  if (settings.socketQueueBytes < 2 * largestFrameBytes(settings.maxMessageBytes)) {
    return yield* refused("PUBSUB_SOCKET_QUEUE_BYTES", "must hold at least two of the largest frames (PORTICO_PUBSUB_MAX_MESSAGE_BYTES in base64, plus 512 bytes)")
  }
  if (settings.batchMaxBytes < largestFrameBytes(settings.maxMessageBytes)) {
    return yield* refused("PUBSUB_BATCH_MAX_BYTES", "must hold at least one message of PORTICO_PUBSUB_MAX_MESSAGE_BYTES in base64")
  }
  return settings
})
