/**
 * Sending push over HTTP (spec §2.6, §4.6) on a real gateway, on both registry engines, against
 * the provider stand-ins (APNs over HTTP/2+TLS trusted through NODE_EXTRA_CA_CERTS, Expo, an ntfy
 * platform relay): a user with devices on all three providers gets one envelope with a result per
 * device; a stand-in 410 is `unregistered: true` and the registration gone; a provider's 5xx is
 * that device's failure; one provider token across sends; a tenant relay on 127.0.0.1 refused by
 * the egress guard, per device; the APNs payload cap and bad bodies 400 with nothing sent; no push
 * configured 503; the topic send's 200/400/404/502/503; and (on SQLite) a replaced credential and
 * a deleted one taking effect once the 30-second credential cache has passed.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ApnsStandIn, makeP8Key, startApnsStandIn } from "../support/apnsStandIn.js"
import { type ExpoStandIn, startExpoStandIn } from "../support/expoStandIn.js"
import { type Gateway, mintKey, type Reply, startGateway } from "../support/gateway.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
  expect(typeof reply.body.error).toBe("string")
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
}

const apnsToken = (n: number) => n.toString(16).padStart(2, "0").repeat(32)
const expoToken = (n: number) => `ExponentPushToken[${String(n).padStart(22, "x")}]`
const secret = (n: number) => n.toString(16).padStart(2, "0").repeat(16)
const topicIdOf = (hex: string) => createHash("sha256").update(Buffer.from(hex, "hex")).digest("hex")
const byDevice = (results: ReadonlyArray<{ device_id?: string }>) => [...results].sort((a, b) => (a.device_id ?? "").localeCompare(b.device_id ?? ""))

const firstKey = { teamId: "TEAM123456", keyId: "FIRSTKEY01", bundleId: "com.example.app", p8Key: makeP8Key() }
const secondKey = { teamId: "TEAM123456", keyId: "SECONDKEY1", bundleId: "com.example.next", p8Key: makeP8Key() }
const apnsCredential = (key: typeof firstKey) => ({
  team_id: key.teamId,
  key_id: key.keyId,
  bundle_id: key.bundleId,
  p8_key: key.p8Key,
  environment: "production"
})
const message = { title: "Hello", body: "World", channel: "chat", data: { room: 7 } }
/** The gateway's credential cache (PORTICO_PUSH_CREDENTIAL_CACHE_SECONDS), short so a replaced credential is seen soon. */
const CACHE_SECONDS = 2

describe.each(["sqlite", "rqlite"] as const)("sending push over HTTP, registry on %s", (engine) => {
  let apns: ApnsStandIn
  let expo: ExpoStandIn
  let relay: NtfyStandIn
  let gw: Gateway
  /** The same registry with no platform relay (so a namespace without credentials has no push) and loopback allowed. */
  let lenient: Gateway
  let engineServer: RqlitedServer | undefined
  let owner: string
  let runtime: string
  let cacheOnly: string
  let bareRuntime: string
  let tenantRuntime: string
  let alice: string
  let aliceSession: string
  const aliceWallet = Wallet.createRandom()

  const signIn = async (namespace: string, signer: { readonly address: string; readonly signMessage: (m: string) => Promise<string> }): Promise<string> => {
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: signer.address, namespace } })
    expect(c.status, c.text).toBe(200)
    const verified = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await signer.signMessage(c.body.message) } })
    expect(verified.status, verified.text).toBe(200)
    return verified.body.access_token
  }
  const send = (token: string, json: unknown) => gw.request("POST", "/v1/push/send", { token, json })
  const sendTopic = (token: string, json: unknown) => gw.request("POST", "/v1/push/topics/send", { token, json })
  const register = async (session: string, json: unknown) => {
    const stored = await gw.request("POST", "/v1/push/devices", { token: session, json })
    expect(stored.status, stored.text).toBe(200)
  }
  const deviceIds = async (session: string) =>
    ((await gw.request("GET", "/v1/push/devices", { token: session })).body.devices as Array<{ device_id: string }>).map((d) => d.device_id).sort()

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    apns = await startApnsStandIn()
    apns.addKey(firstKey)
    apns.addKey(secondKey)
    expo = await startExpoStandIn()
    relay = await startNtfyStandIn()
    const engineEnv: Record<string, string> = engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url }
    const pushEnv = {
      PORTICO_APNS_URL: apns.url,
      PORTICO_EXPO_URL: expo.url,
      PORTICO_PUSH_RELAY_URL: relay.url,
      NODE_EXTRA_CA_CERTS: apns.caFile,
      PORTICO_PUSH_CREDENTIAL_CACHE_SECONDS: String(CACHE_SECONDS)
    }
    gw = await startGateway({ env: { ...engineEnv, ...pushEnv } })
    owner = (await gw.cli(["namespace", "create", "shop"])).api_key
    const bareOwner = (await gw.cli(["namespace", "create", "bare"])).api_key
    const tenantOwner = (await gw.cli(["namespace", "create", "tenant"])).api_key
    const mint = (token: string, body: unknown) => mintKey(gw, token, body)
    runtime = await mint(owner, { profile: "runtime", label: "app" })
    cacheOnly = await mint(owner, { scopes: ["cache"], label: "cache" })
    bareRuntime = await mint(bareOwner, { profile: "runtime", label: "app" })
    tenantRuntime = await mint(tenantOwner, { profile: "runtime", label: "app" })
    for (const [provider, json] of [["ios_push", apnsCredential(firstKey)], ["legacy_push", { access_token: "expo-access" }]] as const) {
      const stored = await gw.request("PUT", `/v1/namespace/push-credentials/${provider}`, { token: owner, json })
      expect(stored.status, stored.text).toBe(200)
    }
    for (const [token, ns] of [[owner, "shop"], [tenantOwner, "tenant"]] as const) {
      const added = await gw.request("POST", "/v1/namespace/members", { token, json: { wallet: aliceWallet.address, role: "runtime" } })
      expect(added.status, `${ns}: ${added.text}`).toBe(200)
    }
    // the tenant relay on 127.0.0.1: only a gateway whose allow-list exempts loopback stores it
    // (the host is resolved at PUT); the gateway under test then meets it at dial time
    lenient = await startGateway({ dataDir: gw.dataDir, env: { ...engineEnv, PORTICO_EGRESS_ALLOW_CIDRS: "127.0.0.0/8" } })
    const stored = await lenient.request("PUT", "/v1/namespace/push-credentials/relay_push", {
      token: tenantOwner,
      json: { base_url: "https://127.0.0.1:9", auth_token: "tk_tenant" }
    })
    expect(stored.status, stored.text).toBe(200)

    aliceSession = await signIn("shop", aliceWallet)
    alice = (await gw.request("GET", "/v1/auth/whoami", { token: aliceSession })).body.subject
    await register(aliceSession, { device_id: "phone", provider: "ios_push", token: apnsToken(1), platform: "ios" })
    await register(aliceSession, { device_id: "android", provider: "legacy_push", token: expoToken(1), platform: "android" })
    await register(aliceSession, { device_id: "web", provider: "relay_push", token: "alice-web", platform: "web" })
  }, 120_000)
  afterAll(async () => {
    await lenient?.stop()
    await gw?.stop()
    await Promise.all([apns?.stop(), expo?.stop(), relay?.stop()])
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("delivers to a user's devices on all three providers, one result per device", async () => {
    const sent = await send(runtime, { user_id: alice, ...message })
    expect(sent.status, sent.text).toBe(200)
    expect(sent.body.ok).toBe(true)
    expect(sent.body.devices_attempted).toBe(3)
    expect(byDevice(sent.body.results)).toEqual([
      { device_id: "android", provider: "legacy_push", status: 200, unregistered: false },
      { device_id: "phone", provider: "ios_push", status: 200, unregistered: false },
      { device_id: "web", provider: "relay_push", status: 200, unregistered: false }
    ])
    const toPhone = apns.received.find((r) => r.token === apnsToken(1))
    expect(toPhone?.topic).toBe("com.example.app")
    expect(JSON.parse(toPhone!.payload)).toEqual({ room: 7, aps: { alert: { title: "Hello", body: "World" }, "thread-id": "chat" } })
    expect(expo.received.at(-1)).toMatchObject({ to: expoToken(1), authorization: "Bearer expo-access", message: { title: "Hello", body: "World" } })
    expect(relay.published.at(-1)).toMatchObject({ topic: "alice-web", title: "Hello", message: "World", tags: ["chat"] })
  })

  it("answers a token the provider reports gone as unregistered and deletes its registration", async () => {
    await register(aliceSession, { device_id: "old-phone", provider: "ios_push", token: apnsToken(2) })
    await register(aliceSession, { device_id: "old-android", provider: "legacy_push", token: expoToken(2) })
    apns.markUnregistered(apnsToken(2))
    expo.markUnregistered(expoToken(2))
    const sent = await send(runtime, { user_id: alice, ...message })
    expect(sent.status, sent.text).toBe(200)
    expect(sent.body.devices_attempted).toBe(5)
    const results = byDevice(sent.body.results)
    expect(results.filter((r) => r.device_id?.startsWith("old-"))).toEqual([
      { device_id: "old-android", provider: "legacy_push", status: 200, reason: "DeviceNotRegistered", unregistered: true },
      { device_id: "old-phone", provider: "ios_push", status: 410, reason: "Unregistered", unregistered: true }
    ])
    expect(await deviceIds(aliceSession)).toEqual(["android", "phone", "web"])
  })

  it("reports a provider's 5xx as that device's failure, never the route's", async () => {
    await register(aliceSession, { device_id: "flaky", provider: "ios_push", token: apnsToken(3) })
    apns.answer(apnsToken(3), 500, "InternalServerError")
    const sent = await send(runtime, { user_id: alice, ...message })
    expect(sent.status, sent.text).toBe(200)
    expect(sent.body.ok).toBe(true)
    expect(sent.body.results.find((r: { device_id: string }) => r.device_id === "flaky")).toEqual({
      device_id: "flaky",
      provider: "ios_push",
      status: 500,
      reason: "InternalServerError",
      unregistered: false
    })
    await gw.request("DELETE", "/v1/push/devices/flaky", { token: aliceSession })
  })

  it("reuses one provider token across sends", async () => {
    for (let i = 0; i < 3; i++) expect((await send(runtime, { user_id: alice, ...message, target_provider: "ios_push" })).status).toBe(200)
    expect(apns.jwtsSeen()).toBe(1)
  })

  it("filters by provider; a filter excluding every device is ok with nothing attempted", async () => {
    const relayOnly = await send(runtime, { user_id: alice, ...message, target_provider: "relay_push" })
    expect(relayOnly.body.results.map((r: { device_id: string }) => r.device_id)).toEqual(["web"])
    const excluded = await send(runtime, { user_id: alice, ...message, exclude_provider: ["ios_push", "legacy_push", "relay_push"] })
    expect(excluded.body).toEqual({ ok: true, devices_attempted: 0, results: [] })
    expect((await send(runtime, { user_id: "0x0000000000000000000000000000000000000001", ...message })).body).toEqual({
      ok: true,
      devices_attempted: 0,
      results: []
    })
  })

  it("refuses bad bodies and an APNs payload over 4096 bytes with 400, nothing sent", async () => {
    const before = [apns.received.length, expo.received.length, relay.published.length]
    expectError(await send(runtime, { user_id: alice, ...message, data: { blob: "x".repeat(4100) } }), 400, "VALIDATION_FAILED")
    expectError(await send(runtime, { user_id: alice, ...message, data: { blob: "x".repeat(17_000) } }), 400, "VALIDATION_FAILED")
    for (const bad of [
      { user_id: alice, title: "t" },
      { user_id: alice, ...message, providers: ["ios_push"] },
      { user_id: "", ...message },
      { user_id: alice, ...message, priority: "urgent" },
      { user_id: alice, ...message, target_provider: "fcm" },
      { user_id: alice, ...message, badge: -1 }
    ]) {
      expectError(await send(runtime, bad), 400, "VALIDATION_FAILED")
    }
    expect([apns.received.length, expo.received.length, relay.published.length]).toEqual(before)
    // without an APNs device among the targets the same message goes
    expect((await send(runtime, { user_id: alice, ...message, data: { blob: "x".repeat(4100) }, target_provider: "relay_push" })).body.ok).toBe(true)
  })

  it("needs push:write; a namespace with nothing configured, on a gateway with no platform relay, is 503", async () => {
    expect((await send(cacheOnly, { user_id: alice, ...message })).status).toBe(403)
    expect((await sendTopic(cacheOnly, { topic_id: topicIdOf(secret(1)), ...message })).status).toBe(403)
    expect((await send(aliceSession, { user_id: alice, ...message })).status).toBe(200)
    // the platform relay delivers relay_push for every namespace: bare is configured on gw
    expect((await send(bareRuntime, { user_id: alice, ...message })).body).toEqual({ ok: true, devices_attempted: 0, results: [] })
    expectError(await lenient.request("POST", "/v1/push/send", { token: bareRuntime, json: { user_id: alice, ...message } }), 503, "PUSH_NOT_CONFIGURED")
    expectError(
      await lenient.request("POST", "/v1/push/topics/send", { token: bareRuntime, json: { topic_id: topicIdOf(secret(1)), ...message } }),
      503,
      "PUSH_NOT_CONFIGURED"
    )
  })

  it("reaches a tenant relay only through the egress guard: 127.0.0.1 is that device's failure", async () => {
    const session = await signIn("tenant", aliceWallet)
    await register(session, { device_id: "web", provider: "relay_push", token: "tenant-web" })
    const before = relay.published.length
    const sent = await send(tenantRuntime, { user_id: alice, ...message })
    expect(sent.status, sent.text).toBe(200)
    expect(sent.body).toEqual({
      ok: false,
      devices_attempted: 1,
      results: [{ device_id: "web", provider: "relay_push", status: 0, reason: "EgressRefused", unregistered: false }]
    })
    // and no fallback to the platform relay
    expect(relay.published.length).toBe(before)
  })

  it("sends to a topic: 200 delivered, 400 malformed, 404 unknown, 502 refused", async () => {
    const registered = await gw.request("POST", "/v1/push/topics", { token: runtime, json: { topic_secret: secret(1), provider: "relay_push", token: "topic-one" } })
    expect(registered.status, registered.text).toBe(200)
    const topicId = registered.body.topic_id
    const sent = await sendTopic(runtime, { topic_id: topicId, ...message })
    expect(sent.status, sent.text).toBe(200)
    expect(sent.body).toEqual({ ok: true, devices_attempted: 1, results: [{ provider: "relay_push", status: 200, unregistered: false }] })
    expect(relay.published.at(-1)).toMatchObject({ topic: "topic-one", title: "Hello" })

    expectError(await sendTopic(runtime, { topic_id: "not-a-topic", ...message }), 400, "VALIDATION_FAILED")
    expectError(await sendTopic(runtime, { topic_id: topicId.toUpperCase(), ...message }), 400, "VALIDATION_FAILED")
    expectError(await sendTopic(runtime, { topic_id: topicIdOf(secret(2)), ...message }), 404, "NOT_FOUND")

    await gw.request("POST", "/v1/push/topics", { token: runtime, json: { topic_secret: secret(3), provider: "relay_push", token: "topic-refused" } })
    relay.answer("topic-refused", 403)
    expectError(await sendTopic(runtime, { topic_id: topicIdOf(secret(3)), ...message }), 502, "PUSH_PROVIDER_REFUSED")

    // a provider 5xx is the envelope's failure, not a 502
    await gw.request("POST", "/v1/push/topics", { token: runtime, json: { topic_secret: secret(4), provider: "ios_push", token: apnsToken(4) } })
    apns.answer(apnsToken(4), 503, "ServiceUnavailable")
    const down = await sendTopic(runtime, { topic_id: topicIdOf(secret(4)), ...message })
    expect(down.status, down.text).toBe(200)
    expect(down.body).toEqual({ ok: false, devices_attempted: 1, results: [{ provider: "ios_push", status: 503, reason: "ServiceUnavailable", unregistered: false }] })

    // filters that exclude the topic's provider
    expect((await sendTopic(runtime, { topic_id: topicId, ...message, exclude_provider: "relay_push" })).body).toEqual({ ok: true, devices_attempted: 0, results: [] })
  })

  it(
    "takes a replaced credential and a deleted one within the credential cache's time",
    async () => {
      expect((await send(runtime, { user_id: alice, ...message })).status).toBe(200)
      const replaced = await gw.request("PUT", "/v1/namespace/push-credentials/ios_push", { token: owner, json: apnsCredential(secondKey) })
      expect(replaced.status, replaced.text).toBe(200)
      expect((await gw.request("DELETE", "/v1/namespace/push-credentials/legacy_push", { token: owner })).status).toBe(200)
      await new Promise((resolve) => setTimeout(resolve, CACHE_SECONDS * 1000 + 500))
      const before = apns.received.length
      const sent = await send(runtime, { user_id: alice, ...message })
      expect(sent.status, sent.text).toBe(200)
      expect(apns.received.slice(before).map((r) => r.topic)).toEqual(["com.example.next"])
      expect(byDevice(sent.body.results)).toEqual([
        { device_id: "android", provider: "legacy_push", status: 0, reason: "NotConfigured", unregistered: false },
        { device_id: "phone", provider: "ios_push", status: 200, unregistered: false },
        { device_id: "web", provider: "relay_push", status: 200, unregistered: false }
      ])
      expect(sent.body.devices_attempted).toBe(2)
    },
    60_000
  )
})
