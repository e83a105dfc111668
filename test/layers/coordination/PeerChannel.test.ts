/**
 * Peer channels (src/layers/coordination/PeerChannel.ts) between a caller and a real HTTP server
 * taking the channel's upgrade: calls answered on the channel, frames that do not verify and
 * replayed ones closing it, deadlines, the channel's loss, and a peer that refuses channels.
 */
import { Either } from "effect"
import { createHmac } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { WebSocket } from "ws"
import { answerRefusalOnSocket } from "../../../src/layers/deployments/serving/AppAnswers.js"
import { internalPath } from "../../../src/layers/coordination/InternalClient.js"
import {
  callFrame,
  CHANNEL_CALLS,
  CHANNEL_PATH,
  type ChannelOutcome,
  type ChannelReply,
  makeChannelServer,
  makePeerChannels,
  type PeerChannels
} from "../../../src/layers/coordination/PeerChannel.js"

const ROOT = Buffer.alloc(32, 9)
const QUERY = "/v1/internal/sqlite/query"
const keyOf = (generation: number, time: string, nonce: string, envelope: string) =>
  generation > 1 ? undefined : createHmac("sha256", ROOT).update([generation, time, nonce, envelope].join("\n")).digest()

let nonces = 0
const opening = (generation = 0) => () => {
  const time = String(Math.floor(Date.now() / 1000))
  const nonce = `nonce-${++nonces}-${"x".repeat(20)}`
  const envelope = JSON.stringify({ from: "node-b", generation })
  return {
    headers: { "x-portico-coordination-time": time, "x-portico-coordination-nonce": nonce, "x-portico-forward-envelope": envelope },
    key: keyOf(generation, time, nonce, envelope)!,
    generation
  }
}

type Serve = (path: string, body: string, done: (reply: ChannelReply) => void) => boolean

/** A gateway's side of channels: an HTTP server whose upgrades the channel server takes (or refuses with `refuseWith`). */
const home = async (serve: Serve, refuseWith?: number) => {
  const server = http.createServer((_req, res) => res.writeHead(404).end())
  const channels = makeChannelServer({
    keyOf,
    generation: () => 0,
    serve,
    maxCallBytes: 1024 * 1024,
    notServed: (path) => ({ status: 404, body: JSON.stringify({ error: `${path} is not taken`, code: "NOT_FOUND" }) })
  })
  const sockets = new Set<import("node:stream").Duplex>()
  server.on("upgrade", (req, socket, head) => {
    sockets.add(socket)
    if (req.url !== CHANNEL_PATH || refuseWith !== undefined) {
      socket.end(`HTTP/1.1 ${refuseWith ?? 404} No\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`)
      return
    }
    channels.accept({
      req,
      socket,
      head,
      refuse: (refusal) => answerRefusalOnSocket(socket, refusal),
      answered: () => undefined
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    base,
    channels,
    /** Every channel's connection cut, as a lost network or a killed process cuts it. */
    cut: () => {
      for (const socket of sockets) socket.destroy()
    },
    close: () => {
      channels.close()
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const caller = (make = opening()) => {
  const peers = makePeerChannels({ opening: make, generation: () => 0, maxAnswerBytes: 1024 * 1024, maxCallBytes: 64 * 1024 })
  cleanups.push(() => peers.close())
  return peers
}

/** Calls until the channel is open and takes the call; the outcome. */
const callOpen = async (peers: PeerChannels, base: string, path: string, body: string, timeoutMs = 2_000): Promise<ChannelOutcome> => {
  for (let i = 0; i < 100; i++) {
    let settle: ((o: ChannelOutcome) => void) | undefined
    const outcome = new Promise<ChannelOutcome>((resolve) => (settle = resolve))
    if (peers.callNow("node-a", base, path, body, timeoutMs, settle!)) return outcome
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error("the channel never opened")
}

const echo: Serve = (path, body, done) => {
  if (path !== QUERY) return false
  setTimeout(() => done({ status: 201, body: JSON.stringify({ path, body }), retryAfter: 7 }), 5)
  return true
}

describe("peer channels", () => {
  it("opens on the first call (which goes over HTTP) and answers the next ones on the channel", async () => {
    const a = await home(echo)
    cleanups.push(a.close)
    const peers = caller()
    expect(peers.callNow("node-a", a.base, QUERY, "{}", 1000, () => undefined)).toBe(false)
    const outcome = await callOpen(peers, a.base, QUERY, '{"q":"é"}')
    expect(outcome).toEqual(Either.right({ status: 201, text: JSON.stringify({ path: QUERY, body: '{"q":"é"}' }), retryAfter: "7" }))
    // calls answered out of order each reach their own caller
    const many = await Promise.all(
      Array.from({ length: 20 }, (_, i) => callOpen(peers, a.base, QUERY, String(i)))
    )
    expect(many.map((o) => JSON.parse(Either.getOrThrow(o).text).body)).toEqual(Array.from({ length: 20 }, (_, i) => String(i)))
    expect(peers.open()).toEqual(["node-a"])
    expect(a.channels.open()).toBe(1)
  })

  it("sends only the routes a channel carries, and no call over its size: those go as HTTP", async () => {
    expect(CHANNEL_CALLS.has(internalPath("sqliteQuery"))).toBe(true)
    const a = await home(echo)
    cleanups.push(a.close)
    const peers = caller()
    await callOpen(peers, a.base, QUERY, "{}")
    expect(peers.callNow("node-a", a.base, internalPath("sqliteDelete"), "{}", 1000, () => undefined)).toBe(false)
    expect(peers.callNow("node-a", a.base, QUERY, "x".repeat(64 * 1024 + 1), 1000, () => undefined)).toBe(false)
    // counted in bytes: 30,000 three-byte characters are over 64 KiB
    expect(peers.callNow("node-a", a.base, QUERY, "€".repeat(30_000), 1000, () => undefined)).toBe(false)
    expect(peers.callNow("node-a", a.base, QUERY, "€".repeat(20_000), 1000, () => undefined)).toBe(true)
  })

  it("answers a path its lane does not take with the refusal, and a throwing route with 500", async () => {
    const a = await home((_path, body) => {
      if (body === "boom") throw new Error("a bug")
      return false
    })
    cleanups.push(a.close)
    const peers = caller()
    expect(Either.getOrThrow(await callOpen(peers, a.base, QUERY, "{}")).status).toBe(404)
    expect(Either.getOrThrow(await callOpen(peers, a.base, QUERY, "boom")).status).toBe(500)
  })

  it("gives up on a call at its deadline and drops the late answer", async () => {
    const a = await home((_path, _body, done) => {
      setTimeout(() => done({ status: 200, body: "late" }), 600)
      return true
    })
    cleanups.push(a.close)
    const peers = caller()
    const started = Date.now()
    expect(await callOpen(peers, a.base, QUERY, "{}", 200)).toEqual(Either.left("no answer in time"))
    expect(Date.now() - started).toBeLessThan(550)
  })

  it("fails the calls waiting when the channel is lost, and opens it again", async () => {
    let hold: Array<(reply: ChannelReply) => void> = []
    const a = await home((_path, _body, done) => {
      hold.push(done)
      return true
    })
    cleanups.push(a.close)
    const peers = caller()
    const waiting = callOpen(peers, a.base, QUERY, "{}", 5_000)
    await new Promise((resolve) => setTimeout(resolve, 100))
    a.cut()
    expect(await waiting).toEqual(Either.left("the channel to the node closed"))
    // the next calls go over HTTP until the channel is opened again
    expect(peers.callNow("node-a", a.base, QUERY, "{}", 1000, () => undefined)).toBe(false)
    hold = []
    const again = callOpen(peers, a.base, QUERY, "{}")
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(hold.length).toBe(1)
    hold[0]!({ status: 200, body: "back" })
    expect(Either.getOrThrow(await again).text).toBe("back")
  })

  it("closes a channel on a frame that does not verify or is replayed, running neither", async () => {
    const ran: Array<string> = []
    const a = await home((_path, body, done) => {
      ran.push(body)
      done({ status: 200, body: "ok" })
      return true
    })
    cleanups.push(a.close)
    const raw = async (make: ReturnType<typeof opening>) => {
      const o = make()
      const ws = new WebSocket(a.base.replace("http", "ws") + CHANNEL_PATH, { headers: o.headers })
      await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject))
      const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)))
      return { ws, key: o.key, closed }
    }
    // a frame under another key
    const forged = await raw(opening())
    forged.ws.send(callFrame(Buffer.alloc(32, 1), 1, QUERY, "forged"))
    expect(await forged.closed).toBe(1008)
    // a frame changed after its MAC was made
    const changed = await raw(opening())
    const frame = callFrame(changed.key, 1, QUERY, "genuine")
    frame[frame.length - 1] = 0x21
    changed.ws.send(frame)
    expect(await changed.closed).toBe(1008)
    // a genuine frame sent twice: the first runs, the second closes the channel
    const replayed = await raw(opening())
    const once = callFrame(replayed.key, 1, QUERY, "once")
    replayed.ws.send(once)
    replayed.ws.send(once)
    expect(await replayed.closed).toBe(1008)
    expect(ran).toEqual(["once"])
  })

  it("calls a peer that refuses channels over HTTP, and does not ask again at once", async () => {
    let served = 0
    const a = await home(() => {
      served++
      return false
    }, 403)
    cleanups.push(a.close)
    const peers = caller()
    for (let i = 0; i < 20; i++) {
      expect(peers.callNow("node-a", a.base, QUERY, "{}", 1000, () => undefined)).toBe(false)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    expect(served).toBe(0)
    expect(peers.open()).toEqual([])
  })

  it("refuses a handshake whose root generation is not held", async () => {
    const a = await home(echo)
    cleanups.push(a.close)
    const o = opening(5)()
    const answer = await new Promise<number>((resolve) => {
      const ws = new WebSocket(a.base.replace("http", "ws") + CHANNEL_PATH, { headers: o.headers })
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0))
      ws.on("open", () => resolve(101))
      ws.on("error", () => undefined)
    })
    expect(answer).toBe(403)
  })
})
