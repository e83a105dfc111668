/**
 * A kept channel of node-to-node calls (docs/cluster.md, "Peer channels"): one WebSocket from this
 * gateway to each peer it forwards to, over which the JSON calls the peer's fast lane answers (a
 * node-local database query forwarded to its home) travel as frames, so a forwarded call costs a
 * frame each way instead of an HTTP request and answer on both gateways (bench/cluster, the
 * forward hop).
 *
 * Who may talk: the channel is opened by a GET of `/v1/internal/channel` that carries the
 * coordination MAC over its envelope `{from, generation}` like any internal call (source, time,
 * single-use nonce). Both ends then derive the channel's key from the root generation the envelope
 * names and the handshake's time and nonce; it never crosses the wire. Every frame carries an
 * HMAC-SHA-256 under that key over its header and body, calls are numbered strictly upwards (a
 * frame replayed or reordered on the channel closes it), and an answer is taken only for a call
 * still waiting. A channel whose key is of a root generation older than the one before the newest
 * is closed by either end and opened again under the newest.
 *
 * Frames (binary): kind (1 byte), the call's id (4 bytes, big-endian), MAC (32 bytes), then
 *   - a call: the length of the internal path (1 byte), the path, the JSON body;
 *   - an answer: the HTTP status (2 bytes), Retry-After in seconds (4 bytes, 0 for none), the text.
 *
 * What is sent on a channel is what the HTTP call would send; whoever calls cannot tell the two
 * apart. Without an open channel (opening, refused by a peer that has none, lost) the call goes as
 * HTTP and the channel is opened again in the background.
 */
import { Either, Schema } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import { WebSocket, WebSocketServer } from "ws"
import type * as http from "node:http"
import type { Duplex } from "node:stream"
import { Code, type ErrorCode } from "../../domain/Errors.js"

/** What taking a channel needs of its handshake (deployments/serving/SocketHandshake.ts has it all). */
export interface ChannelHandshake {
  readonly req: http.IncomingMessage
  readonly socket: Duplex
  readonly head: Buffer
  readonly refuse: (refusal: { readonly code: ErrorCode; readonly error: string; readonly hint?: string }) => void
  readonly answered: (status: number) => void
}

export const CHANNEL_PATH = "/v1/internal/channel"

/**
 * The internal routes whose calls travel on a channel: those the peer's fast lane answers from
 * their JSON body alone (FastLane.ts `peerCall`). Any other call goes as HTTP.
 */
export const CHANNEL_CALLS: ReadonlySet<string> = new Set(["/v1/internal/sqlite/query"])

const CALL = 0x43
const ANSWER = 0x41
const MAC_BYTES = 32
/** kind, id, MAC */
const HEAD = 5 + MAC_BYTES
/** How often a channel is pinged; one not answered by the next ping is closed. */
const PING_MS = 15_000
/** How long after a channel was lost, or could not open, it is tried again. */
const REOPEN_MS = 1_000
/** How long a peer that refused the channel (none there, an older gateway) is called over HTTP only. */
const REFUSED_MS = 30_000
/** How often waiting calls are checked against their deadlines. */
const SWEEP_MS = 100

/** The channel's envelope, what the handshake's coordination MAC covers. */
export const ChannelEnvelope = Schema.Struct({ from: Schema.String, generation: Schema.Int.pipe(Schema.nonNegative()) })
export type ChannelEnvelope = typeof ChannelEnvelope.Type
const decodeEnvelope = Schema.decodeUnknownEither(Schema.parseJson(ChannelEnvelope))

/** The text both ends key the channel with (Coordination.ts derives the key from it). */
export const channelKeyText = (audience: string, time: string, nonce: string, envelope: string): string =>
  ["peer-channel", audience, time, nonce, envelope].join("\n")

const macOf = (key: Buffer, frame: Buffer): Buffer => createHmac("sha256", key).update(frame.subarray(0, 5)).update(frame.subarray(HEAD)).digest()

const sealed = (key: Buffer, frame: Buffer): Buffer => {
  macOf(key, frame).copy(frame, 5)
  return frame
}

const holds = (key: Buffer, frame: Buffer): boolean => frame.length >= HEAD && timingSafeEqual(macOf(key, frame), frame.subarray(5, HEAD))

export const callFrame = (key: Buffer, id: number, path: string, body: string): Buffer => {
  const pathLength = Buffer.byteLength(path, "latin1")
  const frame = Buffer.allocUnsafe(HEAD + 1 + pathLength + Buffer.byteLength(body, "utf8"))
  frame[0] = CALL
  frame.writeUInt32BE(id, 1)
  frame[HEAD] = pathLength
  frame.write(path, HEAD + 1, "latin1")
  frame.write(body, HEAD + 1 + pathLength, "utf8")
  return sealed(key, frame)
}

export const answerFrame = (key: Buffer, id: number, status: number, retryAfter: number | undefined, text: string | Uint8Array): Buffer => {
  const length = typeof text === "string" ? Buffer.byteLength(text, "utf8") : text.byteLength
  const frame = Buffer.allocUnsafe(HEAD + 6 + length)
  frame[0] = ANSWER
  frame.writeUInt32BE(id, 1)
  frame.writeUInt16BE(status, HEAD)
  frame.writeUInt32BE(retryAfter === undefined ? 0 : Math.min(0xffff_ffff, Math.max(0, Math.ceil(retryAfter))), HEAD + 2)
  if (typeof text === "string") frame.write(text, HEAD + 6, "utf8")
  else frame.set(text, HEAD + 6)
  return sealed(key, frame)
}

/** A peer's answer, as an HTTP call gives it. */
export interface ChannelAnswer {
  readonly status: number
  readonly text: string
  readonly retryAfter: string | undefined
}

export type ChannelOutcome = Either.Either<ChannelAnswer, string>

interface Waiting {
  readonly done: (outcome: ChannelOutcome) => void
  readonly deadline: number
}

interface Channel {
  readonly ws: WebSocket
  readonly url: string
  readonly key: Buffer
  readonly generation: number
  nextId: number
  readonly waiting: Map<number, Waiting>
  alive: boolean
}

/** What opening a channel to a node needs from Coordination: the handshake's headers and the key they make. */
export interface ChannelOpening {
  readonly headers: Record<string, string>
  readonly key: Buffer
  readonly generation: number
}

export interface PeerChannels {
  /**
   * Sends a call to node `nodeId` at `base` on its channel, when one is open, and says true;
   * `done` then gets the answer, or why there is none (the channel was lost, no answer in time),
   * once. False when there is no open channel (one is opened for the next calls): call over HTTP.
   */
  readonly callNow: (nodeId: string, base: string, path: string, body: string, timeoutMs: number, done: (outcome: ChannelOutcome) => void) => boolean
  /** Channels open (for tests). */
  readonly open: () => ReadonlyArray<string>
  readonly close: () => void
}

export const makePeerChannels = (options: {
  /** The handshake for node `nodeId`: signed headers, the key, its root generation. */
  readonly opening: (nodeId: string) => ChannelOpening
  /** The newest root generation this node holds. */
  readonly generation: () => number
  /** The largest answer taken. */
  readonly maxAnswerBytes: number
  /** The largest call sent on a channel (what the peer takes); a larger one goes as HTTP, refused there alone. */
  readonly maxCallBytes: number
  readonly log?: (message: string) => void
}): PeerChannels => {
  // a UTF-16 code unit is at most 3 bytes of UTF-8: the bytes are counted only for a long body
  const tooLarge = (body: string) => body.length > options.maxCallBytes || (body.length * 3 > options.maxCallBytes && Buffer.byteLength(body, "utf8") > options.maxCallBytes)
  const channels = new Map<string, Channel>()
  const isOpen = (channel: Channel) => channel.ws.readyState === WebSocket.OPEN
  /** When a node's channel may be tried again. */
  const notBefore = new Map<string, number>()
  let closed = false

  const fail = (channel: Channel, why: string) => {
    const all = [...channel.waiting.values()]
    channel.waiting.clear()
    for (const w of all) w.done(Either.left(why))
  }

  const lost = (nodeId: string, channel: Channel, why: string, retryMs: number) => {
    if (channels.get(nodeId) === channel) {
      channels.delete(nodeId)
      notBefore.set(nodeId, Date.now() + retryMs)
    }
    fail(channel, why)
    channel.ws.terminate()
  }

  const onAnswer = (nodeId: string, channel: Channel, data: Buffer) => {
    if (data.length < HEAD + 6 || data[0] !== ANSWER || !holds(channel.key, data)) return lost(nodeId, channel, "the channel's frame did not verify", REOPEN_MS)
    const id = data.readUInt32BE(1)
    const waiting = channel.waiting.get(id)
    // a call given up on already (its deadline passed): its late answer is dropped
    if (waiting === undefined) return
    channel.waiting.delete(id)
    const retryAfter = data.readUInt32BE(HEAD + 2)
    waiting.done(Either.right({ status: data.readUInt16BE(HEAD), text: data.toString("utf8", HEAD + 6), retryAfter: retryAfter === 0 ? undefined : String(retryAfter) }))
  }

  const openTo = (nodeId: string, base: string) => {
    let opening: ChannelOpening
    try {
      opening = options.opening(nodeId)
    } catch (e) {
      notBefore.set(nodeId, Date.now() + REOPEN_MS)
      options.log?.(`could not sign a channel to ${nodeId}: ${e instanceof Error ? e.message : String(e)}`)
      return
    }
    const url = base.replace(/^http/, "ws").replace(/\/$/, "") + CHANNEL_PATH
    const ws = new WebSocket(url, { headers: opening.headers, perMessageDeflate: false, maxPayload: options.maxAnswerBytes + HEAD + 6, handshakeTimeout: 5_000 })
    const channel: Channel = { ws, url: base, key: opening.key, generation: opening.generation, nextId: 1, waiting: new Map(), alive: true }
    channels.set(nodeId, channel)
    let retryMs = REOPEN_MS
    ws.on("unexpected-response", (_req, res) => {
      // a peer without channels (an older gateway), or one refusing this node's MAC: HTTP for a while
      retryMs = REFUSED_MS
      options.log?.(`node ${nodeId} refused a peer channel (${res.statusCode}); calls go over HTTP`)
      res.resume()
      ws.terminate()
    })
    // ws turns Nagle off on its sockets: a frame leaves when sent; the socket's state says when it is open
    ws.on("message", (data: Buffer) => onAnswer(nodeId, channel, data))
    ws.on("pong", () => (channel.alive = true))
    ws.on("error", () => undefined)
    ws.on("close", () => lost(nodeId, channel, "the channel to the node closed", retryMs))
  }

  // every channel's deadlines and liveness on one clock
  const sweep = setInterval(() => {
    const now = Date.now()
    for (const channel of channels.values()) {
      for (const [id, w] of channel.waiting) {
        if (w.deadline > now) continue
        channel.waiting.delete(id)
        w.done(Either.left("no answer in time"))
      }
    }
  }, SWEEP_MS)
  sweep.unref()
  const ping = setInterval(() => {
    for (const [nodeId, channel] of channels) {
      if (!isOpen(channel)) continue
      if (!channel.alive) {
        lost(nodeId, channel, "the channel to the node stopped answering", REOPEN_MS)
        continue
      }
      channel.alive = false
      channel.ws.ping()
    }
  }, PING_MS)
  ping.unref()

  return {
    callNow: (nodeId, base, path, body, timeoutMs, done) => {
      if (closed || !CHANNEL_CALLS.has(path) || tooLarge(body)) return false
      const channel = channels.get(nodeId)
      if (channel === undefined) {
        if ((notBefore.get(nodeId) ?? 0) <= Date.now()) openTo(nodeId, base)
        return false
      }
      // opening, or closing and not told yet: this call goes as HTTP
      if (!isOpen(channel)) return false
      // the node moved, or the root rotated past the channel's key: a new channel for what follows
      if (channel.url !== base || channel.generation < options.generation() - 1 || channel.nextId > 0xffff_fff0) {
        lost(nodeId, channel, "the channel was replaced", 0)
        return false
      }
      const id = channel.nextId++
      channel.waiting.set(id, { done, deadline: Date.now() + timeoutMs })
      channel.ws.send(callFrame(channel.key, id, path, body))
      return true
    },
    open: () => [...channels].filter(([, c]) => isOpen(c)).map(([id]) => id),
    close: () => {
      closed = true
      clearInterval(sweep)
      clearInterval(ping)
      for (const [nodeId, channel] of [...channels]) lost(nodeId, channel, "the gateway is stopping", 0)
    }
  }
}

/** A call as the peer's lane answers it (FastLane.ts `peerCall`). */
export interface ChannelReply {
  readonly status: number
  readonly body: string | Uint8Array
  readonly retryAfter?: number | undefined
}

export interface ChannelServer {
  /** Takes a channel whose handshake's MAC the upgrade listener verified. */
  readonly accept: (handshake: ChannelHandshake) => void
  /** Channels open from peers (for tests). */
  readonly open: () => number
  readonly close: () => void
}

export const makeChannelServer = (options: {
  /** The key of a channel with this envelope and handshake, under `generation`; undefined when that generation is not held. */
  readonly keyOf: (generation: number, time: string, nonce: string, envelope: string) => Buffer | undefined
  readonly generation: () => number
  /**
   * Answers call `path` with `body` as the lane answers the same HTTP call, `done` once; false
   * when the lane does not take that path (then 404).
   */
  readonly serve: ((path: string, body: string, done: (reply: ChannelReply) => void) => boolean) | undefined
  /** The largest call taken (a forwarded body's cap). */
  readonly maxCallBytes: number
  readonly notServed: (path: string) => ChannelReply
}): ChannelServer => {
  const server = new WebSocketServer({ noServer: true, maxPayload: options.maxCallBytes + HEAD + 256, perMessageDeflate: false, clientTracking: true })
  return {
    accept: (handshake) => {
      const serve = options.serve
      if (serve === undefined) {
        return handshake.refuse({ code: Code.UNAVAILABLE, error: "this gateway takes no peer channels", hint: "call the route over HTTP" })
      }
      const envelopeText = String(handshake.req.headers["x-portico-forward-envelope"] ?? "")
      const envelope = decodeEnvelope(envelopeText)
      if (Either.isLeft(envelope)) return handshake.refuse({ code: Code.VALIDATION_FAILED, error: "the channel's envelope does not decode" })
      const key = options.keyOf(envelope.right.generation, String(handshake.req.headers["x-portico-coordination-time"]), String(handshake.req.headers["x-portico-coordination-nonce"]), envelopeText)
      if (key === undefined) return handshake.refuse({ code: Code.COORDINATION_REFUSED, error: "the channel's root generation is not held here" })
      const generation = envelope.right.generation
      server.handleUpgrade(handshake.req, handshake.socket, handshake.head, (ws) => {
        handshake.answered(101)
        let lastId = 0
        const reply = (id: number) => (answer: ChannelReply) => {
          if (ws.readyState !== WebSocket.OPEN) return
          ws.send(answerFrame(key, id, answer.status, answer.retryAfter, answer.body))
        }
        ws.on("error", () => ws.terminate())
        ws.on("message", (data: Buffer) => {
          // a frame that does not verify, or one out of order, is an attack on the channel, not a call
          if (data.length < HEAD + 1 || data[0] !== CALL || !holds(key, data)) return ws.close(1008, "a frame did not verify")
          const id = data.readUInt32BE(1)
          if (id <= lastId) return ws.close(1008, "a call was replayed")
          lastId = id
          if (generation < options.generation() - 1) return ws.close(1008, "the channel's root generation is retired")
          const pathEnd = HEAD + 1 + data[HEAD]!
          const path = data.toString("latin1", HEAD + 1, pathEnd)
          const answer = reply(id)
          let served: boolean
          try {
            served = serve(path, data.toString("utf8", pathEnd), answer)
          } catch {
            return answer({ status: 500, body: '{"error":"internal error","code":"INTERNAL"}' })
          }
          if (!served) answer(options.notServed(path))
        })
      })
    },
    open: () => server.clients.size,
    // ended at once, not with a closing handshake: a peer that does not answer one (paused, gone)
    // would hold the server's stop for the handshake's 30 s; the peers' calls go as HTTP from then
    close: () => {
      for (const ws of server.clients) ws.terminate()
      server.close()
    }
  }
}
