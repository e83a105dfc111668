import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import {
  envelopeOf,
  isSendTopicId,
  MAX_PUSH_MESSAGE_BYTES,
  messageOf,
  providerRefused,
  providerSelected,
  SendEnvelope,
  SendMessage,
  topicNotFoundEnvelope,
  TopicSendBody,
  UserSendBody
} from "../../src/domain/PushSend.js"

const decode = <A, I>(schema: Schema.Schema<A, I>) => (input: unknown) => Schema.decodeUnknownEither(schema)(input)

describe("send requests", () => {
  it("takes spec 2.6's message fields and refuses anything else", () => {
    const full = {
      user_id: "0xabc",
      title: "Hi",
      body: "there",
      channel: "chat.room-1",
      priority: "normal",
      badge: 3,
      sound: "default",
      data: { room: 1, nested: { a: [1] } },
      message_id: "m-1",
      target_provider: ["ios_push", "relay_push"],
      exclude_provider: "legacy_push"
    }
    const decoded = decode(UserSendBody)(full)
    expect(Either.isRight(decoded)).toBe(true)
    expect(messageOf(Either.getOrThrow(decoded))).not.toHaveProperty("user_id")
    expect(Either.isRight(decode(UserSendBody)({ user_id: "u", title: "", body: "" }))).toBe(true)

    for (const bad of [
      { user_id: "u", title: "t" },
      { user_id: "u", title: "t", body: "b", providers: ["ios_push"] },
      { user_id: "", title: "t", body: "b" },
      { user_id: "has space", title: "t", body: "b" },
      { user_id: "u", title: "t", body: "b", priority: "urgent" },
      { user_id: "u", title: "t", body: "b", badge: -1 },
      { user_id: "u", title: "t", body: "b", badge: 1.5 },
      { user_id: "u", title: "t", body: "b", channel: "a,b" },
      { user_id: "u", title: "t", body: "b", data: [1] },
      { user_id: "u", title: "t", body: "b", target_provider: "fcm" },
      { user_id: "u", title: 1, body: "b" }
    ]) {
      expect(Either.isLeft(decode(UserSendBody)(bad)), JSON.stringify(bad)).toBe(true)
    }
  })

  it("caps the whole message at 16 KiB as JSON", () => {
    const data = { blob: "x".repeat(MAX_PUSH_MESSAGE_BYTES) }
    expect(Either.isLeft(decode(SendMessage)({ title: "t", body: "b", data }))).toBe(true)
    expect(Either.isLeft(decode(TopicSendBody)({ topic_id: "a".repeat(64), title: "t", body: "b", data }))).toBe(true)
    expect(Either.isRight(decode(SendMessage)({ title: "t", body: "b", data: { blob: "x".repeat(8000) } }))).toBe(true)
  })

  it("measures a message holding bigints (integers past 2^53 as the exact JSON reader gives them) by their digits", () => {
    const big = 10n ** 30n
    expect(Either.isRight(decode(SendMessage)({ title: "t", body: "b", data: { n: big } }))).toBe(true)
    // {"title":"t","body":"b","data":{"n":<31 digits>,"pad":"x…"}} exactly at the cap, then one byte over
    const fixed = JSON.stringify({ title: "t", body: "b", data: { n: 0, pad: "" } }).length + 30
    const atCap = { title: "t", body: "b", data: { n: big, pad: "x".repeat(MAX_PUSH_MESSAGE_BYTES - fixed) } }
    expect(Either.isRight(decode(SendMessage)(atCap))).toBe(true)
    expect(Either.isLeft(decode(SendMessage)({ ...atCap, data: { ...atCap.data, pad: atCap.data.pad + "x" } }))).toBe(true)
  })
  it("names a topic by 64 lowercase hex characters", () => {
    expect(isSendTopicId("0f".repeat(32))).toBe(true)
    expect(isSendTopicId("0F".repeat(32))).toBe(false)
    expect(isSendTopicId("0f".repeat(31))).toBe(false)
    expect(isSendTopicId("zz".repeat(32))).toBe(false)
    expect(Either.isRight(decode(TopicSendBody)({ topic_id: "0f".repeat(32), title: "t", body: "b" }))).toBe(true)
    expect(Either.isLeft(decode(TopicSendBody)({ topic_id: "0F".repeat(32), title: "t", body: "b" }))).toBe(true)
  })

  it("selects providers by target and exclusion", () => {
    expect(providerSelected({}, "ios_push")).toBe(true)
    expect(providerSelected({ target_provider: "relay_push" }, "ios_push")).toBe(false)
    expect(providerSelected({ target_provider: ["relay_push", "ios_push"] }, "ios_push")).toBe(true)
    expect(providerSelected({ exclude_provider: "ios_push" }, "ios_push")).toBe(false)
    expect(providerSelected({ target_provider: "ios_push", exclude_provider: ["ios_push"] }, "ios_push")).toBe(false)
  })
})

describe("the envelope", () => {
  it("is ok when at least one device was delivered; counts only attempted devices", () => {
    const envelope = envelopeOf([
      { deviceId: "a", provider: "ios_push", outcome: "ok", status: 200 },
      { deviceId: "b", provider: "ios_push", outcome: "unregistered", status: 410, reason: "Unregistered" },
      { deviceId: "c", provider: "legacy_push", outcome: "skipped", status: 0, reason: "NotConfigured" }
    ])
    expect(envelope).toEqual({
      ok: true,
      devices_attempted: 2,
      results: [
        { device_id: "a", provider: "ios_push", status: 200, unregistered: false },
        { device_id: "b", provider: "ios_push", status: 410, reason: "Unregistered", unregistered: true },
        { device_id: "c", provider: "legacy_push", status: 0, reason: "NotConfigured", unregistered: false }
      ]
    })
  })

  it("is its schema's encoding as JSON text already (the send route answers JSON.stringify of it)", () => {
    const encode = Schema.encodeSync(SendEnvelope)
    const decodeText = Schema.decodeUnknownSync(Schema.parseJson(SendEnvelope))
    const envelopes = [
      envelopeOf([
        { deviceId: "a", provider: "ios_push", outcome: "ok", status: 200 },
        { deviceId: "b", provider: "ios_voip_push", outcome: "unregistered", status: 410, reason: "Unregistered" },
        { deviceId: "c", provider: "legacy_push", outcome: "skipped", status: 0, reason: "NotConfigured" },
        { deviceId: "d\u2028\"", provider: "relay_push", outcome: "failed", status: 0, reason: "Timeout" },
        { provider: "relay_push", outcome: "failed", status: 502, reason: undefined }
      ]),
      envelopeOf([]),
      topicNotFoundEnvelope
    ]
    for (const envelope of envelopes) {
      const text = JSON.stringify(envelope)
      expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(encode(envelope))))
      expect(decodeText(text)).toEqual(envelope)
      // members left undefined are absent from the text, as the schema's encode leaves them out
      expect(text).not.toContain("undefined")
    }
  })

  it("is not ok when every attempted device failed; ok with nothing attempted", () => {
    expect(envelopeOf([{ provider: "relay_push", outcome: "failed", status: 0, reason: "Timeout" }]).ok).toBe(false)
    expect(envelopeOf([])).toEqual({ ok: true, devices_attempted: 0, results: [] })
    expect(envelopeOf([{ provider: "ios_push", outcome: "skipped", status: 0, reason: "NotConfigured" }])).toMatchObject({ ok: true, devices_attempted: 0 })
    expect(topicNotFoundEnvelope).toEqual({ ok: false, devices_attempted: 0, results: [{ status: 404, reason: "TopicNotFound", unregistered: true }] })
  })

  it("reads a provider's 4xx or ticket error as a refusal, never a timeout or a 5xx", () => {
    const failed = (status: number) => ({ provider: "ios_push" as const, outcome: "failed" as const, status, reason: "x" })
    expect(providerRefused(failed(403))).toBe(true)
    expect(providerRefused(failed(429))).toBe(true)
    expect(providerRefused(failed(200))).toBe(true)
    expect(providerRefused(failed(0))).toBe(false)
    expect(providerRefused(failed(503))).toBe(false)
    // a 200 we could not read may have delivered: the envelope reports it, no 502
    expect(providerRefused({ provider: "legacy_push", outcome: "failed", status: 200, reason: "UnreadableAnswer" })).toBe(false)
    expect(providerRefused({ provider: "ios_push", outcome: "unregistered", status: 410 })).toBe(false)
  })
})
