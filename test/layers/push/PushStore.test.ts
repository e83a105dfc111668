/**
 * The push tables (spec §2.6, §3.3) on both registry engines, the embedded SQLite file and a real
 * rqlited: credentials sealed and bound to namespace and slot, device registrations per user with
 * revoked devices dropped, and topics that keep only id, sealed token and expiry, move their
 * expiry forward, hand a token over to one topic per namespace, and expire. Time is the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Either, Layer, Option, TestClock, TestServices } from "effect"
import type { Scope } from "effect"
import * as crypto from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { type ApnsCredential, parseCredential, parsePushConfig, type StoredPushSecret } from "../../../src/domain/PushCredentials.js"
import { topicExpiry, topicIdOf } from "../../../src/domain/PushRegistrations.js"
import { endDeviceRegistrations, makePushStore, type PushStoreService } from "../../../src/layers/push/PushStore.js"
import { RegistryStore, type RegistryStoreService, type StoreError } from "../../../src/layers/registry/RegistryStore.js"
import { RqliteRegistryStore } from "../../../src/layers/registry/RqliteRegistryStore.js"
import { registryDbPath, SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"
import { hasRqlited, rqlited, rqlitedMissingMessage } from "../../support/rqlited.js"

type Provision = Effect.Effect<Layer.Layer<RegistryStore, StoreError>, unknown, Scope.Scope>

const sqlite: Provision = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-push-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (dir) => SqliteRegistryStore.layer({ filename: registryDbPath(dir) })
)

const rqlite: Provision = Effect.map(rqlited(), (server) => RqliteRegistryStore.layer({ url: server.url, timeout: Duration.seconds(5) }))

const sealer = makeSealer(new Uint8Array(32).fill(9))
const day = 86_400
const start = Date.UTC(2026, 10, 26, 10, 30)
const startSeconds = start / 1000

/** A fresh store of the engine, with the clock at `start`; provisioning runs on the live clock. */
const fixture = (provision: Provision) =>
  Effect.gen(function* () {
    const layer = yield* TestServices.provideLive(provision)
    const store = Context.get(yield* TestServices.provideLive(Layer.build(layer)), RegistryStore)
    yield* TestClock.setTime(start)
    return { store, push: makePushStore(store, sealer) }
  })

const p8 = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }) as string
const valid = <A>(result: { ok: true; value: A } | { ok: false; error: { reason: string } }): A => {
  if (!result.ok) throw new Error(result.error.reason)
  return result.value
}
const apns = valid(parseCredential("ios_push", { team_id: "TEAM123456", key_id: "KEY1234567", bundle_id: "com.example.app", p8_key: p8, environment: "sandbox" })) as ApnsCredential
const relay = valid(parseCredential("relay_push", { base_url: "https://ntfy.example.com", auth_token: "relay-secret-token" }))
const config = valid(parsePushConfig({ legacy_access_token: "expo-secret-token" }))

const apnsToken = (n: number) => n.toString(16).padStart(2, "0").repeat(32)
const secretOf = (n: number) => Buffer.alloc(16, n)

const rawRows = (store: RegistryStoreService, table: string) => store.query({ sql: `SELECT * FROM ${table}` })

const pushStoreSuite = (engine: string, provision: Provision) =>
  describe(`PushStore on ${engine}`, () => {
    it.scoped("credentials: sealed at rest, read back whole, replaced, listed and deleted", () =>
      Effect.gen(function* () {
        const { store, push } = yield* fixture(provision)
        const stored = yield* push.putCredential("shop", apns, "0xowner")
        expect(stored).toEqual({ secret: apns, updatedAt: startSeconds, updatedBy: "0xowner" })
        yield* push.putCredential("shop", relay, "0xowner")
        yield* push.putCredential("shop", config, "0xdev")
        expect(yield* push.credential("shop", "ios_push")).toEqual(Option.some(stored))
        expect((yield* push.credential("shop", "push_config")).pipe(Option.map((r) => r.secret))).toEqual(Option.some(config))
        expect(yield* push.credential("shop", "legacy_push")).toEqual(Option.none())
        expect(yield* push.credential("other", "ios_push")).toEqual(Option.none())
        expect(yield* push.configuredSlots("shop")).toEqual(["ios_push", "push_config", "relay_push"])

        // nothing of a credential is in clear: no field, no key, no token
        const raw = JSON.stringify(yield* rawRows(store, "push_credentials"))
        for (const clear of ["TEAM123456", "KEY1234567", "com.example.app", "PRIVATE KEY", "relay-secret-token", "expo-secret-token", "ntfy.example.com"]) {
          expect(raw).not.toContain(clear)
        }

        // replaced: the new one is read, with who wrote it and when
        yield* TestClock.adjust(Duration.seconds(90))
        const replacement: StoredPushSecret = { ...apns, key_id: "NEWKEY0001", environment: "production" }
        yield* push.putCredential("shop", replacement, "0xadmin")
        expect(yield* push.credential("shop", "ios_push")).toEqual(
          Option.some({ secret: replacement, updatedAt: startSeconds + 90, updatedBy: "0xadmin" })
        )

        expect(yield* push.deleteCredential("shop", "ios_push")).toBe(true)
        expect(yield* push.deleteCredential("shop", "ios_push")).toBe(false)
        expect(yield* push.credential("shop", "ios_push")).toEqual(Option.none())
        expect(yield* push.configuredSlots("shop")).toEqual(["push_config", "relay_push"])
      })
    )

    it.scoped("a sealed credential moved to another namespace or slot does not open", () =>
      Effect.gen(function* () {
        const { store, push } = yield* fixture(provision)
        yield* push.putCredential("shop", relay, "0xowner")
        yield* store.exec({ sql: "UPDATE push_credentials SET namespace = 'thief' WHERE namespace = 'shop'" })
        const moved = yield* Effect.either(push.credential("thief", "relay_push"))
        expect(Either.isLeft(moved) && moved.left.reason).toBe("statement")
        yield* store.exec({ sql: "UPDATE push_credentials SET namespace = 'shop', provider = 'legacy_push'" })
        const reslotted = yield* Effect.either(push.credential("shop", "legacy_push"))
        expect(Either.isLeft(reslotted) && reslotted.left.reason).toBe("statement")
      })
    )

    it.scoped("devices: one registration per (namespace, subject, device id), replaced in place, deleted", () =>
      Effect.gen(function* () {
        const { push } = yield* fixture(provision)
        const phone = { device_id: "phone", provider: "ios_push" as const, token: apnsToken(1), platform: "ios" as const, app_version: "1.0" }
        const laptop = { device_id: "laptop", provider: "relay_push" as const, token: "up-topic", platform: "web" as const, app_version: undefined }
        yield* push.registerDevice("shop", "0xalice", phone, false)
        yield* TestClock.adjust(Duration.seconds(5))
        const second = yield* push.registerDevice("shop", "0xalice", laptop, false)
        expect(second).toEqual({
          deviceId: "laptop", bound: false, provider: "relay_push", token: "up-topic", platform: "web", appVersion: undefined,
          createdAt: startSeconds + 5, updatedAt: startSeconds + 5
        })
        yield* push.registerDevice("shop", "0xbob", phone, false)
        yield* push.registerDevice("other", "0xalice", phone, false)

        // the same device id again: its token and provider replaced, its creation time kept
        yield* TestClock.adjust(Duration.seconds(5))
        const renewed = yield* push.registerDevice("shop", "0xalice", { ...phone, provider: "legacy_push", token: "ExponentPushToken[abc]" }, false)
        expect(renewed).toMatchObject({ deviceId: "phone", provider: "legacy_push", token: "ExponentPushToken[abc]", createdAt: startSeconds, updatedAt: startSeconds + 10 })
        expect((yield* push.devices("shop", "0xalice")).map((d) => [d.deviceId, d.provider])).toEqual([["phone", "legacy_push"], ["laptop", "relay_push"]])

        // a provider's "gone" removes only a registration still holding that token
        expect(yield* push.dropDeviceToken("shop", "0xalice", "phone", apnsToken(1))).toBe(false)
        expect(yield* push.dropDeviceToken("shop", "0xalice", "phone", "ExponentPushToken[abc]")).toBe(true)
        expect(yield* push.deleteDevice("shop", "0xalice", "laptop")).toBe(true)
        expect(yield* push.deleteDevice("shop", "0xalice", "laptop")).toBe(false)
        expect(yield* push.devices("shop", "0xalice")).toEqual([])
        // other subjects and namespaces untouched
        expect((yield* push.devices("shop", "0xbob")).map((d) => d.deviceId)).toEqual(["phone"])
        expect((yield* push.devices("other", "0xalice")).map((d) => d.deviceId)).toEqual(["phone"])
      })
    )

    it.scoped("a revoked device's bound registration is dropped on listing and by the revocation statement", () =>
      Effect.gen(function* () {
        const { store, push } = yield* fixture(provision)
        const insertDevice = (id: string, status: string) =>
          store.exec({
            sql: "INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at) VALUES ('shop', ?, '0xalice', '{}', 'l', ?, 1)",
            params: [id, status]
          })
        yield* insertDevice("did-revoked", "revoked")
        yield* insertDevice("did-active", "active")
        const reg = (deviceId: string) => ({ device_id: deviceId, provider: "relay_push" as const, token: `t-${deviceId}`, platform: undefined, app_version: undefined })
        yield* push.registerDevice("shop", "0xalice", reg("did-revoked"), true)
        yield* push.registerDevice("shop", "0xalice", reg("did-active"), true)
        // an app's own label that happens to equal a revoked device's id is not that device
        yield* push.registerDevice("shop", "0xcarol", reg("did-revoked"), false)

        expect((yield* push.devices("shop", "0xalice")).map((d) => [d.deviceId, d.bound])).toEqual([["did-active", true]])
        const left = yield* store.query({ sql: "SELECT subject, device_id FROM push_devices ORDER BY subject, device_id" })
        expect(left).toEqual([{ subject: "0xalice", device_id: "did-active" }, { subject: "0xcarol", device_id: "did-revoked" }])
        expect((yield* push.devices("shop", "0xcarol")).map((d) => d.deviceId)).toEqual(["did-revoked"])

        // revocation (spec §3.1) ends a bound device's registrations in its own batch
        yield* store.batch([endDeviceRegistrations("shop", "did-active")])
        expect(yield* push.devices("shop", "0xalice")).toEqual([])
      })
    )

    it.scoped("a send's targets: where each live registration goes; a revoked device's are dropped on the way", () =>
      Effect.gen(function* () {
        const { store, push } = yield* fixture(provision)
        yield* store.exec({
          sql: "INSERT INTO devices (namespace, id, wallet, public_jwk, label, status, created_at) VALUES ('shop', 'did-revoked', '0xalice', '{}', 'l', 'revoked', 1)"
        })
        const reg = (deviceId: string, provider: "relay_push" | "ios_push", token: string) => ({ device_id: deviceId, provider, token, platform: undefined, app_version: undefined })
        yield* push.registerDevice("shop", "0xalice", reg("did-revoked", "relay_push", "gone"), true)
        yield* push.registerDevice("shop", "0xalice", reg("phone", "ios_push", "ab".repeat(32)), false)
        yield* push.registerDevice("shop", "0xalice", reg("laptop", "relay_push", "topic-1"), false)
        yield* push.registerDevice("shop", "0xbob", reg("phone", "relay_push", "bobs"), false)
        yield* push.registerDevice("other", "0xalice", reg("phone", "relay_push", "elsewhere"), false)

        const targets = yield* push.deliveryTargets("shop", "0xalice")
        expect([...targets].sort((a, b) => a.deviceId.localeCompare(b.deviceId))).toEqual([
          { deviceId: "laptop", provider: "relay_push", token: "topic-1" },
          { deviceId: "phone", provider: "ios_push", token: "ab".repeat(32) }
        ])
        const left = yield* store.query({ sql: "SELECT device_id FROM push_devices WHERE namespace = 'shop' AND subject = '0xalice' ORDER BY device_id" })
        expect(left).toEqual([{ device_id: "laptop" }, { device_id: "phone" }])
        expect(yield* push.deliveryTargets("shop", "0xnobody")).toEqual([])
      })
    )

    it.scoped("topics: only id, sealed token and expiry are stored; expiry 7 days rounded up to a UTC day", () =>
      Effect.gen(function* () {
        const { store, push } = yield* fixture(provision)
        const topicId = topicIdOf(secretOf(1))
        const registered = yield* push.registerTopic("shop", topicId, "ios_voip_push", apnsToken(7))
        expect(registered).toEqual({ topicId, expiresAt: topicExpiry(startSeconds) })
        expect(registered.expiresAt % day).toBe(0)
        expect(registered.expiresAt - startSeconds).toBeGreaterThanOrEqual(7 * day)
        expect(registered.expiresAt - startSeconds).toBeLessThanOrEqual(8 * day)

        const rows = yield* rawRows(store, "push_topics")
        expect(rows.length).toBe(1)
        expect(Object.keys(rows[0] ?? {}).sort()).toEqual(["expires_at", "namespace", "sealed_token", "token_hash", "topic_id"])
        expect(JSON.stringify(rows)).not.toContain(apnsToken(7))
        expect(JSON.stringify(rows)).not.toContain("ios_voip_push")

        expect(yield* push.topic("shop", topicId)).toEqual(
          Option.some({ topicId, provider: "ios_voip_push", token: apnsToken(7), expiresAt: registered.expiresAt })
        )
        // another namespace's topic id is simply not found
        expect(yield* push.topic("other", topicId)).toEqual(Option.none())
        expect(yield* push.deleteTopic("other", topicId)).toBe(false)
      })
    )

    it.scoped("topics: the same secret again moves the expiry forward and may replace the token", () =>
      Effect.gen(function* () {
        const { push } = yield* fixture(provision)
        const topicId = topicIdOf(secretOf(2))
        const first = yield* push.registerTopic("shop", topicId, "relay_push", "topic-a")
        yield* TestClock.adjust(Duration.days(3))
        const again = yield* push.registerTopic("shop", topicId, "legacy_push", "ExponentPushToken[b]")
        expect(again.expiresAt).toBe(topicExpiry(startSeconds + 3 * day))
        expect(again.expiresAt).toBeGreaterThan(first.expiresAt)
        expect((yield* push.topic("shop", topicId)).pipe(Option.map((t) => [t.provider, t.token, t.expiresAt]))).toEqual(
          Option.some(["legacy_push", "ExponentPushToken[b]", again.expiresAt])
        )
      })
    )

    it.scoped("topics: one provider token belongs to one topic per namespace; another secret takes it over", () =>
      Effect.gen(function* () {
        const { store, push } = yield* fixture(provision)
        const older = topicIdOf(secretOf(3))
        const newer = topicIdOf(secretOf(4))
        yield* push.registerTopic("shop", older, "relay_push", "shared-topic")
        yield* push.registerTopic("other", older, "relay_push", "shared-topic")
        // the same token under another provider is another token
        const sameTextOtherProvider = topicIdOf(secretOf(5))
        yield* push.registerTopic("shop", sameTextOtherProvider, "legacy_push", "shared-topic")
        yield* push.registerTopic("shop", newer, "relay_push", "shared-topic")
        expect(yield* push.topic("shop", older)).toEqual(Option.none())
        expect((yield* push.topic("shop", newer)).pipe(Option.map((t) => t.token))).toEqual(Option.some("shared-topic"))
        expect(Option.isSome(yield* push.topic("shop", sameTextOtherProvider))).toBe(true)
        // another namespace's registration of that token is its own
        expect(Option.isSome(yield* push.topic("other", older))).toBe(true)
        expect((yield* store.query({ sql: "SELECT COUNT(*) AS n FROM push_topics" }))[0]).toEqual({ n: 3 })
      })
    )

    it.scoped("topics: expired is not found and cannot be deleted; a live one is deleted once", () =>
      Effect.gen(function* () {
        const { push } = yield* fixture(provision)
        const expiring = topicIdOf(secretOf(6))
        const live = topicIdOf(secretOf(7))
        const { expiresAt } = yield* push.registerTopic("shop", expiring, "relay_push", "t-expiring")
        yield* TestClock.setTime((expiresAt - 1) * 1000)
        expect(Option.isSome(yield* push.topic("shop", expiring))).toBe(true)
        yield* TestClock.setTime(expiresAt * 1000)
        expect(yield* push.topic("shop", expiring)).toEqual(Option.none())
        expect(yield* push.deleteTopic("shop", expiring)).toBe(false)

        yield* push.registerTopic("shop", live, "relay_push", "t-live")
        expect(yield* push.deleteTopic("shop", live)).toBe(true)
        expect(yield* push.deleteTopic("shop", live)).toBe(false)
        expect(yield* push.topic("shop", live)).toEqual(Option.none())
      })
    )

    it.scoped("a short configured lifetime (tests) expires a topic after that many seconds", () =>
      Effect.gen(function* () {
        const { store } = yield* fixture(provision)
        const push: PushStoreService = makePushStore(store, sealer, { topicLifetimeSeconds: 2 })
        const topicId = topicIdOf(secretOf(8))
        expect((yield* push.registerTopic("shop", topicId, "relay_push", "t")).expiresAt).toBe(startSeconds + 2)
        yield* TestClock.adjust(Duration.seconds(2))
        expect(yield* push.topic("shop", topicId)).toEqual(Option.none())
      })
    )
  })

pushStoreSuite("sqlite", sqlite)

if (hasRqlited()) pushStoreSuite("rqlite", rqlite)
else
  describe("PushStore on rqlite", () => {
    it("needs the rqlited binary", () => {
      expect.fail(rqlitedMissingMessage())
    })
  })
