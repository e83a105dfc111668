/**
 * Token-bucket rate limits per client network (IPv4 /24, IPv6 /64) and per namespace, held in
 * memory per gateway. A namespace's own limit, when set, replaces the default; it is read from
 * the registry at most every 30 seconds so the check stays off the store on the hot path.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { PorticoConfig, type RateLimitSetting } from "../config/PorticoConfig.js"
import { Namespaces } from "../namespaces/Namespaces.js"

export interface Decision {
  readonly allowed: boolean
  /** Seconds until one request would be allowed again. */
  readonly retryAfterSeconds: number
}

export interface RateLimiterService {
  readonly checkClient: (remoteAddress: string | undefined) => Effect.Effect<Decision>
  readonly checkNamespace: (namespace: string) => Effect.Effect<Decision>
  /** Sign-in attempts per wallet, so one account cannot be hammered from many networks. */
  readonly checkWallet: (wallet: string) => Effect.Effect<Decision>
  /** The limit in force for a namespace and where it comes from. */
  readonly limitOf: (namespace: string) => Effect.Effect<{ readonly limit: RateLimitSetting; readonly source: "namespace" | "default" }>
  /** Forgets the cached namespace limit after a change on this gateway. */
  readonly invalidate: (namespace: string) => Effect.Effect<void>
}

interface Bucket {
  tokens: number
  at: number
}

const allowed: Decision = { allowed: true, retryAfterSeconds: 0 }
const MAX_BUCKETS = 100_000
const LIMIT_CACHE_MS = 30_000

/** The network a client address belongs to, so one host cannot dodge limits by rotating. */
export const clientNetwork = (address: string | undefined): string => {
  if (address === undefined || address === "") return "unknown"
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address
  if (/^\d+\.\d+\.\d+\.\d+$/.test(v4)) return v4.split(".").slice(0, 3).join(".") + ".0/24"
  const groups = address.split("::")[0]?.split(":") ?? []
  return groups.slice(0, 4).join(":") + "::/64"
}

const take = (buckets: Map<string, Bucket>, key: string, limit: RateLimitSetting, now: number): Decision => {
  let bucket = buckets.get(key)
  if (bucket === undefined) {
    // Bounded memory: when full, drop the oldest buckets (a Map iterates in insertion order).
    if (buckets.size >= MAX_BUCKETS) {
      let drop = Math.ceil(MAX_BUCKETS / 10)
      for (const k of buckets.keys()) {
        buckets.delete(k)
        if (--drop === 0) break
      }
    }
    bucket = { tokens: limit.burst, at: now }
    buckets.set(key, bucket)
  } else {
    bucket.tokens = Math.min(limit.burst, bucket.tokens + ((now - bucket.at) / 1000) * limit.rps)
    bucket.at = now
  }
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1
    return allowed
  }
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / limit.rps)) }
}

export class RateLimiter extends Context.Tag("portico/RateLimiter")<RateLimiter, RateLimiterService>() {
  static readonly Live = Layer.effect(
    RateLimiter,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const namespaces = yield* Namespaces
      const clients = new Map<string, Bucket>()
      const spaces = new Map<string, Bucket>()
      const wallets = new Map<string, Bucket>()
      const limits = new Map<string, { readonly value: RateLimitSetting | undefined; readonly at: number }>()
      const defaults = config.rateLimit

      const namespaceLimit = (namespace: string) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const cached = limits.get(namespace)
          if (cached !== undefined && now - cached.at < LIMIT_CACHE_MS) return cached.value
          // A registry hiccup keeps the last known limit rather than failing the request.
          const value = yield* namespaces.get(namespace).pipe(
            Effect.map(Option.flatMap((ns) => Option.fromNullable(ns.rateLimit))),
            Effect.map(Option.getOrUndefined),
            Effect.orElseSucceed(() => cached?.value)
          )
          limits.set(namespace, { value, at: now })
          return value
        })

      return {
        checkClient: (remoteAddress) =>
          defaults.enabled
            ? Effect.map(Clock.currentTimeMillis, (now) =>
                take(clients, clientNetwork(remoteAddress), defaults.perClientNetwork, now)
              )
            : Effect.succeed(allowed),
        checkNamespace: (namespace) =>
          defaults.enabled
            ? Effect.flatMap(namespaceLimit(namespace), (own) =>
                Effect.map(Clock.currentTimeMillis, (now) =>
                  take(spaces, namespace, own ?? defaults.perNamespace, now)
                )
              )
            : Effect.succeed(allowed),
        checkWallet: (wallet) =>
          defaults.enabled
            ? Effect.map(Clock.currentTimeMillis, (now) => take(wallets, wallet.toLowerCase(), defaults.perWallet, now))
            : Effect.succeed(allowed),
        limitOf: (namespace) =>
          Effect.map(namespaceLimit(namespace), (own) =>
            own === undefined
              ? { limit: defaults.perNamespace, source: "default" as const }
              : { limit: own, source: "namespace" as const }
          ),
        invalidate: (namespace) => Effect.sync(() => void limits.delete(namespace))
      }
    })
  )
}
