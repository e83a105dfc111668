import { describe, expect, it } from "vitest"
import { apnsPayloadFits } from "../../src/layers/push/ApnsClient.js"
import { apnsMessageOf, apnsPayloadOf, expoMessageOf, ntfyMessageOf } from "../../src/layers/push/Messages.js"

const push = { title: "T", body: "B", channel: "chat", priority: "normal" as const, badge: 3, sound: "ding", data: { room: 7, aps: { evil: 1 } }, messageId: "m-1" }

describe("push messages per provider", () => {
  it("builds the APNs payload with data beside aps, never inside it", () => {
    expect(JSON.parse(apnsPayloadOf(push))).toEqual({ room: 7, aps: { alert: { title: "T", body: "B" }, badge: 3, sound: "ding", "thread-id": "chat" } })
    expect(apnsMessageOf(push, "ab", true)).toMatchObject({ deviceToken: "ab", voip: true, priority: 5, collapseId: "m-1" })
    expect(apnsMessageOf({ title: "T", body: "B", messageId: "x".repeat(65) }, "ab")).not.toHaveProperty("collapseId")
    expect(apnsMessageOf({ title: "T", body: "B" }, "ab").priority).toBe(10)
  })
  it("sends a request's integers past 2^53 (bigints from the exact JSON reader) with every digit", () => {
    const payload = apnsPayloadOf({ title: "T", body: "B", data: { id: 12345678901234567890n, list: [1, 98765432109876543210n] } })
    expect(payload).toContain('"id":12345678901234567890')
    expect(payload).toContain("[1,98765432109876543210]")
  })
  it("measures APNs' limit in bytes", () => {
    expect(apnsPayloadFits("é".repeat(2048))).toBe(true)
    expect(apnsPayloadFits("é".repeat(2049))).toBe(false)
    expect(apnsPayloadFits("x".repeat(5000), true)).toBe(true)
  })
  it("maps Expo and ntfy fields", () => {
    expect(expoMessageOf(push, "ExpoPushToken[a]")).toEqual({
      to: "ExpoPushToken[a]", title: "T", body: "B", data: push.data, sound: "ding", badge: 3, channelId: "chat", priority: "normal"
    })
    expect(ntfyMessageOf(push)).toEqual({ title: "T", body: "B", priority: "normal", tags: ["chat"] })
    expect(ntfyMessageOf({ title: "T", body: "B", priority: "high" })).toEqual({ title: "T", body: "B", priority: "high" })
  })
})
