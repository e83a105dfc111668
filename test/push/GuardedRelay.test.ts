/**
 * Tenant-chosen relay hosts go through the guarded egress client: the ntfy and Expo clients over
 * fetchThroughGuard reach a loopback stand-in only when the allow-list exempts loopback, and a
 * refusal is a per-device failure naming it, with nothing sent.
 */
import { Effect, Either } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseCidrs } from "../../src/domain/AddressRanges.js"
import { makeGuardedFetch } from "../../src/layers/egress/GuardedFetch.js"
import { makeExpoClient } from "../../src/layers/push/ExpoClient.js"
import { fetchThroughGuard } from "../../src/layers/push/GuardedFetchLike.js"
import { makeNtfyClient } from "../../src/layers/push/NtfyClient.js"
import { type ExpoStandIn, startExpoStandIn } from "../support/expoStandIn.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"

let ntfy: NtfyStandIn
let expo: ExpoStandIn
const strict = fetchThroughGuard(makeGuardedFetch())
const loopbackAllowed = fetchThroughGuard(makeGuardedFetch({ allow: Either.getOrThrow(parseCidrs("127.0.0.0/8")) }))

beforeAll(async () => {
  ntfy = await startNtfyStandIn({ tokens: ["tk_tenant"] })
  expo = await startExpoStandIn()
})
afterAll(async () => {
  await ntfy.stop()
  await expo.stop()
})

describe("push through the guarded egress client", () => {
  it("refuses a relay base_url on 127.0.0.1 and sends nothing", async () => {
    const outcome = await Effect.runPromise(makeNtfyClient({ fetch: strict }).publish(ntfy.url + "/tenant-topic", { body: "x" }, "tk_tenant"))
    expect(outcome).toEqual({ outcome: "failed", status: 0, reason: "EgressRefused" })
    expect(ntfy.published).toHaveLength(0)
    const tickets = await Effect.runPromise(makeExpoClient({ fetch: strict, baseUrl: expo.url }).send(undefined, [{ to: "ExpoPushToken[a]" }]))
    expect(tickets).toEqual([{ outcome: "failed", status: 0, reason: "EgressRefused" }])
    expect(expo.requests()).toBe(0)
  })

  it("publishes with every header intact when the allow-list exempts loopback", async () => {
    const client = makeNtfyClient({ fetch: loopbackAllowed })
    const outcome = await Effect.runPromise(client.publish(ntfy.url + "/tenant-topic", { title: "Grüße", body: "x", priority: "high", tags: ["a"] }, "tk_tenant"))
    expect(outcome).toMatchObject({ outcome: "ok", status: 200 })
    expect(ntfy.published.at(-1)).toMatchObject({ topic: "tenant-topic", title: "Grüße", priority: 4, tags: ["a"], authorization: "Bearer tk_tenant" })
    expect(await Effect.runPromise(client.publish(ntfy.url + "/tenant-topic", { body: "x" }, "wrong"))).toEqual({ outcome: "failed", status: 401, reason: "unauthorized" })
    const tickets = await Effect.runPromise(makeExpoClient({ fetch: loopbackAllowed, baseUrl: expo.url }).send(undefined, [{ to: "ExpoPushToken[a]" }]))
    expect(tickets[0]).toMatchObject({ outcome: "ok", status: 200 })
  })
})
