/**
 * The registrations service (spec §2.6, §3.3, §4.6) over its test layer (the registry's SQLite
 * double, the sealer's fixed root): a registration needs push configured, a device-bound session
 * registers its verified device whatever the body says, the per-user cap, the caller's own
 * registrations only, the topic life cycle on the TestClock, a topic write the registry refused
 * as 500, and device revocation ending the device's registrations in its own batch. The tables
 * themselves, on both engines, are test/layers/push/PushStore.test.ts's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, TestClock } from "effect"
import { KeptReads } from "../../../src/layers/registry/KeptReads.js"
import type { Principal } from "../../../src/domain/Principal.js"
import { parseCredential } from "../../../src/domain/PushCredentials.js"
import { topicIdOf } from "../../../src/domain/PushRegistrations.js"
import { Audit } from "../../../src/layers/audit/Audit.js"
import { Devices } from "../../../src/layers/devices/Devices.js"
import { PushStore } from "../../../src/layers/push/PushStore.js"
import { PushRegistrations } from "../../../src/layers/push/Registrations.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { Sessions } from "../../../src/layers/sessions/Sessions.js"

const day = 86_400
const start = Date.UTC(2026, 10, 26, 10, 30)

const principal = (subject: string, deviceId?: string, namespace = "shop"): Principal => ({
  namespace,
  subject,
  method: "jwt",
  role: "reader",
  grants: [],
  keyId: undefined,
  sessionId: "s-" + subject,
  deviceId
})
const alice = principal("0xalice")
const aliceOnPhone = principal("0xalice", "did-phone-verified")
const bob = principal("0xbob")
const runtime = principal("key:runtime")

const relayCredential = (() => {
  const parsed = parseCredential("relay_push", { auth_token: "relay-secret-token" })
  if (!parsed.ok) throw new Error(parsed.error.reason)
  return parsed.value
})()

/** Push configured in `namespace`: a relay credential stored. */
const configure = (namespace = "shop") => Effect.flatMap(PushStore, (store) => store.putCredential(namespace, relayCredential, "0xowner"))

const apnsToken = (n: number) => n.toString(16).padStart(2, "0").repeat(32)
const device = (deviceId: string, token = "phone-topic") => ({ device_id: deviceId, provider: "relay_push", token, platform: "android" })
const secret = (n: number) => n.toString(16).padStart(2, "0").repeat(16)

/** The caller's registrations, all on one page. */
const listOf = (caller: Principal) =>
  Effect.flatMap(PushRegistrations, (registrations) => Effect.map(registrations.devices(caller, { limit: 1000, after: undefined }), (page) => page.items))

/** The refusal's code, or "ok". */
const codeOf = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (e) => (Either.isRight(e) ? "ok" : ((e.left as { readonly code?: string }).code ?? "no code")))

describe("PushRegistrations", () => {
  it.scoped("refuses a registration while push is not configured, and writes nothing; listing and removing still answer", () =>
    Effect.gen(function* () {
      const registrations = yield* PushRegistrations
      const refused = yield* Effect.flip(registrations.registerDevice(alice, device("phone")))
      expect(refused).toMatchObject({ code: "PUSH_NOT_CONFIGURED", status: 503 })
      expect(yield* codeOf(registrations.registerTopic(runtime, { topic_secret: secret(1), provider: "relay_push", token: "t1" }))).toBe(
        "PUSH_NOT_CONFIGURED"
      )
      expect(yield* listOf(alice)).toEqual([])
      expect(yield* registrations.removeDevice(alice, "phone")).toBe(false)
      const store = yield* RegistryStore
      expect(yield* store.query({ sql: "SELECT COUNT(*) AS n FROM push_devices" })).toEqual([{ n: 0 }])
      expect(yield* store.query({ sql: "SELECT COUNT(*) AS n FROM push_topics" })).toEqual([{ n: 0 }])
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("counts the gateway's platform relay as configured", () =>
    Effect.gen(function* () {
      const registrations = yield* PushRegistrations
      expect((yield* registrations.registerDevice(alice, device("phone"))).deviceId).toBe("phone")
    }).pipe(
      Effect.provide(
        PushRegistrations.testWith({ push: { apnsUrl: undefined, expoUrl: undefined, relayUrl: "http://127.0.0.1:9", relayToken: undefined } })
      )
    )
  )

  it.scoped("counts a peer to fan out to as configured, as the sends do", () =>
    Effect.gen(function* () {
      const registrations = yield* PushRegistrations
      expect((yield* registrations.registerDevice(alice, device("phone"))).deviceId).toBe("phone")
    }).pipe(Effect.provide(PushRegistrations.testWith({ peers: new Map([["node-b", "http://10.0.0.2:4001"]]) })))
  )

  it.scoped("refuses with 503 when the only peer is off the overlay", () =>
    Effect.gen(function* () {
      const registrations = yield* PushRegistrations
      expect(yield* codeOf(registrations.registerDevice(alice, device("phone")))).toBe("PUSH_NOT_CONFIGURED")
    }).pipe(Effect.provide(PushRegistrations.testWith({ peers: new Map([["node-b", "http://203.0.113.9:4001"]]) })))
  )

  it.scoped("records a plain session's device under its label and a bound session's under its verified device id", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      yield* configure()
      const registrations = yield* PushRegistrations
      const plain = yield* registrations.registerDevice(alice, { ...device("tablet"), app_version: "1.2.0" })
      expect(plain).toMatchObject({ deviceId: "tablet", bound: false, provider: "relay_push", token: "phone-topic", platform: "android", appVersion: "1.2.0" })
      yield* TestClock.adjust("1 second")
      // the body names another device (even the tablet): the registration is the verified one's
      const bound = yield* registrations.registerDevice(aliceOnPhone, { device_id: "tablet", provider: "ios_push", token: apnsToken(0xab).toUpperCase() })
      expect(bound).toMatchObject({ deviceId: "did-phone-verified", bound: true, provider: "ios_push", token: apnsToken(0xab), platform: undefined })

      const listed = yield* listOf(alice)
      expect(listed.map((d) => [d.deviceId, d.bound, d.token])).toEqual([
        ["tablet", false, "phone-topic"],
        ["did-phone-verified", true, apnsToken(0xab)]
      ])
      // registering the same id again replaces the token and keeps the creation time
      yield* TestClock.adjust("1 hour")
      const renewed = yield* registrations.registerDevice(alice, device("tablet", "tablet-topic-2"))
      expect(renewed).toMatchObject({ token: "tablet-topic-2", createdAt: start / 1000, updatedAt: start / 1000 + 3601, appVersion: undefined })
      expect((yield* listOf(alice)).length).toBe(2)
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("refuses a malformed registration naming the field, and writes nothing", () =>
    Effect.gen(function* () {
      yield* configure()
      const registrations = yield* PushRegistrations
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ ...device("phone"), provider: "fcm" }, "provider"],
        [{ ...device("phone"), provider: "ios_push", token: "not-hex" }, "token"],
        [{ ...device("phone"), token: "a/b" }, "token"],
        [{ ...device("phone"), token: "x".repeat(513) }, "token"],
        [{ ...device("phone"), token: "https://relay.example/t?q=1" }, "token"],
        [{ ...device("phone"), platform: "windows" }, "platform"],
        [{ ...device("phone"), device_id: "has space" }, "device_id"],
        [{ ...device("phone"), extra: 1 }, "extra"],
        ["not an object", "body"]
      ]
      for (const [body, field] of cases) {
        const refused = yield* Effect.flip(registrations.registerDevice(alice, body))
        expect(refused, JSON.stringify(body)).toMatchObject({ code: "VALIDATION_FAILED", status: 400 })
        expect(refused.reason.startsWith(field + ":"), refused.reason).toBe(true)
      }
      expect(yield* listOf(alice)).toEqual([])
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("holds a user to the cap: a new device past it is refused, a held one is still renewed, a removed one frees a place", () =>
    Effect.gen(function* () {
      yield* configure()
      const registrations = yield* PushRegistrations
      yield* registrations.registerDevice(alice, device("one"))
      yield* registrations.registerDevice(alice, device("two"))
      const refused = yield* Effect.flip(registrations.registerDevice(alice, device("three")))
      expect(refused).toMatchObject({ code: "VALIDATION_FAILED", status: 400 })
      expect(refused.reason).toContain("2 push registrations")
      expect((yield* registrations.registerDevice(alice, device("two", "renewed"))).token).toBe("renewed")
      // the cap is per user
      expect((yield* registrations.registerDevice(bob, device("three"))).deviceId).toBe("three")
      expect(yield* registrations.removeDevice(alice, "one")).toBe(true)
      expect((yield* registrations.registerDevice(alice, device("three"))).deviceId).toBe("three")
      // oldest first, ties (the same second) by id
      expect((yield* listOf(alice)).map((d) => d.deviceId)).toEqual(["three", "two"])
    }).pipe(Effect.provide(PushRegistrations.testWith({ pushMaxDevicesPerUser: 2 })))
  )

  it.scoped("lists and removes only the caller's own registrations", () =>
    Effect.gen(function* () {
      yield* configure()
      yield* configure("other")
      const registrations = yield* PushRegistrations
      yield* registrations.registerDevice(alice, device("phone"))
      yield* registrations.registerDevice(bob, device("phone"))
      yield* registrations.registerDevice(principal("0xalice", undefined, "other"), device("laptop"))
      expect(yield* registrations.removeDevice(bob, "laptop")).toBe(false)
      expect(yield* registrations.removeDevice(bob, "phone")).toBe(true)
      expect((yield* listOf(alice)).map((d) => d.deviceId)).toEqual(["phone"])
      expect(yield* listOf(bob)).toEqual([])
      expect((yield* listOf(principal("0xalice", undefined, "other"))).map((d) => d.deviceId)).toEqual(["laptop"])
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("runs the topic life cycle of §3.3: register, register again moves the expiry, a token moves to the newer topic, remove once", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      yield* configure()
      const registrations = yield* PushRegistrations
      const push = yield* PushStore
      const topicA = topicIdOf(Buffer.from(secret(1), "hex"))
      const first = yield* registrations.registerTopic(runtime, { topic_secret: secret(1).toUpperCase(), provider: "relay_push", token: "t1" })
      expect(first.topicId).toBe(topicA)
      expect(first.expiresAt % day).toBe(0)
      expect(first.expiresAt - start / 1000).toBeGreaterThanOrEqual(7 * day)

      yield* TestClock.adjust("3 days")
      const again = yield* registrations.registerTopic(runtime, { topic_secret: secret(1), provider: "legacy_push", token: "ExponentPushToken[x]" })
      expect(again.expiresAt - first.expiresAt).toBe(3 * day)
      expect(yield* push.topic("shop", topicA)).toMatchObject({ _tag: "Some", value: { provider: "legacy_push", token: "ExponentPushToken[x]" } })

      // the same provider token under another secret: the first topic is replaced
      const topicB = (yield* registrations.registerTopic(runtime, { topic_secret: secret(2), provider: "legacy_push", token: "ExponentPushToken[x]" })).topicId
      expect((yield* push.topic("shop", topicA))._tag).toBe("None")
      expect((yield* push.topic("shop", topicB))._tag).toBe("Some")

      // another namespace's secret is simply not found, and leaves the topic
      yield* configure("other")
      expect(yield* codeOf(registrations.removeTopic(principal("key:x", undefined, "other"), secret(2)))).toBe("NOT_FOUND")
      expect(yield* registrations.removeTopic(runtime, secret(2))).toBe(topicB)
      expect(yield* codeOf(registrations.removeTopic(runtime, secret(2)))).toBe("NOT_FOUND")
      expect(yield* codeOf(registrations.removeTopic(runtime, secret(1)))).toBe("NOT_FOUND")
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("expires a topic: removing it after its expiry is not found", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      yield* configure()
      const registrations = yield* PushRegistrations
      const { expiresAt } = yield* registrations.registerTopic(runtime, { topic_secret: secret(3), provider: "relay_push", token: "t3" })
      yield* TestClock.setTime(expiresAt * 1000)
      expect(yield* codeOf(registrations.removeTopic(runtime, secret(3)))).toBe("NOT_FOUND")
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("refuses a malformed topic with 400 naming the field", () =>
    Effect.gen(function* () {
      yield* configure()
      const registrations = yield* PushRegistrations
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ topic_secret: "zz".repeat(16), provider: "relay_push", token: "t" }, "topic_secret"],
        [{ topic_secret: "ab".repeat(15), provider: "relay_push", token: "t" }, "topic_secret"],
        [{ topic_secret: "ab".repeat(65), provider: "relay_push", token: "t" }, "topic_secret"],
        [{ topic_secret: "abc".repeat(11), provider: "relay_push", token: "t" }, "topic_secret"],
        [{ topic_secret: secret(1), provider: "fcm", token: "t" }, "provider"],
        [{ topic_secret: secret(1), provider: "relay_push" }, "token"],
        [{ topic_secret: secret(1), provider: "ios_voip_push", token: "zz" }, "token"]
      ]
      for (const [body, field] of cases) {
        const refused = yield* Effect.flip(registrations.registerTopic(runtime, body))
        expect(refused, JSON.stringify(body)).toMatchObject({ code: "VALIDATION_FAILED" })
        expect((refused as { reason: string }).reason.startsWith(field + ":")).toBe(true)
      }
      expect(yield* codeOf(registrations.removeTopic(runtime, "not-hex"))).toBe("VALIDATION_FAILED")
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("answers 500 INTERNAL when the registry refuses a topic write", () =>
    Effect.gen(function* () {
      yield* configure()
      const registrations = yield* PushRegistrations
      const store = yield* RegistryStore
      // a registry whose topics table cannot take the write (a statement refused, not a registry down)
      yield* store.exec({ sql: "CREATE TRIGGER refuse_topics BEFORE INSERT ON push_topics BEGIN SELECT RAISE(ABORT, 'refused'); END" })
      const refused = yield* Effect.flip(registrations.registerTopic(runtime, { topic_secret: secret(1), provider: "relay_push", token: "t" }))
      expect(refused).toMatchObject({ code: "INTERNAL", status: 500 })
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("lists in keyset pages, oldest first; a revoked device's registration is deleted on the way and the next cursor still holds", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      yield* configure()
      const store = yield* RegistryStore
      yield* store.exec({
        sql: "INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at) VALUES ('shop', 'did-old', '0xalice', '{}', 'old', 'active', 1)"
      })
      const registrations = yield* PushRegistrations
      yield* registrations.registerDevice(principal("0xalice", "did-old"), device("x"))
      for (const id of ["b", "a", "c"]) {
        yield* TestClock.adjust("1 second")
        yield* registrations.registerDevice(alice, device(id))
      }
      // revoked behind the registrations' back (a batch that predates the revocation statement)
      yield* store.exec({ sql: "UPDATE devices SET status = 'revoked' WHERE id = 'did-old'" })
      const first = yield* registrations.devices(alice, { limit: 2, after: undefined })
      expect(first.items.map((d) => d.deviceId)).toEqual(["b"])
      expect(first.next).toEqual([start / 1000 + 1, "b"])
      const second = yield* registrations.devices(alice, { limit: 2, after: first.next })
      expect(second.items.map((d) => d.deviceId)).toEqual(["a", "c"])
      expect(second.next).toBeUndefined()
      expect(yield* store.query({ sql: "SELECT device_id FROM push_devices ORDER BY device_id" })).toEqual([
        { device_id: "a" },
        { device_id: "b" },
        { device_id: "c" }
      ])
    }).pipe(Effect.provide(PushRegistrations.Test))
  )

  it.scoped("ends a device's registrations when the device is revoked, in the revocation's own write", () =>
    Effect.gen(function* () {
      yield* configure()
      const store = yield* RegistryStore
      yield* store.exec({
        sql: "INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at) VALUES ('shop', 'did-phone-verified', '0xalice', '{}', 'phone', 'active', 1)"
      })
      const registrations = yield* PushRegistrations
      yield* registrations.registerDevice(aliceOnPhone, device("anything"))
      yield* registrations.registerDevice(alice, device("did-phone-verified")) // an unbound label that equals the id stays
      yield* (yield* Devices).revoke({
        namespace: "shop",
        account: "0xalice",
        deviceId: "did-phone-verified",
        callerDeviceId: undefined,
        deviceProof: undefined,
        actor: "0xalice"
      })
      const rows = yield* store.query({ sql: "SELECT device_id, bound FROM push_devices WHERE namespace = 'shop'" })
      expect(rows).toEqual([{ device_id: "did-phone-verified", bound: 0 }])
    }).pipe(
      // one registry under both services (the layers share the registry double by reference)
      Effect.provide(Devices.Live.pipe(Layer.provide(Layer.mergeAll(Audit.Test, Sessions.Test, KeptReads.Test)), Layer.provideMerge(PushRegistrations.Test)))
    )
  )
})
