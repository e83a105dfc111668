/**
 * Token-bucket rate limits per client network (IPv4 /24, IPv6 /64) and per namespace, held in
 * memory per gateway. A namespace's own limit, when set, replaces the default but never exceeds
 * it; it is read from the registry at most every 30 seconds so the check stays off the store on
 * the hot path.
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

/** Four decimal octets, each 0-255, or undefined when the text is not a dotted IPv4 address. */
const ipv4Octets = (text: string): ReadonlyArray<number> | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p))) return undefined
  const octets = parts.map(Number)
  return octets.every((o) => o <= 255) ? octets : undefined
}

/**
 * The eight 16-bit groups of an IPv6 address written any legal way (`::` anywhere, leading zeros,
 * any case, a trailing dotted IPv4), or undefined when it is not one. Expanding first is what
 * makes two spellings of one address agree and keeps the groups after `::` in their place.
 */
const ipv6Groups = (text: string): ReadonlyArray<number> | undefined => {
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const split = (half: string | undefined) => (half === undefined || half === "" ? [] : half.split(":"))
  const head = split(halves[0])
  const tail = split(halves[1])
  const last = halves.length === 2 ? tail : head
  const lastPart = last[last.length - 1]
  if (lastPart !== undefined && lastPart.includes(".")) {
    const octets = ipv4Octets(lastPart)
    if (octets === undefined) return undefined
    const [a = 0, b = 0, c = 0, d = 0] = octets
    last.splice(last.length - 1, 1, ((a << 8) | b).toString(16), ((c << 8) | d).toString(16))
  }
  if (![...head, ...tail].every((g) => /^[0-9a-f]{1,4}$/.test(g))) return undefined
  const given = head.length + tail.length
  // `::` stands for at least one zero group; without it all eight must be written
  if (halves.length === 2 ? given > 7 : given !== 8) return undefined
  const zeros = Array.from({ length: 8 - given }, () => "0")
  return [...head, ...zeros, ...tail].map((g) => parseInt(g, 16))
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
  const v4 = ipv4Octets(bare)
  if (v4 !== undefined) return v4.slice(0, 3).join(".") + ".0/24"
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
