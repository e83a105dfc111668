/**
 * Token-bucket rate limits per client network (IPv4 /24, IPv6 /64) and per namespace, held in
 * memory per gateway. A namespace's own limit, when set, replaces the default but never exceeds
 * it; it is read from the registry at most every 30 seconds so the check stays off the store on
 * the hot path.
 */
import { Clock, Context, Effect, Layer, Option } from "effect"
import { isIPv4, isIPv6 } from "node:net"
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
   * when the namespace's own limit is not known without a registry read. The listener's fast
   * lane uses it (src/api/FastLane.ts); the client network was charged when the headers arrived.
   */
  readonly admitNow: (namespace: string, now: number) => Admission | undefined
}

export interface Admission extends Decision {
  /** The bucket that refused, when one did. */
  readonly refusedBy: "network" | "namespace" | undefined
}

interface Bucket {
  tokens: number
  at: number
}

const allowed: Decision = { allowed: true, retryAfterSeconds: 0 }
const admitted: Admission = { allowed: true, retryAfterSeconds: 0, refusedBy: undefined }
const MAX_BUCKETS = 100_000
const LIMIT_CACHE_MS = 30_000

/**
 * The eight 16-bit groups of an IPv6 address written any legal way, or undefined when it is not
 * one. `URL` validates the address and writes it canonically (lower case, no leading zeros, a
 * dotted IPv4 tail in hex, the longest run of zero groups as the one `::`), so two spellings of
 * one address agree; what is left is to put the zero groups back where `::` stands.
 */
const ipv6Groups = (text: string): ReadonlyArray<number> | undefined => {
  if (!isIPv6(text)) return undefined
  let canonical: string
  try {
    canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1)
  } catch {
    // node:net and the URL parser disagree about this text: not an address a socket reports
    return undefined
  }
  const [head = "", tail] = canonical.split("::")
  const groupsOf = (part: string | undefined) => (part === undefined || part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)))
  const before = groupsOf(head)
  const after = groupsOf(tail)
  return [...before, ...Array.from({ length: 8 - before.length - after.length }, () => 0), ...after]
}

/**
 * The network a client address belongs to (IPv4 /24, IPv6 /64), so one host cannot dodge limits
 * by rotating through the addresses it holds. An IPv4-mapped IPv6 address is its IPv4 network, so
 * a dual-stack listener charges one client to one bucket whichever way it connected.
 */
export const clientNetwork = (address: string | undefined): string => {
  if (address === undefined || address === "") return "unknown"
  // a zone names the local interface, not a different network
  const bare = address.split("%")[0]?.toLowerCase().replace(/^\[(.*)\]$/, "$1") ?? ""
  if (bare === "") return "unknown"
  if (isIPv4(bare)) return bare.slice(0, bare.lastIndexOf(".")) + ".0/24"
  const groups = ipv6Groups(bare)
  // Not from a socket in practice; keyed by itself so an unknown form cannot throttle everyone.
  if (groups === undefined) return bare
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0xffff) {
    return [g6 >> 8, g6 & 0xff, g7 >> 8].join(".") + ".0/24"
  }
  return groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":") + "::/64"
}

/**
 * A namespace's own limit as enforced: each value capped at the operator's default. A row stored
 * before the cap existed, or before the operator lowered the default, is bounded all the same.
 */
export const capNamespaceLimit = (own: RateLimitSetting, ceiling: RateLimitSetting): RateLimitSetting => ({
  rps: Math.min(own.rps, ceiling.rps),
  burst: Math.min(own.burst, ceiling.burst)
})

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
            Effect.map(Option.map((own) => capNamespaceLimit(own, defaults.perNamespace))),
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
        namespaceCeiling: defaults.perNamespace,
        limitOf: (namespace) =>
          Effect.map(namespaceLimit(namespace), (own) =>
            own === undefined
              ? { limit: defaults.perNamespace, source: "default" as const }
              : { limit: own, source: "namespace" as const }
          ),
        invalidate: (namespace) => Effect.sync(() => void limits.delete(namespace)),
        checkClientNow: (remoteAddress, now) =>
          defaults.enabled ? take(clients, clientNetwork(remoteAddress), defaults.perClientNetwork, now) : allowed,
        admitNow: (namespace, now) => {
          if (!defaults.enabled) return admitted
          const cached = limits.get(namespace)
          if (cached === undefined || now - cached.at >= LIMIT_CACHE_MS) return undefined
          const space = take(spaces, namespace, cached.value ?? defaults.perNamespace, now)
          return space.allowed ? admitted : { ...space, refusedBy: "namespace" }
        }
      }
    })
  )
}
