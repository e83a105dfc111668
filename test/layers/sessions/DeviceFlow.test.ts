/**
 * The device authorization flow's clock rules (RFC 8628 §3.5) on the TestClock: a poll sooner
 * than the interval is slow_down and adds 5 s to the interval for the rest of the request, a
 * poll that keeps the interval hears authorization_pending, and the code is expired_token ten
 * minutes after it was issued.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Either, Layer, TestClock } from "effect"
import { Namespaces } from "../../../src/layers/namespaces/Namespaces.js"
import { DEVICE_CODE_SECONDS, POLL_INTERVAL_SECONDS, Sessions } from "../../../src/layers/sessions/Sessions.js"

describe("device flow", () => {
  it.layer(Layer.mergeAll(Sessions.Test, Namespaces.Test))((it) => {
    it.effect("slow_down grows the interval for the rest of the request; the code expires after ten minutes", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Date.UTC(2026, 3, 1))
        yield* Effect.flatMap(Namespaces, (ns) => ns.create("devices", undefined, "test"))
        const sessions = yield* Sessions
        const codes = yield* sessions.startDeviceRequest({ namespace: "devices", deviceKey: undefined, deviceLabel: undefined })
        expect([codes.expiresIn, codes.interval]).toEqual([DEVICE_CODE_SECONDS, POLL_INTERVAL_SECONDS])
        const poll = Effect.map(Effect.either(sessions.collect({ deviceCode: codes.deviceCode, deviceProof: undefined })), (r) =>
          Either.isLeft(r) ? ("code" in r.left ? r.left.code : r.left.reason) : "collected"
        )
        const after = (seconds: number) => Effect.zipRight(TestClock.adjust(Duration.seconds(seconds)), poll)

        expect(yield* poll).toBe("authorization_pending")
        // each poll sooner than the interval since the last poll adds 5 s to it
        expect(yield* after(1)).toBe("slow_down") // t=1 s: 1 < 5, the interval is 10 s now
        expect(yield* after(6)).toBe("slow_down") // t=7 s: 6 < 10, now 15 s
        expect(yield* after(14)).toBe("slow_down") // t=21 s: 14 < 15, now 20 s
        expect(yield* after(20)).toBe("authorization_pending") // t=41 s: kept the 20 s
        expect(yield* after(20)).toBe("authorization_pending") // t=61 s
        // the code lives 600 s from its issue, to the second
        yield* TestClock.adjust(Duration.seconds(DEVICE_CODE_SECONDS - 61 - 1))
        expect(yield* poll).toBe("authorization_pending")
        expect(yield* after(1)).toBe("expired_token")
        expect(yield* after(60)).toBe("expired_token")
      })
    )

    it.effect("an unknown device code is invalid_grant, whatever the time", () =>
      Effect.gen(function* () {
        const sessions = yield* Sessions
        const polled = yield* Effect.either(sessions.collect({ deviceCode: "not-a-code", deviceProof: undefined }))
        expect(Either.isLeft(polled) && "code" in polled.left ? polled.left.code : polled).toBe("invalid_grant")
      })
    )
  })
})
