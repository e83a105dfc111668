/**
 * `GET /v1/webrtc/signal?room=<room>` past its gate and query schema (src/api/Upgrades.ts;
 * docs/webrtc.md, "Signalling"): the gateway decides whether the caller joins, picks the node whose
 * media server hosts the room, and relays the socket there, frame by frame, at most 1 MiB a frame
 * on each hop.
 *
 * - Media must be on (403), the caller within their join rate (429), and where the namespace
 *   requires admission, admitted (403, saying why not).
 * - The room goes to a node by rendezvous hashing over the nodes whose media server is up
 *   (Rooms.ts). On this node, the gateway seals a 30 s join ticket for its own media server; on
 *   another, it opens that node's `/v1/internal/webrtc/signal`, signed for it, whose gateway seals
 *   the ticket for its own. The media server's key never leaves its node.
 * - The client's upgrade completes only once the media server took the join, so a full room or a
 *   node that went away is an HTTP answer with the API's envelope, never a socket that opens and
 *   drops.
 * - The socket closes when the caller's credential is revoked, as publish/subscribe's do.
 */
import { randomBytes } from "node:crypto"
import type * as http from "node:http"
import { Effect, Either, Schema } from "effect"
import { WebSocket, WebSocketServer } from "ws"
import { JoinEnvelope } from "../../api/groups/WebRtcWire.js"
import { Code, type ErrorCode, errorCodes, statusOfCode } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { eventKeyOf, sealTicket, TICKET_SECONDS } from "../../domain/SfuTicket.js"
import { TokenBuckets } from "../../domain/TokenBuckets.js"
import { credentialOf, type SocketRevocation } from "../auth/SocketRevocation.js"
import type { MembershipService } from "../cluster/Membership.js"
import { canonicalJson, type CoordinationService, ENVELOPE_HEADER } from "../coordination/Coordination.js"
import type { AppRefusal } from "../deployments/serving/AppAnswers.js"
import type { Handshake } from "../deployments/serving/SocketHandshake.js"
import type { Refused } from "../Refused.js"
import type { MediaServerService } from "./MediaServer.js"
import type { RoomsService } from "./Rooms.js"
import type { WebRtcService } from "./WebRtc.js"

/** The largest signalling frame, on the client's hop and the media server's (an SDP is a few KiB). */
export const MAX_FRAME_BYTES = 1024 * 1024
export const PEER_SIGNAL_PATH = "/v1/internal/webrtc/signal"
const CONNECT_MS = 5_000
const REVOKED = 4401

type Join = typeof JoinEnvelope.Type

const asRefusal = (r: Refused<ErrorCode>): AppRefusal => ({ code: r.code, error: r.reason, hint: r.hint, retryAfterSeconds: r.retryAfterSeconds })
const unavailable = (error: string, hint = "retry shortly"): AppRefusal => ({ code: Code.UNAVAILABLE, error, hint, retryAfterSeconds: 5 })
const decodeEnvelope = Schema.decodeUnknownEither(Schema.parseJson(JoinEnvelope))
const knownCodes = new Set<string>(errorCodes)

/** A close code that may be sent on: 1000, 3000-4999, or the RFC's application-visible ones. */
const sendable = (code: number): number => (code === 1000 || (code >= 3000 && code <= 4999) || (code >= 1001 && code <= 1003) || (code >= 1007 && code <= 1014 && code !== 1010 && code !== 1012) ? code : 1011)

/** What the upstream's refusal (an HTTP answer to the handshake) becomes for the client. */
const refusalOf = (status: number, text: string): AppRefusal => {
  let body: { error?: unknown; code?: unknown; hint?: unknown } = {}
  try {
    body = JSON.parse(text) as typeof body
  } catch {
    // an answer without the envelope: described by its status below
  }
  const code = typeof body.code === "string" ? body.code : ""
  const error = typeof body.error === "string" ? body.error : `the media server answered ${status}`
  const hint = typeof body.hint === "string" ? body.hint : undefined
  if (code === "ROOM_FULL") return { code: Code.UNAVAILABLE, error, hint: hint ?? "the room is at its participant cap; retry later", retryAfterSeconds: 5 }
  if (status === 409 || code === "CONFLICT") return { code: Code.CONFLICT, error, hint }
  // another gateway's refusal is the API's envelope already
  if (knownCodes.has(code) && code !== "UNAUTHORIZED" && statusOfCode[code as ErrorCode] === status) return { code: code as ErrorCode, error, hint, retryAfterSeconds: status === 503 || status === 429 ? 5 : undefined }
  return unavailable("the media server did not take the join")
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
}): SignalSockets => {
  const { webrtc, rooms, media, coordination, membership } = deps
  const server = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false })
  const open = new Set<WebSocket>()
  const joins = new TokenBuckets()
  const joinLimit = { rps: deps.joinsPerMinute / 60, burst: Math.max(1, Math.floor(deps.joinsPerMinute / 3)) }
  const run = <A,>(effect: Effect.Effect<A, Refused<ErrorCode>>) => Effect.runPromise(Effect.either(effect))

  /** Opens `url` and, once it took the join, completes the client's upgrade and relays both ways. */
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
        response.on("end", () => refuse(refusalOf(response.statusCode ?? 502, text)))
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
        server.handleUpgrade(handshake.req, handshake.socket, handshake.head, (client) => {
          handshake.answered(101)
          open.add(client)
          const credential = caller === undefined ? undefined : credentialOf(caller)
          const unregister = credential === undefined ? () => {} : deps.revocation.register({ credential, revoke: () => client.close(REVOKED, "REVOKED: the credential was revoked or its session ended") })
          client.on("message", (data, isBinary) => upstream.readyState === WebSocket.OPEN && upstream.send(data, { binary: isBinary }))
          upstream.on("message", (data, isBinary) => client.readyState === WebSocket.OPEN && client.send(data, { binary: isBinary }))
          client.on("close", (code) => {
            open.delete(client)
            unregister()
            upstream.close(sendable(code))
          })
          upstream.on("close", (code, reason) => client.close(sendable(code), reason.subarray(0, 120)))
          client.on("error", () => client.terminate())
          upstream.on("error", () => upstream.terminate())
          done()
        })
      })
    })

  /** The join on this node's media server: a ticket for it, sealed under its key. */
  const toLocal = async (handshake: Handshake<unknown>, join: Join, caller: Principal | undefined) => {
    const local = media.current()
    if (local === undefined) return handshake.refuse(unavailable("this node's media server is not up"))
    const secret = await run(webrtc.relaySecret(join.namespace))
    if (Either.isLeft(secret)) return handshake.refuse(asRefusal(secret.left))
    if (secret.right === undefined) return handshake.refuse({ code: Code.FORBIDDEN, error: "real-time media is not enabled for this namespace" })
    const ticket = sealTicket(local.key, {
      ns: join.namespace,
      room: join.room,
      user: join.user,
      device: join.device,
      peer: join.peer,
      exp: Math.floor(Date.now() / 1000) + TICKET_SECONDS,
      muted: join.muted,
      ek: eventKeyOf(secret.right).toString("hex")
    })
    await relay(handshake, `${local.url.replace(/^http/, "ws")}/signal?ticket=${ticket}`, {}, caller)
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
      const may = await run(webrtc.mayJoin(caller.namespace, room, user))
      if (Either.isLeft(may)) return handshake.refuse(asRefusal(may.left))
      const node = await Effect.runPromise(rooms.place(caller.namespace, room))
      if (node === undefined) return handshake.refuse(unavailable("no node's media server is up", "the operator runs one per node (PORTICO_SFU_BINARY, docs/webrtc.md)"))
      const join: Join = {
        namespace: caller.namespace as Join["namespace"],
        room,
        user,
        device: caller.deviceId ?? "",
        peer: randomBytes(8).toString("hex"),
        muted: may.right.muted
      }
      await (node === deps.self ? toLocal(handshake, join, caller) : toPeer(handshake, node, join, caller))
    },
    peer: async (handshake) => {
      const envelope = decodeEnvelope(handshake.req.headers[ENVELOPE_HEADER] ?? "")
      if (Either.isLeft(envelope)) return handshake.refuse({ code: Code.VALIDATION_FAILED, error: "the join envelope does not decode" })
      await toLocal(handshake, envelope.right, undefined)
    },
    close: () => {
      for (const socket of open) socket.close(1001, "the gateway is stopping")
      server.close()
    }
  }
}
