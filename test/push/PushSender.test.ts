/**
 * PushSender against the provider stand-ins (APNs over HTTP/2+TLS, Expo, ntfy), over the real
 * push store (SQLite registry double), the real ApnsClient, ExpoClient and relay publisher: one
 * envelope per send with a result per device, gone tokens deleted, a provider without a
 * credential a no-op, the APNs payload cap before anything is sent, a tenant relay on 127.0.0.1
 * refused by the egress guard, the topic send's 400/404/502/503 rules and the function host's
 * calls. The credential cache is given no lifetime here (its 30 s are CredentialCache.test.ts's).
 */
import { Effect, Either, ManagedRuntime, Option } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseCidrs } from "../../src/domain/AddressRanges.js"
import type { StoredPushSecret } from "../../src/domain/PushCredentials.js"
import { topicIdOf } from "../../src/domain/PushRegistrations.js"
import type { SendMessage } from "../../src/domain/PushSend.js"
import { makeGuardedFetch } from "../../src/layers/egress/GuardedFetch.js"
import { makeApnsClient, type ApnsClientService } from "../../src/layers/push/ApnsClient.js"
import { makeCredentialCache } from "../../src/layers/push/CredentialCache.js"
import { makeExpoClient } from "../../src/layers/push/ExpoClient.js"
import { fetchThroughGuard } from "../../src/layers/push/GuardedFetchLike.js"
import { makePlatformRelay } from "../../src/layers/push/PlatformRelay.js"
import { makePushSender, type PushSenderService } from "../../src/layers/push/PushSender.js"
import { PushStore, type PushStoreService } from "../../src/layers/push/PushStore.js"
import { makeRelayPublisher } from "../../src/layers/push/RelayPublisherLive.js"
import { type ApnsStandIn, makeP8Key, startApnsStandIn } from "../support/apnsStandIn.js"
import { type ExpoStandIn, startExpoStandIn } from "../support/expoStandIn.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"

let apns: ApnsStandIn
let expo: ExpoStandIn
let platformNtfy: NtfyStandIn
let tenantNtfy: NtfyStandIn
let store: PushStoreService
let apnsClient: ApnsClientService
let sender: PushSenderService
let senderLoopbackRelay: PushSenderService
const runtime = ManagedRuntime.make(PushStore.Test)
const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const runEither = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect))

const key = { teamId: "TEAM123456", keyId: "SENDKEY001", bundleId: "com.example.app", p8Key: makeP8Key() }
const iosCredential: StoredPushSecret = {
  provider: "ios_push",
  team_id: key.teamId,
  key_id: key.keyId,
  bundle_id: key.bundleId,
  p8_key: key.p8Key,
  environment: "production"
}
const hex = (n: number) => n.toString(16).padStart(2, "0").repeat(32)
/** Results in device id order (registrations written in the same second list by device id). */
const byDevice = <R extends { readonly device_id?: string | undefined }>(results: ReadonlyArray<R>) =>
  [...results].sort((a, b) => (a.device_id ?? "").localeCompare(b.device_id ?? ""))
const message: SendMessage = { title: "Hello", body: "World", channel: "chat", data: { room: 7 } }

const register = (ns: string, user: string, device_id: string, provider: "ios_push" | "relay_push" | "legacy_push", token: string) =>
  run(store.registerDevice(ns, user, { device_id, provider, token, platform: undefined, app_version: undefined }, false))

const senderWith = (guardAllowsLoopback: boolean) =>
  Effect.map(makeCredentialCache(store, { platformRelay: Effect.succeed(true), timeToLive: 0 }), (credentials) =>
    makePushSender({
      store,
      credentials,
      apns: apnsClient,
      expo: makeExpoClient({ baseUrl: expo.url }),
      relay: makeRelayPublisher({
        platform: makePlatformRelay({ url: platformNtfy.url, token: undefined }),
        guarded: fetchThroughGuard(makeGuardedFetch(guardAllowsLoopback ? { allow: Either.getOrThrow(parseCidrs("127.0.0.0/8")) } : {})),
        peers: Effect.succeed([]),
        sign: () => Effect.die("a single node signs nothing")
      })
    })
  )

beforeAll(async () => {
  apns = await startApnsStandIn()
  apns.addKey(key)
  expo = await startExpoStandIn()
  platformNtfy = await startNtfyStandIn()
  tenantNtfy = await startNtfyStandIn({ tokens: ["tk_tenant"] })
  store = await runtime.runPromise(PushStore)
  apnsClient = makeApnsClient({ productionUrl: apns.url, sandboxUrl: apns.url, ca: apns.caPem, requestTimeoutMs: 2_000 })
  sender = await run(senderWith(false))
  senderLoopbackRelay = await run(senderWith(true))
  await run(store.putCredential("shop", iosCredential, "owner"))
  await run(store.putCredential("shop", { provider: "legacy_push", access_token: "expo-token" }, "owner"))
})
afterAll(async () => {
  await run(apnsClient.close)
  await Promise.all([apns.stop(), expo.stop(), platformNtfy.stop(), tenantNtfy.stop()])
  await runtime.dispose()
})

describe("sending to a user", () => {
  it("delivers to every device on every provider at once, one result each", async () => {
    await register("shop", "alice", "phone", "ios_push", hex(1))
    await register("shop", "alice", "tablet", "ios_push", hex(2))
    await register("shop", "alice", "android", "legacy_push", "ExpoPushToken[alice]")
    await register("shop", "alice", "web", "relay_push", "alice-topic")
    const envelope = await run(sender.sendToUser("shop", "alice", message))
    expect(envelope.ok).toBe(true)
    expect(envelope.devices_attempted).toBe(4)
    expect(byDevice(envelope.results)).toEqual([
      { device_id: "android", provider: "legacy_push", status: 200, unregistered: false },
      { device_id: "phone", provider: "ios_push", status: 200, unregistered: false },
      { device_id: "tablet", provider: "ios_push", status: 200, unregistered: false },
      { device_id: "web", provider: "relay_push", status: 200, unregistered: false }
    ])
    const toPhone = apns.received.find((r) => r.token === hex(1))
    expect(JSON.parse(toPhone!.payload)).toEqual({ room: 7, aps: { alert: { title: "Hello", body: "World" }, "thread-id": "chat" } })
    expect(toPhone!.topic).toBe("com.example.app")
    expect(expo.received.at(-1)).toMatchObject({ to: "ExpoPushToken[alice]", authorization: "Bearer expo-token", message: { title: "Hello", channelId: "chat" } })
    expect(platformNtfy.published.at(-1)).toMatchObject({ topic: "alice-topic", title: "Hello", message: "World", tags: ["chat"] })
  })

  it("deletes registrations the provider reports gone and answers them unregistered", async () => {
    await register("shop", "bob", "old-phone", "ios_push", hex(3))
    await register("shop", "bob", "bad-phone", "ios_push", hex(4))
    await register("shop", "bob", "old-android", "legacy_push", "ExpoPushToken[bob-old]")
    await register("shop", "bob", "phone", "ios_push", hex(5))
    apns.markUnregistered(hex(3))
    apns.markBad(hex(4))
    expo.markUnregistered("ExpoPushToken[bob-old]")
    const envelope = await run(sender.sendToUser("shop", "bob", message))
    expect(envelope).toMatchObject({ ok: true, devices_attempted: 4 })
    expect(byDevice(envelope.results)).toEqual([
      { device_id: "bad-phone", provider: "ios_push", status: 400, reason: "BadDeviceToken", unregistered: true },
      { device_id: "old-android", provider: "legacy_push", status: 200, reason: "DeviceNotRegistered", unregistered: true },
      { device_id: "old-phone", provider: "ios_push", status: 410, reason: "Unregistered", unregistered: true },
      { device_id: "phone", provider: "ios_push", status: 200, unregistered: false }
    ])
    expect((await run(store.devices("shop", "bob"))).map((d) => d.deviceId)).toEqual(["phone"])
  })

  it("reports a provider's 5xx as that device's failure; the others are delivered", async () => {
    await register("shop", "carol", "broken", "ios_push", hex(6))
    await register("shop", "carol", "fine", "relay_push", "carol-topic")
    apns.answer(hex(6), 500, "InternalServerError")
    const envelope = await run(sender.sendToUser("shop", "carol", message))
    expect({ ...envelope, results: byDevice(envelope.results) }).toEqual({
      ok: true,
      devices_attempted: 2,
      results: [
        { device_id: "broken", provider: "ios_push", status: 500, reason: "InternalServerError", unregistered: false },
        { device_id: "fine", provider: "relay_push", status: 200, unregistered: false }
      ]
    })
    expect((await run(store.devices("shop", "carol"))).length).toBe(2)
  })

  it("filters providers; a filter that excludes every device is ok with nothing attempted", async () => {
    const before = apns.received.length
    const relayOnly = await run(sender.sendToUser("shop", "alice", { ...message, target_provider: "relay_push" }))
    expect(relayOnly.results.map((r) => r.device_id)).toEqual(["web"])
    const none = await run(sender.sendToUser("shop", "alice", { ...message, target_provider: "ios_voip_push" }))
    expect(none).toEqual({ ok: true, devices_attempted: 0, results: [] })
    const excluded = await run(sender.sendToUser("shop", "alice", { ...message, exclude_provider: ["ios_push", "legacy_push"] }))
    expect(excluded.results.map((r) => r.device_id)).toEqual(["web"])
    expect(apns.received.length).toBe(before)
    expect(await run(sender.sendToUser("shop", "nobody", message))).toEqual({ ok: true, devices_attempted: 0, results: [] })
  })

  it("refuses a message over APNs' 4096 bytes before sending anything when an APNs device is targeted", async () => {
    const big = { ...message, data: { blob: "x".repeat(4100) } }
    const [apnsBefore, relayBefore] = [apns.received.length, platformNtfy.published.length]
    const refused = await runEither(sender.sendToUser("shop", "alice", big))
    expect(Either.isLeft(refused) && refused.left._tag === "Refused" && refused.left.code).toBe("VALIDATION_FAILED")
    expect([apns.received.length, platformNtfy.published.length]).toEqual([apnsBefore, relayBefore])
    // without an APNs device among the targets it goes
    const relayOnly = await run(sender.sendToUser("shop", "alice", { ...big, target_provider: "relay_push" }))
    expect(relayOnly.ok).toBe(true)
  })

  it("skips a provider whose credential was deleted: a no-op named NotConfigured, nothing sent", async () => {
    await run(store.putCredential("gone", iosCredential, "owner"))
    await register("gone", "dave", "phone", "ios_push", hex(7))
    await register("gone", "dave", "web", "relay_push", "dave-topic")
    await run(store.deleteCredential("gone", "ios_push"))
    const envelope = await run(sender.sendToUser("gone", "dave", message))
    expect({ ...envelope, results: byDevice(envelope.results) }).toEqual({
      ok: true,
      devices_attempted: 1,
      results: [
        { device_id: "phone", provider: "ios_push", status: 0, reason: "NotConfigured", unregistered: false },
        { device_id: "web", provider: "relay_push", status: 200, unregistered: false }
      ]
    })
    expect(apns.received.some((r) => r.token === hex(7))).toBe(false)
  })

  it("is 503 PUSH_NOT_CONFIGURED where nothing is configured and no platform relay exists", async () => {
    const bare = makePushSender({
      store,
      credentials: await run(makeCredentialCache(store, { platformRelay: Effect.succeed(false), timeToLive: 0 })),
      apns: apnsClient,
      expo: makeExpoClient({ baseUrl: expo.url }),
      relay: { publish: () => Effect.die("not called") }
    })
    const refused = await runEither(bare.sendToUser("empty", "erin", message))
    expect(Either.isLeft(refused) && refused.left._tag === "Refused" && refused.left.code).toBe("PUSH_NOT_CONFIGURED")
  })

  it("reaches a tenant relay only through the egress guard: 127.0.0.1 refused per device", async () => {
    await run(store.putCredential("tenant", { provider: "relay_push", base_url: tenantNtfy.url, auth_token: "tk_tenant" }, "owner"))
    await register("tenant", "frank", "web", "relay_push", "frank-topic")
    const refused = await run(sender.sendToUser("tenant", "frank", message))
    expect(refused).toEqual({
      ok: false,
      devices_attempted: 1,
      results: [{ device_id: "web", provider: "relay_push", status: 0, reason: "EgressRefused", unregistered: false }]
    })
    expect(tenantNtfy.published).toHaveLength(0)
    expect(platformNtfy.published.some((p) => p.topic === "frank-topic")).toBe(false)
    const allowed = await run(senderLoopbackRelay.sendToUser("tenant", "frank", message))
    expect(allowed.ok).toBe(true)
    expect(tenantNtfy.published.at(-1)).toMatchObject({ topic: "frank-topic", authorization: "Bearer tk_tenant" })
  })

  it("mints one provider token across many sends", async () => {
    for (let i = 0; i < 3; i++) await run(sender.sendToUser("shop", "alice", message))
    expect(apnsClient.tokensMinted()).toBe(1)
    expect(apns.jwtsSeen()).toBe(1)
  })
})

describe("sending to a topic", () => {
  const secret = (n: number) => Buffer.alloc(16, n)
  const topic = async (n: number, provider: "relay_push" | "ios_push" | "legacy_push", token: string) => {
    const topicId = topicIdOf(secret(n))
    await run(store.registerTopic("shop", topicId, provider, token))
    return topicId
  }
  const code = (e: Either.Either<unknown, { readonly _tag: string; readonly code?: string }>) => (Either.isLeft(e) ? e.left.code ?? e.left._tag : "sent")

  it("delivers to the topic's token and answers the envelope without a device id", async () => {
    const topicId = await topic(1, "relay_push", "topic-one")
    expect(await run(sender.sendToTopic("shop", topicId, message))).toEqual({
      ok: true,
      devices_attempted: 1,
      results: [{ provider: "relay_push", status: 200, unregistered: false }]
    })
    expect(platformNtfy.published.at(-1)).toMatchObject({ topic: "topic-one" })
  })

  it("is 400 for a malformed id, 404 for an unknown one, 503 with nothing configured", async () => {
    expect(code(await runEither(sender.sendToTopic("shop", "ABC", message)))).toBe("VALIDATION_FAILED")
    expect(code(await runEither(sender.sendToTopic("shop", "0F".repeat(32), message)))).toBe("VALIDATION_FAILED")
    expect(code(await runEither(sender.sendToTopic("shop", "ab".repeat(32), message)))).toBe("NOT_FOUND")
    // another namespace's topic is simply not found
    expect(code(await runEither(sender.sendToTopic("gone", topicIdOf(secret(1)), message)))).toBe("NOT_FOUND")
  })

  it("is 502 when the provider refused the delivery, the envelope when it failed otherwise", async () => {
    const refusedId = await topic(2, "relay_push", "refused-topic")
    platformNtfy.answer("refused-topic", 403)
    expect(code(await runEither(sender.sendToTopic("shop", refusedId, message)))).toBe("PUSH_PROVIDER_REFUSED")
    const downId = await topic(3, "ios_push", hex(9))
    apns.answer(hex(9), 503, "ServiceUnavailable")
    expect(await run(sender.sendToTopic("shop", downId, message))).toEqual({
      ok: false,
      devices_attempted: 1,
      results: [{ provider: "ios_push", status: 503, reason: "ServiceUnavailable", unregistered: false }]
    })
  })

  it("answers a gone token unregistered and keeps the topic (it ends by DELETE, replacement or expiry)", async () => {
    const topicId = await topic(4, "ios_push", hex(10))
    apns.markUnregistered(hex(10))
    expect((await run(sender.sendToTopic("shop", topicId, message))).results[0]).toMatchObject({ status: 410, unregistered: true })
    expect(Option.isSome(await run(store.topic("shop", topicId)))).toBe(true)
  })
})

describe("the function host's calls", () => {
  it("push_send_topic: TopicNotFound envelope, filters, and 0 (none) on invalid input", async () => {
    const json = JSON.stringify(message)
    expect(await run(sender.pushSendTopic("shop", "cd".repeat(32), json))).toEqual(
      Option.some({ ok: false, devices_attempted: 0, results: [{ status: 404, reason: "TopicNotFound", unregistered: true }] })
    )
    const topicId = topicIdOf(Buffer.alloc(16, 1))
    expect(await run(sender.pushSendTopic("shop", topicId, JSON.stringify({ ...message, target_provider: "ios_push" })))).toEqual(
      Option.some({ ok: true, devices_attempted: 0, results: [] })
    )
    expect(Option.getOrThrow(await run(sender.pushSendTopic("shop", topicId, json))).devices_attempted).toBe(1)
    for (const [ns, id, text] of [
      ["shop", "not-hex", json],
      ["shop", topicId, "{not json"],
      ["shop", topicId, JSON.stringify({ ...message, data: { blob: "x".repeat(17_000) } })],
      ["shop", topicId, JSON.stringify({ title: "t" })],
      ["", topicId, json]
    ] as const) {
      expect(Option.isNone(await run(sender.pushSendTopic(ns, id, text))), `${ns} ${id} ${text.slice(0, 40)}`).toBe(true)
    }
    // a refused delivery is the envelope's result, not a 0
    const refused = Option.getOrThrow(await run(sender.pushSendTopic("shop", topicIdOf(Buffer.alloc(16, 2)), json)))
    expect(refused).toMatchObject({ ok: false, devices_attempted: 1, results: [{ provider: "relay_push", status: 403 }] })
  })

  it("push_send_v2: the user's envelope", async () => {
    const envelope = Option.getOrThrow(await run(sender.pushSendV2("shop", "alice", JSON.stringify(message))))
    expect(envelope).toMatchObject({ ok: true, devices_attempted: 4 })
    expect(Option.isNone(await run(sender.pushSendV2("shop", "has space", JSON.stringify(message))))).toBe(true)
  })
})
