/**
 * The platform relay's fan-out between two real gateways (spec §4.6, §4.10), on the embedded
 * registry and on rqlite: gateway A has no platform relay, gateway B has the ntfy stand-in as its
 * `PORTICO_PUSH_RELAY_URL`; they are each other's peers and share the cluster's root secret. A
 * relay call signed for B arrives at the stand-in with only Title, Priority and Tags; unsigned,
 * forged, replayed and tampered calls are refused with nothing published; a bad topic is 400, an
 * over-long message 413, a node without a relay 503 and a relay's refusal 502.
 *
 * The test signs its calls with Coordination.Test, whose sealer root (32 bytes of 7) is the root
 * secret both gateways are given, as the peers' own calls are signed.
 */
import { Effect, ManagedRuntime } from "effect"
import { Wallet } from "ethers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Coordination } from "../../src/layers/coordination/Coordination.js"
import { relaySignedBody } from "../../src/layers/push/RelayCall.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const ROOT_SECRET = "07".repeat(32)
const coordination = ManagedRuntime.make(Coordination.Test)

/** Headers a peer sends: the coordination MAC for `audience` over the path and what RelayCall.ts signs. */
const signedFor = async (audience: string, path: string, message: string, relayed: { title?: string; priority?: string; tags?: string } = {}) => {
  const body = relaySignedBody(message, relayed)
  const mac = await coordination.runPromise(Effect.flatMap(Coordination, (c) => c.sign(audience, "POST", path, body)))
  const headers: Record<string, string> = { ...mac, "content-type": "text/plain; charset=utf-8" }
  if (relayed.title !== undefined) headers["Title"] = relayed.title
  if (relayed.priority !== undefined) headers["Priority"] = relayed.priority
  if (relayed.tags !== undefined) headers["Tags"] = relayed.tags
  return headers
}

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body?.code, reply.text).toBe(code)
  expect(Object.keys(reply.body ?? {}).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
}

afterAll(async () => {
  await coordination.dispose()
})

describe.each(["embedded", "rqlite"] as const)("the platform relay fan-out between two gateways on the %s registry", (engine) => {
  let a: Gateway
  let b: Gateway
  let ntfy: NtfyStandIn
  const servers: Array<RqlitedServer> = []

  const relayCall = (gw: Gateway, topic: string, message: string, headers: Record<string, string>) =>
    gw.request("POST", `/v1/internal/push/ntfy/${topic}`, { body: message, headers })

  beforeAll(async () => {
    ntfy = await startNtfyStandIn({ tokens: ["tk_platform"] })
    const [portA, portB] = await Promise.all([Effect.runPromise(freePort), Effect.runPromise(freePort)])
    const shared: Record<string, string> = { PORTICO_SECRET: ROOT_SECRET }
    const registries: Array<Record<string, string>> = [{}, {}]
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      // one registry for the cluster, as the two nodes of a real one share it
      const registry = await Effect.runPromise(startRqlited())
      servers.push(registry)
      registries[0] = registries[1] = { PORTICO_RQLITE_URL: registry.url }
    }
    ;[a, b] = await Promise.all([
      startGateway({
        port: portA,
        env: { ...shared, ...registries[0], PORTICO_NODE_ID: "relay-a", PORTICO_PEERS: `relay-b=http://127.0.0.1:${portB}` }
      }),
      startGateway({
        port: portB,
        env: {
          ...shared,
          ...registries[1],
          PORTICO_NODE_ID: "relay-b",
          PORTICO_PEERS: `relay-a=http://127.0.0.1:${portA}`,
          PORTICO_PUSH_RELAY_URL: ntfy.url,
          PORTICO_PUSH_RELAY_TOKEN: "tk_platform"
        }
      })
    ])
  }, 120_000)
  afterAll(async () => {
    if (process.env["DEBUG_LOGS"]) console.log(a?.logs(), b?.logs())
    await a?.stop()
    await b?.stop()
    await ntfy?.stop()
    for (const s of servers) await Effect.runPromise(s.stop)
  })

  it("publishes a signed call at the node's relay with Title, Priority and Tags, and answers the relay's id", async () => {
    const relayed = { title: "=?UTF-8?B?R3LDvMOfZQ==?=", priority: "high", tags: "warning,disk" }
    const reply = await relayCall(b, "alerts-1", "the disk is full ✓", await signedFor("relay-b", "/v1/internal/push/ntfy/alerts-1", "the disk is full ✓", relayed))
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body.id).toBeTypeOf("string")
    expect(ntfy.published.at(-1)).toEqual({
      topic: "alerts-1",
      method: "POST",
      message: "the disk is full ✓",
      title: "Grüße",
      priority: 4,
      tags: ["warning", "disk"],
      authorization: "Bearer tk_platform"
    })
  })

  it("relays no other header: aliases, Click, Authorization and the like stay behind", async () => {
    const headers = {
      ...(await signedFor("relay-b", "/v1/internal/push/ntfy/plain", "only the body")),
      "X-Title": "sneaky",
      "X-Priority": "5",
      "X-Tags": "evil",
      Click: "https://example.com/",
      Attach: "https://example.com/file",
      Authorization: "Bearer tk_someone_else"
    }
    const reply = await relayCall(b, "plain", "only the body", headers)
    expect(reply.status, reply.text).toBe(200)
    expect(ntfy.published.at(-1)).toEqual({
      topic: "plain",
      method: "POST",
      message: "only the body",
      title: undefined,
      priority: 3,
      tags: [],
      authorization: "Bearer tk_platform"
    })
  })

  it("refuses unsigned, forged, tampered and replayed calls with 403 and publishes nothing", async () => {
    const before = ntfy.published.length
    const path = "/v1/internal/push/ntfy/guarded"
    expectError(await relayCall(b, "guarded", "x", { "content-type": "text/plain" }), 403, "COORDINATION_REFUSED")
    // signed for the other node
    expectError(await relayCall(b, "guarded", "x", await signedFor("relay-a", path, "x")), 403, "COORDINATION_REFUSED")
    // signed for another topic, another message, or other relayed headers
    expectError(await relayCall(b, "guarded", "x", await signedFor("relay-b", "/v1/internal/push/ntfy/other", "x")), 403, "COORDINATION_REFUSED")
    expectError(await relayCall(b, "guarded", "y", await signedFor("relay-b", path, "x")), 403, "COORDINATION_REFUSED")
    const titled = await signedFor("relay-b", path, "x", { title: "Hello" })
    expectError(await relayCall(b, "guarded", "x", { ...titled, Title: "Changed" }), 403, "COORDINATION_REFUSED")
    expectError(await relayCall(b, "guarded", "x", { ...titled, Tags: "added" }), 403, "COORDINATION_REFUSED")
    // a genuine call is taken once
    const genuine = await signedFor("relay-b", path, "x")
    expect((await relayCall(b, "guarded", "x", genuine)).status).toBe(200)
    expectError(await relayCall(b, "guarded", "x", genuine), 403, "COORDINATION_REFUSED")
    expect(ntfy.published.length).toBe(before + 1)
  })

  it("refuses a topic that is not one segment of [-_A-Za-z0-9] of at most 64 with 400, a bad Priority too", async () => {
    const before = ntfy.published.length
    for (const topic of ["t".repeat(65), "a.b", "bad%2Ftopic", "caf%C3%A9"]) {
      const reply = await relayCall(b, topic, "x", await signedFor("relay-b", `/v1/internal/push/ntfy/${topic}`, "x"))
      expectError(reply, 400, "VALIDATION_FAILED")
    }
    expectError(await relayCall(b, "t".repeat(64), "x", await signedFor("relay-b", `/v1/internal/push/ntfy/${"t".repeat(64)}`, "x", { priority: "urgent" })), 400, "VALIDATION_FAILED")
    expect((await relayCall(b, "t".repeat(64), "x", await signedFor("relay-b", `/v1/internal/push/ntfy/${"t".repeat(64)}`, "x"))).status).toBe(200)
    expect(ntfy.published.length).toBe(before + 1)
    // two segments are another path, which no route serves
    expectError(await relayCall(b, "a/b", "x", await signedFor("relay-b", "/v1/internal/push/ntfy/a/b", "x")), 404, "ROUTE_NOT_FOUND")
  })

  it("refuses a message over 4096 bytes with 413 before reading it", async () => {
    const long = "é".repeat(2049)
    expectError(await relayCall(b, "big", long, await signedFor("relay-b", "/v1/internal/push/ntfy/big", long)), 413, "PAYLOAD_TOO_LARGE")
    const fits = "é".repeat(2048)
    expect((await relayCall(b, "big", fits, await signedFor("relay-b", "/v1/internal/push/ntfy/big", fits))).status).toBe(200)
  })

  it("answers 503 PUSH_NOT_CONFIGURED on a node without a platform relay, and 502 with the relay's reason when it refuses", async () => {
    expectError(await relayCall(a, "alerts-1", "x", await signedFor("relay-a", "/v1/internal/push/ntfy/alerts-1", "x")), 503, "PUSH_NOT_CONFIGURED")
    ntfy.answer("refused", 403)
    const refused = await relayCall(b, "refused", "x", await signedFor("relay-b", "/v1/internal/push/ntfy/refused", "x"))
    expectError(refused, 502, "PUSH_PROVIDER_REFUSED")
    expect(refused.body.error).toBe("forbidden")
  })

  it("delivers POST /v1/push/send on the node without a relay to a relay_push device through the peer's relay", async () => {
    // a namespace on A whose relay credential names no server: the platform relay (spec §2.6)
    const owner = (await a.cli(["namespace", "create", "fanout"])).api_key as string
    expect((await a.request("PUT", "/v1/namespace/push-credentials/relay_push", { token: owner, json: {} })).status).toBe(200)
    const runtime = (await a.request("POST", "/v1/namespace/keys", { token: owner, json: { profile: "runtime", label: "app" } })).body.api_key as string
    const wallet = Wallet.createRandom()
    expect((await a.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: wallet.address, role: "runtime" } })).status).toBe(200)
    const challenge = await a.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address, namespace: "fanout" } })
    const verified = await a.request("POST", "/v1/auth/verify", {
      json: { message: challenge.body.message, signature: await wallet.signMessage(challenge.body.message) }
    })
    expect(verified.status, verified.text).toBe(200)
    const session = verified.body.access_token as string
    const userId = (await a.request("GET", "/v1/auth/whoami", { token: session })).body.subject as string
    const registered = await a.request("POST", "/v1/push/devices", { token: session, json: { device_id: "web", provider: "relay_push", token: "fanout-web" } })
    expect(registered.status, registered.text).toBe(200)

    const sent = await a.request("POST", "/v1/push/send", { token: runtime, json: { user_id: userId, title: "Hello", body: "from node A", priority: "high" } })
    expect(sent.status, sent.text).toBe(200)
    expect(sent.body).toMatchObject({ ok: true, devices_attempted: 1, results: [{ device_id: "web", provider: "relay_push", status: 200, unregistered: false }] })
    expect(ntfy.published.at(-1)).toMatchObject({ topic: "fanout-web", message: "from node A", title: "Hello", priority: 4, authorization: "Bearer tk_platform" })
  })
})
