/**
 * The embedded cache engine: one byte-bounded LRU per namespace (all its dmaps share it), with
 * per-entry TTL, from `lru-cache`. Expired entries are never returned (`allowStale: false`).
 */
import { Clock, Effect, Layer, Option } from "effect"
import { LRUCache } from "lru-cache"
import { type CacheEntry, CacheStore, type CacheStoreNow, type CacheStoreService } from "./CacheStore.js"

/** Per-entry bookkeeping in lru-cache and our object: counted so the bound is about real memory. */
const ENTRY_OVERHEAD_BYTES = 96

/** dmap and key joined unambiguously: the dmap's length prefixes it, so ':' inside is harmless. */
const slot = (dmap: string, key: string) => `${dmap.length}:${dmap}:${key}`

/**
 * `now` is the clock lru-cache reads for TTLs; the layer passes Effect's Clock, so a test on
 * `TestClock` moves expiry with it.
 */
const INTEGER = /^-?\d{1,16}$/

/** What an entry costs against the namespace's bound: its slot name, value text and bookkeeping. */
const entrySize = (json: string, name: string) => Buffer.byteLength(name, "utf8") + Buffer.byteLength(json, "utf8") + ENTRY_OVERHEAD_BYTES

export const makeMemoryCacheStore = (maxBytesPerNamespace: number, now: () => number = Date.now): CacheStoreService => {
  const spaces = new Map<string, LRUCache<string, string>>()
  const spaceOf = (namespace: string) => {
    let cache = spaces.get(namespace)
    if (cache === undefined) {
      cache = new LRUCache<string, string>({
        maxSize: maxBytesPerNamespace,
        sizeCalculation: entrySize,
        allowStale: false,
        ttlAutopurge: false,
        // Our clock decides expiry; lru-cache would otherwise read performance.now itself.
        perf: { now },
        // read the clock on every check: lru-cache would otherwise reuse a reading until a real
        // timer fires, which a moved test clock never waits for
        ttlResolution: 0
      })
      spaces.set(namespace, cache)
    }
    return cache
  }
  const putAt = (namespace: string, dmap: string, key: string, entry: CacheEntry, at: number): void => {
    const cache = spaceOf(namespace)
    const name = slot(dmap, key)
    if (entry.expiresAt !== undefined && entry.expiresAt <= at) {
      cache.delete(name)
      return
    }
    cache.set(name, entry.json, entry.expiresAt === undefined ? {} : { ttl: entry.expiresAt - at })
  }
  const sync: CacheStoreNow = {
    put: (namespace, dmap, key, entry) => putAt(namespace, dmap, key, entry, now()),
    get: (namespace, dmap, key) => spaces.get(namespace)?.get(slot(dmap, key)),
    delete: (namespace, dmap, key) => spaces.get(namespace)?.delete(slot(dmap, key)) ?? false,
    mget: (namespace, dmap, keys) => {
      const cache = spaces.get(namespace)
      return keys.map((k) => cache?.get(slot(dmap, k)))
    }
  }
  return {
    engine: "memory",
    now: sync,
    fits: (dmap, key, json) => entrySize(json, slot(dmap, key)) <= maxBytesPerNamespace,
    put: (namespace, dmap, key, entry) => Effect.map(Clock.currentTimeMillis, (at) => putAt(namespace, dmap, key, entry, at)),
    get: (namespace, dmap, key) => Effect.sync(() => Option.fromNullable(sync.get(namespace, dmap, key))),
    delete: (namespace, dmap, key) => Effect.sync(() => sync.delete(namespace, dmap, key)),
    mget: (namespace, dmap, keys) => Effect.sync(() => sync.mget(namespace, dmap, keys)),
    incrBy: (namespace, dmap, key, delta) =>
      Effect.sync(() => {
        const cache = spaceOf(namespace)
        const name = slot(dmap, key)
        const current = cache.get(name)
        if (current !== undefined && !INTEGER.test(current)) return Option.none()
        const next = Number(current ?? "0") + delta
        if (!Number.isSafeInteger(next)) return Option.none()
        const ttl = cache.getRemainingTTL(name)
        cache.set(name, String(next), current !== undefined && Number.isFinite(ttl) && ttl > 0 ? { ttl } : {})
        return Option.some(next)
      }),
    scan: (namespace, dmap, match) =>
      Effect.sync(() => {
        const cache = spaces.get(namespace)
        if (cache === undefined) return []
        const prefix = `${dmap.length}:${dmap}:`
        const out: Array<string> = []
        // keys() skips nothing by itself; `has` drops entries whose TTL has passed.
        for (const name of cache.keys()) {
          if (!name.startsWith(prefix)) continue
          const key = name.slice(prefix.length)
          if (cache.has(name) && match(key)) out.push(key)
        }
        return out
      }),
    ping: Effect.void,
    dropNamespace: (namespace) =>
      Effect.sync(() => {
        const cache = spaces.get(namespace)
        spaces.delete(namespace)
        return cache?.size ?? 0
      })
  }
}

export const MemoryCacheStore = {
  layer: (maxBytesPerNamespace: number) =>
    Layer.effect(
      CacheStore,
      Effect.map(Effect.clock, (clock) => makeMemoryCacheStore(maxBytesPerNamespace, () => clock.unsafeCurrentTimeMillis()))
    ),
  /** The store with 1 MiB per namespace (test double; its expiry reads the Clock, so a TestClock drives it). */
  Test: Layer.effect(
    CacheStore,
    Effect.map(Effect.clock, (clock) => makeMemoryCacheStore(1024 * 1024, () => clock.unsafeCurrentTimeMillis()))
  )
}

