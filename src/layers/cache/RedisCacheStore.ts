/**
 * The cluster engine of the cache (issue 4): `CacheStore` on Redis/Valkey through `ioredis`.
 *
 * How the per-namespace memory bound (256 MiB per namespace, LRU first) maps onto Redis:
 * Redis has no memory limit per key prefix, only per server (`maxmemory`), so the bound is the
 * operator's deployment choice, not something this layer can enforce:
 *   - Every namespace is routed to one Redis deployment: `overrides[namespace]` when given, the
 *     default `url` otherwise. A deployment's `maxmemory` is the bound shared by all namespaces
 *     routed to it, and `maxmemory-policy allkeys-lru` (or `allkeys-lfu`) makes Redis evict the
 *     least recently (frequently) used entries first when it is reached.
 *   - For the strict per-namespace bound, give a namespace its own instance (or logical deployment)
 *     with `maxmemory 256mb` and list it in `overrides`. Namespaces left on the default URL form one
 *     group: their data stays isolated (the namespace is part of every key), but they share that
 *     instance's memory, so one of them can evict another's entries.
 *   - `maxmemory` counts Redis' own overhead too, so it holds fewer value bytes than the embedded
 *     engine's byte-accounted bound of the same size.
 * Because an unbounded cache would eventually fail writes (`noeviction`) or exhaust the host, the
 * layer refuses to start against a deployment whose policy does not evict every key (`noeviction`
 * and the `volatile-*` policies, which never evict entries without a TTL) or which has no
 * `maxmemory` at all.
 *
 * Keys: `pc:<ns-bytes>:{<namespace>}:<dmap-bytes>:<dmap>:<key>`. Both lengths are UTF-8 byte
 * lengths, so a dmap or namespace holding ':' can never be read as a different split; the braces
 * are a Redis Cluster hash tag that keeps one namespace's keys on one slot (MGET needs that).
 */
import { Clock, Data, Duration, Effect, Layer, Option } from "effect"
import type { Scope } from "effect"
import type { Redis } from "ioredis"
import { loadRedisClass } from "./IoredisModule.js"
import { CacheStore, CacheUnavailable } from "./CacheStore.js"
import type { CacheEntry, CacheStoreService } from "./CacheStore.js"

/** The layer refused the deployment it was pointed at (policy or memory bound). */
export class RedisCacheRefused extends Data.TaggedError("RedisCacheRefused")<{ readonly detail: string }> {}

export interface RedisCacheConfig {
  /** Default deployment, `redis://[user:pass@]host:port[/db]` (or `rediss://`). */
  readonly url: string
  /** namespace → URL of the deployment that holds (and bounds) that namespace. */
  readonly overrides?: Readonly<Record<string, string>>
  /** Deadline of one command; default 2 s. */
  readonly commandTimeout?: Duration.DurationInput
  /** Deadline of the first connection and policy check at layer build; default 5 s. */
  readonly connectTimeout?: Duration.DurationInput
  /** Most keys one scan returns, so a huge dmap cannot make one request run unbounded; default 100 000. */
  readonly scanLimit?: number
  /** Deadline of a whole scan (all its SCAN round trips); default 10 s. */
  readonly scanTimeout?: Duration.DurationInput
}

/** Policies that evict any key, whether or not it has a TTL. */
const evictingPolicies: ReadonlySet<string> = new Set(["allkeys-lru", "allkeys-lfu"])

const scanPageSize = 1000

const utf8Length = (text: string): number => Buffer.byteLength(text, "utf8")

/** Prefix shared by every key of one dmap; nothing else starts with it (both parts are length-prefixed). */
export const dmapPrefix = (namespace: string, dmap: string): string =>
  `pc:${utf8Length(namespace)}:{${namespace}}:${utf8Length(dmap)}:${dmap}:`

/** INCRBY, but nil (rather than an error) when the entry holds something else than an integer; INCRBY keeps the expiry. */
const INCR_IF_INTEGER = `local v = redis.call('GET', KEYS[1])
if v and not string.match(v, '^-?%d+$') then return false end
return redis.call('INCRBY', KEYS[1], ARGV[1])`

/** Escapes SCAN MATCH glob metacharacters so the prefix matches only itself. */
export const escapeGlob = (text: string): string => text.replace(/[*?[\]\\]/g, (char) => `\\${char}`)

/**
 * A detail safe to surface: ioredis messages may carry the peer address, which must not reach a
 * client (architecture: "no route leaks a peer address").
 */
const describe = (error: unknown): string => {
  const message = error instanceof Error ? error.message : String(error)
  return message
    .replace(/\[?[0-9a-f]*:[0-9a-f:]+\]?:\d+/gi, "<redis>")
    .replace(/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g, "<redis>")
    .slice(0, 200)
}

/** Redis' INFO memory section as key → value. */
const parseInfo = (info: string): ReadonlyMap<string, string> => {
  const fields = new Map<string, string>()
  for (const line of info.split(/\r?\n/)) {
    const colon = line.indexOf(":")
    if (colon > 0 && !line.startsWith("#")) fields.set(line.slice(0, colon), line.slice(colon + 1).trim())
  }
  return fields
}

interface Deployment {
  readonly client: Redis
  /** Runs one command under both ioredis' and our deadline, mapping every failure to CacheUnavailable. */
  readonly run: <A>(op: string, command: (client: Redis) => Promise<A>) => Effect.Effect<A, CacheUnavailable>
}

const connect = (
  url: string,
  commandTimeout: Duration.Duration,
  connectTimeout: Duration.Duration
): Effect.Effect<Deployment, CacheUnavailable | RedisCacheRefused, Scope.Scope> =>
  Effect.gen(function* () {
    // loaded when a Redis is configured: a gateway on the embedded cache does not pay for it at start
    const Redis = yield* Effect.promise(loadRedisClass)
    const client = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          new Redis(url, {
            lazyConnect: false,
            // A down server must fail requests at once, not queue them until it comes back.
            enableOfflineQueue: false,
            maxRetriesPerRequest: 1,
            commandTimeout: Duration.toMillis(commandTimeout),
            connectTimeout: Duration.toMillis(connectTimeout),
            // Keep reconnecting in the background (capped backoff) so the cache heals when the
            // server returns; requests meanwhile fail fast because of the disabled offline queue.
            retryStrategy: (attempt: number) => Math.min(50 * 2 ** Math.min(attempt, 5), 1000)
          }),
        catch: (error) => new CacheUnavailable({ detail: `redis client: ${describe(error)}` })
      }),
      (client) =>
        Effect.tryPromise(() => client.quit()).pipe(
          Effect.timeout(Duration.seconds(1)),
          Effect.ignore,
          // quit waits for the server; disconnect always drops the socket and stops reconnecting.
          Effect.ensuring(Effect.sync(() => client.disconnect()))
        )
    )
    let lastError = "not connected yet"
    // ioredis emits "error" on every failed (re)connect; without a listener Node logs each one.
    client.on("error", (error: unknown) => {
      lastError = describe(error)
    })

    const run = <A>(op: string, command: (client: Redis) => Promise<A>): Effect.Effect<A, CacheUnavailable> =>
      Effect.tryPromise({
        try: () => command(client),
        catch: (error) => new CacheUnavailable({ detail: `redis ${op}: ${describe(error)}` })
      }).pipe(
        // ioredis' commandTimeout covers the command on the wire; this also covers a hung socket.
        Effect.timeoutFail({
          duration: Duration.sum(commandTimeout, Duration.millis(250)),
          onTimeout: () => new CacheUnavailable({ detail: `redis ${op}: timed out` })
        })
      )

    const ready: Effect.Effect<void, CacheUnavailable> = Effect.async<void, CacheUnavailable>((resume) => {
      if (client.status === "ready") return resume(Effect.void)
      const onReady = () => resume(Effect.void)
      client.once("ready", onReady)
      return Effect.sync(() => client.removeListener("ready", onReady))
    })
    yield* ready.pipe(
      Effect.timeoutFail({
        duration: connectTimeout,
        onTimeout: () => new CacheUnavailable({ detail: `redis did not become ready: ${lastError}` })
      })
    )

    const memory = parseInfo(yield* run("info", (c) => c.info("memory")))
    const policy = memory.get("maxmemory_policy")
    const maxmemory = Number(memory.get("maxmemory") ?? "0")
    if (policy === undefined || !evictingPolicies.has(policy)) {
      return yield* new RedisCacheRefused({
        detail:
          `redis maxmemory-policy is ${policy ?? "unknown"}; the cache needs an eviction policy over all keys ` +
          `(${[...evictingPolicies].join(" or ")}) so the memory bound evicts least recently used entries`
      })
    }
    if (!(maxmemory > 0)) {
      return yield* new RedisCacheRefused({
        detail: "redis has no maxmemory: set it to the namespace group's bound (e.g. 256mb) so eviction can happen"
      })
    }
    return { client, run }
  })

const make = (config: RedisCacheConfig): Effect.Effect<CacheStoreService, CacheUnavailable | RedisCacheRefused, Scope.Scope> =>
  Effect.gen(function* () {
    const commandTimeout = Duration.decode(config.commandTimeout ?? Duration.seconds(2))
    const connectTimeout = Duration.decode(config.connectTimeout ?? Duration.seconds(5))
    const scanTimeout = Duration.decode(config.scanTimeout ?? Duration.seconds(10))
    const scanLimit = config.scanLimit ?? 100_000
    const overrides = config.overrides ?? {}

    // One client per distinct URL: namespaces sharing a deployment share its connection.
    const urls = [...new Set([config.url, ...Object.values(overrides)])]
    const deployments = new Map<string, Deployment>()
    for (const url of urls) deployments.set(url, yield* connect(url, commandTimeout, connectTimeout))

    const deploymentOf = (namespace: string): Effect.Effect<Deployment, CacheUnavailable> => {
      const url = Object.prototype.hasOwnProperty.call(overrides, namespace) ? overrides[namespace] : config.url
      const deployment = url === undefined ? undefined : deployments.get(url)
      return deployment === undefined
        ? Effect.fail(new CacheUnavailable({ detail: "no redis deployment for namespace" }))
        : Effect.succeed(deployment)
    }

    const put: CacheStoreService["put"] = (namespace, dmap, key, entry: CacheEntry) =>
      Effect.gen(function* () {
        const redis = yield* deploymentOf(namespace)
        const fullKey = dmapPrefix(namespace, dmap) + key
        if (entry.expiresAt === undefined) {
          yield* redis.run("set", (c) => c.set(fullKey, entry.json))
          return
        }
        const remaining = entry.expiresAt - (yield* Clock.currentTimeMillis)
        // An entry already expired is not stored, but it still replaces (hides) an older value.
        if (remaining <= 0) yield* redis.run("del", (c) => c.del(fullKey))
        else yield* redis.run("set", (c) => c.set(fullKey, entry.json, "PX", Math.ceil(remaining)))
      })

    const get: CacheStoreService["get"] = (namespace, dmap, key) =>
      Effect.flatMap(deploymentOf(namespace), (redis) =>
        Effect.map(redis.run("get", (c) => c.get(dmapPrefix(namespace, dmap) + key)), Option.fromNullable)
      )

    const del: CacheStoreService["delete"] = (namespace, dmap, key) =>
      Effect.flatMap(deploymentOf(namespace), (redis) =>
        Effect.map(redis.run("del", (c) => c.del(dmapPrefix(namespace, dmap) + key)), (count) => count > 0)
      )

    const mget: CacheStoreService["mget"] = (namespace, dmap, keys) =>
      keys.length === 0
        ? Effect.succeed([])
        : Effect.flatMap(deploymentOf(namespace), (redis) => {
            const prefix = dmapPrefix(namespace, dmap)
            return Effect.map(
              redis.run("mget", (c) => c.mget(keys.map((key) => prefix + key))),
              (values) => keys.map((_, index) => values[index] ?? undefined)
            )
          })

    const incrBy: CacheStoreService["incrBy"] = (namespace, dmap, key, delta) =>
      Effect.flatMap(deploymentOf(namespace), (redis) =>
        Effect.map(
          redis.run("incrby", (c) => c.eval(INCR_IF_INTEGER, 1, dmapPrefix(namespace, dmap) + key, String(delta)) as Promise<number | null>),
          (value) => (value === null ? Option.none() : Option.some(Number(value)))
        )
      )

    const scan: CacheStoreService["scan"] = (namespace, dmap, match) =>
      Effect.gen(function* () {
        const redis = yield* deploymentOf(namespace)
        const prefix = dmapPrefix(namespace, dmap)
        const pattern = `${escapeGlob(prefix)}*`
        // SCAN may return a key more than once; a set keeps each once.
        const found = new Set<string>()
        let cursor = "0"
        do {
          const [next, batch] = yield* redis.run("scan", (c) => c.scan(cursor, "MATCH", pattern, "COUNT", scanPageSize))
          cursor = next
          for (const fullKey of batch) {
            if (!fullKey.startsWith(prefix)) continue
            const key = fullKey.slice(prefix.length)
            if (match(key)) found.add(key)
            if (found.size >= scanLimit) break
          }
        } while (cursor !== "0" && found.size < scanLimit)
        return [...found]
      }).pipe(
        Effect.timeoutFail({
          duration: scanTimeout,
          onTimeout: () => new CacheUnavailable({ detail: "redis scan: timed out" })
        })
      )

    const ping: CacheStoreService["ping"] = Effect.forEach(
      [...deployments.values()],
      (redis) =>
        Effect.flatMap(redis.run("ping", (c) => c.ping()), (reply) =>
          reply === "PONG" ? Effect.void : Effect.fail(new CacheUnavailable({ detail: `redis ping answered ${reply}` }))
        ),
      { discard: true, concurrency: "unbounded" }
    )

    // Every key of the namespace starts with its length-prefixed, hash-tagged part, and nothing
    // of another namespace does; SCAN pages of it are deleted until a whole pass finds none.
    const dropNamespace: CacheStoreService["dropNamespace"] = (namespace) =>
      Effect.gen(function* () {
        const redis = yield* deploymentOf(namespace)
        const prefix = `pc:${utf8Length(namespace)}:{${namespace}}:`
        const pattern = `${escapeGlob(prefix)}*`
        let removed = 0
        let cursor = "0"
        do {
          const [next, batch] = yield* redis.run("scan", (c) => c.scan(cursor, "MATCH", pattern, "COUNT", scanPageSize))
          cursor = next
          const mine = batch.filter((fullKey) => fullKey.startsWith(prefix))
          if (mine.length > 0) removed += yield* redis.run("del", (c) => c.del(...mine))
        } while (cursor !== "0")
        return removed
      })

    // Redis bounds memory per deployment, and its own OOM refusal answers an entry it cannot keep
    return { engine: "redis", fits: () => true, put, get, delete: del, mget, incrBy, scan, ping, dropNamespace }
  })

export const RedisCacheStore = {
  /** `CacheStore` on Redis; fails to build when a deployment is unreachable or does not evict. */
  layer: (config: RedisCacheConfig): Layer.Layer<CacheStore, CacheUnavailable | RedisCacheRefused> =>
    Layer.scoped(CacheStore, make(config))
} as const
