/**
 * Time rules of credentials, on the TestClock over the services' test doubles: a key minted for
 * some days authenticates until that moment and not after, and the access token exchanged from a
 * key lasts 15 minutes, even once it has been verified and kept.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Option, TestClock } from "effect"
import { Authenticator } from "../../../src/layers/auth/Authenticator.js"
import { AuthenticatorTest } from "../../../src/layers/sessions/AuthenticatorTest.js"
import { ApiKeys } from "../../../src/layers/keys/ApiKeys.js"
import { Namespaces } from "../../../src/layers/namespaces/Namespaces.js"

const DAY = 86_400_000
const operator = { _tag: "Operator", actor: "test" } as const

describe("credential expiry", () => {
  it.layer(Layer.mergeAll(ApiKeys.Test, Namespaces.Test, AuthenticatorTest))((it) => {
    it.effect("a key minted for two days authenticates until the moment it expires, then never", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.UTC(2026, 0, 1))
        yield* Effect.flatMap(Namespaces, (ns) => ns.create("expiry", undefined, "test"))
        const keys = yield* ApiKeys
        const minted = yield* keys.mint(operator, { namespace: "expiry", role: "custom", scopes: ["cache"], label: "t", expiresInDays: 2 })
        expect(minted.record.expiresAt).toBe(Date.UTC(2026, 0, 3))
        const works = Effect.map(keys.authenticate(minted.apiKey), Option.isSome)
        const active = Effect.map(keys.active(minted.record.id), Option.isSome)

        expect(yield* works).toBe(true)
        yield* TestClock.adjust(Duration.millis(2 * DAY - 1))
        expect([yield* works, yield* active]).toEqual([true, true])
        // the on-the-spot check the fast lane uses says the same at the same instant
        expect(keys.now?.authenticate(minted.apiKey, Date.UTC(2026, 0, 3) - 1)?.pipe(Either.map(Option.isSome))).toEqual(Either.right(true))
        yield* TestClock.adjust(Duration.millis(1))
        expect([yield* works, yield* active]).toEqual([false, false])
        expect(keys.now?.authenticate(minted.apiKey, Date.UTC(2026, 0, 3))?.pipe(Either.map(Option.isSome))).toEqual(Either.right(false))
      })
    )

    it.effect("an access token from a key lasts 15 minutes, even after it was verified and kept", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.UTC(2026, 1, 1))
        const created = yield* Effect.flatMap(Namespaces, (ns) => ns.create("tokens", undefined, "test"))
        const authenticator = yield* Authenticator
        const token = yield* authenticator.exchange(created.ownerKey.record)
        const principal = yield* authenticator.authenticate(token)
        expect([principal.namespace, principal.role, principal.keyId]).toEqual(["tokens", "owner", created.ownerKey.record.id])

        yield* TestClock.adjust(Duration.minutes(15).pipe(Duration.subtract(Duration.seconds(1))))
        expect((yield* Effect.either(authenticator.authenticate(token)))._tag).toBe("Right")
        yield* TestClock.adjust(Duration.seconds(1))
        const late = yield* Effect.either(authenticator.authenticate(token))
        expect(Either.isLeft(late) ? late.left._tag : late).toBe("CredentialRejected")
        // and on the spot, where the kept verification would otherwise answer
        const now = Date.UTC(2026, 1, 1) + 15 * 60_000
        const spot = authenticator.authenticateNow(token, now)
        expect(spot === undefined || Either.isLeft(spot)).toBe(true)
      })
    )
  })
})
