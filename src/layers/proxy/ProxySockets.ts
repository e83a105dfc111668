/**
 * The proxy's WebSocket routes, taken from the server's `upgrade` event on the API's hosts before
 * the API sees them (docs/proxy.md "Tunnels"). `GET /v1/proxy/tunnel?host=&port=`:
 *
 * 1. the credential (`Authorization`, or `?jwt=` for a client that cannot set headers) through the
 *    same gate and policy as `/v1/proxy/anon`: a wallet session holding `proxy`;
 * 2. the destination judged (src/domain/ProxyDestination.ts) and the tunnel counted against the
 *    per-user and per-node caps (429 RATE_LIMITED with Retry-After);
 * 3. the stream opened through the SOCKS upstream BEFORE the upgrade is accepted, so a refused
 *    destination or a dead upstream is an HTTP answer to the handshake (400, 502, 503), never a
 *    socket that opens and closes;
 * 4. the upgrade accepted and the two joined (TunnelPipe.ts), the socket watched for revocation.
 *
 * `GET /v1/proxy/relay?host=<namespace host>&port=443[&circuit=session]` is the same without a
 * credential, pinned to an existing namespace's host and capped per client address (docs/proxy.md
 * "Relay"). Both count against the gateway's cap on open tunnels.
 *
 * Every refusal is the API's envelope `{error, code, hint}` written on the socket.
 */
import { Effect, Either } from "effect"
import { randomBytes } from "node:crypto"
import type * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import { WebSocketServer } from "ws"
import { statusOfCode } from "../../domain/Errors.js"
import { asSession, type Principal } from "../../domain/Principal.js"
import { judgeDestination } from "../../domain/ProxyDestination.js"
import type { SessionLiveness } from "../auth/Authenticator.js"
import { type AppRefusal, answerRefusalOnSocket } from "../deployments/serving/AppAnswers.js"
import type { ProxySettings } from "./ProxySettings.js"
import { makeSocketRevocation } from "./SocketRevocation.js"
import { DialFailed, dialThroughSocks, isolationKey } from "./SocksDial.js"
import { joinPipe } from "./TunnelPipe.js"

type Upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void

export interface ProxySocketsOptions {
  readonly settings: ProxySettings
  /**
   * The gate's decision on a tunnel's credential under the route's policy (src/api/ProxyUpgrade.ts
   * passes the API's gate with `session("proxy")`): the caller, or the refusal to answer.
   */
  readonly admit: (authorization: string | undefined, remoteAddress: string | undefined) => Effect.Effect<Principal | undefined, AppRefusal>
  readonly standing: SessionLiveness["Type"]["standing"]
  /** The client network's rate limit for the anonymous relay (the gate under the open policy). */
  readonly admitAnonymous: (remoteAddress: string | undefined) => Effect.Effect<unknown, AppRefusal>
  /** Whether a namespace exists (the relay is pinned to existing namespaces' hosts); fails when the registry does not answer. */
  readonly namespaceExists: (name: string) => Effect.Effect<boolean, unknown>
  /** The platform's base domain: a relay goes only to `ns-<namespace>.<base domain>`. */
  readonly baseDomain: string
  /** The access log's call, when request logging is on: each handshake's answer (101 or the refusal's status). */
  readonly onAnswered?: ((req: http.IncomingMessage, status: number, ms: number) => void) | undefined
}

const TUNNEL_PATH = "/v1/proxy/tunnel"
const RELAY_PATH = "/v1/proxy/relay"
const wsKey = /^[+/0-9A-Za-z]{22}==$/
/** A frame larger than this closes the tunnel (1009); clients send the stream in smaller pieces. */
export const MAX_FRAME_BYTES = 1024 * 1024

export const makeProxySockets = (options: ProxySocketsOptions) => {
  const { settings } = options
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, clientTracking: true })
  const revocation = makeSocketRevocation({ standing: options.standing, intervalMs: settings.revocationCheckMs })
  const perUser = new Map<string, number>()
  let total = 0

  const release = (user: string) => {
    total--
    const left = (perUser.get(user) ?? 1) - 1
    if (left <= 0) perUser.delete(user)
    else perUser.set(user, left)
  }

  /** The handshake each socket belongs to and when it began, for the access log. */
  const handshakes = new WeakMap<Duplex, { readonly req: http.IncomingMessage; readonly startedAt: number }>()
  const logAnswer = (socket: Duplex, status: number) => {
    const handshake = handshakes.get(socket)
    if (handshake !== undefined && options.onAnswered !== undefined) options.onAnswered(handshake.req, status, performance.now() - handshake.startedAt)
  }

  const refuse = (socket: Duplex, refusal: AppRefusal) => {
    logAnswer(socket, statusOfCode[refusal.code])
    answerRefusalOnSocket(socket, refusal)
  }

  /** The handshake's own shape: GET, Upgrade: websocket, version 13 and a key; a refusal otherwise. */
  const handshakeRefusal = (req: http.IncomingMessage, path: string): AppRefusal | undefined => {
    if (req.method !== "GET" || (req.headers["upgrade"] ?? "").toLowerCase() !== "websocket") {
      return { code: "BAD_REQUEST", error: `${path} is a WebSocket`, hint: "open it with GET, Connection: Upgrade and Upgrade: websocket" }
    }
    if (req.headers["sec-websocket-version"] !== "13" || !wsKey.test(req.headers["sec-websocket-key"] ?? "")) {
      return { code: "BAD_REQUEST", error: "a WebSocket handshake needs Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key" }
    }
    return undefined
  }

  /**
   * Accepts the upgrade and joins the socket to `stream`; `onEnd` runs once when either ends. ws
   * answers a handshake it cannot complete itself (the callback never runs): then nothing is kept.
   */
  const accept = (req: http.IncomingMessage, socket: Duplex, head: Buffer, stream: net.Socket, onEnd: () => void, revocable?: string) => {
    if (socket.destroyed) {
      stream.destroy()
      return onEnd()
    }
    let accepted = false
    wss.handleUpgrade(req, socket, head, (ws) => {
      accepted = true
      logAnswer(socket, 101)
      let unregister = () => {}
      const pipe = joinPipe(
        ws,
        stream,
        { maxBytes: settings.tunnelMaxBytes, idleMs: settings.tunnelIdleSeconds * 1000, lifetimeMs: settings.tunnelLifetimeSeconds * 1000 },
        () => {
          unregister()
          onEnd()
        }
      )
      if (revocable !== undefined) unregister = revocation.register({ sessionId: revocable, revoke: () => pipe.end("revoked") })
    })
    if (!accepted) {
      stream.destroy()
      onEnd()
    }
  }

  const dialFailure = (error: unknown): AppRefusal =>
    error instanceof DialFailed && error.side === "destination"
      ? { code: "RELAY_DESTINATION_UNREACHABLE", error: "the destination could not be reached" }
      : {
          code: "RELAY_UNAVAILABLE",
          error: settings.socks === undefined ? "no anonymity network is configured on this gateway" : "the anonymity network is unavailable",
          retryAfterSeconds: 5
        }

  const relayPerAddress = new Map<string, number>()
  const nsHost = new RegExp(`^ns-([a-z0-9][a-z0-9-]{0,62})\\.${options.baseDomain.toLowerCase().replace(/\.$/, "").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`)

  /**
   * `GET /v1/proxy/relay?host=<namespace host>&port=443[&circuit=session]`: anonymous, pinned to
   * `ns-<namespace>.<base domain>` of an existing namespace, at most `relayPerAddress` open per
   * client address; otherwise a tunnel (binary frames, a text frame ends it).
   */
  const relay = async (req: http.IncomingMessage, socket: Duplex, head: Buffer, query: URLSearchParams) => {
    const shape = handshakeRefusal(req, RELAY_PATH)
    if (shape !== undefined) return refuse(socket, shape)
    const admitted = await Effect.runPromise(Effect.either(options.admitAnonymous(req.socket.remoteAddress)))
    if (Either.isLeft(admitted)) return refuse(socket, admitted.left)
    const circuit = query.get("circuit")
    if (circuit !== null && circuit !== "session") return refuse(socket, { code: "VALIDATION_FAILED", error: "circuit: only session" })
    const port = query.get("port") ?? "443"
    if (!/^[0-9]{1,5}$/.test(port)) return refuse(socket, { code: "VALIDATION_FAILED", error: "port must be a number (443)" })
    if (port !== "443") return refuse(socket, { code: "RELAY_DESTINATION_NOT_ALLOWED", error: "the relay goes to port 443 only" })
    const raw = query.get("host")
    if (raw === null || raw === "") return refuse(socket, { code: "VALIDATION_FAILED", error: "host is required" })
    const host = raw.toLowerCase().replace(/\.$/, "")
    const namespace = nsHost.exec(host)?.[1]
    if (namespace === undefined) {
      return refuse(socket, { code: "RELAY_DESTINATION_NOT_ALLOWED", error: `the relay goes only to a namespace's host, ns-<namespace>.${options.baseDomain}` })
    }
    const exists = await Effect.runPromise(Effect.either(options.namespaceExists(namespace)))
    if (Either.isLeft(exists)) return refuse(socket, { code: "UNAVAILABLE", error: "registry unavailable", retryAfterSeconds: 5 })
    if (!exists.right) return refuse(socket, { code: "RELAY_DESTINATION_NOT_ALLOWED", error: `no namespace ${namespace}` })
    const address = req.socket.remoteAddress ?? "unknown"
    if ((relayPerAddress.get(address) ?? 0) >= settings.relayPerAddress) {
      return refuse(socket, { code: "RATE_LIMITED", error: `at most ${settings.relayPerAddress} open relay streams per address`, hint: "close one first", retryAfterSeconds: 5 })
    }
    // relay streams share the gateway's cap on open tunnels: each holds two sockets the same way
    if (total >= settings.tunnelsPerNode) {
      return refuse(socket, { code: "RATE_LIMITED", error: "this gateway holds its most open tunnels", hint: "retry later", retryAfterSeconds: 5 })
    }
    relayPerAddress.set(address, (relayPerAddress.get(address) ?? 0) + 1)
    total++
    const done = () => {
      total--
      const left = (relayPerAddress.get(address) ?? 1) - 1
      if (left <= 0) relayPerAddress.delete(address)
      else relayPerAddress.set(address, left)
    }
    let stream: net.Socket
    try {
      // circuit=session: the client address's relay streams share a circuit; otherwise each its own
      const isolation = circuit === "session" ? isolationKey("relay", address) : randomBytes(16).toString("hex")
      stream = await dialThroughSocks(settings.socks, { host, port: 443 }, settings.connectTimeoutMs, isolation)
    } catch (error) {
      done()
      return refuse(socket, dialFailure(error))
    }
    accept(req, socket, head, stream, done)
  }

  const tunnel = async (req: http.IncomingMessage, socket: Duplex, head: Buffer, query: URLSearchParams) => {
    const shape = handshakeRefusal(req, TUNNEL_PATH)
    if (shape !== undefined) return refuse(socket, shape)
    const jwt = query.get("jwt")
    const authorization = req.headers.authorization ?? (jwt === null ? undefined : `Bearer ${jwt}`)
    const admitted = await Effect.runPromise(Effect.either(options.admit(authorization, req.socket.remoteAddress)))
    if (Either.isLeft(admitted)) return refuse(socket, admitted.left)
    const caller = admitted.right === undefined ? undefined : asSession(admitted.right)
    if (caller === undefined) return refuse(socket, { code: "SESSION_REQUIRED", error: "this route needs a signed-in user's token" })
    const destination = judgeDestination(query.get("host") ?? undefined, query.get("port") ?? undefined)
    if (Either.isLeft(destination)) return refuse(socket, { code: destination.left.code, error: destination.left.reason })
    const user = `${caller.namespace}\u0000${caller.subject}`
    if ((perUser.get(user) ?? 0) >= settings.tunnelsPerUser) {
      return refuse(socket, { code: "RATE_LIMITED", error: `at most ${settings.tunnelsPerUser} open tunnels per user`, hint: "close a tunnel first", retryAfterSeconds: 5 })
    }
    if (total >= settings.tunnelsPerNode) {
      return refuse(socket, { code: "RATE_LIMITED", error: "this gateway holds its most open tunnels", hint: "retry later", retryAfterSeconds: 5 })
    }
    perUser.set(user, (perUser.get(user) ?? 0) + 1)
    total++
    let stream: net.Socket
    try {
      // one user's tunnels share circuits, never another user's
      stream = await dialThroughSocks(settings.socks, destination.right, settings.connectTimeoutMs, isolationKey("user", caller.namespace, caller.subject))
    } catch (error) {
      release(user)
      return refuse(socket, dialFailure(error))
    }
    accept(req, socket, head, stream, () => release(user), caller.sessionId)
  }

  /** Whether an upgrade is one of the proxy's (its path), to be answered by `upgrade`. */
  const handles = (req: http.IncomingMessage): boolean => {
    const path = (req.url ?? "").split("?")[0]
    return path === TUNNEL_PATH || path === RELAY_PATH
  }

  const upgrade: Upgrade = (req, socket, head) => {
    // node leaves an upgraded socket without an error listener: a client reset while the stream is
    // being opened must not become an uncaught error
    socket.on("error", () => socket.destroy())
    handshakes.set(socket, { req, startedAt: performance.now() })
    const url = new URL(req.url ?? "/", "http://gateway")
    const answer = url.pathname === RELAY_PATH ? relay : tunnel
    answer(req, socket, head, url.searchParams).catch(() => socket.destroy())
  }

  return {
    handles,
    upgrade,
    /** How many tunnels and relay streams are open on this gateway. */
    open: () => total,
    close: () => {
      revocation.stop()
      for (const client of wss.clients) client.terminate()
      wss.close()
    }
  }
}

export type ProxySockets = ReturnType<typeof makeProxySockets>
