/**
 * `GET /v1/functions/{name}/ws` past its gate (the `invoke` grant) and query schema
 * (src/api/Upgrades.ts; docs/functions.md, "Sockets"). Each socket has one instance of the
 * function, opened BEFORE the 101 (`_initialize`, then `ws_open`), so a function that cannot take
 * the socket is refused as an invoke is. Then:
 *
 * - each client frame is a `ws_frame` entry, run in order, one at a time; what an entry writes to
 *   stdout is a frame to the client, as is each `ws_send` naming this socket (or none);
 * - a client that sends faster than the function takes its frames is paused, not dropped; one
 *   that does not read what is sent is closed 1013 `SLOW_CONSUMER`;
 * - the instance ending (a trap, an exit, an entry past its timeout, the runner stopping) closes
 *   the socket with a code and the catalogue's code in the reason (SocketClose);
 * - the socket closing (the client, `ws_disconnect`, a revocation, a frame over the cap) runs
 *   `ws_close` in an instance still alive, then the instance is dropped;
 * - the socket is in the SocketDirectory while open, so functions on any node reach it;
 * - its credential is watched for revocation (SocketRevocation.ts); pings find dead peers.
 */
import { Effect, Either } from "effect"
import { isUtf8 } from "node:buffer"
import { type WebSocket, WebSocketServer } from "ws"
import { FUNCTION_NAME } from "../../domain/FunctionRules.js"
import { SocketClose } from "../../domain/FunctionSockets.js"
import { credentialOf, type SocketRevocation } from "../auth/SocketRevocation.js"
import type { FunctionSettings } from "../config/FunctionSettings.js"
import type { Handshake } from "../deployments/serving/SocketHandshake.js"
import type { InvocationsService, OpenedSocket, SocketEnd } from "./Invocations.js"
import type { SessionEntry } from "./runner/Protocol.js"
import type { SocketDirectoryService } from "./SocketDirectory.js"

export type FunctionSocketHandshake = Handshake<{ readonly jwt?: string | undefined }>

/** Frames the function has not yet taken before the client is paused, and resumed. */
const PAUSE_AT = 8
const RESUME_AT = 2
/** Frames the function may send before the client's socket is open (from `ws_open`). */
const EARLY_FRAMES = 64
/** Bytes waiting in a client's socket before it is closed as a slow consumer. */
const QUEUE_BYTES = 4 * 1024 * 1024
const PING_MS = 30_000
const DEAD_PEER_MS = 75_000

export const makeFunctionSockets = (options: {
  readonly invocations: InvocationsService
  readonly directory: SocketDirectoryService
  readonly revocation: SocketRevocation
  readonly settings: FunctionSettings
}) => {
  const { invocations, directory, revocation, settings } = options
  const wss = new WebSocketServer({ noServer: true, maxPayload: settings.maxInputBytes, perMessageDeflate: false, clientTracking: false })
  const open = new Set<{ readonly ws: WebSocket; lastSeen: number }>()
  const perNamespace = new Map<string, number>()
  let held = 0

  const pinger = setInterval(() => {
    const now = Date.now()
    for (const o of open) {
      if (now - o.lastSeen > DEAD_PEER_MS) o.ws.close(SocketClose.deadPeer, "DEAD_PEER: no answer to pings")
      else o.ws.ping()
    }
  }, PING_MS)
  pinger.unref()

  const handle = async (handshake: FunctionSocketHandshake): Promise<void> => {
    const { refuse, caller } = handshake
    if (caller === undefined) return refuse({ code: "INVALID_TOKEN", error: "a credential is required" })
    const name = handshake.params["name"] ?? ""
    if (!FUNCTION_NAME.test(name)) return refuse({ code: "NOT_FOUND", error: `no function named ${name.slice(0, 80)}` })
    const namespace = caller.namespace
    if (held >= settings.sockets) {
      return refuse({ code: "RATE_LIMITED", error: "this gateway holds its most function sockets", hint: "retry later", retryAfterSeconds: 5 })
    }
    if ((perNamespace.get(namespace) ?? 0) >= settings.namespaceSockets) {
      return refuse({ code: "RATE_LIMITED", error: `the namespace holds ${settings.namespaceSockets} function sockets on this gateway, its most`, hint: "close one", retryAfterSeconds: 5 })
    }
    held++
    perNamespace.set(namespace, (perNamespace.get(namespace) ?? 0) + 1)
    let released = false
    const release = () => {
      if (released) return
      released = true
      held--
      const left = (perNamespace.get(namespace) ?? 1) - 1
      if (left > 0) perNamespace.set(namespace, left)
      else perNamespace.delete(namespace)
    }

    let ws: WebSocket | undefined
    let closing = false
    let ended: SocketEnd | undefined
    /** The instance ended (it hears no ws_close then). */
    let dead = false
    const early: Array<Uint8Array> = []
    const close = (end: SocketEnd) => {
      if (closing) return
      closing = true
      ended ??= end
      if (ws === undefined) return
      ws.close(end.code, end.reason.slice(0, 120))
      // a client that reads nothing never takes the close frame either
      setTimeout(() => ws?.terminate(), 5_000).unref()
    }
    const send = (data: Uint8Array): boolean => {
      if (closing) return false
      if (ws === undefined) {
        if (early.length >= EARLY_FRAMES) return false
        early.push(data)
        return true
      }
      if (ws.bufferedAmount > QUEUE_BYTES) {
        close({ code: SocketClose.slowConsumer, reason: "SLOW_CONSUMER: frames were not read fast enough" })
        return false
      }
      ws.send(data, { binary: !isUtf8(data) })
      return true
    }
    const id = directory.newId()
    const unregister = directory.register({ id, namespace, functionName: name, openedAt: Date.now(), send, close: (code, reason) => close({ code, reason }) })
    const opened = await Effect.runPromise(
      Effect.either(
        invocations.openSocket({ namespace, name, caller, socket: id }, (end) => {
          dead = true
          close(end)
        })
      )
    )
    if (Either.isLeft(opened)) {
      unregister()
      release()
      const refusal = opened.left
      return refuse({ code: refusal.code, error: refusal.reason, hint: refusal.hint, retryAfterSeconds: refusal.retryAfterSeconds })
    }
    const instance = opened.right
    let accepted = false
    wss.handleUpgrade(handshake.req, handshake.socket, handshake.head, (socket) => {
      accepted = true
      handshake.answered(101)
      ws = socket
      serve(socket, instance, {
        send,
        close,
        died: (end) => {
          dead = true
          close(end)
        },
        ended: () => ended,
        dead: () => dead,
        unregister,
        release,
        early,
        caller: handshake.caller!
      })
    })
    if (!accepted) {
      // ws answered a handshake it could not complete itself: nothing is kept
      instance.end()
      unregister()
      release()
    }
  }

  /** The socket once open: its frames to the instance in order, its end to the instance's. */
  const serve = (
    socket: WebSocket,
    instance: OpenedSocket,
    s: {
      readonly send: (data: Uint8Array) => boolean
      readonly close: (end: SocketEnd) => void
      /** The instance ended: the socket closes as it says. */
      readonly died: (end: SocketEnd) => void
      readonly ended: () => SocketEnd | undefined
      readonly dead: () => boolean
      readonly unregister: () => void
      readonly release: () => void
      readonly early: Array<Uint8Array>
      readonly caller: NonNullable<FunctionSocketHandshake["caller"]>
    }
  ) => {
    const entry = { ws: socket, lastSeen: Date.now() }
    open.add(entry)
    const credential = credentialOf(s.caller)
    const unwatch =
      credential === undefined
        ? () => {}
        : revocation.register({ credential, revoke: () => s.close({ code: SocketClose.revoked, reason: "REVOKED: the credential was revoked or its session ended" }) })
    const queue: Array<SessionEntry> = []
    let running = false
    let paused = false
    let finished = false
    const finish = () => {
      if (finished) return
      finished = true
      instance.end()
      open.delete(entry)
      unwatch()
      s.unregister()
      s.release()
    }
    const pump = async () => {
      if (running) return
      running = true
      while (queue.length > 0) {
        const next = queue.shift()!
        if (paused && queue.length <= RESUME_AT) {
          paused = false
          socket.resume()
        }
        const result = await instance.entry(next)
        if ("ended" in result) {
          s.died(result.ended)
          queue.length = 0
          break
        }
        if (result.output.length > 0) s.send(result.output)
        if (next.entry === "close") break
      }
      running = false
      if (s.dead() || socket.readyState === socket.CLOSED) finish()
    }
    const enqueue = (next: SessionEntry) => {
      queue.push(next)
      if (!paused && queue.length >= PAUSE_AT) {
        paused = true
        socket.pause()
      }
      void pump()
    }

    // what the function sent while opening, then what ws_open wrote
    for (const frame of s.early.splice(0)) s.send(frame)
    if (instance.first.length > 0) s.send(instance.first)
    const ended = s.ended()
    if (ended !== undefined) {
      socket.close(ended.code, ended.reason.slice(0, 120))
    }
    socket.on("pong", () => (entry.lastSeen = Date.now()))
    socket.on("message", (data) => {
      entry.lastSeen = Date.now()
      if (s.ended() !== undefined) return
      // binaryType nodebuffer: one Buffer per message, text or binary alike
      const bytes = data as Buffer
      enqueue({ entry: "frame", data: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length) })
    })
    socket.on("error", () => socket.terminate())
    socket.once("close", () => {
      // whoever closed it, a live instance hears ws_close, then goes
      if (!s.dead()) enqueue({ entry: "close" })
      else if (!running) finish()
    })
  }

  return {
    handle,
    close: () => {
      clearInterval(pinger)
      for (const o of open) o.ws.close(SocketClose.goingAway, "the gateway is shutting down")
    }
  }
}

export type FunctionSockets = ReturnType<typeof makeFunctionSockets>
