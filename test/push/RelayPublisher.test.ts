/**
 * The relay publisher (spec §4.6 delivery rules) against the ntfy-compatible stand-in: a tenant's
 * own base_url only through the egress guard, endpoint URLs held to the relay's scheme and host,
 * bare topics on the platform relay, no relay at all, and the fan-out to a peer whose receiving
 * end (RelayCallReceiver) runs in this process behind a node:http listener that verifies the real
 * coordination MAC as PeerGate does (src/api/gate/GatesLive.ts) before handing the call on.
 */
import { Effect, Either, Exit, Layer, ManagedRuntime } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseCidrs } from "../../src/domain/AddressRanges.js"
import { defaultMembershipSettings } from "../../src/layers/config/MembershipSettings.js"
import { Coordination } from "../../src/layers/coordination/Coordination.js"
import type { StoreError } from "../../src/layers/registry/RegistryStore.js"
import { makeGuardedFetch } from "../../src/layers/egress/GuardedFetch.js"
import { fetchThroughGuard } from "../../src/layers/push/GuardedFetchLike.js"
import { makePlatformRelay, PlatformRelay } from "../../src/layers/push/PlatformRelay.js"
import { relayedHeadersOf, relaySignedBody } from "../../src/layers/push/RelayCall.js"
import { RelayCallReceiver } from "../../src/layers/push/RelayCallReceiver.js"
import { makeRelayPublisher, platformRelayReachable, relayPeersOf } from "../../src/layers/push/RelayPublisherLive.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"

let tenantRelay: NtfyStandIn
let platformRelay: NtfyStandIn
let peerRelay: NtfyStandIn
let peer: http.Server
let peerUrl: string
let deadUrl: string
let runtime: ManagedRuntime.ManagedRuntime<Coordination | RelayCallReceiver, StoreError>

const strictGuard = fetchThroughGuard(makeGuardedFetch())
const loopbackGuard = fetchThroughGuard(makeGuardedFetch({ allow: Either.getOrThrow(parseCidrs("127.0.0.0/8")) }))
const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect)
const noPeers = { peers: Effect.succeed([]), sign: () => Effect.succeed({}) }
/** The coordination MAC of the test node (Coordination.Test), which the in-process peer verifies. */
const sign = (audience: string, method: string, path: string, body: string) =>
  Effect.promise(() => runtime.runPromise(Effect.flatMap(Coordination, (c) => c.sign(audience, method, path, body))))

const listen = (server: http.Server) =>
  new Promise<string>((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)))

beforeAll(async () => {
  tenantRelay = await startNtfyStandIn({ tokens: ["tk_tenant"] })
  platformRelay = await startNtfyStandIn({ tokens: ["tk_platform"] })
  peerRelay = await startNtfyStandIn()
  // the peer: the relay route's receiving end over its own platform relay, with the test node's
  // coordination (the same root secret signs and verifies; the audience is "test-node")
  runtime = ManagedRuntime.make(
    RelayCallReceiver.Live.pipe(
      Layer.provideMerge(Coordination.Test),
      Layer.provide(Layer.succeed(PlatformRelay, makePlatformRelay({ url: peerRelay.url, token: undefined })))
    )
  )
  const receiver = await runtime.runPromise(RelayCallReceiver)
  const coordination = await runtime.runPromise(Coordination)
  peer = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : v]))
      const body = Buffer.concat(chunks).toString("utf8")
      const relayed = relayedHeadersOf(headers)
      const call = { topic: (req.url ?? "").split("/").pop() ?? "", body, relayed }
      const gated = Effect.flatMap(
        coordination.verify("POST", req.url ?? "/", relaySignedBody(body, relayed), headers, req.socket.remoteAddress, false),
        (refused) => (refused === undefined ? receiver.receive(call) : Effect.fail({ status: 403, reason: refused, code: "COORDINATION_REFUSED" }))
      )
      void Effect.runPromiseExit(gated).then((exit) => {
        const [status, answer] = Exit.isSuccess(exit)
          ? [200, exit.value]
          : exit.cause._tag === "Fail"
            ? [exit.cause.error.status, { error: exit.cause.error.reason, code: exit.cause.error.code }]
            : [500, { error: "defect" }]
        res.writeHead(status, { "content-type": "application/json" })
        res.end(JSON.stringify(answer))
      })
    })
  })
  peerUrl = await listen(peer)
  const dead = http.createServer()
  deadUrl = await listen(dead)
  await new Promise<void>((resolve) => dead.close(() => resolve()))
})
afterAll(async () => {
  await Promise.all([tenantRelay.stop(), platformRelay.stop(), peerRelay.stop()])
  peer.closeAllConnections()
  await new Promise<void>((resolve) => peer.close(() => resolve()))
  await runtime.dispose()
})

describe("a namespace's own relay (base_url)", () => {
  const tenant = () => ({ baseUrl: tenantRelay.url, authToken: "tk_tenant" })

  it("is published to through the guard, with the tenant's token, and never fanned out", async () => {
    const publisher = makeRelayPublisher({
      platform: makePlatformRelay({ url: platformRelay.url, token: "tk_platform" }),
      guarded: loopbackGuard,
      peers: Effect.succeed([{ nodeId: "test-node", baseUrl: peerUrl }]),
      sign
    })
    const before = { platform: platformRelay.published.length, peer: peerRelay.published.length }
    const outcome = await run(publisher.publish("acme", tenant(), "tenant-topic", { body: "hi", title: "T", priority: "high", tags: ["a"] }))
    expect(outcome).toMatchObject({ outcome: "ok", status: 200 })
    expect(tenantRelay.published.at(-1)).toMatchObject({ topic: "tenant-topic", message: "hi", title: "T", priority: 4, tags: ["a"], authorization: "Bearer tk_tenant" })
    expect(platformRelay.published.length).toBe(before.platform)
    expect(peerRelay.published.length).toBe(before.peer)
  })

  it("on a loopback address is refused by the guard without the allow-list, and nothing is sent", async () => {
    const publisher = makeRelayPublisher({ platform: makePlatformRelay({ url: platformRelay.url, token: "tk_platform" }), guarded: strictGuard, ...noPeers })
    const before = tenantRelay.published.length
    expect(await run(publisher.publish("acme", tenant(), "tenant-topic", { body: "hi" }))).toEqual({ outcome: "failed", status: 0, reason: "EgressRefused" })
    expect(tenantRelay.published.length).toBe(before)
  })

  it("posts an endpoint URL verbatim when its scheme and host are the relay's, and refuses another host", async () => {
    const publisher = makeRelayPublisher({ platform: makePlatformRelay({ url: undefined, token: undefined }), guarded: loopbackGuard, ...noPeers })
    expect(await run(publisher.publish("acme", tenant(), tenantRelay.url + "/ep-topic", { body: "via endpoint" }))).toMatchObject({ outcome: "ok" })
    expect(tenantRelay.published.at(-1)).toMatchObject({ topic: "ep-topic", message: "via endpoint" })
    const before = tenantRelay.published.length
    const otherHost = tenantRelay.url.replace("127.0.0.1", "localhost") + "/ep-topic"
    expect(await run(publisher.publish("acme", tenant(), otherHost, { body: "x" }))).toEqual({ outcome: "failed", status: 0, reason: "RelayHostMismatch" })
    expect(await run(publisher.publish("acme", tenant(), "https://evil.example/ep-topic", { body: "x" }))).toEqual({ outcome: "failed", status: 0, reason: "RelayHostMismatch" })
    expect(await run(publisher.publish("acme", tenant(), "not a topic", { body: "x" }))).toEqual({ outcome: "failed", status: 0, reason: "BadRelayToken" })
    expect(tenantRelay.published.length).toBe(before)
  })
})

describe("the platform relay", () => {
  it("publishes a bare topic directly on a single node, with the operator's token and not through the guard", async () => {
    const publisher = makeRelayPublisher({ platform: makePlatformRelay({ url: platformRelay.url, token: "tk_platform" }), guarded: strictGuard, ...noPeers })
    const outcome = await run(publisher.publish("acme", undefined, "bare-topic", { body: "plain" }))
    expect(outcome).toMatchObject({ outcome: "ok", status: 200 })
    expect(outcome.providerId).toBeTypeOf("string")
    expect(platformRelay.published.at(-1)).toMatchObject({ topic: "bare-topic", message: "plain", authorization: "Bearer tk_platform" })
    // an endpoint URL on the platform relay's host is its topic; another host is refused
    expect(await run(publisher.publish("acme", undefined, platformRelay.url + "/ep-2", { body: "e" }))).toMatchObject({ outcome: "ok" })
    expect(platformRelay.published.at(-1)).toMatchObject({ topic: "ep-2" })
    expect(await run(publisher.publish("acme", undefined, "https://ntfy.sh/ep-2", { body: "e" }))).toEqual({ outcome: "failed", status: 0, reason: "RelayHostMismatch" })
  })

  it("is RelayNotConfigured when neither the namespace nor this node has a relay, and no peer either", async () => {
    const publisher = makeRelayPublisher({ platform: makePlatformRelay({ url: undefined, token: undefined }), guarded: loopbackGuard, ...noPeers })
    expect(await run(publisher.publish("acme", undefined, "bare-topic", { body: "x" }))).toEqual({ outcome: "failed", status: 0, reason: "RelayNotConfigured" })
    // a tenant relay credential without a base_url means the platform relay (spec §2.6)
    expect(await run(publisher.publish("acme", { baseUrl: undefined, authToken: "t" }, "bare-topic", { body: "x" }))).toEqual({
      outcome: "failed",
      status: 0,
      reason: "RelayNotConfigured"
    })
  })
})

describe("the fan-out over the peers", () => {
  it("reaches a peer's relay through its relay route when this node has none, with the three headers", async () => {
    const publisher = makeRelayPublisher({
      platform: makePlatformRelay({ url: undefined, token: undefined }),
      guarded: strictGuard,
      peers: Effect.succeed([{ nodeId: "test-node", baseUrl: peerUrl }]),
      sign
    })
    const outcome = await run(publisher.publish("acme", undefined, "fan-topic", { body: "Grüße ✓", title: " Größe ", priority: "high", tags: ["ä", "b"] }))
    expect(outcome).toMatchObject({ outcome: "ok", status: 200 })
    expect(outcome.providerId).toBeTypeOf("string")
    expect(peerRelay.published.at(-1)).toMatchObject({ topic: "fan-topic", message: "Grüße ✓", title: "Größe", priority: 4, tags: ["ä", "b"] })
  })

  it("succeeds when at least one node accepted, and reports the most telling failure when none did", async () => {
    const withDead = makeRelayPublisher({
      platform: makePlatformRelay({ url: platformRelay.url, token: "tk_platform" }),
      guarded: strictGuard,
      peers: Effect.succeed([{ nodeId: "gone", baseUrl: deadUrl }, { nodeId: "test-node", baseUrl: peerUrl }]),
      sign
    })
    const before = { platform: platformRelay.published.length, peer: peerRelay.published.length }
    expect(await run(withDead.publish("acme", undefined, "both", { body: "x" }))).toMatchObject({ outcome: "ok" })
    // this node's relay and the live peer's each got it once; the dead peer did not stop them
    expect(platformRelay.published.length).toBe(before.platform + 1)
    expect(peerRelay.published.length).toBe(before.peer + 1)

    const noneAccepts = makeRelayPublisher({
      platform: makePlatformRelay({ url: undefined, token: undefined }),
      guarded: strictGuard,
      peers: Effect.succeed([{ nodeId: "gone", baseUrl: deadUrl }]),
      sign
    })
    expect(await run(noneAccepts.publish("acme", undefined, "x", { body: "x" }))).toEqual({ outcome: "failed", status: 0, reason: "ConnectionFailed" })
  })

  it("carries the peer relay's refusal as the reason, and a forged MAC is refused by the peer", async () => {
    peerRelay.answer("refused-topic", 403)
    const publisher = makeRelayPublisher({
      platform: makePlatformRelay({ url: undefined, token: undefined }),
      guarded: strictGuard,
      peers: Effect.succeed([{ nodeId: "test-node", baseUrl: peerUrl }]),
      sign
    })
    expect(await run(publisher.publish("acme", undefined, "refused-topic", { body: "x" }))).toEqual({ outcome: "failed", status: 502, reason: "forbidden" })
    const forged = makeRelayPublisher({
      platform: makePlatformRelay({ url: undefined, token: undefined }),
      guarded: strictGuard,
      peers: Effect.succeed([{ nodeId: "test-node", baseUrl: peerUrl }]),
      // signed for another audience: the peer's MAC does not hold
      sign: (_a, m, p, b) => sign("another-node", m, p, b)
    })
    const before = peerRelay.published.length
    expect(await run(forged.publish("acme", undefined, "fan-topic", { body: "x" }))).toEqual({ outcome: "failed", status: 403, reason: "COORDINATION_REFUSED" })
    expect(peerRelay.published.length).toBe(before)
  })

  it("does not post a message over the relay route's 4096-byte cap to a peer", async () => {
    const publisher = makeRelayPublisher({
      platform: makePlatformRelay({ url: undefined, token: undefined }),
      guarded: strictGuard,
      peers: Effect.succeed([{ nodeId: "test-node", baseUrl: peerUrl }]),
      sign
    })
    const before = peerRelay.published.length
    expect(await run(publisher.publish("acme", undefined, "big", { body: "é".repeat(2049) }))).toEqual({ outcome: "failed", status: 413, reason: "PayloadTooLarge" })
    expect(await run(publisher.publish("acme", undefined, "big", { body: "é".repeat(2048) }))).toMatchObject({ outcome: "ok" })
    expect(peerRelay.published.length).toBe(before + 1)
  })

  it("refuses an endpoint URL when this node has no relay to match its host against", async () => {
    const publisher = makeRelayPublisher({
      platform: makePlatformRelay({ url: undefined, token: undefined }),
      guarded: strictGuard,
      peers: Effect.succeed([{ nodeId: "test-node", baseUrl: peerUrl }]),
      sign
    })
    expect(await run(publisher.publish("acme", undefined, peerRelay.url + "/fan-topic", { body: "x" }))).toEqual({
      outcome: "failed",
      status: 0,
      reason: "RelayNotConfigured"
    })
  })
})

describe("relayPeersOf", () => {
  it("leaves out this node and IP literals off the private overlay, and keeps host names", () => {
    const peers = new Map([
      ["self", "http://10.0.0.1:8080"],
      ["a", "http://10.0.0.2:8080/"],
      ["b", "http://203.0.113.9:8080"],
      ["c", "http://[fd00::2]:8080"],
      ["d", "http://node-d.internal:8080"],
      ["e", "http://[2001:db8::1]:8080"]
    ])
    const { eligible, skipped } = relayPeersOf(peers, "self")
    expect(eligible.map((p) => p.nodeId)).toEqual(["a", "c", "d"])
    expect(eligible[0]?.baseUrl).toBe("http://10.0.0.2:8080")
    expect(skipped.map((p) => p.nodeId)).toEqual(["b", "e"])
  })

  it("skips IP literals outside the overlay it is given (PORTICO_OVERLAY_CIDRS), and peers with no URL", () => {
    const overlay = Either.getOrThrow(parseCidrs("127.0.0.0/8"))
    const peers: Array<readonly [string, string]> = [
      ["a", "http://127.0.0.2:8080"],
      ["b", "http://192.168.1.2:8080"],
      ["c", ""],
      ["d", "http://node-d.internal:8080"]
    ]
    const { eligible, skipped } = relayPeersOf(peers, "self", overlay)
    expect(eligible.map((p) => p.nodeId)).toEqual(["a", "d"])
    expect(skipped.map((p) => p.nodeId)).toEqual(["b", "c"])
  })

  it("counts a gateway without a relay of its own as reaching the platform relay when a live peer is eligible (a seed or a node the membership counts active)", () => {
    const push: { apnsUrl: undefined; expoUrl: undefined; relayUrl: string | undefined; relayToken: undefined } = {
      apnsUrl: undefined,
      expoUrl: undefined,
      relayUrl: undefined,
      relayToken: undefined
    }
    const reachable = (settings: { push: typeof push }, live: Array<{ id: string; url: string }>) =>
      Effect.runSync(platformRelayReachable({ ...settings, membership: defaultMembershipSettings, nodeId: "a" }, { peers: Effect.succeed(live) }))
    expect(reachable({ push }, [])).toBe(false)
    expect(reachable({ push }, [{ id: "a", url: "http://10.0.0.1:1" }])).toBe(false)
    expect(reachable({ push }, [{ id: "b", url: "http://203.0.113.1:1" }])).toBe(false)
    expect(reachable({ push }, [{ id: "b", url: "http://10.0.0.2:1" }])).toBe(true)
    expect(reachable({ push: { ...push, relayUrl: "http://127.0.0.1:1" } }, [])).toBe(true)
  })
})
