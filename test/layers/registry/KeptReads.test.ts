/**
 * Credentials on a registry that reads only over the network (docs/auth.md, "Credentials in a
 * cluster"): the SQLite registry without its on-the-spot read stands in for rqlite. What decides
 * a credential (an API key's row, a session's standing), read once, answers on the spot for
 * KEPT_MS; a change through another gateway takes effect within that time, one through this
 * gateway at once; what does not stand is never kept.
 */
import { Effect, Either, Layer, Option } from "effect"
import { describe, expect, it } from "vitest"
import { KEPT_MS, KeptReads } from "../../../src/layers/registry/KeptReads.js"
import { ApiKeys } from "../../../src/layers/keys/ApiKeys.js"
import { Audit } from "../../../src/layers/audit/Audit.js"
import { Namespaces } from "../../../src/layers/namespaces/Namespaces.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"
import { Sessions } from "../../../src/layers/sessions/Sessions.js"
import { KeyRing } from "../../../src/layers/tokens/KeyRing.js"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"

/** The embedded registry as a network registry looks to its callers: no read on the spot. */
const overTheNetwork = Layer.effect(
  RegistryStore,
  Effect.map(RegistryStore, (store) => RegistryStore.of({ ...store, queryNow: undefined, holdNow: undefined }))
).pipe(Layer.provide(SqliteRegistryStore.Test))

const shared = Layer.mergeAll(overTheNetwork, Sealer.Test, Audit.Test, KeptReads.Test, KeyRing.Test, PorticoConfig.Test)
const layer = Layer.mergeAll(ApiKeys.Live, Sessions.Live, Namespaces.Live.pipe(Layer.provide(ApiKeys.Live))).pipe(Layer.provideMerge(shared))
const operator = { _tag: "Operator", actor: "test" } as const
const isSome = (answer: Either.Either<Option.Option<unknown>, unknown> | undefined) => (answer === undefined ? undefined : Either.map(answer, Option.isSome))
const run = (program: Effect.Effect<void, unknown, ApiKeys | Sessions | Namespaces | RegistryStore | KeptReads>) =>
  Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))

describe("API keys kept on a network registry", () => {
  it("answers on the spot only from a row read in the last second, and forgets a key revoked here at once", () =>
    run(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        const store = yield* RegistryStore
        const kept = yield* KeptReads
        const now = keys.now
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
        yield* Effect.sleep(KEPT_MS + 50)
        expect(now.authenticate(a.apiKey, Date.now())).toBeUndefined()
        expect(Option.isSome(yield* keys.authenticate(a.apiKey))).toBe(false)

        // revoked through this gateway (the route forgets once its batch has committed): read again at once
        expect(Option.isSome(yield* keys.active(b.record.id))).toBe(true)
        expect(isSome(now.active(b.record.id, Date.now()))).toEqual(Either.right(true))
        yield* store.exec(keys.revokeStatement("kept", b.record.id, Date.now()))
        kept.forget()
        expect(now.active(b.record.id, Date.now())).toBeUndefined()
        expect(Option.isSome(yield* keys.active(b.record.id))).toBe(false)

        // a key not found is not kept: minted a moment later on another gateway, it is read
        const unknown = `portico_key_${"a".repeat(16)}_${"A".repeat(43)}`
        expect(Option.isSome(yield* keys.authenticate(unknown))).toBe(false)
        expect(now.authenticate(unknown, Date.now())).toBeUndefined()
      })
    ))
})

describe("session standings kept on a network registry", () => {
  const wallet = "0x1111111111111111111111111111111111111111"
  /** A namespace, `wallet` as a developer, and one open session of it: rows as sign-in writes them. */
  const seeded = (namespace: string, sessionId: string) =>
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const at = Date.now()
      yield* store.batch([
        { sql: "INSERT INTO namespaces (name, owner, created_at) VALUES (?, NULL, ?)", params: [namespace, at] },
        { sql: "INSERT INTO members (namespace, wallet, role, added_at, added_by) VALUES (?, ?, 'developer', ?, 'test')", params: [namespace, wallet, at] },
        {
          sql: "INSERT INTO sessions (id, namespace, wallet, device_id, created_at, refreshed_at) VALUES (?, ?, ?, NULL, ?, ?)",
          params: [sessionId, namespace, wallet, at, at]
        }
      ])
      return store
    })
  const roleNow = (sessions: Sessions["Type"], sessionId: string) => {
    const found = sessions.standingNow?.(sessionId)
    return found === undefined ? undefined : Either.map(found, Option.getOrUndefined)
  }

  it("keeps a standing session a second, ends it at once when ended here, within the second when ended elsewhere", () =>
    run(
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const store = yield* seeded("standing", "ses_a")
        yield* seeded("standing-b", "ses_b").pipe(Effect.asVoid)

        // nothing read yet: the registry must be read first, and then answers on the spot
        expect(roleNow(sessions, "ses_a")).toBeUndefined()
        expect(Option.getOrUndefined(yield* sessions.standing("ses_a"))).toBe("developer")
        expect(roleNow(sessions, "ses_a")).toEqual(Either.right("developer"))

        // ended through another gateway: answered from what was kept for up to KEPT_MS, then read again
        yield* store.exec({ sql: "UPDATE sessions SET ended_at = 1, end_reason = 'logout' WHERE id = 'ses_a'" })
        expect(roleNow(sessions, "ses_a")).toEqual(Either.right("developer"))
        yield* Effect.sleep(KEPT_MS + 50)
        expect(roleNow(sessions, "ses_a")).toBeUndefined()
        expect(Option.isNone(yield* sessions.standing("ses_a"))).toBe(true)
        // a session that does not stand is never kept: it is read every time
        expect(roleNow(sessions, "ses_a")).toBeUndefined()

        // ended through this gateway: gone from what is kept once the end has committed
        expect(Option.getOrUndefined(yield* sessions.standing("ses_b"))).toBe("developer")
        expect(roleNow(sessions, "ses_b")).toEqual(Either.right("developer"))
        yield* sessions.end({ namespace: "standing-b", wallet, sessionId: "ses_b", callerDeviceId: undefined, deviceProof: undefined, reason: "logout" })
        expect(roleNow(sessions, "ses_b")).toBeUndefined()
        expect(Option.isNone(yield* sessions.standing("ses_b"))).toBe(true)
      })
    ))

  it("answers a member's new role at once when it was changed here, and refuses a removed member at once", () =>
    run(
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const namespaces = yield* Namespaces
        yield* seeded("roles", "ses_r")
        expect(Option.getOrUndefined(yield* sessions.standing("ses_r"))).toBe("developer")
        expect(roleNow(sessions, "ses_r")).toEqual(Either.right("developer"))

        yield* namespaces.putMember("roles", wallet, "reader", "test", "owner")
        expect(roleNow(sessions, "ses_r")).toBeUndefined()
        expect(Option.getOrUndefined(yield* sessions.standing("ses_r"))).toBe("reader")
        expect(roleNow(sessions, "ses_r")).toEqual(Either.right("reader"))

        yield* namespaces.removeMember("roles", wallet, "test", "owner")
        expect(roleNow(sessions, "ses_r")).toBeUndefined()
        expect(Option.isNone(yield* sessions.standing("ses_r"))).toBe(true)
      })
    ))
})
