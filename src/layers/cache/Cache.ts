/**
 * The cache's rules over whichever engine is configured: key and entry bounds, TTL parsing,
 * linear-time scan patterns, and grants narrowed to keys (`cache:key=<map>/*`).
 */
import { Clock, Context, Data, Effect, Either, Layer, Option } from "effect"
import { RE2JS } from "re2js"
import { ENTRY_MAX_BYTES, entryBytes, KEY_BOUND_BYTES, keyBytes, MGET_MAX_KEYS, parseTtl } from "../../domain/CacheRules.js"
import { type CacheCode, statusOfCode } from "../../domain/Errors.js"
import { cacheGrantReaches, cacheGrantReachesMap } from "../../domain/Grants.js"
import type { Principal } from "../../domain/Principal.js"
import { type CacheEntry, CacheStore, type CacheUnavailable } from "./CacheStore.js"
import { MemoryCacheStore } from "./MemoryCacheStore.js"
import { PLATFORM_PREFIX } from "../../domain/Names.js"

/** A cache rule refused the request, in the cache family's codes; `status` is the code's (the catalogue's). */
export class CacheRefused extends Data.TaggedError("CacheRefused")<{
  readonly status: number
  readonly code: Exclude<CacheCode, "UNAVAILABLE">
  readonly reason: string
  readonly hint?: string
}> {}

const refuse = (code: CacheRefused["code"], reason: string, hint?: string) => {
  const status = statusOfCode[code]
  return new CacheRefused(hint === undefined ? { status, code, reason } : { status, code, reason, hint })
}

const miss = refuse("NOT_FOUND", "no such key", "a miss is not an error: treat the key as absent")

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
  /** Every entry of the namespace removed, on its engine (the namespace's deletion). */
  readonly dropNamespace: (namespace: string) => Effect.Effect<number, CacheUnavailable>
  /** put, get, delete and mget answered on the spot, where the engine can (the embedded one). */
  readonly now?: CacheNow | undefined
}

/** Maps under the platform's prefix (functions' own map, docs/functions.md): no grant reaches them over HTTP. */
const isPlatformMap = (dmap: string): boolean => dmap.startsWith(PLATFORM_PREFIX)

/** Whether the caller's cache grants reach `key` in `dmap`. */
const allows = (caller: Principal, dmap: string, key: string): boolean =>
  !isPlatformMap(dmap) &&
  caller.grants.some((g) => g.name === "cache" && (g.pattern === undefined || cacheGrantReaches(g.pattern, dmap, key)))

/** Whether the caller's cache grants could reach any key of `dmap`. */
const allowsMap = (caller: Principal, dmap: string): boolean =>
  !isPlatformMap(dmap) &&
  caller.grants.some((g) => g.name === "cache" && (g.pattern === undefined || cacheGrantReachesMap(g.pattern, dmap)))

/** The cache operations answered on the spot (`now` in Unix ms), over an engine that can. */
export interface CacheNow {
  readonly put: (
    caller: Principal,
    input: { readonly dmap: string; readonly key: string; readonly json: string; readonly ttl: string | undefined },
    now: number
  ) => Either.Either<void, CacheRefused>
  readonly get: (caller: Principal, dmap: string, key: string) => Either.Either<string, CacheRefused>
  readonly delete: (caller: Principal, dmap: string, key: string) => Either.Either<void, CacheRefused>
  readonly mget: (caller: Principal, dmap: string, keys: ReadonlyArray<string>) => Either.Either<ReadonlyArray<string | undefined>, CacheRefused>
}

const keyTooLong = refuse("PAYLOAD_TOO_LARGE", `map name + key is over ${KEY_BOUND_BYTES} bytes`, "the map name counts its UTF-8 length plus 2")
const entryTooLarge = refuse("PAYLOAD_TOO_LARGE", `the entry is over ${ENTRY_MAX_BYTES} bytes`, "key and encoding count too")
const overBound = refuse(
  "PAYLOAD_TOO_LARGE",
  "the entry is larger than this namespace's whole cache bound",
  "the embedded cache's bound is PORTICO_CACHE_MAX_BYTES per namespace; an entry counts its key, value and about 96 bytes"
)
const tooManyKeys = refuse("VALIDATION_FAILED", `at most ${MGET_MAX_KEYS} keys per mget`)
const notCovered = (dmap: string, key: string) => refuse("GRANT_REQUIRED", `your cache grant does not cover ${dmap}/${key}`)

/** Why a get or delete is refused before any lookup, if it is: a key too long to exist is a miss. */
const keyRefusal = (caller: Principal, dmap: string, key: string): CacheRefused | undefined =>
  keyBytes(dmap, key) > KEY_BOUND_BYTES ? miss : allows(caller, dmap, key) ? undefined : notCovered(dmap, key)

/** Why an mget is refused before any lookup, if it is. */
const mgetRefusal = (caller: Principal, dmap: string, keys: ReadonlyArray<string>): CacheRefused | undefined => {
  if (keys.length > MGET_MAX_KEYS) return tooManyKeys
  const uncovered = keys.find((key) => !allows(caller, dmap, key))
  return uncovered === undefined ? undefined : notCovered(dmap, uncovered)
}

/** The keys an mget asks the engine for: over-long keys cannot exist, so they are misses without a lookup. */
const askable = (dmap: string, keys: ReadonlyArray<string>) => keys.filter((k) => keyBytes(dmap, k) <= KEY_BOUND_BYTES)

/** The engine's answers for `asked`, one slot per requested key, in request order. */
const inRequestOrder = (keys: ReadonlyArray<string>, asked: ReadonlyArray<string>, found: ReadonlyArray<string | undefined>) => {
  const byKey = new Map(asked.map((k, i) => [k, found[i]]))
  return keys.map((k) => byKey.get(k))
}

export class Cache extends Context.Tag("portico/Cache")<Cache, CacheService>() {
  static readonly Live = Layer.effect(
    Cache,
    Effect.map(CacheStore, (store): CacheService => {
      /** The entry a put stores, or why it is refused; either way nothing is stored yet. */
      const admitPut = (
        caller: Principal,
        input: { readonly dmap: string; readonly key: string; readonly json: string; readonly ttl: string | undefined },
        now: number
      ): Either.Either<CacheEntry, CacheRefused> => {
        if (keyBytes(input.dmap, input.key) > KEY_BOUND_BYTES) return Either.left(keyTooLong)
        if (!allows(caller, input.dmap, input.key)) return Either.left(notCovered(input.dmap, input.key))
        const ttlMs = input.ttl === undefined ? 0 : parseTtl(input.ttl)
        if (ttlMs === undefined) {
          return Either.left(
            refuse("VALIDATION_FAILED", `invalid ttl "${input.ttl}"`, "a duration such as 30s, 5m, 1h30m, up to 10 years; 0s for none")
          )
        }
        if (entryBytes(input.dmap, input.key, input.json) > ENTRY_MAX_BYTES) return Either.left(entryTooLarge)
        if (!store.fits(input.dmap, input.key, input.json)) return Either.left(overBound)
        return Either.right({ json: input.json, expiresAt: ttlMs === 0 ? undefined : now + ttlMs })
      }
      const refusedOr = <A>(refused: CacheRefused | undefined, then: () => A): Either.Either<A, CacheRefused> =>
        refused === undefined ? Either.right(then()) : Either.left(refused)

      const engineNow = store.now
      const now: CacheNow | undefined =
        engineNow === undefined
          ? undefined
          : {
              put: (caller, input, at) =>
                Either.map(admitPut(caller, input, at), (entry) => engineNow.put(caller.namespace, input.dmap, input.key, entry)),
              get: (caller, dmap, key) =>
                Either.flatMap(refusedOr(keyRefusal(caller, dmap, key), () => engineNow.get(caller.namespace, dmap, key)), (found) =>
                  found === undefined ? Either.left(miss) : Either.right(found)
                ),
              delete: (caller, dmap, key) =>
                Either.flatMap(refusedOr(keyRefusal(caller, dmap, key), () => engineNow.delete(caller.namespace, dmap, key)), (deleted) =>
                  deleted ? Either.void : Either.left(miss)
                ),
              mget: (caller, dmap, keys) =>
                refusedOr(mgetRefusal(caller, dmap, keys), () => {
                  const asked = askable(dmap, keys)
                  return inRequestOrder(keys, asked, engineNow.mget(caller.namespace, dmap, asked))
                })
            }

      return {
        engine: store.engine,
        now,
        put: (caller, input) =>
          Effect.flatMap(Clock.currentTimeMillis, (at) =>
            Effect.flatMap(admitPut(caller, input, at), (entry) => store.put(caller.namespace, input.dmap, input.key, entry))
          ),
        get: (caller, dmap, key) =>
          Effect.gen(function* () {
            const refused = keyRefusal(caller, dmap, key)
            if (refused !== undefined) return yield* refused
            const found = yield* store.get(caller.namespace, dmap, key)
            return yield* Option.match(found, { onNone: () => Effect.fail(miss), onSome: Effect.succeed })
          }),
        delete: (caller, dmap, key) =>
          Effect.gen(function* () {
            const refused = keyRefusal(caller, dmap, key)
            if (refused !== undefined) return yield* refused
            if (!(yield* store.delete(caller.namespace, dmap, key))) return yield* miss
          }),
        mget: (caller, dmap, keys) =>
          Effect.gen(function* () {
            const refused = mgetRefusal(caller, dmap, keys)
            if (refused !== undefined) return yield* refused
            const asked = askable(dmap, keys)
            return inRequestOrder(keys, asked, yield* store.mget(caller.namespace, dmap, asked))
          }),
        scan: (caller, dmap, match) =>
          Effect.gen(function* () {
            // a map the grant cannot reach is refused like every other route, not shown as empty
            if (!allowsMap(caller, dmap)) return yield* Effect.fail(refuse("GRANT_REQUIRED", `your cache grant does not cover the map ${dmap}`))
            // RE2 semantics: matching time is linear in the key, whatever the tenant's pattern.
            let matcher: (key: string) => boolean = () => true
            if (match !== undefined) {
              const compiled = yield* Effect.try({
                try: () => RE2JS.compile(match),
                catch: () => refuse("VALIDATION_FAILED", "invalid regular expression in match", "RE2 syntax")
              })
              matcher = (key) => compiled.matcher(key).find()
            }
            const keys = yield* store.scan(caller.namespace, dmap, (key) => allows(caller, dmap, key) && matcher(key))
            return [...keys].sort()
          }),
        ping: store.ping,
        dropNamespace: store.dropNamespace
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() => Cache.Live.pipe(Layer.provide(MemoryCacheStore.Test)))
}
