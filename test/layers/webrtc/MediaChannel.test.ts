/**
 * The gateway's channel to its media server (src/layers/webrtc/MediaChannel.ts) and the signalling
 * relay over it (SignalSockets.ts), against a stand-in media server that speaks the channel's
 * protocol (engines/sfu/mux.go): the framing, joins multiplexed and answered, the per-client bound
 * on what waits for a slow reader, and the channel's loss.
 */
import { Effect } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import type { Principal } from "../../../src/domain/Principal.js"
import { type ChannelJoin, decodeFrame, encodeFrame, Kind, makeMediaChannel, type MediaChannel } from "../../../src/layers/webrtc/MediaChannel.js"
import { CLIENT_QUEUE_BYTES, makeSignalSockets, MAX_FRAME_BYTES, type SignalSockets } from "../../../src/layers/webrtc/SignalSockets.js"

const KEY = Buffer.alloc(32, 7)

interface Received {
  readonly kind: number
  readonly id: number
  readonly payload: Buffer
}

/** A stand-in media server's /mux: what it received, and a way to answer on its channels. */
const fakeMediaServer = async (answer: (frame: Received, reply: (kind: number, id: number, payload?: Buffer | string) => void) => void) => {
  const received: Array<Received> = []
  const channels = new Set<WebSocket>()
  const server = http.createServer()
  const wss = new WebSocketServer({ noServer: true })
  let refused = 0
  server.on("upgrade", (req, socket, head) => {
    if (req.url !== "/mux" || req.headers.authorization !== `Bearer ${KEY.toString("hex")}`) {
      refused++
      socket.end("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
      return
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      channels.add(ws)
      ws.on("close", () => channels.delete(ws))
      ws.on("message", (data) => {
        const frame = decodeFrame(data as Buffer)!
        received.push(frame)
        answer(frame, (kind, id, payload) => ws.send(encodeFrame(kind, id, payload)))
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    received,
    channels,
    refused: () => refused,
    /** The media server dies: every channel drops without a close frame. */
    kill: () => {
      for (const ws of channels) ws.terminate()
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of channels) ws.terminate()
        wss.close()
        server.close(() => resolve())
      })
  }
}

const join = (peer: string): ChannelJoin => ({ ns: "calls", room: "standup", user: "0xabc", device: "", peer, muted: false, ek: "ab".repeat(32) })
const until = async (check: () => boolean, what: string, ms = 3_000) => {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

describe("the media server's channel", () => {
  it("frames a kind, a stream id and a payload, and refuses a frame shorter than its header", () => {
    const frame = encodeFrame(Kind.text, 0xfffffffe, '{"type":"answer"}')
    expect(frame.length).toBe(5 + 17)
    expect(decodeFrame(frame)).toEqual({ kind: Kind.text, id: 0xfffffffe, payload: Buffer.from('{"type":"answer"}') })
    expect(decodeFrame(encodeFrame(Kind.accept, 3))).toEqual({ kind: Kind.accept, id: 3, payload: Buffer.alloc(0) })
    expect(decodeFrame(Buffer.from([Kind.text, 0, 0]))).toBeUndefined()
  })

  it("multiplexes joins on one socket: each answered, each stream's frames its own, both ways", async () => {
    const media = await fakeMediaServer((frame, reply) => {
      if (frame.kind !== Kind.join) return
      const asked = JSON.parse(frame.payload.toString()) as ChannelJoin
      if (asked.peer === "full") return reply(Kind.refuse, frame.id, JSON.stringify({ status: 503, code: "ROOM_FULL", error: "the room is full" }))
      // a welcome comes with the accept, or after it
      const welcome = JSON.stringify({ type: "welcome", peer_id: asked.peer })
      if (asked.peer === "b") return reply(Kind.accept, frame.id, welcome)
      reply(Kind.accept, frame.id)
      reply(Kind.text, frame.id, welcome)
    })
    cleanups.push(media.close)
    const channel = makeMediaChannel({ target: () => ({ url: media.url, key: KEY }), maxFrameBytes: MAX_FRAME_BYTES })
    cleanups.push(channel.close)
    const got: Record<string, Array<string>> = { a: [], b: [] }
    const a = channel.open(join("a"), { frame: (d) => got["a"]!.push(d.toString()), close: () => {} })
    const b = channel.open(join("b"), { frame: (d) => got["b"]!.push(d.toString()), close: () => {} })
    const full = channel.open(join("full"), { frame: () => {}, close: () => {} })
    expect(await a.answer).toEqual({ _tag: "accepted" })
    expect(await b.answer).toEqual({ _tag: "accepted" })
    expect(await full.answer).toEqual({ _tag: "refused", refusal: { status: 503, code: "ROOM_FULL", error: "the room is full" } })
    await until(() => got["a"]!.length === 1 && got["b"]!.length === 1, "both welcomes")
    expect(JSON.parse(got["a"]![0]!).peer_id).toBe("a")
    expect(JSON.parse(got["b"]![0]!).peer_id).toBe("b")
    expect(media.channels.size).toBe(1)

    const joins = media.received.filter((f) => f.kind === Kind.join)
    expect(JSON.parse(joins[0]!.payload.toString())).toEqual(join("a"))
    b.send(Buffer.from('{"type":"answer","sdp":"x"}'), false)
    a.send(Buffer.from([1, 2]), true)
    a.end(true)
    b.end(false)
    await until(() => media.received.length === 7, "the streams' frames")
    const idOf = (peer: string) => joins.find((f) => JSON.parse(f.payload.toString()).peer === peer)!.id
    const rest = media.received.slice(3).map((f) => [String.fromCharCode(f.kind), f.id, [...f.payload]])
    expect(rest).toEqual([
      ["T", idOf("b"), [...Buffer.from('{"type":"answer","sdp":"x"}')]],
      ["B", idOf("a"), [1, 2]],
      ["E", idOf("a"), [1]],
      ["E", idOf("b"), [0]]
    ])
    expect(channel.streams()).toBe(0)
  })

  it("closes a stream the media server closes, and drops frames for it after", async () => {
    const media = await fakeMediaServer((frame, reply) => {
      if (frame.kind !== Kind.join) return
      reply(Kind.accept, frame.id)
      reply(Kind.close, frame.id, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from("kicked")]))
      reply(Kind.text, frame.id, "late")
    })
    cleanups.push(media.close)
    const channel = makeMediaChannel({ target: () => ({ url: media.url, key: KEY }), maxFrameBytes: MAX_FRAME_BYTES })
    cleanups.push(channel.close)
    const frames: Array<string> = []
    let closed: [number, string] | undefined
    const s = channel.open(join("k"), { frame: (d) => frames.push(d.toString()), close: (code, reason) => (closed = [code, reason]) })
    expect((await s.answer)._tag).toBe("accepted")
    await until(() => closed !== undefined, "the close")
    expect(closed).toEqual([1000, "kicked"])
    await new Promise((r) => setTimeout(r, 50))
    expect(frames).toEqual([])
    expect(channel.streams()).toBe(0)
  })

  it("fails waiting joins and closes open streams as dropped (1006) when the channel is lost, then opens it again", async () => {
    let answering = true
    const media = await fakeMediaServer((frame, reply) => {
      if (frame.kind === Kind.join && (answering || JSON.parse(frame.payload.toString()).peer === "again")) reply(Kind.accept, frame.id)
    })
    cleanups.push(media.close)
    const channel = makeMediaChannel({ target: () => ({ url: media.url, key: KEY }), maxFrameBytes: MAX_FRAME_BYTES, reopenMs: 50 })
    cleanups.push(channel.close)
    let closed: number | undefined
    const open = channel.open(join("open"), { frame: () => {}, close: (code) => (closed = code) })
    expect((await open.answer)._tag).toBe("accepted")
    answering = false
    const waiting = channel.open(join("waiting"), { frame: () => {}, close: () => {} })
    await until(() => media.received.length === 2, "the second join")
    media.kill()
    expect(await waiting.answer).toEqual({ _tag: "unavailable", error: "the media server's channel dropped" })
    await until(() => closed !== undefined, "the open stream closed")
    expect(closed).toBe(1006)
    // opened again on its own, before any join asks
    await until(() => media.channels.size === 1, "the channel reopened")
    expect((await channel.open(join("again"), { frame: () => {}, close: () => {} }).answer)._tag).toBe("accepted")
  })

  it("opens as the media server comes up, not at its next check, so the first joins' reports go on it", async () => {
    const media = await fakeMediaServer(() => {})
    cleanups.push(media.close)
    let up = false
    let cameUp: (() => void) | undefined
    const channel = makeMediaChannel({
      target: () => (up ? { url: media.url, key: KEY } : undefined),
      maxFrameBytes: MAX_FRAME_BYTES,
      reopenMs: 60_000,
      onTargetUp: (listener) => (cameUp = listener)
    })
    cleanups.push(channel.close)
    up = true
    cameUp!()
    await until(() => media.channels.size === 1, "the channel opened", 1_000)
  })

  it("refuses joins while the media server refuses the channel's key, or is down", async () => {
    const media = await fakeMediaServer(() => {})
    cleanups.push(media.close)
    const wrong = makeMediaChannel({ target: () => ({ url: media.url, key: Buffer.alloc(32, 1) }), maxFrameBytes: MAX_FRAME_BYTES })
    cleanups.push(wrong.close)
    expect(await wrong.open(join("x"), { frame: () => {}, close: () => {} }).answer).toEqual({ _tag: "unavailable", error: "the room's media server did not answer" })
    expect(media.refused()).toBeGreaterThan(0)
    const down = makeMediaChannel({ target: () => undefined, maxFrameBytes: MAX_FRAME_BYTES })
    cleanups.push(down.close)
    expect((await down.open(join("y"), { frame: () => {}, close: () => {} }).answer)._tag).toBe("unavailable")
  })

  it("gives up on a join the media server does not answer, and tells it to let go", async () => {
    const media = await fakeMediaServer(() => {})
    cleanups.push(media.close)
    const channel = makeMediaChannel({ target: () => ({ url: media.url, key: KEY }), maxFrameBytes: MAX_FRAME_BYTES, answerMs: 200 })
    cleanups.push(channel.close)
    expect(await channel.open(join("slow"), { frame: () => {}, close: () => {} }).answer).toEqual({ _tag: "unavailable", error: "the media server did not answer the join" })
    await until(() => media.received.some((f) => f.kind === Kind.end), "the end")
    expect(channel.streams()).toBe(0)
  })
})

describe("the signalling relay over the channel", () => {
  const caller: Principal = { namespace: "calls", subject: "0xabc", method: "jwt", role: "runtime", grants: [], keyId: undefined, sessionId: "s1", deviceId: undefined }

  /** A gateway's signalling sockets over a stand-in media server, behind a bare HTTP server. */
  const relayOver = async (media: Awaited<ReturnType<typeof fakeMediaServer>>, channel?: MediaChannel) => {
    const sockets: SignalSockets = makeSignalSockets({
      self: "n1",
      webrtc: {
        relaySecret: () => Effect.succeed(new Uint8Array(32).fill(9)),
        // nothing kept: each join reads through the effects
        keptNow: () => undefined,
        mayJoin: () => Effect.succeed({ muted: false })
      } as never,
      rooms: { place: () => Effect.succeed("n1"), placeNow: () => undefined } as never,
      // a stand-in reached only by its channel: it takes no handed sockets (as a media server
      // the gateway did not start with an IPC channel), so every join is relayed
      media: { current: () => ({ url: media.url, key: KEY }), onUp: () => {}, hand: () => undefined } as never,
      coordination: {} as never,
      membership: {} as never,
      revocation: { register: () => () => {} } as never,
      joinsPerMinute: 100_000,
      channel
    })
    const server = http.createServer()
    const refusals: Array<unknown> = []
    server.on("upgrade", (req, socket, head) => {
      void sockets.client({
        req,
        socket,
        head,
        query: { room: "standup" },
        params: {},
        caller,
        refuse: (refusal) => {
          refusals.push(refusal)
          socket.end("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
        },
        answered: () => {}
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    cleanups.push(() => new Promise<void>((resolve) => (sockets.close(), server.close(() => resolve()))))
    const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`
    return { url, refusals }
  }

  const connect = (url: string) =>
    new Promise<{ ws: WebSocket; frames: Array<string>; closed: Promise<number> }>((resolve, reject) => {
      const ws = new WebSocket(url)
      const frames: Array<string> = []
      const closed = new Promise<number>((r) => ws.once("close", (code) => r(code)))
      ws.on("message", (d) => frames.push(d.toString()))
      ws.once("open", () => resolve({ ws, frames, closed }))
      ws.once("error", reject)
    })

  it("closes a client that lets more than its bound wait (1008) and tells the media server it failed, while another client on the channel is served", async () => {
    const ids = new Map<string, number>()
    let reply!: (kind: number, id: number, payload?: Buffer | string) => void
    const media = await fakeMediaServer((frame, r) => {
      reply = r
      if (frame.kind !== Kind.join) return
      ids.set(ids.size === 0 ? "slow" : "quick", frame.id)
      r(Kind.accept, frame.id)
      r(Kind.text, frame.id, '{"type":"welcome"}')
    })
    cleanups.push(media.close)
    const { url } = await relayOver(media)
    const slow = await connect(url)
    await until(() => slow.frames.length === 1, "the slow client's welcome")
    const quick = await connect(url)
    await until(() => quick.frames.length === 1, "the quick client's welcome")
    // the slow client stops reading; the media server sends it far more than its bound
    ;(slow.ws as unknown as { _socket: { pause: () => void } })._socket.pause()
    const big = `{"type":"offer","sdp":"${"x".repeat(512 * 1024)}"}`
    for (let i = 0; i < (2 * CLIENT_QUEUE_BYTES) / big.length + 8; i++) reply(Kind.text, ids.get("slow")!, big)
    await until(() => media.received.some((f) => f.kind === Kind.end && f.id === ids.get("slow")), "the slow client's end", 10_000)
    expect([...media.received.find((f) => f.kind === Kind.end && f.id === ids.get("slow"))!.payload]).toEqual([1])
    // the other stream on the same channel goes on
    reply(Kind.text, ids.get("quick")!, '{"type":"candidate"}')
    await until(() => quick.frames.length === 2, "the quick client's frame")
    quick.ws.send('{"type":"leave"}')
    await until(() => media.received.some((f) => f.kind === Kind.text && f.id === ids.get("quick")), "the quick client's leave")
    quick.ws.close()
    slow.ws.terminate()
  })

  it("answers a refused join over HTTP, closes a kicked client as the media server says, and a client whose media server died with 1011", async () => {
    let n = 0
    const media = await fakeMediaServer((frame, reply) => {
      if (frame.kind !== Kind.join) return
      n++
      if (n === 1) return reply(Kind.refuse, frame.id, JSON.stringify({ status: 503, code: "ROOM_FULL", error: "room standup is full" }))
      reply(Kind.accept, frame.id)
      reply(Kind.text, frame.id, '{"type":"welcome"}')
      if (n === 2) {
        reply(Kind.text, frame.id, '{"type":"kicked"}')
        reply(Kind.close, frame.id, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from("kicked")]))
      }
    })
    cleanups.push(media.close)
    const { url, refusals } = await relayOver(media)
    await expect(connect(url)).rejects.toThrow(/503/)
    expect(refusals).toEqual([expect.objectContaining({ code: "UNAVAILABLE", error: "room standup is full", retryAfterSeconds: 5 })])
    const kicked = await connect(url)
    expect(await kicked.closed).toBe(1000)
    expect(kicked.frames.map((f) => JSON.parse(f).type)).toEqual(["welcome", "kicked"])
    const dropped = await connect(url)
    await until(() => dropped.frames.length === 1, "the welcome")
    media.kill()
    expect(await dropped.closed).toBe(1011)
  })
})
