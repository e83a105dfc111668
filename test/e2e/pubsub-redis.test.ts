/**
 * Publish/subscribe across two real gateways on one real Redis and one rqlite registry (the
 * embedded bus's suite, pubsub.test.ts, runs on the SQLite registry) (docs/pubsub.md "Engines"):
 * subscribers on both and a publisher on each, order and completeness checked by sequence
 * numbers; topics and presence listed cluster-wide; Redis killed and started again mid-stream
 * (publishes 503, sockets told of the gap, delivery resumed without reconnecting); a revoked
 * device's socket on one gateway closed within 10 s when the device is revoked through the other.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newDevice } from "../support/device.js"
import { type Gateway, mintKey, startGateway } from "../support/gateway.js"
import { b64, isSubscriber, openSubscriber, type Subscriber, unb64 } from "../support/pubsubSocket.js"
import { hasRedisServer, redisMissingMessage, type RedisServer, startRedis } from "../support/redis.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { deployForm, inputLogger } from "../support/functions.js"

describe("publish/subscribe on Redis, two gateways on an rqlite registry", () => {
  let redis: RedisServer
  let rqlited: RqlitedServer
  let a: Gateway
  let b: Gateway
  let owner: string
  let key: string
  const sockets: Array<Subscriber> = []
  const alice = Wallet.createRandom()

  const opened = async (gw: Gateway, query: string, token = key) => {
    const answer = await openSubscriber(gw.url, query, token)
    if (!isSubscriber(answer)) throw new Error(`refused: ${JSON.stringify(answer)}`)
    sockets.push(answer)
    await answer.waitFor(1, "subscribed")
    return answer
  }
  const publish = (gw: Gateway, topic: string, text: string) => gw.request("POST", "/v1/pubsub/publish", { token: key, json: { topic, data_base64: b64(text) } })

  beforeAll(async () => {
    if (!hasRedisServer()) throw new Error(redisMissingMessage())
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    redis = await Effect.runPromise(startRedis())
    rqlited = await Effect.runPromise(startRqlited())
    const env = { PORTICO_RQLITE_URL: rqlited.url, PORTICO_PUBSUB_REDIS_URL: redis.url, PORTICO_PUBSUB_REVOCATION_CHECK_MS: "1000", PORTICO_PUBSUB_PUBLISH_TIMEOUT_MS: "1000", PORTICO_FUNCTIONS_TRIGGER_REFRESH_MS: "300" }
    a = await startGateway({ env })
    b = await startGateway({ env, dataDir: a.dataDir })
    owner = (await a.cli(["namespace", "create", "live"])).api_key
    key = await mintKey(a, owner, { profile: "runtime", label: "app" })
    const added = await a.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: alice.address, role: "runtime" } })
    expect(added.status, added.text).toBe(200)
  }, 120_000)
  afterAll(async () => {
    for (const s of sockets) s.ws.terminate()
    await Promise.all([a?.stop(), b?.stop()])
    if (redis !== undefined) await Effect.runPromise(redis.stop)
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("runs a function a topic triggers once per message, though both gateways hear every message (functions on the rqlite registry)", async () => {
    // logs its input (the message's frame)
    const logger = await inputLogger()
    const form = deployForm({ name: "worker", metadata: JSON.stringify({ pubsub_topics: ["jobs"] }) }, logger)
    const deployed = await fetch(`${a.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${owner}` }, body: form })
    expect(deployed.status, await deployed.clone().text()).toBe(201)
    // both gateways read the triggers every 300 ms here
    await new Promise((r) => setTimeout(r, 800))
    for (const [i, gw] of [a, b, a, b, a, b].entries()) expect((await publish(gw, "jobs", `job ${i}`)).status).toBe(200)
    type Line = { message: string }
    let lines: Array<Line> = []
    for (let i = 0; i < 50 && lines.length < 6; i++) {
      await new Promise((r) => setTimeout(r, 200))
      lines = ((await b.request("GET", "/v1/functions/worker/logs?limit=1000", { token: owner })).body as { logs: Array<Line> }).logs
    }
    // a while longer: a second run of any message would show by now
    await new Promise((r) => setTimeout(r, 1500))
    lines = ((await b.request("GET", "/v1/functions/worker/logs?limit=1000", { token: owner })).body as { logs: Array<Line> }).logs
    const runs = lines.map((l) => JSON.parse(l.message) as { offset: number; data: string })
    expect(runs.map((r) => r.offset).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6])
    expect(new Set(runs.map((r) => unb64(r.data)))).toEqual(new Set([0, 1, 2, 3, 4, 5].map((i) => `job ${i}`)))
  }, 60_000)

  it("delivers every message of publishers on both gateways to subscribers on both, in one order", async () => {
    const subscribers = [await opened(a, "topic=game"), await opened(a, "topic=game"), await opened(b, "topic=game"), await opened(b, "topic=game")]
    const perPublisher = 100
    await Promise.all(
      [a, b].map(async (gw, p) => {
        for (let n = 1; n <= perPublisher; n++) {
          const r = await publish(gw, "game", `${p}:${n}`)
          expect(r.status, r.text).toBe(200)
        }
      })
    )
    const orders = await Promise.all(subscribers.map((s) => s.waitFor(2 * perPublisher, "message")))
    const reference = orders[0]!.map((m) => unb64(m["data"]))
    for (const order of orders) {
      expect(order.map((m) => m["offset"])).toEqual(Array.from({ length: 2 * perPublisher }, (_, i) => i + 1))
      expect(order.map((m) => unb64(m["data"]))).toEqual(reference)
    }
    // each publisher's own messages in the order it sent them, none missing
    for (const p of [0, 1]) {
      expect(reference.filter((t) => t.startsWith(`${p}:`))).toEqual(Array.from({ length: perPublisher }, (_, i) => `${p}:${i + 1}`))
    }
  })

  it("lists topics and presence cluster-wide", async () => {
    await opened(a, "topic=only-on-a&presence=true&member_id=left")
    await opened(b, "topic=only-on-b&topic=only-on-a&presence=true&member_id=right")
    for (const gw of [a, b]) {
      const topics = await gw.request("GET", "/v1/pubsub/topics", { token: key })
      expect(topics.body.topics).toEqual(expect.arrayContaining(["only-on-a", "only-on-b"]))
      const presence = await gw.request("GET", "/v1/pubsub/presence?topic=only-on-a", { token: key })
      expect(presence.body.members.map((m: { member_id: string }) => m.member_id)).toEqual(["left", "right"])
    }
  })

  it("with Redis killed mid-stream: publishes 503, sockets are told of the gap, and delivery resumes without reconnecting", async () => {
    const onA = await opened(a, "topic=outage")
    const onB = await opened(b, "topic=outage")
    for (let n = 1; n <= 5; n++) expect((await publish(a, "outage", `before${n}`)).status).toBe(200)
    // both sockets hold all five before Redis goes: a message still on its way to one gateway's
    // subscriber when Redis dies is lost to that socket (the gap frame says so), not a 6th later
    for (const s of [onA, onB]) await s.waitFor(5, "message")
    await Effect.runPromise(redis.kill)
    const refused = await publish(a, "outage", "during")
    expect([refused.status, refused.body.code]).toEqual([503, "UNAVAILABLE"])
    expect(refused.headers.get("retry-after")).toBe("5")
    for (const s of [onA, onB]) expect((await s.waitFor(1, "gap"))[0]).toMatchObject({ topic: "outage", reason: "engine-interrupted" })
    await Effect.runPromise(redis.start)
    let resumed = false
    for (let i = 0; i < 100 && !resumed; i++) {
      resumed = (await publish(b, "outage", "after")).status === 200
      if (!resumed) await new Promise((r) => setTimeout(r, 100))
    }
    expect(resumed).toBe(true)
    for (const s of [onA, onB]) {
      const messages = await s.waitFor(6, "message")
      expect(unb64(messages[5]!["data"])).toBe("after")
      expect(s.ws.readyState).toBe(s.ws.OPEN)
    }
  }, 30_000)

  it("closes a revoked device's socket within 10 s, the device revoked through the other gateway", async () => {
    const device = await newDevice()
    const c = await a.request("POST", "/v1/auth/challenge", { json: { wallet: alice.address, namespace: "live", device_id: device.id } })
    const verified = await a.request("POST", "/v1/auth/verify", {
      json: { message: c.body.message, signature: await alice.signMessage(c.body.message), device_key: device.jwk, device_signature: await device.sign(c.body.message) }
    })
    expect(verified.status, verified.text).toBe(200)
    const socket = await opened(a, "topic=private", verified.body.access_token)
    const revoked = await b.request("DELETE", `/v1/namespace/devices/${device.id}`, { token: owner })
    expect(revoked.status, revoked.text).toBe(200)
    const at = Date.now()
    const closed = await socket.closed
    expect([closed.code, closed.reason.startsWith("REVOKED")]).toEqual([4401, true])
    expect(closed.at - at).toBeLessThan(10_000)
  }, 20_000)
})
