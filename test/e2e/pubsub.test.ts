/**
 * Publish/subscribe through a real gateway on the embedded bus (docs/pubsub.md): publish,
 * publish-batch, topics, presence and the socket, table-driven refusals of every route, grants
 * narrowed to topics, the reserved prefix, resume from history, a socket's own publishes, hostile
 * frames, a slow consumer, the limits with short settings, and a revoked key's and a logged-out
 * session's sockets closed within 10 s. Several gateways on Redis: pubsub-redis.test.ts.
 */
import { Wallet } from "ethers"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { call, signIn } from "../support/client.js"
import { type Gateway, mintKey, startGateway } from "../support/gateway.js"
import { b64, type Frame, isSubscriber, openSubscriber, type Refused, type Subscriber, unb64 } from "../support/pubsubSocket.js"

describe("publish/subscribe on the embedded bus", () => {
  let gw: Gateway
  /** The same registry with tight socket limits: two per node, pings every 200 ms, dead after 700 ms. */
  let tight: Gateway
  let owner: string
  let runtimeKey: string
  let narrowKey: string
  let cacheOnlyKey: string
  const sockets: Array<Subscriber> = []
  const alice = Wallet.createRandom()

  const open = async (query: string, token: string | undefined, via?: "header" | "query") => {
    const answer = await openSubscriber(gw.url, query, token, { via })
    if (isSubscriber(answer)) sockets.push(answer)
    return answer
  }
  const opened = async (query: string, token: string = runtimeKey, via?: "header" | "query") => {
    const answer = await open(query, token, via)
    if (!isSubscriber(answer)) throw new Error(`refused: ${JSON.stringify(answer)}`)
    await answer.waitFor(1, "subscribed")
    return answer
  }
  const refused = async (query: string, status: number, code: string, token: string | null = runtimeKey) => {
    const answer = await open(query, token ?? undefined)
    expect(isSubscriber(answer), `${query} was accepted`).toBe(false)
    const r = answer as Refused
    expect([r.status, r.body?.code], `${query}: ${JSON.stringify(r.body)}`).toEqual([status, code])
    expect(typeof r.body.error).toBe("string")
    return r
  }
  const publish = (topic: string, text: string, token = runtimeKey) =>
    gw.request("POST", "/v1/pubsub/publish", { token, json: { topic, data_base64: b64(text) } })
  beforeAll(async () => {
    gw = await startGateway({
      env: {
        PORTICO_PUBSUB_SOCKETS_PER_USER: "6",
        PORTICO_PUBSUB_TOPICS_PER_SOCKET: "4",
        PORTICO_PUBSUB_MAX_MESSAGE_BYTES: "65536",
        PORTICO_PUBSUB_BATCH_MAX: "5",
        PORTICO_PUBSUB_SOCKET_QUEUE_BYTES: "262144",
        PORTICO_PUBSUB_HISTORY_SIZE: "10",
        PORTICO_PUBSUB_REVOCATION_CHECK_MS: "500"
      }
    })
    tight = await startGateway({
      dataDir: gw.dataDir,
      env: { PORTICO_PUBSUB_SOCKETS_PER_NODE: "2", PORTICO_PUBSUB_PING_INTERVAL_MS: "200", PORTICO_PUBSUB_DEAD_PEER_MS: "700" }
    })
    owner = (await gw.cli(["namespace", "create", "chat"])).api_key
    runtimeKey = await mintKey(gw, owner, { profile: "runtime", label: "app" })
    narrowKey = await mintKey(gw, owner, { scopes: ["pubsub:topic=rooms/*"], label: "narrow" })
    cacheOnlyKey = await mintKey(gw, owner, { scopes: ["cache"], label: "cache" })
    const added = await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: alice.address, role: "runtime" } })
    expect(added.status, added.text).toBe(200)
  }, 120_000)
  afterEach(() => {
    for (const s of sockets.splice(0)) s.ws.terminate()
  })
  afterAll(async () => {
    await tight?.stop()
    await gw?.stop()
  })

  it("delivers a publish to every subscriber, in order, after the subscribed frame; the answer names its position", async () => {
    const a = await opened("topic=rooms/lobby")
    const b = await opened("topic=rooms/lobby&topic=rooms/other", runtimeKey, "query")
    expect(a.frames[0]).toEqual({ type: "subscribed", topics: [{ topic: "rooms/lobby", epoch: expect.any(String), offset: 0 }] })
    const answers = []
    for (let n = 1; n <= 30; n++) answers.push(await publish("rooms/lobby", `m${n}`))
    expect(answers.map((r) => r.status)).toEqual(Array(30).fill(200))
    expect(answers[0]!.body).toEqual({ status: "ok", topic: "rooms/lobby", epoch: (a.frames[0]!["topics"] as Array<{ epoch: string }>)[0]!.epoch, offset: 1 })
    for (const s of [a, b]) {
      const messages = await s.waitFor(30, "message")
      expect(messages.map((m) => unb64(m["data"]))).toEqual(Array.from({ length: 30 }, (_, i) => `m${i + 1}`))
      expect(messages.map((m) => m["offset"])).toEqual(Array.from({ length: 30 }, (_, i) => i + 1))
      expect(Object.keys(messages[0]!).sort()).toEqual(["data", "epoch", "offset", "timestamp", "topic", "type"])
    }
    expect(gw.logs()).toContain('"route":"/v1/pubsub/ws","status":101')
  })

  it("publish-batch checks every message before publishing any, then publishes them in order", async () => {
    const s = await opened("topic=rooms/batch")
    const bad = await gw.request("POST", "/v1/pubsub/publish-batch", {
      token: runtimeKey,
      json: { messages: [{ topic: "rooms/batch", data_base64: b64("one") }, { topic: "_portico/x", data_base64: b64("two") }] }
    })
    expect([bad.status, bad.body.code]).toEqual([403, "FORBIDDEN"])
    expect(bad.body.error).toContain("messages[1]")
    const good = await gw.request("POST", "/v1/pubsub/publish-batch", {
      token: runtimeKey,
      json: { messages: ["a", "b", "c"].map((t) => ({ topic: "rooms/batch", data_base64: b64(t) })) }
    })
    expect(good.status, good.text).toBe(200)
    expect(good.body.count).toBe(3)
    expect(good.body.published.map((p: { offset: number }) => p.offset)).toEqual([1, 2, 3])
    const got = await s.waitFor(3, "message")
    expect(got.map((m) => unb64(m["data"]))).toEqual(["a", "b", "c"])
    const tooMany = await gw.request("POST", "/v1/pubsub/publish-batch", {
      token: runtimeKey,
      json: { messages: Array.from({ length: 6 }, () => ({ topic: "rooms/batch", data_base64: "" })) }
    })
    expect([tooMany.status, tooMany.body.code]).toEqual([400, "VALIDATION_FAILED"])
    await new Promise((r) => setTimeout(r, 100))
    expect(s.ofType("message").length).toBe(3)
  })

  it("refuses bad publishes with the spec's status and an envelope; nothing is published", async () => {
    const s = await opened("topic=rooms/refusals")
    const cases: ReadonlyArray<readonly [unknown, string | undefined, number, string]> = [
      [{ topic: "_portico/webrtc/room", data_base64: b64("x") }, runtimeKey, 403, "FORBIDDEN"],
      [{ topic: "has space", data_base64: b64("x") }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "", data_base64: b64("x") }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "x".repeat(257), data_base64: b64("x") }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "rooms/refusals", data_base64: "not base64!" }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "rooms/refusals", data_base64: "QQ" }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "rooms/refusals", data_base64: "QR==" }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "rooms/refusals", data_base64: b64("x".repeat(65537)) }, runtimeKey, 413, "PAYLOAD_TOO_LARGE"],
      [{ topic: "rooms/refusals", data_base64: b64("x"), extra: 1 }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "rooms/refusals" }, runtimeKey, 400, "VALIDATION_FAILED"],
      [{ topic: "rooms/refusals", data_base64: b64("x") }, cacheOnlyKey, 403, "GRANT_REQUIRED"],
      [{ topic: "elsewhere", data_base64: b64("x") }, narrowKey, 403, "GRANT_REQUIRED"],
      [{ topic: "rooms/refusals", data_base64: b64("x") }, undefined, 401, "UNAUTHORIZED"]
    ]
    for (const [json, token, status, code] of cases) {
      const r = await gw.request("POST", "/v1/pubsub/publish", { token, json })
      expect([r.status, r.body?.code], JSON.stringify(json).slice(0, 100)).toEqual([status, code])
      expect(typeof r.body.error).toBe("string")
    }
    const malformed = await gw.request("POST", "/v1/pubsub/publish", { token: runtimeKey, body: '{"topic":', headers: { "content-type": "application/json" } })
    expect(malformed.status).toBe(400)
    expect((await publish("rooms/refusals", "only this", narrowKey)).status).toBe(200)
    const got = await s.waitFor(1, "message")
    expect(got.map((m) => unb64(m["data"]))).toEqual(["only this"])
  })

  it("refuses bad handshakes as HTTP answers: 400, 401, 403", async () => {
    await refused("", 400, "VALIDATION_FAILED")
    await refused("topic=a&topic=b&topic=c&topic=d&topic=e", 400, "VALIDATION_FAILED")
    await refused("topic=bad%20topic", 400, "VALIDATION_FAILED")
    await refused("topic=a&unknown=1", 400, "VALIDATION_FAILED")
    await refused("topic=a&since=a,epoch", 400, "VALIDATION_FAILED")
    await refused("topic=a&since=b,epoch,1", 400, "VALIDATION_FAILED")
    await refused("topic=a&member_id=me", 400, "VALIDATION_FAILED")
    await refused("topic=a&presence=true&member_meta=%5B1%5D", 400, "VALIDATION_FAILED")
    await refused("topic=a&presence=yes", 400, "VALIDATION_FAILED")
    await refused("topic=elsewhere", 403, "GRANT_REQUIRED", narrowKey)
    await refused("topic=a", 403, "GRANT_REQUIRED", cacheOnlyKey)
    await refused("topic=a", 401, "UNAUTHORIZED", null)
    await refused("topic=a", 401, "INVALID_API_KEY", "portico_not-a-key")
    const plain = await gw.request("GET", "/v1/pubsub/ws?topic=a", { token: runtimeKey })
    expect([plain.status, plain.body.code]).toEqual([400, "BAD_REQUEST"])
    // the platform's topics may be read where granted
    await opened("topic=_portico/webrtc/room1")
  })

  it("lists live topics sorted and paged, narrowed by the grant; presence with join and leave events", async () => {
    const watcher = await opened("topic=rooms/p")
    const one = await opened("topic=rooms/p&presence=true&member_id=alice&member_meta=%7B%22colour%22%3A%22red%22%7D")
    const two = await opened("topic=rooms/p&presence=true&member_id=alice")
    await opened("topic=rooms/p&presence=true", narrowKey)
    await watcher.waitFor(2, "presence")
    const listed = await gw.request("GET", "/v1/pubsub/presence?topic=rooms/p", { token: runtimeKey })
    expect(listed.status, listed.text).toBe(200)
    expect(listed.body.count, listed.text).toBe(2)
    expect(listed.body.count).toBe(2)
    const aliceEntry = listed.body.members.find((m: { member_id: string }) => m.member_id === "alice")
    expect(aliceEntry).toMatchObject({ member_id: "alice", meta: { colour: "red" }, connections: 2 })
    expect(aliceEntry.subject).toMatch(/^key:/)
    one.ws.close()
    two.ws.close()
    const events = await watcher.waitFor(3, "presence")
    expect(events.map((e) => [e["event"], (e["member"] as { member_id: string }).member_id])).toEqual([
      ["join", "alice"],
      ["join", expect.stringMatching(/^key:/)],
      ["leave", "alice"]
    ])
    await opened("topic=zeta&topic=rooms/b&topic=alpha")
    const topics = await gw.request("GET", "/v1/pubsub/topics?limit=2", { token: runtimeKey })
    expect(topics.status, topics.text).toBe(200)
    expect(topics.body.namespace).toBe("chat")
    expect(topics.body.topics.length).toBe(2)
    const all: Array<string> = [...topics.body.topics]
    let cursor = topics.body.next_cursor
    while (cursor !== null) {
      const page = await gw.request("GET", `/v1/pubsub/topics?limit=2&cursor=${cursor}`, { token: runtimeKey })
      all.push(...page.body.topics)
      cursor = page.body.next_cursor
    }
    expect(all).toEqual(["alpha", "rooms/b", "rooms/p", "zeta"])
    const narrow = await gw.request("GET", "/v1/pubsub/topics?limit=1000", { token: narrowKey })
    expect(narrow.body.topics).toEqual(["rooms/b", "rooms/p"])
    expect((await gw.request("GET", "/v1/pubsub/presence?topic=elsewhere", { token: narrowKey })).status).toBe(403)
    expect((await gw.request("GET", "/v1/pubsub/topics?cursor=!!", { token: runtimeKey })).status).toBe(400)
  })

  it("resumes from a position: history first, then live; a gap frame when history cannot reach back", async () => {
    const first = await opened("topic=rooms/resume")
    for (let n = 1; n <= 5; n++) await publish("rooms/resume", `r${n}`)
    const seen = await first.waitFor(5, "message")
    const { epoch } = seen[0] as Frame & { epoch: string }
    first.ws.close()
    for (let n = 6; n <= 8; n++) await publish("rooms/resume", `r${n}`)
    const back = await opened(`topic=rooms/resume&since=rooms/resume,${epoch},5`)
    await publish("rooms/resume", "r9")
    const resumed = await back.waitFor(4, "message")
    expect(resumed.map((m) => unb64(m["data"]))).toEqual(["r6", "r7", "r8", "r9"])
    // history keeps 10: a position 12 messages back cannot be filled
    for (let n = 10; n <= 21; n++) await publish("rooms/resume", `r${n}`)
    const late = await opened(`topic=rooms/resume&since=rooms/resume,${epoch},5`)
    const gap = await late.waitFor(1, "gap")
    expect(gap[0]).toMatchObject({ topic: "rooms/resume", reason: "history-exceeded", epoch, offset: 21 })
    const other = await opened(`topic=rooms/resume&since=rooms/resume,otherepoch,3`)
    expect((await other.waitFor(1, "gap"))[0]!["reason"]).toBe("epoch-changed")
  })

  it("a socket publishes with its own frames, acked in order; refused frames are error frames; binary closes 1003", async () => {
    const s = await opened("topic=rooms/own")
    const acks = []
    for (let n = 1; n <= 5; n++) acks.push(await s.publish("rooms/own", `own${n}`, `id${n}`))
    expect(acks.map((a) => [a.type, a["offset"]])).toEqual([1, 2, 3, 4, 5].map((n) => ["ack", n]))
    const messages = await s.waitFor(5, "message")
    expect(messages.map((m) => unb64(m["data"]))).toEqual(["own1", "own2", "own3", "own4", "own5"])
    expect((await s.publish("_portico/x", "no", "r1"))["code"]).toBe("FORBIDDEN")
    s.ws.send("not json")
    s.ws.send(JSON.stringify({ type: "subscribe", topic: "more" }))
    await s.waitFor(3, "error")
    expect(s.ofType("error").map((e) => e["code"])).toEqual(["FORBIDDEN", "VALIDATION_FAILED", "VALIDATION_FAILED"])
    s.ws.send(Buffer.from([1, 2, 3]), { binary: true })
    expect((await s.closed).code).toBe(1003)
    const flood = await opened("topic=rooms/flood")
    for (let i = 0; i < 2000; i++) flood.ws.send(JSON.stringify({ type: "subscribe", topic: `rooms/t${i}` }))
    expect((await flood.closed).code).toBe(1008)
    const big = await opened("topic=rooms/big")
    big.ws.send("x".repeat(200_000))
    expect((await big.closed).code).toBe(1009)
  })

  it("closes a subscriber that does not read (1013 SLOW_CONSUMER) without slowing the topic's others", async () => {
    const reader = await opened("topic=rooms/slow")
    const answer = await openSubscriber(gw.url, "topic=rooms/slow", runtimeKey)
    if (!isSubscriber(answer)) throw new Error("refused")
    sockets.push(answer)
    await answer.waitFor(1, "subscribed")
    // the slow one stops reading from its socket
    ;(answer.ws as unknown as { _socket: { pause: () => void } })._socket.pause()
    const payload = "y".repeat(60_000)
    for (let n = 0; n < 80; n++) expect((await publish("rooms/slow", payload)).status).toBe(200)
    await reader.waitFor(80, "message")
    ;(answer.ws as unknown as { _socket: { resume: () => void } })._socket.resume()
    const closed = await answer.closed
    expect(closed.code).toBe(1013)
    expect(closed.reason).toContain("SLOW_CONSUMER")
  })

  it("publishes, lists and reads presence through the typed client", async () => {
    const s = await opened("topic=rooms/client&presence=true&member_id=typed")
    const published = await call(gw, runtimeKey, (c) => c.pubsub.publish({ payload: { topic: "rooms/client", data_base64: b64("typed") } }))
    expect(published).toMatchObject({ status: "ok", topic: "rooms/client", offset: expect.any(Number) })
    const batch = await call(gw, runtimeKey, (c) =>
      c.pubsub.publishBatch({ payload: { messages: [{ topic: "rooms/client", data_base64: b64("b1") }, { topic: "rooms/client", data_base64: b64("b2") }] } })
    )
    expect(batch.count).toBe(2)
    const topics = await call(gw, runtimeKey, (c) => c.pubsub.topics({ urlParams: {} }))
    expect(topics.topics).toContain("rooms/client")
    const presence = await call(gw, runtimeKey, (c) => c.pubsub.presence({ urlParams: { topic: "rooms/client" } }))
    expect(presence.members.map((m) => m.member_id)).toEqual(["typed"])
    const got = await s.waitFor(3, "message")
    expect(got.map((m) => unb64(m["data"]))).toEqual(["typed", "b1", "b2"])
  })

  it("caps sockets per user (429 with Retry-After)", async () => {
    const user = await mintKey(gw, owner, { scopes: ["pubsub"], label: "capped" })
    for (let i = 0; i < 6; i++) await opened("topic=rooms/cap", user)
    const r = await refused("topic=rooms/cap", 429, "RATE_LIMITED", user)
    expect(r.headers["retry-after"]).toBeDefined()
  })

  it("caps sockets per node (429), and closes a peer that answers no ping (4408 DEAD_PEER)", async () => {
    const first = await openSubscriber(tight.url, "topic=rooms/tight", runtimeKey, { autoPong: false })
    const second = await openSubscriber(tight.url, "topic=rooms/tight", runtimeKey)
    if (!isSubscriber(first) || !isSubscriber(second)) throw new Error("refused")
    sockets.push(first, second)
    const third = await openSubscriber(tight.url, "topic=rooms/tight", runtimeKey)
    expect(isSubscriber(third)).toBe(false)
    expect([(third as Refused).status, (third as Refused).body.code]).toEqual([429, "RATE_LIMITED"])
    const silent = await first.closed
    expect([silent.code, silent.reason.startsWith("DEAD_PEER")]).toEqual([4408, true])
    // the one that answers pings stays
    await new Promise((r) => setTimeout(r, 500))
    expect(second.ws.readyState).toBe(second.ws.OPEN)
  })

  it("closes a revoked key's sockets and a logged-out session's within 10 s", async () => {
    const doomed = await mintKey(gw, owner, { scopes: ["pubsub"], label: "doomed" })
    const keySocket = await opened("topic=rooms/revoke", doomed)
    const session = (await signIn(gw, "chat", alice)).access_token
    const sessionSocket = await opened("topic=rooms/revoke", session, "query")
    expect(gw.logs()).not.toContain(session)
    const keys = await gw.request("GET", "/v1/namespace/keys?limit=1000", { token: owner })
    const id = keys.body.keys.find((k: { label: string }) => k.label === "doomed").id
    const started = Date.now()
    expect((await gw.request("DELETE", `/v1/namespace/keys/${id}`, { token: owner })).status).toBe(200)
    expect((await gw.request("POST", "/v1/auth/logout", { token: session, json: {} })).status).toBe(200)
    const [a, b] = await Promise.all([keySocket.closed, sessionSocket.closed])
    expect([a.code, b.code]).toEqual([4401, 4401])
    expect(Math.max(a.at, b.at) - started).toBeLessThan(10_000)
  })
})
