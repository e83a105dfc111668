/**
 * Rooms through a real gateway, its real media server (engines/sfu) and a real coturn
 * (docs/webrtc.md): two werift peers join a room over `/v1/webrtc/signal`, relay-only through
 * coturn, and one's RTP and data reach the other through the SFU; joins and leaves are published
 * on the room's platform topic; the rooms route lists who is in; a function admits, mutes and
 * kicks; hostile handshakes and forged participant events are refused.
 */
import { Wallet } from "ethers"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { eventKeyOf, eventMac } from "../../src/domain/SfuTicket.js"
import { signIn } from "../support/client.js"
import { hasTurnServer, startTurnServer, type TurnServer } from "../support/coturn.js"
import { goFunction } from "../support/functions.js"
import { type Gateway, mintKey, type Reply, startGateway } from "../support/gateway.js"
import { connected, JoinRefused, joinRoom, type MediaPeer, until } from "../support/mediaPeers.js"

const SECRET = "turn-secret-" + "9".repeat(20)
const bin = process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(import.meta.dirname, "../../.engines/bin")
const sfuBinary = path.join(bin, "portico-sfu")

const expectRefused = (reply: Reply, status: number, code: string) => {
  expect([reply.status, reply.body?.code], reply.text).toEqual([status, code])
}

const refusalOf = async (join: Promise<MediaPeer>): Promise<JoinRefused> => {
  try {
    const peer = await join
    await peer.close()
  } catch (e) {
    if (e instanceof JoinRefused) return e
    throw e
  }
  throw new Error("the join was taken")
}

/** A subscriber to a topic over the pub/sub socket: the frames it hears. */
const subscribe = async (gw: Gateway, token: string, topic: string) => {
  const frames: Array<Record<string, unknown>> = []
  const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/pubsub/ws?topic=${encodeURIComponent(topic)}`, { headers: { authorization: `Bearer ${token}` } })
  ws.on("message", (raw) => frames.push(JSON.parse(raw.toString())))
  await new Promise((resolve, reject) => {
    ws.once("open", resolve)
    ws.once("error", reject)
  })
  await until(() => frames.some((f) => f["type"] === "subscribed"), 5_000, "the subscription")
  return { frames, events: () => frames.filter((f) => f["type"] === "event"), close: () => ws.close() }
}

describe("rooms through the gateway, its media server and coturn", () => {
  let turn: TurnServer
  let gw: Gateway
  let owner: string
  let alice: string
  let bob: string
  let carol: string
  const wallets = { alice: Wallet.createRandom(), bob: Wallet.createRandom(), carol: Wallet.createRandom() }
  const peers: Array<MediaPeer> = []
  const join = async (token: string, room: string) => {
    const peer = await joinRoom(gw.url, token, room)
    peers.push(peer)
    return peer
  }
  const post = (route: string, token: string): Promise<Reply> => gw.request("POST", route, { token, json: {} })
  const invoke = async (body: unknown) => {
    const answer = await fetch(`${gw.url}/v1/functions/media/invoke`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: JSON.stringify(body) })
    return (await answer.json()) as Record<string, unknown>
  }

  beforeAll(async () => {
    if (!hasTurnServer()) throw new Error("coturn is missing: bash scripts/engines.sh coturn")
    turn = await startTurnServer(SECRET)
    gw = await startGateway({ env: { PORTICO_TURN_URIS: turn.uri, PORTICO_TURN_SECRET: SECRET, PORTICO_SFU_BINARY: sfuBinary, PORTICO_WEBRTC_ROOM_PEERS: "3" } })
    owner = (await gw.cli(["namespace", "create", "calls"])).api_key
    for (const [name, wallet] of Object.entries(wallets)) {
      const added = await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: wallet.address, role: "runtime" } })
      expect(added.status, `${name}: ${added.text}`).toBe(200)
    }
    alice = (await signIn(gw, "calls", wallets.alice)).access_token
    bob = (await signIn(gw, "calls", wallets.bob)).access_token
    carol = (await signIn(gw, "calls", wallets.carol)).access_token
    const form = new FormData()
    form.set("name", "media")
    form.set("wasm", new Blob([goFunction("media")]), "media.wasm")
    const deployed = await fetch(`${gw.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: form })
    expect(deployed.status, await deployed.text()).toBe(201)
    // the media server is up once the gateway's health says it is
    await until(async () => (await gw.request("GET", "/v1/webrtc/rooms", { token: owner })).status === 200, 10_000, "the rooms route")
  }, 120_000)
  afterAll(async () => {
    for (const peer of peers) await peer.close().catch(() => {})
    await gw?.stop()
    await turn?.stop()
  })

  it("refuses joins while media is off, without a room, and from an API key", async () => {
    expect((await refusalOf(joinRoom(gw.url, alice, "lobby"))).status).toBe(403)
    expect((await post("/v1/namespace/webrtc/enable", owner)).status).toBe(200)
    const key = await refusalOf(joinRoom(gw.url, owner, "lobby"))
    expect([key.status, key.body.code]).toEqual([403, "SESSION_REQUIRED"])
    for (const room of ["", "a/b", "x".repeat(65)]) {
      const bad = await refusalOf(joinRoom(gw.url, alice, room))
      expect([bad.status, bad.body.code], room).toEqual([400, "VALIDATION_FAILED"])
    }
    const anonymous = await refusalOf(joinRoom(gw.url, "not-a-token", "lobby"))
    expect(anonymous.status).toBe(401)
  })

  it("forwards one peer's media and data to another, relay-only through coturn, and publishes joins and leaves", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    const topic = await subscribe(gw, owner, "_portico/webrtc/standup")
    const a = await join(alice, "standup")
    expect(a.welcome["participants"]).toEqual([])
    const servers = a.welcome["ice_servers"] as Array<{ urls: Array<string>; username: string }>
    expect(servers[0]?.urls).toEqual([turn.uri])
    expect(servers[0]?.username).toMatch(/^\d+:calls$/)
    const b = await join(bob, "standup")
    expect(b.welcome["participants"]).toEqual([expect.objectContaining({ user: wallets.alice.address.toLowerCase() })])
    await a.next("participant-joined")
    await until(() => connected(a, b), 20_000, "both peers connected")
    await until(async () => {
      await a.sendRtp(20, 5)
      return (await b.stats()).rtp >= 20
    }, 20_000, "bob receiving alice's RTP")
    await until(async () => {
      await a.sendData("hello from alice").catch(() => {})
      return (await b.stats()).data.includes("hello from alice")
    }, 10_000, "bob receiving alice's data")
    // relay-only: the media server offered nothing but its relay on coturn
    const offered = (await a.stats()).frames.filter((f) => f.type === "candidate")
    expect(offered.length).toBeGreaterThan(0)
    for (const f of offered) expect((f["candidate"] as { candidate: string }).candidate).toMatch(/ typ relay /)

    const listed = await gw.request("GET", "/v1/webrtc/rooms", { token: alice })
    expect(listed.status, listed.text).toBe(200)
    expect(listed.body.unreachable).toEqual([])
    const room = listed.body.rooms.find((r: { room: string }) => r.room === "standup")
    expect(room.participants.map((p: { user: string }) => p.user).sort()).toEqual([wallets.alice.address, wallets.bob.address].map((w) => w.toLowerCase()).sort())

    await b.close()
    await a.next("participant-left")
    await until(() => topic.events().length >= 3, 10_000, "three events on the room's topic")
    const events = topic.events().map((f) => [f["event"], (f["body"] as { user: string }).user])
    expect(events).toEqual([
      ["webrtc.join", wallets.alice.address.toLowerCase()],
      ["webrtc.join", wallets.bob.address.toLowerCase()],
      ["webrtc.leave", wallets.bob.address.toLowerCase()]
    ])
    topic.close()
    await a.close()
  })

  it("caps a room's participants, and keeps rooms of the same name in two namespaces apart", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    const first = [await join(alice, "full"), await join(bob, "full"), await join(carol, "full")]
    const refused = await refusalOf(joinRoom(gw.url, alice, "full"))
    expect([refused.status, refused.body.code]).toEqual([503, "UNAVAILABLE"])
    expect(refused.body.error).toMatch(/full/)
    // the media server answers the handed socket's handshake itself, with the gateway's envelope
    expect(Object.keys(refused.body)).toEqual(["error", "code", "hint"])
    expect(refused.body.hint).toBe("the room is at its participant cap; retry later")
    // another namespace's room "full" is its own
    const otherOwner = (await gw.cli(["namespace", "create", "other-calls"])).api_key
    await post("/v1/namespace/webrtc/enable", otherOwner)
    const stranger = Wallet.createRandom()
    await gw.request("POST", "/v1/namespace/members", { token: otherOwner, json: { wallet: stranger.address, role: "runtime" } })
    const strangerToken = (await signIn(gw, "other-calls", stranger)).access_token
    const elsewhere = await join(strangerToken, "full")
    expect(elsewhere.welcome["participants"]).toEqual([])
    const theirs = await gw.request("GET", "/v1/webrtc/rooms", { token: otherOwner })
    expect(theirs.body.rooms.map((r: { participants: Array<unknown> }) => r.participants.length)).toEqual([1])
    for (const peer of [...first, elsewhere]) await peer.close()
  })

  it("lets a function admit, mute and kick; a kicked user's admission is revoked", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    expect((await gw.request("PUT", "/v1/webrtc/config", { token: owner, json: { require_admission: true } })).status).toBe(200)
    try {
      const none = await refusalOf(joinRoom(gw.url, bob, "stage"))
      expect([none.status, none.body.code]).toEqual([403, "FORBIDDEN"])
      expect(none.body.error).toMatch(/requires an admission/)
      const bobUser = wallets.bob.address.toLowerCase()
      expect(await invoke({ op: "admit", room: "stage", user: bobUser, ttl: 600 })).toEqual({ admitted: 1 })
      expect(await invoke({ op: "admit", room: "stage", user: bobUser, ttl: 0 })).toEqual({ admitted: 0 })
      expect(await invoke({ op: "admit", room: "stage", user: wallets.alice.address.toLowerCase(), ttl: 600 })).toEqual({ admitted: 1 })
      const a = await join(alice, "stage")
      const b = await join(bob, "stage")
      await until(() => connected(a, b), 20_000, "both peers connected")
      await until(async () => {
        await a.sendRtp(10, 5)
        return (await b.stats()).rtp >= 10
      }, 20_000, "bob receiving alice's RTP")

      const muted = await invoke({ op: "mute", room: "stage", user: wallets.alice.address.toLowerCase() })
      expect(muted).toEqual({ affected: 1, unreachable: [] })
      expect((await a.next("muted"))["muted"]).toBe(true)
      await new Promise((r) => setTimeout(r, 300))
      const before = (await b.stats()).rtp
      await a.sendRtp(50, 5)
      await new Promise((r) => setTimeout(r, 500))
      expect((await b.stats()).rtp).toBe(before)
      expect(await invoke({ op: "unmute", room: "stage", user: wallets.alice.address.toLowerCase() })).toEqual({ affected: 1, unreachable: [] })
      await until(async () => {
        await a.sendRtp(10, 5)
        return (await b.stats()).rtp > before
      }, 10_000, "alice heard again")

      const kicked = await invoke({ op: "kick", room: "stage", user: bobUser })
      expect(kicked).toEqual({ affected: 1, revoked: true, unreachable: [] })
      await b.next("kicked")
      await b.closed
      const again = await refusalOf(joinRoom(gw.url, bob, "stage"))
      expect([again.status, again.body.code]).toEqual([403, "FORBIDDEN"])
      expect(again.body.error).toMatch(/revoked/)

      const turnCredentials = await invoke({ op: "turn" })
      expect(turnCredentials).toMatchObject({ username: expect.stringMatching(/^\d+:calls$/), uris: [turn.uri] })
      await a.close()
    } finally {
      await gw.request("PUT", "/v1/webrtc/config", { token: owner, json: { require_admission: false } })
    }
  })

  it("ends the namespace's calls when media is turned off", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    const a = await join(alice, "late-night")
    const b = await join(bob, "other-room")
    expect((await post("/v1/namespace/webrtc/disable", owner)).status).toBe(200)
    for (const peer of [a, b]) {
      await peer.next("ended")
      expect(await peer.closed).toBe(1000)
    }
    expect((await gw.request("GET", "/v1/webrtc/rooms", { token: owner })).body.rooms).toEqual([])
    expect((await refusalOf(joinRoom(gw.url, alice, "late-night"))).status).toBe(403)
  })

  it("refuses participant events without the namespace's MAC", async () => {
    await post("/v1/namespace/webrtc/enable", owner)
    const base = { namespace: "calls", room: "standup", event: "join", peer_id: "p1", user: "0xabc", device: "", reason: "" }
    const send = (body: Record<string, unknown>, mac: string | undefined) =>
      fetch(`${gw.url}/v1/internal/webrtc/events`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(mac === undefined ? {} : { "x-portico-webrtc-mac": mac }) },
        body: JSON.stringify(body)
      })
    const event = (over: Record<string, unknown> = {}) => ({ ...base, node: "node-1", at: Date.now(), nonce: Math.random().toString(16).slice(2).padEnd(32, "0").slice(0, 32), ...over })
    for (const mac of [undefined, "0".repeat(64), "nonsense"]) {
      const answer = await send(event(), mac)
      expect(answer.status).toBe(401)
      expect(((await answer.json()) as { code: string }).code).toBe("UNAUTHORIZED")
    }
    // a MAC under another key: one made from a relay secret the namespace does not hold
    const forged = event()
    expect((await send(forged, eventMac(eventKeyOf(new Uint8Array(32)), JSON.stringify(forged)))).status).toBe(401)
    expect((await send({ ...event(), extra: 1 }, "0".repeat(64))).status).toBe(400)
  })
})
