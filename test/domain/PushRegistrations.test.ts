/**
 * Push device and topic registrations (spec §2.6, §3.3, §8): field checks, the topic id, the
 * expiry rule and token redaction.
 */
import { describe, expect, it } from "@effect/vitest"
import * as crypto from "node:crypto"
import {
  isTopicId,
  parseDeviceRegistration,
  parseTopicRegistration,
  providerToken,
  redactToken,
  topicExpiry
} from "../../src/domain/PushRegistrations.js"

const apnsToken = "a1".repeat(32)
const fieldOf = (result: { ok: boolean; error?: { field: string } }) => (result.ok ? "ok" : result.error?.field)

describe("PushRegistrations", () => {
  it("device registration: the fields of 2.6, the APNs token lowercased", () => {
    const parsed = parseDeviceRegistration({ device_id: "phone-1", provider: "ios_push", token: apnsToken.toUpperCase(), platform: "ios", app_version: "1.2.3" })
    if (!parsed.ok) return expect.fail(parsed.error.reason)
    expect(parsed.value).toEqual({ device_id: "phone-1", provider: "ios_push", token: apnsToken, platform: "ios", app_version: "1.2.3" })
    expect(parseDeviceRegistration({ device_id: "d", provider: "relay_push", token: "my-topic_1" }).ok).toBe(true)
    expect(parseDeviceRegistration({ device_id: "d", provider: "relay_push", token: "https://ntfy.example.com/up/abc_DEF-1" }).ok).toBe(true)
    expect(parseDeviceRegistration({ device_id: "d", provider: "legacy_push", token: "ExponentPushToken[xxxxxxxxxxxxxxxxxxxxxx]" }).ok).toBe(true)
    for (const [body, field] of <Array<[Record<string, unknown>, string]>>[
      [{ provider: "ios_push", token: apnsToken }, "device_id"],
      [{ device_id: "x".repeat(129), provider: "ios_push", token: apnsToken }, "device_id"],
      [{ device_id: "d", provider: "ios_voip_push", token: apnsToken }, "provider"],
      [{ device_id: "d", provider: "fax", token: apnsToken }, "provider"],
      [{ device_id: "d", provider: "ios_push" }, "token"],
      [{ device_id: "d", provider: "ios_push", token: "not-hex-at-all-not-hex-at-all-not-hex" }, "token"],
      [{ device_id: "d", provider: "ios_push", token: "abc" }, "token"],
      [{ device_id: "d", provider: "ios_push", token: "a".repeat(201) }, "token"],
      [{ device_id: "d", provider: "relay_push", token: "a/b" }, "token"],
      [{ device_id: "d", provider: "relay_push", token: "t".repeat(65) }, "token"],
      [{ device_id: "d", provider: "relay_push", token: "https://ntfy.example.com/up/a.b" }, "token"],
      [{ device_id: "d", provider: "relay_push", token: "https://u:p@ntfy.example.com/abc" }, "token"],
      [{ device_id: "d", provider: "legacy_push", token: "x".repeat(513) }, "token"],
      [{ device_id: "d", provider: "legacy_push", token: "é".repeat(257) }, "token"],
      [{ device_id: "d", provider: "legacy_push", token: "tab\there" }, "token"],
      [{ device_id: "d", provider: "legacy_push", token: "t", platform: "symbian" }, "platform"],
      [{ device_id: "d", provider: "legacy_push", token: "t", app_version: 3 }, "app_version"],
      [{ device_id: "d", provider: "legacy_push", token: "t", subject: "someone-else" }, "subject"]
    ]) {
      expect(fieldOf(parseDeviceRegistration(body)), JSON.stringify(body).slice(0, 80)).toBe(field)
    }
  })

  it("a token of 512 bytes is accepted, 513 refused", () => {
    expect(providerToken("legacy_push", "x".repeat(512)).ok).toBe(true)
    expect(providerToken("legacy_push", "x".repeat(513)).ok).toBe(false)
  })

  it("the topic id is lowercase hex SHA-256 of the decoded secret bytes", () => {
    const secret = "00112233445566778899AABBCCDDEEFF"
    const parsed = parseTopicRegistration({ topic_secret: secret, provider: "relay_push", token: "my-topic" })
    if (!parsed.ok) return expect.fail(parsed.error.reason)
    const expected = crypto.createHash("sha256").update(Buffer.from(secret, "hex")).digest("hex")
    expect(parsed.value).toEqual({ topicId: expected, provider: "relay_push", token: "my-topic" })
    expect(isTopicId(parsed.value.topicId)).toBe(true)
    // same bytes whatever the case of the hex
    const lower = parseTopicRegistration({ topic_secret: secret.toLowerCase(), provider: "relay_push", token: "my-topic" })
    expect(lower.ok && lower.value.topicId).toBe(expected)
    expect(parseTopicRegistration({ topic_secret: "ab".repeat(64), provider: "ios_voip_push", token: apnsToken }).ok).toBe(true)
  })

  it("refuses a topic secret not hex or outside 32-128 characters, unknown providers and bad tokens", () => {
    for (const [body, field] of <Array<[Record<string, unknown>, string]>>[
      [{ topic_secret: "ab".repeat(15), provider: "relay_push", token: "t" }, "topic_secret"],
      [{ topic_secret: "ab".repeat(65), provider: "relay_push", token: "t" }, "topic_secret"],
      [{ topic_secret: "a".repeat(33), provider: "relay_push", token: "t" }, "topic_secret"],
      [{ topic_secret: "zz".repeat(16), provider: "relay_push", token: "t" }, "topic_secret"],
      [{ topic_secret: 12, provider: "relay_push", token: "t" }, "topic_secret"],
      [{ topic_secret: "ab".repeat(16), provider: "sms", token: "t" }, "provider"],
      [{ topic_secret: "ab".repeat(16), provider: "relay_push" }, "token"],
      [{ topic_secret: "ab".repeat(16), provider: "relay_push", token: "x".repeat(513) }, "token"],
      [{ topic_secret: "ab".repeat(16), provider: "relay_push", token: "a/b" }, "token"]
    ]) {
      expect(fieldOf(parseTopicRegistration(body)), JSON.stringify(body).slice(0, 60)).toBe(field)
    }
    expect(isTopicId("A".repeat(64))).toBe(false)
    expect(isTopicId("a".repeat(63))).toBe(false)
    expect(isTopicId("g".repeat(64))).toBe(false)
  })

  it("topic expiry: now + 7 days rounded up to a whole UTC day (7 to 8 days); a short test lifetime is not rounded", () => {
    const day = 86_400
    const midnight = Date.UTC(2026, 10, 26) / 1000
    expect(topicExpiry(midnight)).toBe(midnight + 7 * day)
    expect(topicExpiry(midnight + 1)).toBe(midnight + 8 * day)
    expect(topicExpiry(midnight + day - 1)).toBe(midnight + 8 * day)
    for (const now of [midnight + 5, midnight + 43_210, midnight + day - 1]) {
      const lifetime = topicExpiry(now) - now
      expect(lifetime).toBeGreaterThanOrEqual(7 * day)
      expect(lifetime).toBeLessThanOrEqual(8 * day)
      expect(topicExpiry(now) % day).toBe(0)
    }
    expect(topicExpiry(midnight + 5, 2)).toBe(midnight + 7)
  })

  it("a listed token shows only its last 6 characters; a short one nothing", () => {
    expect(redactToken(apnsToken)).toBe("…" + apnsToken.slice(-6))
    expect(redactToken("short")).toBe("…")
  })
})
