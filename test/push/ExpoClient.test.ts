/**
 * The Expo client against the Expo push API stand-in: batches of 100, tickets read per message,
 * DeviceNotRegistered as unregistered, refusals and timeouts as failures.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeExpoClient } from "../../src/layers/push/ExpoClient.js"
import { type ExpoStandIn, startExpoStandIn } from "../support/expoStandIn.js"

let expo: ExpoStandIn
const tokenOf = (n: number) => `ExponentPushToken[device-${n}]`

beforeAll(async () => {
  expo = await startExpoStandIn({ accessToken: "expo-access" })
})
afterAll(async () => {
  await expo.stop()
})

describe("ExpoClient", () => {
  it("sends with the bearer token and reads one ticket per message, DeviceNotRegistered as unregistered", async () => {
    expo.markUnregistered(tokenOf(2))
    const client = makeExpoClient({ baseUrl: expo.url })
    const outcomes = await Effect.runPromise(
      client.send("expo-access", [1, 2, 3].map((n) => ({ to: tokenOf(n), title: "t", body: "b", sound: "default" as const, data: { n } })))
    )
    expect(outcomes[0]).toMatchObject({ outcome: "ok", status: 200, providerId: expect.any(String) })
    expect(outcomes[1]).toEqual({ outcome: "unregistered", status: 200, reason: "DeviceNotRegistered" })
    expect(outcomes[2]?.outcome).toBe("ok")
    expect(expo.received.at(-1)).toMatchObject({ to: tokenOf(3), authorization: "Bearer expo-access", message: { title: "t", body: "b", data: { n: 3 } } })
  })

  it("splits 250 messages into batches of 100 and keeps their order", async () => {
    const client = makeExpoClient({ baseUrl: expo.url })
    expo.markUnregistered(tokenOf(1_199))
    const before = expo.requests()
    const outcomes = await Effect.runPromise(client.send("expo-access", Array.from({ length: 250 }, (_, i) => ({ to: tokenOf(1_000 + i), body: "b" }))))
    expect(expo.requests() - before).toBe(3)
    expect(outcomes).toHaveLength(250)
    expect(outcomes.filter((o) => o.outcome === "unregistered")).toHaveLength(1)
    expect(outcomes[199]?.outcome).toBe("unregistered")
  })

  it("fails every message of a refused, failed or timed-out request, never throwing", async () => {
    const client = makeExpoClient({ baseUrl: expo.url, timeoutMs: 300 })
    expect(await Effect.runPromise(client.send("wrong", [{ to: tokenOf(5) }]))).toEqual([{ outcome: "failed", status: 401, reason: "UNAUTHORIZED" }])
    expo.failRequests(503)
    expect(await Effect.runPromise(client.send("expo-access", [{ to: tokenOf(5) }, { to: tokenOf(6) }]))).toEqual([
      { outcome: "failed", status: 503, reason: "INTERNAL_SERVER_ERROR" },
      { outcome: "failed", status: 503, reason: "INTERNAL_SERVER_ERROR" }
    ])
    expo.failRequests("stall")
    expect(await Effect.runPromise(client.send("expo-access", [{ to: tokenOf(5) }]))).toEqual([{ outcome: "failed", status: 0, reason: "Timeout" }])
    expo.failRequests(undefined)
  })
})
