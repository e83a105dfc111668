/**
 * Token buckets held in Redis, so every gateway pointed at the same server draws on one budget
 * (docs/operations.md, "Rate limits"). One Lua script per take keeps the read, refill and debit
 * atomic; it reads the time from Redis (`TIME`), so gateways whose clocks disagree still refill a
 * bucket at one rate.
 *
 * Why not `@effect/experimental`'s `RateLimiter/Redis` store: its token-bucket keys never expire
 * (a per-wallet key is chosen by whoever asks for a challenge, so Redis would grow without bound),
 * it refills from each gateway's own clock, and it takes exactly `n` tokens or none, while a lease
 * (SharedBudget.ts) wants "up to n".
 *
 * Keys: `portico:rl:{<kind>:<name>}`, a hash `{tokens, at}`; the braces keep each bucket on one
 * Redis Cluster slot. A key expires when its bucket would be full again, so a missing key is
 * exactly a full bucket, and an idle one costs nothing. Under `allkeys-lru` (which the cache asks
 * for) Redis may evict a bucket under memory pressure: that bucket starts full again.
 */
import { Data, Duration, Effect } from "effect"
import type { Scope } from "effect"
import type { Redis } from "ioredis"
import { loadRedisClass } from "../cache/IoredisModule.js"
import type { RateLimitSetting } from "../config/PorticoConfig.js"

/** Redis did not answer in time, or refused the command. */
export class SharedBucketsUnavailable extends Data.TaggedError("SharedBucketsUnavailable")<{ readonly detail: string }> {}

export interface Grant {
  /** Tokens taken, from 0 to the number asked for. */
  readonly granted: number
  /** When none was: milliseconds until the next token is in the bucket. */
  readonly waitMs: number
}

export interface SharedBucketsService {
  /**
   * Puts back `refund` tokens this gateway took earlier and did not use, then takes up to `want`
   * tokens (as many as the bucket holds, up to `want`) from the bucket `key`.
   */
  readonly take: (key: string, limit: RateLimitSetting, want: number, refund: number) => Effect.Effect<Grant, SharedBucketsUnavailable>
}

export interface SharedBucketsOptions {
  /** Deadline of one take on the wire; default 250 ms. A request waits at most this for its check. */
  readonly commandTimeoutMs?: number
  /** Key prefix; default `portico:rl:`. */
  readonly prefix?: string
  /** How long the layer waits for a first connection before answering from local buckets; default 2 s. */
  readonly connectTimeoutMs?: number
}

interface RedisWithTake extends Redis {
  porticoTake(key: string, rps: number, burst: number, want: number, refund: number): Promise<[number, number]>
}

/**
 * ARGV: rps, burst, want, refund. Returns {granted, wait ms}. Lua numbers are doubles, so a
 * fractional token count survives between calls as its decimal text.
 */
const takeScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rps = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local refund = tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
elseif now > at then
  tokens = math.min(burst, tokens + (now - at) * rps / 1000)
  at = now
end
tokens = math.min(burst, tokens + refund)
local granted = math.max(0, math.min(want, math.floor(tokens)))
tokens = tokens - granted
local wait = 0
if granted == 0 then wait = math.ceil((1 - tokens) * 1000 / rps) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(at))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rps) + 1000)
return { granted, wait }
`

/** An error's message without the server's address (architecture: no route leaks a peer address). */
const describe = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error))
    .replace(/\[?[0-9a-f]*:[0-9a-f:]+\]?:\d+/gi, "<redis>")
    .replace(/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g, "<redis>")
    .slice(0, 200)

/** A connection to `url` (REDIS_URL) for the shared buckets, closed with the scope. */
export const connectSharedBuckets = (
  url: string,
  options: SharedBucketsOptions = {}
): Effect.Effect<SharedBucketsService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const commandTimeoutMs = options.commandTimeoutMs ?? 250
    const prefix = options.prefix ?? "portico:rl:"
    // loaded when a Redis is configured: a gateway without one does not pay for it at start
    const Redis = yield* Effect.promise(loadRedisClass)
    const client = yield* Effect.acquireRelease(
      Effect.sync(
        () =>
          new Redis(url, {
            // A down server must fail a check at once (the caller falls back), not queue it.
            enableOfflineQueue: false,
            maxRetriesPerRequest: 1,
            commandTimeout: commandTimeoutMs,
            connectTimeout: options.connectTimeoutMs ?? 2000,
            // reconnect in the background with a capped backoff, so sharing resumes by itself
            retryStrategy: (attempt: number) => Math.min(50 * 2 ** Math.min(attempt, 5), 1000)
          }) as RedisWithTake
      ),
      (client) =>
        Effect.tryPromise(() => client.quit()).pipe(
          Effect.timeout(Duration.seconds(1)),
          Effect.ignore,
          Effect.ensuring(Effect.sync(() => client.disconnect()))
        )
    )
    // ioredis emits "error" on every failed (re)connect; without a listener Node prints each one.
    client.on("error", () => {})
    client.defineCommand("porticoTake", { lua: takeScript, numberOfKeys: 1 })
    // best effort: a server that is not there yet leaves the gateway on its local buckets
    yield* Effect.async<void>((resume) => {
      if (client.status === "ready") return resume(Effect.void)
      const onReady = () => resume(Effect.void)
      client.once("ready", onReady)
      return Effect.sync(() => client.removeListener("ready", onReady))
    }).pipe(Effect.timeout(Duration.millis(options.connectTimeoutMs ?? 2000)), Effect.ignore)

    return {
      take: (key, limit, want, refund) =>
        Effect.tryPromise({
          try: () => client.porticoTake(prefix + key, limit.rps, limit.burst, want, refund),
          catch: (error) => new SharedBucketsUnavailable({ detail: describe(error) })
        }).pipe(
          // ioredis' commandTimeout covers the command on the wire; this also covers a hung socket
          Effect.timeoutFail({
            duration: Duration.millis(commandTimeoutMs + 50),
            onTimeout: () => new SharedBucketsUnavailable({ detail: "timed out" })
          }),
          Effect.map(([granted, waitMs]) => ({ granted: Number(granted), waitMs: Number(waitMs) }))
        )
    }
  })
