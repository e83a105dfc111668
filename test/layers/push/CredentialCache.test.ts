/**
 * The send path's credential cache: which stored record delivers each provider (the per-provider
 * record before the legacy /v1/push/config one), and a replaced or deleted credential taking
 * effect once the 30 seconds are over, never before a read of the store. Time is the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, TestClock } from "effect"
import { generateKeyPairSync } from "node:crypto"
import type { CredentialSlot, StoredPushSecret } from "../../../src/domain/PushCredentials.js"
import { makeCredentialCache, sendCredentialsOf } from "../../../src/layers/push/CredentialCache.js"
import { PushStore } from "../../../src/layers/push/PushStore.js"

const p8 = () => generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const apns = (provider: "ios_push" | "ios_voip_push", keyId: string): StoredPushSecret => ({
  provider,
  team_id: "TEAM1",
  key_id: keyId,
  bundle_id: "com.example.app",
  p8_key: p8(),
  environment: "production"
})
const records = (...secrets: Array<StoredPushSecret>) => new Map<CredentialSlot, StoredPushSecret>(secrets.map((s) => [s.provider, s]))

describe("which record delivers", () => {
  it("nothing stored and no platform relay: not configured", () => {
    expect(sendCredentialsOf(records(), false)).toEqual({
      configured: false,
      apns: undefined,
      voip: undefined,
      expoToken: undefined,
      relayConfigured: false,
      relay: undefined
    })
    expect(sendCredentialsOf(records(), true)).toMatchObject({ configured: true, relayConfigured: true, relay: undefined })
  })

  it("VoIP falls back to the ios_push key; its own wins", () => {
    const ios = apns("ios_push", "KEYIOS0001")
    expect(sendCredentialsOf(records(ios), false).voip?.keyId).toBe("KEYIOS0001")
    expect(sendCredentialsOf(records(ios, apns("ios_voip_push", "KEYVOIP001")), false).voip?.keyId).toBe("KEYVOIP001")
  })

  it("the per-provider record takes precedence over /v1/push/config", () => {
    const config: StoredPushSecret = { provider: "push_config", legacy_access_token: "legacy", relay_base_url: "https://legacy.example", relay_auth_token: "lt" }
    expect(sendCredentialsOf(records(config), false)).toMatchObject({
      expoToken: "legacy",
      relayConfigured: true,
      relay: { baseUrl: "https://legacy.example", authToken: "lt" }
    })
    const own = sendCredentialsOf(
      records(config, { provider: "legacy_push", access_token: "own" }, { provider: "relay_push", auth_token: "ot" }),
      false
    )
    // the relay record as a whole: it names no server, so the platform relay, not the legacy one
    expect(own).toMatchObject({ expoToken: "own", relayConfigured: true, relay: { baseUrl: undefined, authToken: "ot" } })
  })
})

describe("the 30-second cache", () => {
  it.scoped("keeps a namespace's credentials 30 s: a replacement or a delete shows after that", () =>
    Effect.gen(function* () {
      const store = Context.get(yield* Layer.build(PushStore.Test), PushStore)
      const cache = yield* makeCredentialCache(store, { platformRelay: Effect.succeed(false) })
      yield* store.putCredential("shop", apns("ios_push", "FIRSTKEY01"), "owner")
      expect((yield* cache.get("shop")).apns?.keyId).toBe("FIRSTKEY01")

      yield* store.putCredential("shop", apns("ios_push", "SECONDKEY1"), "owner")
      yield* TestClock.adjust(Duration.seconds(29))
      expect((yield* cache.get("shop")).apns?.keyId).toBe("FIRSTKEY01")
      yield* TestClock.adjust(Duration.seconds(2))
      expect((yield* cache.get("shop")).apns?.keyId).toBe("SECONDKEY1")

      yield* store.deleteCredential("shop", "ios_push")
      yield* TestClock.adjust(Duration.seconds(31))
      expect(yield* cache.get("shop")).toMatchObject({ configured: false, apns: undefined })
      // another namespace is its own entry
      expect((yield* cache.get("other")).configured).toBe(false)
    })
  )
})
