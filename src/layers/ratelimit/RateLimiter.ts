/**
 * Token-bucket rate limits per client network (IPv4 /24, IPv6 /64), per namespace and per wallet
 * (sign-in). A namespace's own limit, when set, replaces the default but never exceeds it; it is
 * read from the registry at most every 30 seconds so the check stays off the store on the hot path.
 *
 * Where the buckets live (docs/operations.md, "Rate limits"): without Redis, all of them in this
 * process (TokenBuckets.ts). With `REDIS_URL`, the namespace and wallet buckets are held in Redis
 * (SharedBuckets.ts, SharedBudget.ts), so every gateway on that server draws on one budget; the
 * client networks stay per gateway, because the listener charges them before it reads a byte and
 * cannot wait for a round trip.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { clientNetwork } from "../../domain/ClientNetwork.js"
import { PorticoConfig, type PorticoSettings, type RateLimitSetting } from "../config/PorticoConfig.js"
import { Namespaces } from "../namespaces/Namespaces.js"
import { connectSharedBuckets, type SharedBucketsService } from "./SharedBuckets.js"
import { leaseSizeOf, SharedBudget, StoreHealth } from "./SharedBudget.js"
import { allowed, type Decision, TokenBuckets } from "../../domain/TokenBuckets.js"
import { MessageBudget } from "../pubsub/MessageBudget.js"

export type { Decision } from "../../domain/TokenBuckets.js"
export { clientNetwork } from "../../domain/ClientNetwork.js"

export interface RateLimiterService {
  readonly checkClient: (remoteAddress: string | undefined) => Effect.Effect<Decision>
  readonly checkNamespace: (namespace: string) => Effect.Effect<Decision>
  /** Sign-in attempts per wallet, so one account cannot be hammered from many networks. */
  readonly checkWallet: (wallet: string) => Effect.Effect<Decision>
  /** The operator's per-namespace default: the most a namespace may set as its own limit. */
  readonly namespaceCeiling: RateLimitSetting
  /** The limit in force for a namespace and where it comes from. */
  readonly limitOf: (namespace: string) => Effect.Effect<{ readonly limit: RateLimitSetting; readonly source: "namespace" | "default" }>
  /** Forgets the cached namespace limit after a change on this gateway. */
  readonly invalidate: (namespace: string) => Effect.Effect<void>
  /**
   * `checkClient` on the spot (`now` in Unix ms): the listener charges every request to its
   * client network when its headers arrive, before its body is read (src/api/BodyGuard.ts).
   */
  readonly checkClientNow: (remoteAddress: string | undefined, now: number) => Decision
  /**
   * `checkNamespace` answered on the spot (`now` in Unix ms); undefined, with nothing charged,
   * when the namespace's own limit is not known without a registry read, or, with the budget in
   * Redis, when this gateway holds no leased token and knows of no refusal (SharedBudget.ts): the
   * caller then takes the asynchronous path, whose `checkNamespace` asks Redis. The listener's
   * fast lane uses it (src/api/FastLane.ts); the client network was charged when the headers arrived.
   */
  readonly admitNow: (namespace: string, now: number) => Admission | undefined
}

export interface Admission extends Decision {
  /** The bucket that refused, when one did. */
  readonly refusedBy: "network" | "namespace" | undefined
}

const admitted: Admission = { allowed: true, retryAfterSeconds: 0, refusedBy: undefined }
const LIMIT_CACHE_MS = 30_000

/**
 * A namespace's own limit as enforced: each value capped at the operator's default. A row stored
 * before the cap existed, or before the operator lowered the default, is bounded all the same.
 */
export const capNamespaceLimit = (own: RateLimitSetting, ceiling: RateLimitSetting): RateLimitSetting => ({
  rps: Math.min(own.rps, ceiling.rps),
  burst: Math.min(own.burst, ceiling.burst)
})

/** What a limiter is made of: the settings, where a namespace's own limit is read, and the store. */
export interface RateLimiterParts {
  readonly settings: PorticoSettings["rateLimit"]
  /** A namespace's own limit as stored (uncapped), or undefined; a failure keeps the last known one. */
  readonly ownLimit: (namespace: string) => Effect.Effect<RateLimitSetting | undefined, unknown>
  /** Redis' buckets, shared with the other gateways; undefined holds every budget in this process. */
  readonly shared: SharedBucketsService | undefined
}

/**
 * One budget kind (namespaces, wallets): on the spot and asynchronously. In this process both
 * always answer; shared, the spot answer may be undefined (SharedBudget.ts).
 */
interface Budget {
  readonly takeNow: (key: string, limit: RateLimitSetting, now: number) => Decision | undefined
  readonly take: (key: string, limit: RateLimitSetting) => Effect.Effect<Decision>
}

const localBudget = (): Budget => {
  const buckets = new TokenBuckets()
  return {
    takeNow: (key, limit, now) => buckets.take(key, limit, now),
    take: (key, limit) => Effect.map(Clock.currentTimeMillis, (now) => buckets.take(key, limit, now))
  }
}

const sharedBudget = (store: SharedBucketsService, health: StoreHealth, kind: string, leaseSize: (limit: RateLimitSetting) => number): Budget => {
  const budget = new SharedBudget(store, health, kind, leaseSize)
  return { takeNow: (key, limit, now) => budget.takeNow(key, limit, now), take: (key, limit) => budget.take(key, limit) }
}

export const makeRateLimiter = (parts: RateLimiterParts): RateLimiterService => {
  const defaults = parts.settings
  const clients = new TokenBuckets()
  const health = new StoreHealth()
  const spaces = parts.shared === undefined ? localBudget() : sharedBudget(parts.shared, health, "ns", leaseSizeOf)
  // sign-in attempts are few: each one asks Redis, no lease
  const wallets = parts.shared === undefined ? localBudget() : sharedBudget(parts.shared, health, "wallet", () => 1)
  const limits = new Map<string, { readonly value: RateLimitSetting | undefined; readonly at: number }>()

  const namespaceLimit = (namespace: string) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const cached = limits.get(namespace)
      if (cached !== undefined && now - cached.at < LIMIT_CACHE_MS) return cached.value
      // A registry hiccup keeps the last known limit rather than failing the request.
      const value = yield* parts.ownLimit(namespace).pipe(
        Effect.map((own) => (own === undefined ? undefined : capNamespaceLimit(own, defaults.perNamespace))),
        Effect.orElseSucceed(() => cached?.value)
      )
      limits.set(namespace, { value, at: now })
      return value
    })

  return {
    checkClient: (remoteAddress) =>
      defaults.enabled
        ? Effect.map(Clock.currentTimeMillis, (now) => clients.take(clientNetwork(remoteAddress), defaults.perClientNetwork, now))
        : Effect.succeed(allowed),
    checkNamespace: (namespace) =>
      defaults.enabled
        ? Effect.flatMap(namespaceLimit(namespace), (own) => spaces.take(namespace, own ?? defaults.perNamespace))
        : Effect.succeed(allowed),
    checkWallet: (wallet) => (defaults.enabled ? wallets.take(wallet.toLowerCase(), defaults.perWallet) : Effect.succeed(allowed)),
    namespaceCeiling: defaults.perNamespace,
    limitOf: (namespace) =>
      Effect.map(namespaceLimit(namespace), (own) =>
        own === undefined ? { limit: defaults.perNamespace, source: "default" as const } : { limit: own, source: "namespace" as const }
      ),
    invalidate: (namespace) => Effect.sync(() => void limits.delete(namespace)),
    checkClientNow: (remoteAddress, now) =>
      defaults.enabled ? clients.take(clientNetwork(remoteAddress), defaults.perClientNetwork, now) : allowed,
    admitNow: (namespace, now) => {
      if (!defaults.enabled) return admitted
      const cached = limits.get(namespace)
      if (cached === undefined || now - cached.at >= LIMIT_CACHE_MS) return undefined
      const space = spaces.takeNow(namespace, cached.value ?? defaults.perNamespace, now)
      if (space === undefined) return undefined
      return space.allowed ? admitted : { ...space, refusedBy: "namespace" }
    }
  }
}

/** The embedded defaults, switched on: what `RateLimiter.Test` enforces unless told otherwise. */
export const defaultRateLimits: PorticoSettings["rateLimit"] = {
  enabled: true,
  perClientNetwork: { rps: 100, burst: 200 },
  perNamespace: { rps: 1000, burst: 2000 },
  perWallet: { rps: 1, burst: 20 }
}

export class RateLimiter extends Context.Tag("portico/RateLimiter")<RateLimiter, RateLimiterService>() {
  /** Every budget in this process, or, with `REDIS_URL`, the namespace and wallet budgets in Redis. */
  static readonly Live = Layer.scoped(
    RateLimiter,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const namespaces = yield* Namespaces
      const redisUrl = config.cache.redisUrl
      const shared = redisUrl === undefined || !config.rateLimit.enabled ? undefined : yield* connectSharedBuckets(redisUrl)
      return makeRateLimiter({
        settings: config.rateLimit,
        ownLimit: (namespace) =>
          Effect.map(namespaces.get(namespace), (ns) => Option.getOrUndefined(Option.flatMap(ns, (n) => Option.fromNullable(n.rateLimit)))),
        shared
      })
    })
  )

  /**
   * In memory and deterministic (refills follow Effect's `Clock`, so `TestClock` drives them):
   * `settings` default to the embedded limits switched on; `namespaceLimits` are the namespaces'
   * own limits; `shared` puts the namespace and wallet budgets in a given store.
   */
  /** Pub/sub's messages charged to the namespace bucket this limiter keeps (src/layers/pubsub/MessageBudget.ts). */
  static readonly MessageBudget = Layer.effect(
    MessageBudget,
    Effect.map(RateLimiter, (limiter) => ({ take: limiter.checkNamespace }))
  )

  static readonly Test = (
    options: {
      readonly settings?: PorticoSettings["rateLimit"]
      readonly namespaceLimits?: Readonly<Record<string, RateLimitSetting>>
      readonly shared?: SharedBucketsService
    } = {}
  ): Layer.Layer<RateLimiter> =>
    Layer.sync(RateLimiter, () =>
      makeRateLimiter({
        settings: options.settings ?? defaultRateLimits,
        ownLimit: (namespace) => Effect.succeed(options.namespaceLimits?.[namespace]),
        shared: options.shared
      })
    )
}
