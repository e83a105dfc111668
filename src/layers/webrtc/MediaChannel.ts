/**
 * The gateway's channel to its node's media server (docs/webrtc.md, "Signalling"): one WebSocket
 * to the media server's `/mux`, its key as the bearer, over which every join on this node is
 * multiplexed, so that a join costs a frame each way instead of a TCP connection and a WebSocket
 * handshake of its own. It is opened as soon as the media server is up, and opened again within a
 * second when lost or when the media server restarted elsewhere.
 *
 * Each join is a stream, numbered here; every channel frame is binary: kind (1 byte), the stream's
 * id (4 bytes, big-endian), payload. The kinds and what the media server does with them are in
 * engines/sfu/mux.go. A join waits for the media server's accept or refusal; once accepted, the
 * peer's frames travel both ways tagged with its stream's id, and either end closes the stream. A
 * channel that drops closes every stream on it as a socket whose far end dropped (1006), and fails
 * the joins still waiting.
 *
 * The media server's participant reports come on the channel too, each answered with the status
 * the events route would have answered (`report`), so a report costs a frame each way rather than
 * an HTTP request; without a channel the media server posts them.
 */
import { Schema } from "effect"
import { WebSocket } from "ws"

/** The frame kinds (engines/sfu/mux.go). */
export const Kind = {
  /** gateway: a join (ChannelJoin, JSON) */
  join: 0x4a,
  /** either way: one text frame of the peer's socket */
  text: 0x54,
  /** gateway: one binary frame of the client's */
  binary: 0x42,
  /** gateway: the client's socket ended; 1 byte, 1 when it failed */
  end: 0x45,
  /** media server: the peer is in its room; its first frame (the welcome), when it has one */
  accept: 0x41,
  /** media server: the join was refused (ChannelRefusal, JSON) */
  refuse: 0x52,
  /** media server: close the client's socket; close code (2 bytes, big-endian) and reason */
  close: 0x43,
  /** media server: a participant report numbered in the id field; its MAC (64 hex characters), then its body */
  event: 0x56,
  /** gateway: the answer to a report; the status (2 bytes, big-endian) the events route would answer */
  ack: 0x4b
} as const

const MAC_CHARS = 64

export const HEADER_BYTES = 5
const MAX_ID = 0xffff_ffff

/** A join as the channel carries it: what a sealed ticket holds, but for its expiry. */
export const ChannelJoin = Schema.Struct({
  ns: Schema.String,
  room: Schema.String,
  user: Schema.String,
  device: Schema.String,
  peer: Schema.String,
  muted: Schema.Boolean,
  /** the namespace's event key, hex */
  ek: Schema.String
})
export type ChannelJoin = typeof ChannelJoin.Type

/** The media server's refusal of a join, as `/signal` answers a refused handshake. */
export const ChannelRefusal = Schema.Struct({ status: Schema.Number, code: Schema.String, error: Schema.String })
export type ChannelRefusal = typeof ChannelRefusal.Type

const encodeJoin = Schema.encodeSync(Schema.parseJson(ChannelJoin))
const decodeRefusal = Schema.decodeUnknownEither(Schema.parseJson(ChannelRefusal))

export const encodeFrame = (kind: number, id: number, payload?: Buffer | string): Buffer => {
  const body = payload === undefined ? Buffer.alloc(0) : typeof payload === "string" ? Buffer.from(payload, "utf8") : payload
  const frame = Buffer.allocUnsafe(HEADER_BYTES + body.length)
  frame[0] = kind
  frame.writeUInt32BE(id, 1)
  body.copy(frame, HEADER_BYTES)
  return frame
}

export const decodeFrame = (data: Buffer): { readonly kind: number; readonly id: number; readonly payload: Buffer } | undefined =>
  data.length < HEADER_BYTES ? undefined : { kind: data[0]!, id: data.readUInt32BE(1), payload: data.subarray(HEADER_BYTES) }

/** Where an accepted stream's frames from the media server go. */
export interface StreamSink {
  readonly frame: (data: Buffer) => void
  /** The media server closed the peer, or the channel dropped (1006). */
  readonly close: (code: number, reason: string) => void
}

export type JoinAnswer =
  | { readonly _tag: "accepted" }
  | { readonly _tag: "refused"; readonly refusal: ChannelRefusal }
  | { readonly _tag: "unavailable"; readonly error: string }

/** One join on the channel: its answer, then the client's frames to the media server. */
export interface Stream {
  readonly answer: Promise<JoinAnswer>
  readonly send: (data: Buffer, isBinary: boolean) => void
  /** The client's socket ended (failed: it went silent, sent too much or read too little). */
  readonly end: (failed: boolean) => void
}

export interface MediaChannel {
  /** Asks the media server to take `join`; its frames go to `sink` once accepted. */
  readonly open: (join: ChannelJoin, sink: StreamSink) => Stream
  /** Streams waiting or open (for tests). */
  readonly streams: () => number
  readonly close: () => void
}

interface Entry {
  readonly sink: StreamSink
  settle: ((answer: JoinAnswer) => void) | undefined
}

export const makeMediaChannel = (options: {
  /** Where the media server listens and its key, while it is up. */
  readonly target: () => { readonly url: string; readonly key: Buffer } | undefined
  /** The largest frame of a peer's (the channel's own cap adds the header and room for a join). */
  readonly maxFrameBytes: number
  /** How long a join, or opening the channel, may take. */
  readonly answerMs?: number
  /** How often a lost channel is opened again. */
  readonly reopenMs?: number
  /** Registers a call for when the media server comes up, so the channel opens then, not at the next check. */
  readonly onTargetUp?: (listener: () => void) => void
  /**
   * Takes a participant report the media server sends on the channel (`raw` its body, `mac` its
   * MAC), as `POST /v1/internal/webrtc/events` does: the HTTP status that route would answer.
   */
  readonly report?: (raw: string, mac: string) => number | Promise<number>
}): MediaChannel => {
  const answerMs = options.answerMs ?? 5_000
  let socket: WebSocket | undefined
  let socketUrl: string | undefined
  let opening: Promise<WebSocket | undefined> | undefined
  let nextId = 1
  let closed = false
  const entries = new Map<number, Entry>()

  /** Closes every stream of a channel that dropped: waiting joins fail, open ones close as dropped. */
  const lost = (which: WebSocket) => {
    if (socket !== which) return
    socket = undefined
    socketUrl = undefined
    const all = [...entries.values()]
    entries.clear()
    for (const entry of all) {
      if (entry.settle !== undefined) entry.settle({ _tag: "unavailable", error: "the media server's channel dropped" })
      else entry.sink.close(1006, "")
    }
  }

  /**
   * A report answered on the channel it came on; 503 (the media server tries again) when it cannot
   * be taken. It is taken once the I/O already read is handled: a join's accept and welcome often
   * arrive in the same read as its report, and the client's upgrade goes first.
   */
  const ack = (ws: WebSocket, id: number, status: number) => {
    if (ws.readyState === WebSocket.OPEN) ws.send(encodeFrame(Kind.ack, id, Buffer.from([status >> 8, status & 0xff])))
  }
  const onReport = (ws: WebSocket, id: number, payload: Buffer) =>
    setImmediate(() => {
      if (options.report === undefined || payload.length < MAC_CHARS) return ack(ws, id, 503)
      let taken: number | Promise<number>
      try {
        taken = options.report(payload.subarray(MAC_CHARS).toString("utf8"), payload.subarray(0, MAC_CHARS).toString("latin1"))
      } catch {
        taken = 503
      }
      if (typeof taken === "number") return ack(ws, id, taken)
      void taken.catch(() => 503).then((status) => ack(ws, id, status))
    })

  const onMessage = (ws: WebSocket, data: Buffer) => {
    const frame = decodeFrame(data)
    if (frame === undefined) return
    if (frame.kind === Kind.event) return onReport(ws, frame.id, frame.payload)
    const entry = entries.get(frame.id)
    if (entry === undefined) return // a stream this end closed already
    switch (frame.kind) {
      case Kind.accept:
        entry.settle?.({ _tag: "accepted" })
        entry.settle = undefined
        // the peer's first frame (its welcome) comes with the accept
        if (frame.payload.length > 0) entry.sink.frame(frame.payload)
        return
      case Kind.refuse: {
        entries.delete(frame.id)
        const refusal = decodeRefusal(frame.payload.toString("utf8"))
        entry.settle?.(refusal._tag === "Right" ? { _tag: "refused", refusal: refusal.right } : { _tag: "unavailable", error: "the media server's refusal does not decode" })
        entry.settle = undefined
        return
      }
      case Kind.text:
        if (entry.settle === undefined) entry.sink.frame(frame.payload)
        return
      case Kind.close:
        entries.delete(frame.id)
        if (entry.settle !== undefined) {
          entry.settle({ _tag: "unavailable", error: "the media server closed the join" })
          entry.settle = undefined
        } else entry.sink.close(frame.payload.length >= 2 ? frame.payload.readUInt16BE(0) : 1006, frame.payload.subarray(2).toString("utf8"))
        return
    }
  }

  /** The channel to the media server where it is now, opened if it is not. */
  const ready = (): Promise<WebSocket | undefined> => {
    const target = options.target()
    if (closed || target === undefined) return Promise.resolve(undefined)
    if (socket !== undefined && socketUrl === target.url && socket.readyState === WebSocket.OPEN) return Promise.resolve(socket)
    // the media server restarted elsewhere: its old channel is gone with it
    if (socket !== undefined && socketUrl !== target.url) {
      const old = socket
      lost(old)
      old.terminate()
    }
    if (opening !== undefined) return opening
    opening = new Promise<WebSocket | undefined>((resolve) => {
      const ws = new WebSocket(`${target.url.replace(/^http/, "ws")}/mux`, {
        headers: { authorization: `Bearer ${target.key.toString("hex")}` },
        maxPayload: options.maxFrameBytes + 1024,
        perMessageDeflate: false,
        handshakeTimeout: answerMs
      })
      const settle = (value: WebSocket | undefined) => {
        opening = undefined
        resolve(value)
      }
      ws.once("open", () => {
        if (closed) {
          ws.terminate()
          return settle(undefined)
        }
        socket = ws
        socketUrl = target.url
        ws.on("message", (data, isBinary) => isBinary && onMessage(ws, data as Buffer))
        settle(ws)
      })
      ws.once("unexpected-response", () => {
        ws.terminate()
        settle(undefined)
      })
      ws.on("error", () => {
        ws.terminate()
        settle(undefined)
      })
      ws.once("close", () => {
        lost(ws)
        settle(undefined)
      })
    })
    return opening
  }

  // opened as the media server comes up (its reports go on the channel from its first join), and
  // opened again when lost
  const keep = () => {
    if (!closed && socket === undefined && opening === undefined && options.target() !== undefined) void ready()
  }
  options.onTargetUp?.(keep)
  const keeper = setInterval(keep, options.reopenMs ?? 1_000)
  keeper.unref()

  const open: MediaChannel["open"] = (join, sink) => {
    const id = nextId
    nextId = nextId >= MAX_ID ? 1 : nextId + 1
    let channel: WebSocket | undefined
    let ended = false
    let settle!: (answer: JoinAnswer) => void
    const answer = new Promise<JoinAnswer>((resolve) => {
      let timer: NodeJS.Timeout | undefined
      settle = (a) => {
        if (timer !== undefined) clearTimeout(timer)
        resolve(a)
      }
      timer = setTimeout(() => {
        const entry = entries.get(id)
        if (entry?.settle === undefined) return
        entries.delete(id)
        entry.settle = undefined
        // a late accept finds no stream here; the end tells the media server to let it go
        if (channel?.readyState === WebSocket.OPEN) channel.send(encodeFrame(Kind.end, id, Buffer.of(0)))
        settle({ _tag: "unavailable", error: "the media server did not answer the join" })
      }, answerMs)
    })
    const entry: Entry = { sink, settle }
    entries.set(id, entry)
    const current = socket !== undefined && socket.readyState === WebSocket.OPEN && socketUrl === options.target()?.url ? socket : undefined
    const send = (ws: WebSocket | undefined) => {
      if (ended || entries.get(id) !== entry) return
      if (ws === undefined) {
        entries.delete(id)
        entry.settle?.({ _tag: "unavailable", error: "the room's media server did not answer" })
        entry.settle = undefined
        return
      }
      channel = ws
      ws.send(encodeFrame(Kind.join, id, encodeJoin(join)))
    }
    if (current !== undefined) send(current)
    else void ready().then(send)
    return {
      answer,
      send: (data, isBinary) => {
        if (!ended && entries.get(id) === entry && channel?.readyState === WebSocket.OPEN) channel.send(encodeFrame(isBinary ? Kind.binary : Kind.text, id, data))
      },
      end: (failed) => {
        if (ended) return
        ended = true
        const mine = entries.get(id) === entry
        if (mine) entries.delete(id)
        if (entry.settle !== undefined) {
          entry.settle({ _tag: "unavailable", error: "closed" })
          entry.settle = undefined
        }
        if (mine && channel?.readyState === WebSocket.OPEN) channel.send(encodeFrame(Kind.end, id, Buffer.of(failed ? 1 : 0)))
      }
    }
  }

  return {
    open,
    streams: () => entries.size,
    close: () => {
      closed = true
      clearInterval(keeper)
      const ws = socket
      if (ws !== undefined) {
        lost(ws)
        ws.close(1001)
      }
    }
  }
}
