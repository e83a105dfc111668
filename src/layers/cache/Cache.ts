/**
 * The cache's rules over whichever engine is configured: key and entry bounds, TTL parsing,
 * linear-time scan patterns, and grants narrowed to keys (`cache:key=<map>/*`).
 */
import { Clock, Context, Data, Effect, Layer, Option } from "effect"
import { RE2JS } from "re2js"
import { ENTRY_MAX_BYTES, entryBytes, KEY_BOUND_BYTES, keyBytes, MGET_MAX_KEYS, parseTtl } from "../../domain/CacheRules.js"
import { cacheGrantReaches, cacheGrantReachesMap } from "../../domain/Grants.js"
import type { Principal } from "../../domain/Principal.js"
import { CacheStore, type CacheUnavailable } from "./CacheStore.js"

export class CacheRefused extends Data.TaggedError("CacheRefused")<{
  readonly status: 400 | 403 | 404 | 413
  readonly code: string
  readonly reason: string
  readonly hint?: string
}> {}

const refuse = (status: 400 | 403 | 404 | 413, code: string, reason: string, hint?: string) =>
  new CacheRefused(hint === undefined ? { status, code, reason } : { status, code, reason, hint })

const miss = refuse(404, "NOT_FOUND", "no such key", "a miss is not an error: treat the key as absent")

export interface CacheService {
  readonly engine: "memory" | "redis"
  readonly put: (
    caller: Principal,
    input: { readonly dmap: string; readonly key: string; readonly json: string; readonly ttl: string | undefined }
  ) => Effect.Effect<void, CacheRefused | CacheUnavailable>
  readonly get: (caller: Principal, dmap: string, key: string) => Effect.Effect<string, CacheRefused | CacheUnavailable>
  readonly delete: (caller: Principal, dmap: string, key: string) => Effect.Effect<void, CacheRefused | CacheUnavailable>
  readonly mget: (
    caller: Principal,
    dmap: string,
    keys: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string | undefined>, CacheRefused | CacheUnavailable>
  readonly scan: (
    caller: Principal,
    dmap: string,
    match: string | undefined
  ) => Effect.Effect<ReadonlyArray<string>, CacheRefused | CacheUnavailable>
  readonly ping: Effect.Effect<void, CacheUnavailable>
}

/** Whether the caller's cache grants reach `key` in `dmap`. */
const allows = (caller: Principal, dmap: string, key: string): boolean =>
  caller.grants.some((g) => g.name === "cache" && (g.keyPattern === undefined || cacheGrantReaches(g.keyPattern, dmap, key)))

/** Whether the caller's cache grants could reach any key of `dmap`. */
const allowsMap = (caller: Principal, dmap: string): boolean =>
  caller.grants.some((g) => g.name === "cache" && (g.keyPattern === undefined || cacheGrantReachesMap(g.keyPattern, dmap)))

export class Cache extends Context.Tag("portico/Cache")<Cache, CacheService>() {
  static readonly Live = Layer.effect(
    Cache,
    Effect.map(CacheStore, (store): CacheService => {
      const guard = (caller: Principal, dmap: string, key: string) =>
        allows(caller, dmap, key)
          ? Effect.void
          : Effect.fail(refuse(403, "GRANT_REQUIRED", `your cache grant does not cover ${dmap}/${key}`))
      return {
        engine: store.engine,
        put: (caller, input) =>
          Effect.gen(function* () {
            if (keyBytes(input.dmap, input.key) > KEY_BOUND_BYTES) {
              return yield* refuse(413, "PAYLOAD_TOO_LARGE", `map name + key is over ${KEY_BOUND_BYTES} bytes`, "the map name counts its UTF-8 length plus 2")
            }
            yield* guard(caller, input.dmap, input.key)
            const ttlMs = input.ttl === undefined ? 0 : parseTtl(input.ttl)
            if (ttlMs === undefined) {
              return yield* refuse(400, "VALIDATION_FAILED", `invalid ttl "${input.ttl}"`, "a duration such as 30s, 5m, 1h30m, up to 10 years; 0s for none")
            }
            if (entryBytes(input.dmap, input.key, input.json) > ENTRY_MAX_BYTES) {
              return yield* refuse(413, "PAYLOAD_TOO_LARGE", `the entry is over ${ENTRY_MAX_BYTES} bytes`, "key and encoding count too")
            }
            if (!store.fits(input.dmap, input.key, input.json)) {
              return yield* refuse(
                413,
                "PAYLOAD_TOO_LARGE",
                "the entry is larger than this namespace's whole cache bound",
                "the embedded cache's bound is PORTICO_CACHE_MAX_BYTES per namespace; an entry counts its key, value and about 96 bytes"
              )
            }
            const now = yield* Clock.currentTimeMillis
            yield* store.put(caller.namespace, input.dmap, input.key, {
              json: input.json,
              expiresAt: ttlMs === 0 ? undefined : now + ttlMs
            })
          }),
        get: (caller, dmap, key) =>
          Effect.gen(function* () {
            if (keyBytes(dmap, key) > KEY_BOUND_BYTES) return yield* miss
            yield* guard(caller, dmap, key)
            const found = yield* store.get(caller.namespace, dmap, key)
            return yield* Option.match(found, { onNone: () => Effect.fail(miss), onSome: Effect.succeed })
          }),
        delete: (caller, dmap, key) =>
          Effect.gen(function* () {
            if (keyBytes(dmap, key) > KEY_BOUND_BYTES) return yield* miss
            yield* guard(caller, dmap, key)
            if (!(yield* store.delete(caller.namespace, dmap, key))) return yield* miss
          }),
        mget: (caller, dmap, keys) =>
          Effect.gen(function* () {
            if (keys.length > MGET_MAX_KEYS) {
              return yield* refuse(400, "VALIDATION_FAILED", `at most ${MGET_MAX_KEYS} keys per mget`)
            }
            for (const key of keys) yield* guard(caller, dmap, key)
            // Over-long keys cannot exist, so they are misses without a lookup.
            const asked = keys.filter((k) => keyBytes(dmap, k) <= KEY_BOUND_BYTES)
            const found = yield* store.mget(caller.namespace, dmap, asked)
            const byKey = new Map(asked.map((k, i) => [k, found[i]]))
            return keys.map((k) => byKey.get(k))
          }),
        scan: (caller, dmap, match) =>
          Effect.gen(function* () {
            // a map the grant cannot reach is refused like every other route, not shown as empty
            if (!allowsMap(caller, dmap)) return yield* Effect.fail(refuse(403, "GRANT_REQUIRED", `your cache grant does not cover the map ${dmap}`))
            // RE2 semantics: matching time is linear in the key, whatever the tenant's pattern.
            let matcher: (key: string) => boolean = () => true
            if (match !== undefined) {
              const compiled = yield* Effect.try({
                try: () => RE2JS.compile(match),
                catch: () => refuse(400, "VALIDATION_FAILED", "invalid regular expression in match", "RE2 syntax")
              })
              matcher = (key) => compiled.matcher(key).find()
            }
            const keys = yield* store.scan(caller.namespace, dmap, (key) => allows(caller, dmap, key) && matcher(key))
            return [...keys].sort()
          }),
        ping: store.ping
      }
    })
  )
}
