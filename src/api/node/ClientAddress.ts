/**
 * A request's client, decided once at the listener (src/layers/config/TrustedProxies.ts) and kept
 * on node's request, so every later reader (rate limits, body budgets, the gate, the access log,
 * the app proxy) takes the same answer without the settings. Without trusted proxies nothing is
 * kept and the socket's peer is read, as before.
 */
import type * as http from "node:http"
import type * as net from "node:net"
import { relayedClientOf } from "../../domain/HopByHop.js"
import { forwardedIn, type TrustedProxies } from "../../layers/config/TrustedProxies.js"

const CLIENT = Symbol("portico.request.client")
const PROTO = Symbol("portico.request.proto")
interface Noted {
  [CLIENT]?: string | undefined
  [PROTO]?: "http" | "https"
}

const encrypted = (req: http.IncomingMessage) => (req.socket as net.Socket & { encrypted?: boolean }).encrypted === true

/** Decides the request's client and scheme when its peer is a trusted proxy. */
export const noteClient = (proxies: TrustedProxies, req: http.IncomingMessage): void => {
  if (!proxies.any) return
  const peer = req.socket.remoteAddress
  if (!proxies.trusts(peer)) return
  const noted = req as http.IncomingMessage & Noted
  ;[noted[CLIENT], noted[PROTO]] = forwardedIn(proxies, peer, req.rawHeaders, encrypted(req))
}

/** The request's client address: as a trusted proxy named it, else its peer's. */
export const clientAddressOf = (req: http.IncomingMessage): string | undefined => {
  const noted = req as http.IncomingMessage & Noted
  return CLIENT in noted ? noted[CLIENT] : req.socket.remoteAddress
}

/** The scheme the client used. */
export const clientProtoOf = (req: http.IncomingMessage): "http" | "https" =>
  (req as http.IncomingMessage & Noted)[PROTO] ?? (encrypted(req) ? "https" : "http")

/**
 * A request another gateway of the cluster relayed to this one for the app it runs here (the
 * relay marker, from an internal source: HostRouting.ts): its client is the one that gateway
 * named in the one `X-Forwarded-For` value it set, and so is its scheme.
 */
export const noteRelayed = (req: http.IncomingMessage): void => {
  const noted = req as http.IncomingMessage & Noted
  ;[noted[CLIENT], noted[PROTO]] = relayedClientOf(req.rawHeaders)
}
