/**
 * `GET /v1/webrtc/signal?room=<room>` past its gate and query schema (src/api/Upgrades.ts;
 * docs/webrtc.md, "Signalling"): the gateway decides whether the caller joins, picks the node whose
 * media server hosts the room, and relays the socket there, frame by frame, at most 1 MiB a frame
 * on each hop.
 *
 * - Media must be on (403), the caller within their join rate (429), and where the namespace
 *   requires admission, admitted (403, saying why not).
 * - The room goes to a node by rendezvous hashing over the nodes whose media server is up
 *   (Rooms.ts). On this node, the join goes to its own media server on the channel the gateway
 *   keeps open to it (MediaChannel.ts); on another, the gateway opens that node's
 *   `/v1/internal/webrtc/signal`, signed for it, whose gateway passes the join on its own channel.
 *   The media server's key never leaves its node.
 * - The client's upgrade completes only once the media server took the join, so a full room or a
 *   node that went away is an HTTP answer with the API's envelope, never a socket that opens and
 *   drops.
 * - Each client socket is pinged every 15 s and closed when it answered none for 45 s, as the
 *   media server does its own sockets; one that reads too slowly to take what the media server
 *   sends (more than 4 MiB waiting) is closed with 1008, as the media server closes its own slow
 *   clients. Either way the media server hears that the client failed.
 * - The socket closes when the caller's credential is revoked, as publish/subscribe's do.
 */
import { randomBytes } from "node:crypto"
import type * as http from "node:http"
import * as net from "node:net"
import { Cause, Effect, Either, Exit, Fiber, Runtime, Schema } from "effect"
import { WebSocket, WebSocketServer } from "ws"
import { JoinEnvelope, ParticipantEvent } from "../../api/groups/WebRtcWire.js"
import { Code, type ErrorCode, errorCodes, statusOfCode } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { eventKeyOf } from "../../domain/SfuTicket.js"
import { TokenBuckets } from "../../domain/TokenBuckets.js"
import { credentialOf, type SocketRevocation } from "../auth/SocketRevocation.js"
import type { MembershipService } from "../cluster/Membership.js"
import { canonicalJson, type CoordinationService, ENVELOPE_HEADER } from "../coordination/Coordination.js"
import type { AppRefusal } from "../deployments/serving/AppAnswers.js"
import type { Handshake } from "../deployments/serving/SocketHandshake.js"
import type { Refused } from "../Refused.js"
import { type ChannelJoin, makeMediaChannel, type MediaChannel } from "./MediaChannel.js"
import type { MediaServerService } from "./MediaServer.js"
import type { RoomEventsService } from "./RoomEvents.js"
import type { RoomsService } from "./Rooms.js"
import type { WebRtcService } from "./WebRtc.js"

/** The largest signalling frame, on the client's hop and the media server's (an SDP is a few KiB). */
export const MAX_FRAME_BYTES = 1024 * 1024
export const PEER_SIGNAL_PATH = "/v1/internal/webrtc/signal"
/** What may wait for one client to read before it is closed as too slow (1008). */
export const CLIENT_QUEUE_BYTES = 4 * MAX_FRAME_BYTES
const CONNECT_MS = 5_000
const REVOKED = 4401
const PING_MS = 15_000
const SILENT_MS = 45_000

type Join = typeof JoinEnvelope.Type

const asRefusal = (r: Refused<ErrorCode>): AppRefusal => ({ code: r.code, error: r.reason, hint: r.hint, retryAfterSeconds: r.retryAfterSeconds })
const unavailable = (error: string, hint = "retry shortly"): AppRefusal => ({ code: Code.UNAVAILABLE, error, hint, retryAfterSeconds: 5 })
const decodeEnvelope = Schema.decodeUnknownEither(Schema.parseJson(JoinEnvelope))
const decodeEvent = Schema.decodeUnknownEither(Schema.parseJson(ParticipantEvent))
const knownCodes = new Set<string>(errorCodes)

/**
 * An effect's outcome, at once when it completes without waiting (a join's reads are usually kept
 * in memory), else once its fiber is done: no promise and fiber hand-offs for what needs no wait.
 */
const soon = <A, E>(effect: Effect.Effect<A, E>): Either.Either<A, E> | Promise<Either.Either<A, E>> => {
  const exit = Effect.runSyncExit(Effect.either(effect))
  if (Exit.isSuccess(exit)) return exit.value
  const defect = Cause.squash(exit.cause)
  if (Runtime.isAsyncFiberException(defect)) return Effect.runPromise(Fiber.join(defect.fiber as Fiber.RuntimeFiber<Either.Either<A, E>>))
  throw defect
}

const statusOfReport = (taken: Either.Either<void, Refused<ErrorCode>>): number => (Either.isLeft(taken) ? statusOfCode[taken.left.code] : 200)

/** A close code that may be sent on: 1000, 3000-4999, or the RFC's application-visible ones. */
const sendable = (code: number): number => (code === 1000 || (code >= 3000 && code <= 4999) || (code >= 1001 && code <= 1003) || (code >= 1007 && code <= 1014 && code !== 1010 && code !== 1012) ? code : 1011)

/** What the media server's or the other gateway's refusal becomes for the client. */
const refusalOf = (status: number, body: { readonly error?: unknown; readonly code?: unknown; readonly hint?: unknown }): AppRefusal => {
  const code = typeof body.code === "string" ? body.code : ""
  const error = typeof body.error === "string" ? body.error : `the media server answered ${status}`
  const hint = typeof body.hint === "string" ? body.hint : undefined
  if (code === "ROOM_FULL") return { code: Code.UNAVAILABLE, error, hint: hint ?? "the room is at its participant cap; retry later", retryAfterSeconds: 5 }
  if (status === 409 || code === "CONFLICT") return { code: Code.CONFLICT, error, hint }
  // another gateway's refusal is the API's envelope already
  if (knownCodes.has(code) && code !== "UNAUTHORIZED" && statusOfCode[code as ErrorCode] === status) return { code: code as ErrorCode, error, hint, retryAfterSeconds: status === 503 || status === 429 ? 5 : undefined }
  return unavailable("the media server did not take the join")
}

/** An HTTP answer's body read as the envelope, or nothing to go on. */
const bodyOf = (text: string): Record<string, unknown> => {
  try {
    const body: unknown = JSON.parse(text)
    return typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

/** A client socket's liveness and whether it ended as a failure (silent, too slow, oversized). */
interface Client {
  readonly ws: WebSocket
  pongAt: number
  failed: boolean
}

export interface SignalSockets {
  /** A client's handshake on `/v1/webrtc/signal`, admitted by its gate. */
  readonly client: (handshake: Handshake<{ readonly room: string }>) => Promise<void>
  /** Another gateway's participant for this node's media server, its coordination MAC verified. */
  readonly peer: (handshake: Handshake<unknown>) => Promise<void>
  readonly close: () => void
}

export const makeSignalSockets = (deps: {
  readonly self: string
  readonly webrtc: WebRtcService
  readonly rooms: RoomsService
  readonly media: MediaServerService
  readonly coordination: CoordinationService
  readonly membership: MembershipService
  readonly revocation: SocketRevocation
  readonly joinsPerMinute: number
  /** Takes the participant reports the media server sends on the channel. */
  readonly events?: RoomEventsService
  /** The channel to this node's media server; by default one kept open to `media`. */
  readonly channel?: MediaChannel
}): SignalSockets => {
  const { webrtc, rooms, media, coordination, membership } = deps
  const server = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false })
  const run = <A,>(effect: Effect.Effect<A, Refused<ErrorCode>>) => Effect.runPromise(Effect.either(effect))
  const events = deps.events
  const channel =
    deps.channel ??
    makeMediaChannel({
      target: media.current,
      onTargetUp: media.onUp,
      maxFrameBytes: MAX_FRAME_BYTES,
      report:
        events === undefined
          ? undefined
          : (raw, mac) => {
              const event = decodeEvent(raw)
              if (Either.isLeft(event)) return statusOfCode[Code.VALIDATION_FAILED]
              // at once on the embedded engines, where nothing the report does waits
              const taken = soon(events.report(event.right, raw, mac))
              return taken instanceof Promise ? taken.then(statusOfReport) : statusOfReport(taken)
            }
    })
  const open = new Map<WebSocket, Client>()
  const joins = new TokenBuckets()
  const joinLimit = { rps: deps.joinsPerMinute / 60, burst: Math.max(1, Math.floor(deps.joinsPerMinute / 3)) }
  const eventKeys = new WeakMap<Uint8Array, string>()

  const keepalive = setInterval(() => {
    const now = Date.now()
    for (const client of open.values()) {
      if (now - client.pongAt > SILENT_MS) {
        client.failed = true
        client.ws.terminate()
      } else if (client.ws.readyState === WebSocket.OPEN) client.ws.ping()
    }
  }, PING_MS)
  keepalive.unref()

  /** Sends the media server's frame on, or closes a client that lets too much wait (1008). */
  const deliver = (client: Client, data: Buffer) => {
    if (client.ws.readyState !== WebSocket.OPEN) return
    if (client.ws.bufferedAmount > CLIENT_QUEUE_BYTES) {
      client.failed = true
      client.ws.close(1008, "client too slow")
      // one that reads nothing would not take the close frame either
      setTimeout(() => client.ws.terminate(), 1_000).unref()
      return
    }
    client.ws.send(data, { binary: false })
  }

  /**
   * Completes the client's upgrade (the media server took the join) and wires it: revocation,
   * liveness, its frames to `toMedia`; `ended` once it closed, saying whether it failed.
   */
  const upgrade = (handshake: Handshake<unknown>, caller: Principal | undefined, toMedia: (data: Buffer, isBinary: boolean) => void, ended: (client: Client, code: number) => void) =>
    new Promise<Client | undefined>((resolve) => {
      let accepted = false
      server.handleUpgrade(handshake.req, handshake.socket, handshake.head, (ws) => {
        accepted = true
        handshake.answered(101)
        const client: Client = { ws, pongAt: Date.now(), failed: false }
        open.set(ws, client)
        const credential = caller === undefined ? undefined : credentialOf(caller)
        const unregister = credential === undefined ? () => {} : deps.revocation.register({ credential, revoke: () => ws.close(REVOKED, "REVOKED: the credential was revoked or its session ended") })
        ws.on("pong", () => (client.pongAt = Date.now()))
        ws.on("message", (data, isBinary) => toMedia(data as Buffer, isBinary))
        ws.on("close", (code) => {
          open.delete(ws)
          unregister()
          ended(client, code)
        })
        // an oversized frame (ws answers 1009) or a broken connection
        ws.on("error", () => {
          client.failed = true
          ws.terminate()
        })
        resolve(client)
      })
      // ws answers a handshake it cannot complete itself and never calls back: a socket the client
      // half-closed (not destroyed, no longer readable) is destroyed there. Then there is no client,
      // and the caller lets the join go (ProxySockets' accept does the same).
      if (!accepted) resolve(undefined)
    })

  /**
   * Whether the caller may join, the room's node, and (on this node) the namespace's relay secret:
   * one effect, usually answered from what WebRtc and Rooms keep.
   */
  const decide = (namespace: string, room: string, user: string) =>
    Effect.gen(function* () {
      const { muted } = yield* webrtc.mayJoin(namespace, room, user)
      const node = yield* rooms.place(namespace, room)
      const secret = node === deps.self ? yield* webrtc.relaySecret(namespace) : undefined
      return { muted, node, secret }
    })

  /**
   * `decide` on the spot, for the usual join (media on, no admission required, the settings, the
   * relay secret and the nodes' health read lately): no effect run. Undefined for anything else,
   * which `decide` reads and refuses.
   */
  const decideNow = (namespace: string, room: string, now: number) => {
    const kept = webrtc.keptNow(namespace, now)
    if (kept === undefined || !kept.enabled || kept.requireAdmission) return undefined
    const placed = rooms.placeNow(namespace, room, now)
    if (placed === undefined) return undefined
    const here = placed.node === deps.self
    if (here && kept.secret === undefined) return undefined
    return Either.right({ muted: false, node: placed.node, secret: here ? kept.secret : undefined })
  }

  /** Opens `url` (another node's gateway) and, once it took the join, completes the client's upgrade and relays both ways. */
  const relay = (handshake: Handshake<unknown>, url: string, headers: Readonly<Record<string, string>>, caller: Principal | undefined) =>
    new Promise<void>((done) => {
      let settled = false
      const upstream = new WebSocket(url, { headers, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, handshakeTimeout: CONNECT_MS })
      const refuse = (refusal: AppRefusal) => {
        if (settled) return
        settled = true
        upstream.terminate()
        handshake.refuse(refusal)
        done()
      }
      upstream.once("unexpected-response", (_request, response: http.IncomingMessage) => {
        let text = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => (text = (text + chunk).slice(0, 4096)))
        response.on("end", () => refuse(refusalOf(response.statusCode ?? 502, bodyOf(text))))
        response.on("error", () => refuse(unavailable("the media server did not take the join")))
      })
      upstream.once("error", () => refuse(unavailable("the room's media server did not answer", "retry: the room goes to another node once this one is out of placement")))
      // the client gone while the media server was asked
      handshake.socket.once("close", () => refuse(unavailable("closed")))
      upstream.once("open", () => {
        if (settled) return void upstream.close(1001)
        settled = true
        // the client went away while the media server took the join: nothing to upgrade
        if (handshake.socket.destroyed) {
          upstream.close(1001)
          return done()
        }
        // the other gateway's first frames may come with its 101: kept until the client's upgrade completes
        let client: Client | undefined
        const early: Array<Buffer> = []
        let closedEarly: { readonly code: number; readonly reason: Buffer } | undefined
        upstream.on("message", (data) => (client === undefined ? void early.push(data as Buffer) : deliver(client, data as Buffer)))
        upstream.on("close", (code, reason) => (client === undefined ? void (closedEarly = { code, reason }) : client.ws.close(sendable(code), reason.subarray(0, 120))))
        upstream.on("error", () => upstream.terminate())
        void upgrade(
          handshake,
          caller,
          (data, isBinary) => upstream.readyState === WebSocket.OPEN && upstream.send(data, { binary: isBinary }),
          (_client, code) => upstream.close(sendable(code))
        ).then((upgraded) => {
          if (upgraded === undefined) {
            upstream.close(1001)
            return done()
          }
          client = upgraded
          for (const data of early.splice(0)) deliver(upgraded, data)
          if (closedEarly !== undefined) upgraded.ws.close(sendable(closedEarly.code), closedEarly.reason.subarray(0, 120))
          done()
        })
      })
    })

  /** The join on this node's media server, on the gateway's channel to it; `known`: its namespace's relay secret, read already. */
  const toLocal = async (handshake: Handshake<unknown>, join: Join, caller: Principal | undefined, known?: Uint8Array | undefined) => {
    if (media.current() === undefined) return handshake.refuse(unavailable("this node's media server is not up"))
    const secret = known === undefined ? await run(webrtc.relaySecret(join.namespace)) : Either.right(known)
    if (Either.isLeft(secret)) return handshake.refuse(asRefusal(secret.left))
    if (secret.right === undefined) return handshake.refuse({ code: Code.FORBIDDEN, error: "real-time media is not enabled for this namespace" })
    let ek = eventKeys.get(secret.right)
    if (ek === undefined) eventKeys.set(secret.right, (ek = eventKeyOf(secret.right).toString("hex")))
    const joined: ChannelJoin = { ns: join.namespace, room: join.room, user: join.user, device: join.device, peer: join.peer, muted: join.muted, ek }
    if (await handOver(handshake, joined, caller)) return
    // what the media server sends before the client's upgrade completes, and a close meanwhile
    let client: Client | undefined
    const early: Array<Buffer> = []
    let closedEarly: { readonly code: number; readonly reason: string } | undefined
    const stream = channel.open(
      joined,
      {
        frame: (data) => (client === undefined ? void early.push(data) : deliver(client, data)),
        close: (code, reason) => (client === undefined ? void (closedEarly = { code, reason }) : client.ws.close(sendable(code), reason.slice(0, 120)))
      }
    )
    const gone = () => stream.end(false)
    handshake.socket.once("close", gone)
    const answer = await stream.answer
    handshake.socket.off("close", gone)
    if (answer._tag === "refused") return handshake.refuse(refusalOf(answer.refusal.status, answer.refusal))
    if (answer._tag === "unavailable") return handshake.refuse(unavailable(answer.error, "retry: the room goes to another node once this one is out of placement"))
    // the client went away while the media server took the join: nothing to upgrade
    if (handshake.socket.destroyed) return stream.end(false)
    // the 101 and the frames that came with the accept (the welcome) leave in one write
    handshake.socket.cork()
    try {
      client = await upgrade(handshake, caller, stream.send, (c) => stream.end(c.failed))
      // the client went away as the upgrade was completed: the media server lets the join go
      if (client === undefined) return stream.end(false)
      for (const data of early.splice(0)) deliver(client, data)
      if (closedEarly !== undefined) client.ws.close(sendable(closedEarly.code), closedEarly.reason.slice(0, 120))
    } finally {
      handshake.socket.uncork()
    }
  }

  /**
   * The join handed to this node's media server with the client's socket (MediaServer.hand): it
   * answers the handshake and owns the socket from then on, so the gateway neither completes a
   * WebSocket of its own nor relays frames. Whether it was handed: a socket that is not a plain
   * TCP one with nothing read past its head, or a handshake naming subprotocols (which the
   * gateway's own WebSocket server negotiates), goes on the channel instead.
   */
  const handOver = async (handshake: Handshake<unknown>, join: ChannelJoin, caller: Principal | undefined): Promise<boolean> => {
    const socket = handshake.socket
    if (!(socket instanceof net.Socket) || "encrypted" in socket || handshake.head.length > 0 || socket.readableLength > 0) return false
    if (handshake.req.headers["sec-websocket-protocol"] !== undefined) return false
    const credential = caller === undefined ? undefined : credentialOf(caller)
    let unregister: (() => void) | undefined
    let over = false
    const answer = media.hand(socket, { join, key: handshake.req.headers["sec-websocket-key"]! }, () => {
      over = true
      unregister?.()
    })
    if (answer === undefined) return false
    const status = await answer
    handshake.answered(status === 0 ? 502 : status)
    if (status === 101 && credential !== undefined && !over) {
      unregister = deps.revocation.register({
        credential,
        revoke: () => void Effect.runFork(media.control({ ns: join.ns, room: join.room, user: "", peer: join.peer, action: "revoke" }))
      })
    }
    return true
  }

  /** The join on another node's media server, through that node's gateway. */
  const toPeer = async (handshake: Handshake<unknown>, node: string, join: Join, caller: Principal) => {
    const base = await Effect.runPromise(membership.urlOf(node))
    if (base === undefined) return handshake.refuse(unavailable("the room's node has no address"))
    const envelope = canonicalJson(join)
    const signed = await Effect.runPromise(coordination.sign(node, "GET", PEER_SIGNAL_PATH, envelope))
    await relay(handshake, `${base.replace(/^http/, "ws").replace(/\/$/, "")}${PEER_SIGNAL_PATH}`, { ...signed, [ENVELOPE_HEADER]: envelope }, caller)
  }

  return {
    client: async (handshake) => {
      const caller = handshake.caller!
      const room = handshake.query.room
      const user = caller.subject
      const charge = joins.take(`${caller.namespace}\u0000${user}`, joinLimit, Date.now())
      if (!charge.allowed) {
        return handshake.refuse({ code: Code.RATE_LIMITED, error: "too many joins", hint: `retry after ${charge.retryAfterSeconds} s`, retryAfterSeconds: charge.retryAfterSeconds })
      }
      const decided = decideNow(caller.namespace, room, Date.now()) ?? soon(decide(caller.namespace, room, user))
      const decision = decided instanceof Promise ? await decided : decided
      if (Either.isLeft(decision)) return handshake.refuse(asRefusal(decision.left))
      const { muted, node, secret } = decision.right
      if (node === undefined) return handshake.refuse(unavailable("no node's media server is up", "the operator runs one per node (PORTICO_SFU_BINARY, docs/webrtc.md)"))
      const join: Join = {
        namespace: caller.namespace as Join["namespace"],
        room,
        user,
        device: caller.deviceId ?? "",
        peer: randomBytes(8).toString("hex"),
        muted
      }
      await (node === deps.self ? toLocal(handshake, join, caller, secret) : toPeer(handshake, node, join, caller))
    },
    peer: async (handshake) => {
      const envelope = decodeEnvelope(handshake.req.headers[ENVELOPE_HEADER] ?? "")
      if (Either.isLeft(envelope)) return handshake.refuse({ code: Code.VALIDATION_FAILED, error: "the join envelope does not decode" })
      await toLocal(handshake, envelope.right, undefined)
    },
    close: () => {
      clearInterval(keepalive)
      for (const socket of open.keys()) socket.close(1001, "the gateway is stopping")
      channel.close()
      server.close()
    }
  }
}
