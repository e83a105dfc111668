/**
 * API keys on a registry that reads only over the network (docs/auth.md, "API keys in a
 * cluster"): the SQLite registry without its on-the-spot read stands in for rqlite. A key's row
 * read once answers on the spot for KEY_ROWS_KEPT_MS; a key revoked through another gateway stops
 * within that time, one revoked through this gateway at once; a key not found is never kept.
 */
import { Effect, Either, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import { ApiKeys, KEY_ROWS_KEPT_MS } from "../../../src/layers/keys/ApiKeys.js"
import { Audit } from "../../../src/layers/audit/Audit.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"

/** The embedded registry as a network registry looks to its callers: no read on the spot. */
const overTheNetwork = Layer.effect(
  RegistryStore,
  Effect.map(RegistryStore, (store) => RegistryStore.of({ ...store, queryNow: undefined, holdNow: undefined }))
).pipe(Layer.provide(SqliteRegistryStore.Test))

const layer = ApiKeys.Live.pipe(Layer.provideMerge(Layer.mergeAll(overTheNetwork, Sealer.Test, Audit.Test)))
const operator = { _tag: "Operator", actor: "test" } as const
const isSome = (answer: Either.Either<Option.Option<unknown>, unknown> | undefined) => (answer === undefined ? undefined : Either.map(answer, Option.isSome))

describe("API keys kept on a network registry", () => {
  it("answers on the spot only from a row read in the last second, and forgets a key revoked here at once", async () => {
    const program = Effect.gen(function* () {
      const keys = yield* ApiKeys
      const store = yield* RegistryStore
      const now = keys.now!
      const a = yield* keys.mint(operator, { namespace: "kept", role: "custom", scopes: ["cache"], label: "a", expiresInDays: undefined })
      const b = yield* keys.mint(operator, { namespace: "kept", role: "custom", scopes: ["cache"], label: "b", expiresInDays: undefined })

      // nothing read yet: the registry must be read first
      expect(now.authenticate(a.apiKey, Date.now())).toBeUndefined()
      expect(Option.isSome(yield* keys.authenticate(a.apiKey))).toBe(true)
      expect(isSome(now.authenticate(a.apiKey, Date.now()))).toEqual(Either.right(true))
      // a wrong secret for a kept key is refused on the spot, as the row says
      expect(isSome(now.authenticate(`${a.apiKey.slice(0, -2)}xx`, Date.now()))).toEqual(Either.right(false))

      // revoked through another gateway: still answered from the kept row, then read again
      yield* store.exec({ sql: "UPDATE api_keys SET revoked_at = 1 WHERE id = ?", params: [a.record.id] })
      expect(isSome(now.authenticate(a.apiKey, Date.now()))).toEqual(Either.right(true))
      yield* Effect.sleep(KEY_ROWS_KEPT_MS + 50)
      expect(now.authenticate(a.apiKey, Date.now())).toBeUndefined()
      expect(Option.isSome(yield* keys.authenticate(a.apiKey))).toBe(false)

      // revoked through this gateway (the route forgets once its batch has committed): read again at once
      expect(Option.isSome(yield* keys.active(b.record.id))).toBe(true)
      expect(isSome(now.active(b.record.id, Date.now()))).toEqual(Either.right(true))
      yield* store.exec(keys.revokeStatement("kept", b.record.id, Date.now()))
      keys.forgetKept?.()
      expect(now.active(b.record.id, Date.now())).toBeUndefined()
      expect(Option.isSome(yield* keys.active(b.record.id))).toBe(false)

      // a key not found is not kept: minted a moment later on another gateway, it is read
      const unknown = `portico_key_${"a".repeat(16)}_${"A".repeat(43)}`
      expect(Option.isSome(yield* keys.authenticate(unknown))).toBe(false)
      expect(now.authenticate(unknown, Date.now())).toBeUndefined()
    })
    await Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))
  })
})
