/**
 * The APNs client against the APNs stand-in (HTTP/2 over TLS, real ES256 provider tokens).
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ApnsCredential, type ApnsMessage, makeApnsClient } from "../../src/layers/push/ApnsClient.js"
import { type ApnsStandIn, makeP8Key, startApnsStandIn } from "../support/apnsStandIn.js"

let clock = Date.now()
const now = () => clock
let skew = 0
let apns: ApnsStandIn

let keys = 0
/** Each test has its own signing key, as separate tenants would: a key's token churn is per key. */
const freshCredential = (): ApnsCredential => {
  keys += 1
  const credential: ApnsCredential = {
    teamId: "TEAM123456",
    keyId: ("KEY" + keys).padEnd(10, "0"),
    bundleId: "com.example.app",
    p8Key: makeP8Key(),
    environment: "production"
  }
  apns.addKey(credential)
  return credential
}

const token = (n: number) => n.toString(16).padStart(64, "0")
const alert = (deviceToken: string, extra: Partial<ApnsMessage> = {}): ApnsMessage => ({
  deviceToken,
  payload: JSON.stringify({ aps: { alert: { title: "hi", body: "there" } } }),
  ...extra
})

const clientFor = (extra: { requestTimeoutMs?: number; idleTimeoutMs?: number } = {}) =>
  makeApnsClient({ productionUrl: apns.url, sandboxUrl: apns.url, ca: apns.caPem, now, ...extra })

beforeAll(async () => {
  // The stand-in's clock may run ahead of the client's (`skew`), as Apple's may.
  apns = await startApnsStandIn({ now: () => clock + skew })
})
afterAll(async () => {
  await apns.stop()
})

describe("ApnsClient", () => {
  it("delivers with the topic, push type, priority and collapse id APNs expects", async () => {
    const client = clientFor()
    const credential = freshCredential()
    const outcome = await Effect.runPromise(client.send(credential, alert(token(1), { collapseId: "m-1", expiration: 0 })))
    expect(outcome.outcome).toBe("ok")
    expect(outcome.status).toBe(200)
    expect(outcome.providerId).toMatch(/^[0-9a-f-]{36}$/)
    const seen = apns.received.find((r) => r.token === token(1))
    expect(seen).toMatchObject({ topic: "com.example.app", pushType: "alert", priority: "10", collapseId: "m-1", expiration: "0" })
    await Effect.runPromise(client.close)
  })

  it("sends VoIP to <bundle>.voip with apns-push-type voip", async () => {
    const client = clientFor()
    const credential = freshCredential()
    const outcome = await Effect.runPromise(client.send(credential, alert(token(2), { voip: true })))
    expect(outcome.outcome).toBe("ok")
    expect(apns.received.find((r) => r.token === token(2))).toMatchObject({ topic: "com.example.app.voip", pushType: "voip" })
    await Effect.runPromise(client.close)
  })

  it("completes 10,000 sends over one connection with one provider token", async () => {
    const client = clientFor()
    const credential = freshCredential()
    const before = { connections: apns.connections(), jwts: apns.jwtsSeen() }
    const messages = Array.from({ length: 10_000 }, (_, i) => alert(token(100_000 + i)))
    const outcomes = await Effect.runPromise(client.sendAll(credential, messages))
    expect(outcomes.filter((o) => o.outcome === "ok")).toHaveLength(10_000)
    expect(client.connectionsOpened()).toBe(1)
    expect(apns.connections() - before.connections).toBe(1)
    expect(client.tokensMinted()).toBe(1)
    expect(apns.jwtsSeen() - before.jwts).toBe(1)
    await Effect.runPromise(client.close)
  }, 60_000)

  it("reuses the provider token for its lifetime and mints a new one after it, never churning", async () => {
    const client = clientFor()
    const credential = freshCredential()
    await Effect.runPromise(client.send(credential, alert(token(3))))
    clock += 19 * 60_000
    await Effect.runPromise(client.send(credential, alert(token(3))))
    clock += 20 * 60_000 // 39 minutes: still inside the 40-minute window
    expect((await Effect.runPromise(client.send(credential, alert(token(3))))).outcome).toBe("ok")
    expect(client.tokensMinted()).toBe(1)
    clock += 2 * 60_000 // 41 minutes: past the window, well before APNs' hour
    expect((await Effect.runPromise(client.send(credential, alert(token(3))))).outcome).toBe("ok")
    expect(client.tokensMinted()).toBe(2)
    await Effect.runPromise(client.close)
  })

  it("reports 410 Unregistered and 400 BadDeviceToken as unregistered", async () => {
    apns.markUnregistered(token(4))
    apns.markBad(token(5))
    const client = clientFor()
    const credential = freshCredential()
    const [gone, bad, fine] = await Effect.runPromise(client.sendAll(credential, [alert(token(4)), alert(token(5)), alert(token(6))]))
    expect(gone).toEqual({ outcome: "unregistered", status: 410, reason: "Unregistered" })
    expect(bad).toEqual({ outcome: "unregistered", status: 400, reason: "BadDeviceToken" })
    expect(fine?.outcome).toBe("ok")
    // A token that is not hex never leaves the process.
    expect(await Effect.runPromise(client.send(credential, alert("not-hex/../x")))).toEqual({ outcome: "unregistered", status: 400, reason: "BadDeviceToken" })
    await Effect.runPromise(client.close)
  })

  it("the stand-in answers token churn with 429 TooManyProviderTokenUpdates", async () => {
    const credential = freshCredential()
    const first = clientFor()
    const second = clientFor() // a second process with its own token for the same key
    expect((await Effect.runPromise(first.send(credential, alert(token(20))))).outcome).toBe("ok")
    expect(await Effect.runPromise(second.send(credential, alert(token(20))))).toEqual({ outcome: "failed", status: 429, reason: "TooManyProviderTokenUpdates" })
    await Effect.runPromise(first.close)
    await Effect.runPromise(second.close)
  })

  it("reports a key APNs does not know as a failure with InvalidProviderToken", async () => {
    const client = clientFor()
    const credential = freshCredential()
    const unknown = { ...credential, keyId: "OTHER12345", p8Key: makeP8Key() }
    expect(await Effect.runPromise(client.send(unknown, alert(token(7))))).toEqual({ outcome: "failed", status: 403, reason: "InvalidProviderToken" })
    // A key that is not P-256 cannot sign at all: a failure, nothing sent.
    const broken = { ...credential, keyId: "BROKEN1234", p8Key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }
    expect(await Effect.runPromise(client.send(broken, alert(token(7))))).toEqual({ outcome: "failed", status: 0, reason: "InvalidProviderKey" })
    await Effect.runPromise(client.close)
  })

  it("a stalled device times out alone; a 5xx is a per-device failure", async () => {
    apns.stall(token(8))
    apns.answer(token(9), 503, "ServiceUnavailable")
    const client = clientFor({ requestTimeoutMs: 300 })
    const credential = freshCredential()
    const started = Date.now()
    const outcomes = await Effect.runPromise(client.sendAll(credential, [alert(token(8)), alert(token(9)), alert(token(10))]))
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(outcomes).toEqual([
      { outcome: "failed", status: 0, reason: "Timeout" },
      { outcome: "failed", status: 503, reason: "ServiceUnavailable" },
      expect.objectContaining({ outcome: "ok", status: 200 })
    ])
    await Effect.runPromise(client.close)
  })

  it("refuses a payload over 4096 bytes before sending", async () => {
    const client = clientFor()
    const credential = freshCredential()
    const big = JSON.stringify({ aps: { alert: "x".repeat(4100) } })
    const before = apns.received.length
    expect(await Effect.runPromise(client.send(credential, alert(token(11), { payload: big })))).toEqual({ outcome: "failed", status: 413, reason: "PayloadTooLarge" })
    expect(apns.received.length).toBe(before)
    expect(client.connectionsOpened()).toBe(0)
    await Effect.runPromise(client.close)
  })

  it("opens a new connection after the server drops the old one", async () => {
    const client = clientFor()
    const credential = freshCredential()
    expect((await Effect.runPromise(client.send(credential, alert(token(12))))).outcome).toBe("ok")
    await apns.dropConnections()
    expect((await Effect.runPromise(client.send(credential, alert(token(13))))).outcome).toBe("ok")
    expect(client.connectionsOpened()).toBe(2)
    await Effect.runPromise(client.close)
  })

  it("closes a connection that has been idle past idleTimeoutMs", async () => {
    const client = clientFor({ idleTimeoutMs: 200 })
    const credential = freshCredential()
    const open = apns.openConnections()
    expect((await Effect.runPromise(client.send(credential, alert(token(14))))).outcome).toBe("ok")
    expect(apns.openConnections()).toBe(open + 1)
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect(apns.openConnections()).toBe(open)
    expect((await Effect.runPromise(client.send(credential, alert(token(15))))).outcome).toBe("ok")
    expect(client.connectionsOpened()).toBe(2)
    await Effect.runPromise(client.close)
  })

  it("a provider that does not answer at all is a failure per device", async () => {
    const client = makeApnsClient({ productionUrl: "https://127.0.0.1:1", ca: apns.caPem, now })
    const credential = freshCredential()
    expect(await Effect.runPromise(client.sendAll(credential, [alert(token(16)), alert(token(17))]))).toEqual([
      { outcome: "failed", status: 0, reason: "ConnectionFailed" },
      { outcome: "failed", status: 0, reason: "ConnectionFailed" }
    ])
    await Effect.runPromise(client.close)
  })

  it("streams refused by a connection going away are sent again on a new connection", async () => {
    const client = clientFor()
    const credential = freshCredential()
    // More than the 500 streams in flight, so a stream sent again is not refused again.
    apns.goAwayAfter(1_200)
    try {
      const outcomes = await Effect.runPromise(client.sendAll(credential, Array.from({ length: 4_000 }, (_, i) => alert(token(200_000 + i)))))
      const notOk = outcomes.filter((o) => o.outcome !== "ok")
      expect(notOk).toEqual([])
      expect(client.connectionsOpened()).toBeGreaterThan(1)
      expect(client.tokensMinted()).toBe(1)
    } finally {
      apns.goAwayAfter(undefined)
      await Effect.runPromise(client.close)
    }
  })

  it("an ExpiredProviderToken answer fails that device and, for a token past 20 minutes, mints a new one", async () => {
    const client = clientFor()
    const credential = freshCredential()
    expect((await Effect.runPromise(client.send(credential, alert(token(30))))).outcome).toBe("ok")
    clock += 30 * 60_000
    skew = 31 * 60_000 // APNs sees the token 61 minutes old
    try {
      expect(await Effect.runPromise(client.send(credential, alert(token(31))))).toEqual({ outcome: "failed", status: 403, reason: "ExpiredProviderToken" })
      expect((await Effect.runPromise(client.send(credential, alert(token(32))))).outcome).toBe("ok")
      expect(client.tokensMinted()).toBe(2)
    } finally {
      skew = 0
      await Effect.runPromise(client.close)
    }
  })
})
