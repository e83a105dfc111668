/**
 * Fetch capabilities on the TestClock: a capability lets its bearer read its one CID until it
 * expires (to the second), a revoked one is refused as revoked, and only its revoke key revokes
 * it. The content index is a stand-in (makeTestLayer) that holds one CID; the rest are the
 * services' test doubles.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, TestClock } from "effect"
import { parseGrant } from "../../../src/domain/Grants.js"
import type { Principal } from "../../../src/domain/Principal.js"
import { Audit } from "../../../src/layers/audit/Audit.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { Sealer } from "../../../src/layers/secrets/Sealer.js"
import { ContentIndex } from "../../../src/layers/storage/ContentIndex.js"
import { FetchCaps } from "../../../src/layers/storage/FetchCaps.js"
import { makeTestLayer } from "../../../src/layers/TestLayer.js"

const CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
const OTHER = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"

const device: Principal = {
  namespace: "media",
  subject: "0x" + "cd".repeat(20),
  method: "jwt",
  role: "user",
  grants: [parseGrant("storage-read")!],
  keyId: undefined,
  sessionId: "ses_1",
  deviceId: "dev_1"
}

const caps = FetchCaps.Live.pipe(
  Layer.provide(
    Layer.mergeAll(
      makeTestLayer(ContentIndex)({ holds: (namespace, cid) => Effect.succeed(namespace === "media" && cid === CID) }),
      SqliteRegistryStore.Test,
      Sealer.Test,
      Audit.Test
    )
  )
)

const refusal = <A>(result: Either.Either<A, { readonly code: string }>) => (Either.isLeft(result) ? result.left.code : "redeemed")

describe("fetch capabilities", () => {
  it.layer(caps)((it) => {
    it.effect("redeem until the second they expire, for their CID only", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.UTC(2026, 2, 1, 12))
        const fetchCaps = yield* FetchCaps
        const minted = yield* fetchCaps.mint(device, CID, 2, 60)
        expect(minted.caps.map((c) => c.expires_at)).toEqual([Date.UTC(2026, 2, 1, 12, 1) / 1000, Date.UTC(2026, 2, 1, 12, 1) / 1000])
        const [first, second] = minted.caps
        const redeem = (token: string, cid = CID) => Effect.either(fetchCaps.redeem(token, cid))

        expect(yield* redeem(first!.token)).toEqual(Either.right("media"))
        expect(refusal(yield* redeem(first!.token, OTHER))).toBe("FETCH_CAP_INVALID")
        // a bearer may use it again and again while it lasts
        yield* TestClock.adjust(Duration.millis(59_999))
        expect(yield* redeem(first!.token)).toEqual(Either.right("media"))
        expect(yield* redeem(second!.token)).toEqual(Either.right("media"))
        yield* TestClock.adjust(Duration.millis(1))
        expect(refusal(yield* redeem(first!.token))).toBe("FETCH_CAP_INVALID")
        expect(refusal(yield* redeem(second!.token))).toBe("FETCH_CAP_INVALID")
      })
    )

    it.effect("a revoked capability is refused as revoked; only its own revoke key revokes it", () =>
      Effect.gen(function* () {
        const fetchCaps = yield* FetchCaps
        const [a, b] = (yield* fetchCaps.mint(device, CID, 2, 3600)).caps
        const revoked = yield* Effect.either(fetchCaps.revoke(a!.id, b!.revoke_key))
        expect(refusal(revoked)).toBe("FETCH_CAP_REVOKE_KEY_INVALID")
        expect(yield* Effect.either(fetchCaps.redeem(a!.token, CID))).toEqual(Either.right("media"))
        yield* fetchCaps.revoke(a!.id, a!.revoke_key)
        expect(refusal(yield* Effect.either(fetchCaps.redeem(a!.token, CID)))).toBe("FETCH_CAP_REVOKED")
        expect(yield* Effect.either(fetchCaps.redeem(b!.token, CID))).toEqual(Either.right("media"))
      })
    )

    it.effect("mints only for content the namespace holds, and only from a device-bound session", () =>
      Effect.gen(function* () {
        const fetchCaps = yield* FetchCaps
        expect(refusal(yield* Effect.either(fetchCaps.mint(device, OTHER, 1, 60)))).toBe("NOT_FOUND")
        expect(refusal(yield* Effect.either(fetchCaps.mint({ ...device, deviceId: undefined }, CID, 1, 60)))).toBe("FETCH_CAP_DEVICE_REQUIRED")
      })
    )
  })
})
