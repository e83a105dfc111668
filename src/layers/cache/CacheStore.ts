/**
 * The cache capability (spec §2.1, §4.1): named maps (dmaps) of a namespace, entries with an
 * optional expiry, one memory bound per namespace shared by all its dmaps, least recently used
 * evicted first. Values are kept as their exact JSON text so every JSON type round-trips exactly
 * (large integers and long decimals included).
 */
import { Context, Data, type Effect, type Option } from "effect"

/** The engine did not answer; `detail` is for the log, the client hears the catalogue's UNAVAILABLE. */
export class CacheUnavailable extends Data.TaggedError("CacheUnavailable")<{ readonly detail: string }> {
  readonly code = "UNAVAILABLE" as const
  readonly reason = "cache unavailable"
  readonly hint = "retry shortly"
}

export interface CacheEntry {
  /** The value's JSON text, exactly as the client wrote it. */
  readonly json: string
  /** Absolute expiry in Unix milliseconds, or undefined for none. */
  readonly expiresAt: number | undefined
}

export interface CacheStoreService {
  readonly engine: "memory" | "redis"
  /**
   * Whether an entry this size can be kept at all. The embedded engine cannot hold one larger
   * than its whole per-namespace bound: lru-cache would drop it on set, and the old value with it.
   */
  readonly fits: (dmap: string, key: string, json: string) => boolean
  /** Stores an entry; the caller has already checked key and entry size, and `fits`. */
  readonly put: (namespace: string, dmap: string, key: string, entry: CacheEntry) => Effect.Effect<void, CacheUnavailable>
  /** The value's JSON text; none when absent or expired (an expired entry is never returned). */
  readonly get: (namespace: string, dmap: string, key: string) => Effect.Effect<Option.Option<string>, CacheUnavailable>
  /** Whether an entry was there to delete. */
  readonly delete: (namespace: string, dmap: string, key: string) => Effect.Effect<boolean, CacheUnavailable>
  /**
   * Adds `delta` to an integer entry (absent: 0) atomically, keeping its expiry, and answers the
   * new value; none when the entry holds something else than an integer.
   */
  readonly incrBy: (namespace: string, dmap: string, key: string, delta: number) => Effect.Effect<Option.Option<number>, CacheUnavailable>
  /** One slot per requested key, in order; undefined for a miss. */
  readonly mget: (
    namespace: string,
    dmap: string,
    keys: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string | undefined>, CacheUnavailable>
  /** The live keys of a dmap that `match` accepts (the caller supplies a linear-time matcher). */
  readonly scan: (
    namespace: string,
    dmap: string,
    match: (key: string) => boolean
  ) => Effect.Effect<ReadonlyArray<string>, CacheUnavailable>
  /** Cheap liveness for `/v1/cache/health` and `/health`. */
  readonly ping: Effect.Effect<void, CacheUnavailable>
  /** Removes every entry of every dmap of the namespace (its deletion); the count removed. */
  readonly dropNamespace: (namespace: string) => Effect.Effect<number, CacheUnavailable>
  /** put, get, delete and mget answered on the spot, on an engine that can (the embedded one). */
  readonly now?: CacheStoreNow | undefined
}

export interface CacheStoreNow {
  readonly put: (namespace: string, dmap: string, key: string, entry: CacheEntry) => void
  readonly get: (namespace: string, dmap: string, key: string) => string | undefined
  readonly delete: (namespace: string, dmap: string, key: string) => boolean
  readonly mget: (namespace: string, dmap: string, keys: ReadonlyArray<string>) => ReadonlyArray<string | undefined>
}

export class CacheStore extends Context.Tag("portico/CacheStore")<CacheStore, CacheStoreService>() {}
