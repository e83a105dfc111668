/**
 * The proxy's WebSocket routes (docs/proxy.md "Tunnels"), past the handshake's gate and query
 * schema (src/api/Upgrades.ts answers those for every WebSocket route). `GET
 * /v1/proxy/tunnel?host=&port=`, a wallet session holding `proxy`:
 *
 * 1. the destination judged (src/domain/ProxyDestination.ts) and the tunnel counted against the
 *    per-user and per-node caps (429 RATE_LIMITED with Retry-After);
 * 2. the stream opened through the SOCKS upstream BEFORE the upgrade is accepted, so a refused
 *    destination or a dead upstream is an HTTP answer to the handshake (400, 502, 503), never a
 *    socket that opens and closes;
 * 3. the upgrade accepted and the two joined (TunnelPipe.ts), the socket watched for revocation.
 *
 * `GET /v1/proxy/relay?host=<namespace host>&port=443[&circuit=session]` is the same without a
 * credential, pinned to an existing namespace's host and capped per client address (docs/proxy.md
 * "Relay"). Both count against the gateway's cap on open tunnels.
 *
 * Every refusal is the API's envelope `{error, code, hint}` written on the socket.
 */
import { Effect, Either } from "effect"
import { randomBytes } from "node:crypto"
import type * as net from "node:net"
import { WebSocketServer } from "ws"
import { asSession } from "../../domain/Principal.js"
import { judgeDestination } from "../../domain/ProxyDestination.js"
import type { Handshake } from "../deployments/serving/SocketHandshake.js"
import type { SocketRevocation } from "../auth/SocketRevocation.js"
import type { AppRefusal } from "../deployments/serving/AppAnswers.js"
import type { ProxySettings } from "../config/ProxySettings.js"
import { DialFailed, dialThroughSocks, isolationKey } from "./SocksDial.js"
import { joinPipe } from "./TunnelPipe.js"

export interface ProxySocketsOptions {
  readonly settings: ProxySettings
  /** The gateway's revocation check, shared by every family's sockets. */
  readonly revocation: SocketRevocation
  /** Whether a namespace exists (the relay is pinned to existing namespaces' hosts); fails when the registry does not answer. */
  readonly namespaceExists: (name: string) => Effect.Effect<boolean, unknown>
  /** The platform's base domain: a relay goes only to `ns-<namespace>.<base domain>`. */
  readonly baseDomain: string
}

/** A frame larger than this closes the tunnel (1009); clients send the stream in smaller pieces. */
export const MAX_FRAME_BYTES = 1024 * 1024

export const makeProxySockets = (options: ProxySocketsOptions) => {
  const { settings } = options
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false, clientTracking: true })
  const revocation = options.revocation
  const perUser = new Map<string, number>()
  let total = 0

  const release = (user: string) => {
    total--
    const left = (perUser.get(user) ?? 1) - 1
    if (left <= 0) perUser.delete(user)
    else perUser.set(user, left)
  }

  /**
   * Accepts the upgrade and joins the socket to `stream`; `onEnd` runs once when either ends. ws
   * answers a handshake it cannot complete itself (the callback never runs): then nothing is kept.
   */
  const accept = (handshake: Handshake<unknown>, stream: net.Socket, onEnd: () => void, revocable?: string) => {
    const { req, socket, head } = handshake
    if (socket.destroyed) {
      stream.destroy()
      return onEnd()
    }
    let accepted = false
    wss.handleUpgrade(req, socket, head, (ws) => {
      accepted = true
      handshake.answered(101)
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
      if (revocable !== undefined) unregister = revocation.register({ credential: `session:${revocable}`, revoke: () => pipe.end("revoked") })
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
  const relay = async (handshake: Handshake<{ readonly host?: string | undefined; readonly port?: string | undefined; readonly circuit?: "session" | undefined }>) => {
    const { query, refuse } = handshake
    if ((query.port ?? "443") !== "443") return refuse({ code: "RELAY_DESTINATION_NOT_ALLOWED", error: "the relay goes to port 443 only" })
    if (query.host === undefined || query.host === "") return refuse({ code: "VALIDATION_FAILED", error: "host is required" })
    const host = query.host.toLowerCase().replace(/\.$/, "")
    const namespace = nsHost.exec(host)?.[1]
    if (namespace === undefined) {
      return refuse({ code: "RELAY_DESTINATION_NOT_ALLOWED", error: `the relay goes only to a namespace's host, ns-<namespace>.${options.baseDomain}` })
    }
    const exists = await Effect.runPromise(Effect.either(options.namespaceExists(namespace)))
    if (Either.isLeft(exists)) return refuse({ code: "UNAVAILABLE", error: "registry unavailable", retryAfterSeconds: 5 })
    if (!exists.right) return refuse({ code: "RELAY_DESTINATION_NOT_ALLOWED", error: `no namespace ${namespace}` })
    const address = handshake.req.socket.remoteAddress ?? "unknown"
    if ((relayPerAddress.get(address) ?? 0) >= settings.relayPerAddress) {
      return refuse({ code: "RATE_LIMITED", error: `at most ${settings.relayPerAddress} open relay streams per address`, hint: "close one first", retryAfterSeconds: 5 })
    }
    // relay streams share the gateway's cap on open tunnels: each holds two sockets the same way
    if (total >= settings.tunnelsPerNode) {
      return refuse({ code: "RATE_LIMITED", error: "this gateway holds its most open tunnels", hint: "retry later", retryAfterSeconds: 5 })
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
      const isolation = query.circuit === "session" ? isolationKey("relay", address) : randomBytes(16).toString("hex")
      stream = await dialThroughSocks(settings.socks, { host, port: 443 }, settings.connectTimeoutMs, isolation)
    } catch (error) {
      done()
      return refuse(dialFailure(error))
    }
    accept(handshake, stream, done)
  }

  /** `GET /v1/proxy/tunnel?host=&port=`: a wallet session's tunnel to a public destination. */
  const tunnel = async (handshake: Handshake<{ readonly host?: string | undefined; readonly port?: string | undefined }>) => {
    const { query, refuse } = handshake
    const caller = handshake.caller === undefined ? undefined : asSession(handshake.caller)
    if (caller === undefined) return refuse({ code: "SESSION_REQUIRED", error: "this route needs a signed-in user's token" })
    const destination = judgeDestination(query.host, query.port)
    if (Either.isLeft(destination)) return refuse({ code: destination.left.code, error: destination.left.reason })
    const user = `${caller.namespace}\u0000${caller.subject}`
    if ((perUser.get(user) ?? 0) >= settings.tunnelsPerUser) {
      return refuse({ code: "RATE_LIMITED", error: `at most ${settings.tunnelsPerUser} open tunnels per user`, hint: "close a tunnel first", retryAfterSeconds: 5 })
    }
    if (total >= settings.tunnelsPerNode) {
      return refuse({ code: "RATE_LIMITED", error: "this gateway holds its most open tunnels", hint: "retry later", retryAfterSeconds: 5 })
    }
    perUser.set(user, (perUser.get(user) ?? 0) + 1)
    total++
    let stream: net.Socket
    try {
      // one user's tunnels share circuits, never another user's
      stream = await dialThroughSocks(settings.socks, destination.right, settings.connectTimeoutMs, isolationKey("user", caller.namespace, caller.subject))
    } catch (error) {
      release(user)
      return refuse(dialFailure(error))
    }
    accept(handshake, stream, () => release(user), caller.sessionId)
  }

  return {
    tunnel,
    relay,
    /** How many tunnels and relay streams are open on this gateway. */
    open: () => total,
    close: () => {
      for (const client of wss.clients) client.terminate()
      wss.close()
    }
  }
}

export type ProxySockets = ReturnType<typeof makeProxySockets>
