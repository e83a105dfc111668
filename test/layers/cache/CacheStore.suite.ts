/**
 * The CacheStore contract, run unchanged against every engine: exact JSON text, overwrite,
 * delete, mget order, real-time expiry, scan without cross-dmap leakage, namespace isolation, a
 * namespace's deletion.
 * Expiry uses real time (small waits) because an external engine such as Redis keeps its own clock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { Scope } from "effect"
import { CacheStore } from "../../../src/layers/cache/CacheStore.js"
import type { CacheStoreService } from "../../../src/layers/cache/CacheStore.js"

export interface CacheEngineHarness {
  /** A layer over an empty store (a fresh server, a fresh in-process map) that lives as long as the scope. */
  readonly provision: Effect.Effect<Layer.Layer<CacheStore, unknown>, unknown, Scope.Scope>
}

const fresh = (harness: CacheEngineHarness): Effect.Effect<CacheStoreService, unknown, Scope.Scope> =>
  Effect.flatMap(harness.provision, (layer) => Effect.map(Layer.build(layer), (context) => Context.get(context, CacheStore)))

const forever = (json: string) => ({ json, expiresAt: undefined })

const sorted = (keys: ReadonlyArray<string>): ReadonlyArray<string> => [...keys].sort()

export const cacheStoreSuite = (name: string, harness: CacheEngineHarness): void => {
  describe(name, () => {
    it.scopedLive("round-trips JSON text exactly", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        const values = [
          "12345678901234567890123",
          "1.000000000000000000001",
          '{"a":[1,null,{"b":true}]}',
          '"str"',
          "false",
          "[]",
          '"multi-byte: é ✓ 🙂"'
        ]
        for (const [index, json] of values.entries()) yield* store.put("ns", "m", `k${index}`, forever(json))
        for (const [index, json] of values.entries()) {
          expect(yield* store.get("ns", "m", `k${index}`)).toEqual(Option.some(json))
        }
        expect(yield* store.get("ns", "m", "absent")).toEqual(Option.none())
      })
    )

    it.scopedLive("a put overwrites the previous value", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        yield* store.put("ns", "m", "k", forever('"first"'))
        yield* store.put("ns", "m", "k", forever('{"second":2}'))
        expect(yield* store.get("ns", "m", "k")).toEqual(Option.some('{"second":2}'))
      })
    )

    it.scopedLive("delete reports whether the entry was there", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        yield* store.put("ns", "m", "k", forever("1"))
        expect(yield* store.delete("ns", "m", "k")).toBe(true)
        expect(yield* store.get("ns", "m", "k")).toEqual(Option.none())
        expect(yield* store.delete("ns", "m", "k")).toBe(false)
        expect(yield* store.delete("ns", "m", "never")).toBe(false)
      })
    )

    it.scopedLive("mget answers one slot per key, in request order, undefined for misses", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        yield* store.put("ns", "m", "a", forever("1"))
        yield* store.put("ns", "m", "c", forever('"three"'))
        yield* store.put("ns", "other", "b", forever("2"))
        expect(yield* store.mget("ns", "m", ["c", "b", "a", "zz", "a"])).toEqual(['"three"', undefined, "1", undefined, "1"])
        expect(yield* store.mget("ns", "m", [])).toEqual([])
      })
    )

    it.scopedLive("expired entries are never returned", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        const now = yield* Clock.currentTimeMillis
        yield* store.put("ns", "m", "past", { json: "1", expiresAt: now - 1000 })
        yield* store.put("ns", "m", "soon", { json: "2", expiresAt: now + 50 })
        yield* store.put("ns", "m", "later", { json: "3", expiresAt: now + 60_000 })
        yield* store.put("ns", "m", "kept", forever("4"))
        expect(yield* store.get("ns", "m", "past")).toEqual(Option.none())
        expect(yield* store.get("ns", "m", "soon")).toEqual(Option.some("2"))

        yield* Effect.sleep("150 millis")
        expect(yield* store.get("ns", "m", "soon")).toEqual(Option.none())
        expect(yield* store.mget("ns", "m", ["past", "soon", "later", "kept"])).toEqual([undefined, undefined, "3", "4"])
        expect(sorted(yield* store.scan("ns", "m", () => true))).toEqual(["kept", "later"])
      })
    )

    it.scopedLive("an already-expired put replaces an older value instead of leaving it visible", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        yield* store.put("ns", "m", "k", forever('"old"'))
        const now = yield* Clock.currentTimeMillis
        yield* store.put("ns", "m", "k", { json: '"new"', expiresAt: now - 1 })
        expect(yield* store.get("ns", "m", "k")).toEqual(Option.none())
      })
    )

    it.scopedLive("scan returns the dmap's keys that the matcher accepts", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        for (const key of ["user:1", "user:2", "order:1", "ünï:✓"]) yield* store.put("ns", "m", key, forever("1"))
        yield* store.put("ns", "m2", "user:3", forever("1"))
        expect(sorted(yield* store.scan("ns", "m", (key) => key.startsWith("user:")))).toEqual(["user:1", "user:2"])
        expect(sorted(yield* store.scan("ns", "m", () => true))).toEqual(sorted(["user:1", "user:2", "order:1", "ünï:✓"]))
        expect(yield* store.scan("ns", "m", () => false)).toEqual([])
        expect(yield* store.scan("ns", "empty", () => true)).toEqual([])
      })
    )

    it.scopedLive("a ':' in a dmap name never collides with another dmap/key split", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        yield* store.put("ns", "a", "b:c", forever('"in a"'))
        yield* store.put("ns", "a:b", "c", forever('"in a:b"'))
        expect(yield* store.get("ns", "a", "b:c")).toEqual(Option.some('"in a"'))
        expect(yield* store.get("ns", "a:b", "c")).toEqual(Option.some('"in a:b"'))
        expect(yield* store.scan("ns", "a", () => true)).toEqual(["b:c"])
        expect(yield* store.scan("ns", "a:b", () => true)).toEqual(["c"])
        expect(yield* store.delete("ns", "a", "b:c")).toBe(true)
        expect(yield* store.get("ns", "a:b", "c")).toEqual(Option.some('"in a:b"'))
      })
    )

    it.scopedLive("glob characters in names match only themselves", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        for (const dmap of ["*", "?", "[ab]", "a", "b", "\\"]) yield* store.put("ns", dmap, "k", forever(JSON.stringify(dmap)))
        expect(yield* store.scan("ns", "*", () => true)).toEqual(["k"])
        expect(yield* store.scan("ns", "?", () => true)).toEqual(["k"])
        expect(yield* store.scan("ns", "[ab]", () => true)).toEqual(["k"])
        expect(yield* store.get("ns", "[ab]", "k")).toEqual(Option.some('"[ab]"'))
        expect(yield* store.get("ns", "\\", "k")).toEqual(Option.some('"\\\\"'))
        yield* store.delete("ns", "[ab]", "k")
        expect(yield* store.scan("ns", "[ab]", () => true)).toEqual([])
        expect(yield* store.get("ns", "a", "k")).toEqual(Option.some('"a"'))
      })
    )

    it.scopedLive("namespaces are isolated", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        yield* store.put("one", "m", "k", forever('"one"'))
        yield* store.put("two", "m", "k", forever('"two"'))
        yield* store.put("one:m", "k", "x", forever('"tricky"'))
        expect(yield* store.get("one", "m", "k")).toEqual(Option.some('"one"'))
        expect(yield* store.get("two", "m", "k")).toEqual(Option.some('"two"'))
        expect(yield* store.mget("three", "m", ["k"])).toEqual([undefined])
        expect(yield* store.scan("one", "m", () => true)).toEqual(["k"])
        expect(yield* store.delete("one", "m", "k")).toBe(true)
        expect(yield* store.get("two", "m", "k")).toEqual(Option.some('"two"'))
        expect(yield* store.scan("one", "m", () => true)).toEqual([])
        expect(yield* store.scan("two", "m", () => true)).toEqual(["k"])
      })
    )

    it.scopedLive("dropNamespace removes every entry of every dmap of that namespace only", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        for (const dmap of ["a", "b", "with:colon"]) {
          for (const key of ["k1", "k2"]) yield* store.put("gone", dmap, key, forever("1"))
        }
        // names that share a prefix of the namespace's keys must stay
        yield* store.put("gone2", "a", "k1", forever('"kept"'))
        yield* store.put("gon", "e", "k1", forever('"kept"'))
        expect(yield* store.dropNamespace("gone")).toBe(6)
        for (const dmap of ["a", "b", "with:colon"]) expect(yield* store.scan("gone", dmap, () => true)).toEqual([])
        expect(yield* store.get("gone", "a", "k1")).toEqual(Option.none())
        expect(yield* store.get("gone2", "a", "k1")).toEqual(Option.some('"kept"'))
        expect(yield* store.get("gon", "e", "k1")).toEqual(Option.some('"kept"'))
        // nothing left: nothing to drop, and the namespace can be written again
        expect(yield* store.dropNamespace("gone")).toBe(0)
        yield* store.put("gone", "a", "k1", forever("2"))
        expect(yield* store.get("gone", "a", "k1")).toEqual(Option.some("2"))
      })
    )

    it.scopedLive("ping succeeds on a healthy store", () =>
      Effect.gen(function* () {
        const store = yield* fresh(harness)
        yield* store.ping
        expect(["memory", "redis"]).toContain(store.engine)
      })
    )
  })
}
