/**
 * The reverse proxy to a dynamic app (spec §4.8 "Serving"): the request is sent to the app's
 * port on 127.0.0.1 and both bodies are piped, so they stream with back-pressure (neither side is
 * buffered whole, a slow reader slows the writer); a WebSocket (any `Upgrade`) is handed the two
 * sockets piped together once the app has said 101.
 *
 * Hop-by-hop headers (RFC 9110 §7.6.1: `Connection` and every header it names, `Keep-Alive`,
 * `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`, `Proxy-*`) are not passed on, except `Upgrade`
 * on an upgrade. `X-Forwarded-For/-Proto/-Host` are set by the gateway, never passed from the
 * client (the gateway is the edge: RequestMeta trusts no forwarding header either); `Host` is the
 * client's, the app's own domain. The app has `ANSWER_TIMEOUT_MS` to start its answer: past it,
 * or when it refuses the connection, the client gets 502 APP_UNREACHABLE. After the headers
 * nothing is timed: long polls and event streams are the app's to end.
 *
 * The proxy never connects to the gateway's own port: a record naming it would loop.
 */
import { clientAddressOf, clientProtoOf } from "../../../api/node/ClientAddress.js"
import * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import { DROPPED_TOWARD_APPS, PROXY_NODE_HEADER } from "../../../domain/HopByHop.js"
import { answerRefusal, answerRefusalOnSocket, type AppRefusal, appUnreachable } from "./AppAnswers.js"
import type { AppTarget } from "./AppHosts.js"
import { splice } from "./Splice.js"

/** How long an app has to start answering (its status line) before the client is told 502. */
export const ANSWER_TIMEOUT_MS = 30_000

// and `expect`: the gateway answered the client's 100-continue itself (Gateway.ts)
const HOP_BY_HOP = new Set([...DROPPED_TOWARD_APPS, "expect"])

/** Headers named by `Connection` (`Connection: keep-alive, X-Foo`) are hop-by-hop too. */
const connectionTokens = (value: string | undefined): ReadonlySet<string> =>
  value === undefined ? new Set() : new Set(value.split(",").map((t) => t.trim().toLowerCase()).filter((t) => t !== ""))

/** `rawHeaders` (name, value, name, value …, duplicates kept) without the hop-by-hop ones. */
export const endToEnd = (raw: ReadonlyArray<string>, connection: string | string[] | undefined): Array<string> => {
  const named = connectionTokens(Array.isArray(connection) ? connection.join(",") : connection)
  const kept: Array<string> = []
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string
    const lower = name.toLowerCase()
    if (HOP_BY_HOP.has(lower) || named.has(lower)) continue
    kept.push(name, raw[i + 1] as string)
  }
  return kept
}

export { PROXY_NODE_HEADER }

/** Where a request goes: the app's port on this machine, or another node's gateway (`relayedBy`: this node's id). */
export interface Upstream {
  readonly host: string
  readonly port: number
  readonly relayedBy?: string | undefined
}

/** The request's headers as the app (or the gateway relayed to) receives them. */
const forwardedHeaders = (req: http.IncomingMessage, upgrade: string | undefined, relayedBy: string | undefined): Array<string> => {
  const headers = endToEnd(req.rawHeaders, req.headers["connection"])
  headers.push(
    "X-Forwarded-For", clientAddressOf(req) ?? "",
    "X-Forwarded-Proto", clientProtoOf(req),
    "X-Forwarded-Host", req.headers.host ?? ""
  )
  if (relayedBy !== undefined) headers.push("X-Portico-Proxy-Node", relayedBy)
  if (upgrade !== undefined) headers.push("Connection", "Upgrade", "Upgrade", upgrade)
  return headers
}

/** No body follows the head: such a request may be sent again elsewhere when its first target refused the connection. */
export const bodyless = (req: http.IncomingMessage): boolean =>
  req.headers["transfer-encoding"] === undefined && (req.headers["content-length"] === undefined || req.headers["content-length"] === "0")

/** The answer's headers as the client receives them. */
const answerHeaders = (answer: http.IncomingMessage): Array<string> => {
  const kept = endToEnd(answer.rawHeaders, answer.headers["connection"])
  // the X-Forwarded-* names are the request's; an app may send its own back, unchanged
  for (let i = 0; i + 1 < answer.rawHeaders.length; i += 2) {
    const name = answer.rawHeaders[i] as string
    if (name.toLowerCase().startsWith("x-forwarded-")) kept.push(name, answer.rawHeaders[i + 1] as string)
  }
  return kept
}

export interface AppProxyOptions {
  /** The gateway's own listening port, read at each request (it is known only once listening). */
  readonly ownPort: () => number | undefined
  readonly answerTimeoutMs?: number | undefined
}

export const makeAppProxy = (options: AppProxyOptions) => {
  const answerTimeoutMs = options.answerTimeoutMs ?? ANSWER_TIMEOUT_MS
  // kept-alive connections to the apps: a new TCP connection per request would cost more than
  // the proxying itself; LIFO keeps the warm ones busy and lets the rest time out
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 64, scheduling: "lifo" })
  // and to the other gateways an app's requests are relayed to
  const peers = new http.Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 64, scheduling: "lifo" })

  /** A port the proxy may not use: none, or the gateway's own. */
  const refusedTarget = (app: AppTarget): AppRefusal | undefined => {
    if (app.port === undefined) return appUnreachable(app.name, "has no port")
    if (app.port === options.ownPort()) return appUnreachable(app.name, "names the gateway's own port")
    return undefined
  }

  /**
   * `to`: another node's gateway, else the app's port here. `unreached`: called instead of the
   * 502 when the connection was refused before anything was sent (a bodyless request), so the
   * caller may try another node.
   */
  const request = (req: http.IncomingMessage, res: http.ServerResponse, app: AppTarget, to?: Upstream, unreached?: () => void): void => {
    const refused = to === undefined ? refusedTarget(app) : undefined
    if (refused !== undefined) return answerRefusal(res, refused, req.method)
    const upstream = http.request({
      host: to?.host ?? "127.0.0.1",
      port: to?.port ?? app.port,
      method: req.method,
      path: req.url,
      headers: forwardedHeaders(req, undefined, to?.relayedBy),
      agent: to === undefined ? agent : peers,
      setHost: false
    })
    const timer = setTimeout(() => upstream.destroy(new AnswerTimeout()), answerTimeoutMs)
    upstream.once("response", (answer) => {
      clearTimeout(timer)
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, answerHeaders(answer))
      answer.pipe(res)
      answer.once("error", () => res.destroy())
      // the app cut its answer short: the client must see it cut, not a short body as whole
      answer.once("aborted", () => res.destroy())
    })
    let settled = false
    upstream.once("error", (error) => {
      clearTimeout(timer)
      settled = true
      if (res.headersSent) {
        res.destroy()
        return
      }
      const refusedConnection = (error as NodeJS.ErrnoException).code === "ECONNREFUSED" || (error as NodeJS.ErrnoException).code === "EHOSTUNREACH"
      if (unreached !== undefined && refusedConnection) return unreached()
      const why = error instanceof AnswerTimeout ? `did not answer within ${answerTimeoutMs / 1000} s` : to === undefined ? "is not answering on its port" : "is not answering on the node that runs it"
      answerRefusal(res, appUnreachable(app.name, why), req.method)
    })
    // the client left: the app's request goes too
    res.once("close", () => {
      clearTimeout(timer)
      if (!res.writableFinished && !settled) upstream.destroy()
    })
    if (unreached !== undefined && bodyless(req)) {
      // nothing to stream: the head alone, so another node can be asked the same if this one refuses
      req.resume()
      upstream.end()
    } else req.pipe(upstream)
  }

  const upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer, app: AppTarget, to?: Upstream): void => {
    const refused = to === undefined ? refusedTarget(app) : undefined
    if (refused !== undefined) return answerRefusalOnSocket(socket, refused)
    const protocol = req.headers["upgrade"] ?? "websocket"
    // its own connection, not the agent's: an upgraded socket never returns to a pool
    const upstream = http.request({
      host: to?.host ?? "127.0.0.1",
      port: to?.port ?? app.port,
      method: req.method,
      path: req.url,
      headers: forwardedHeaders(req, protocol, to?.relayedBy),
      agent: false,
      setHost: false
    })
    const timer = setTimeout(() => upstream.destroy(new AnswerTimeout()), answerTimeoutMs)
    socket.once("error", () => upstream.destroy())
    socket.once("close", () => {
      clearTimeout(timer)
      upstream.destroy()
    })
    // once the app has answered, a later failure only closes the sockets
    let switched = false
    upstream.once("upgrade", (answer, appSocket, appHead) => {
      clearTimeout(timer)
      switched = true
      const lines = [`HTTP/1.1 ${answer.statusCode ?? 101} ${answer.statusMessage ?? "Switching Protocols"}`]
      const raw = answer.rawHeaders
      for (let i = 0; i + 1 < raw.length; i += 2) lines.push(`${raw[i]}: ${raw[i + 1]}`)
      socket.write(lines.join("\r\n") + "\r\n\r\n")
      if (appHead.length > 0) socket.write(appHead)
      if (head.length > 0) appSocket.write(head)
      ;(appSocket as net.Socket).setNoDelay(true)
      ;(socket as net.Socket).setNoDelay?.(true)
      splice(socket, appSocket)
    })
    // the app answered without switching (a 400, a 404): relayed as it is, then closed
    upstream.once("response", (answer) => {
      clearTimeout(timer)
      switched = true
      const lines = [`HTTP/1.1 ${answer.statusCode ?? 502} ${answer.statusMessage ?? ""}`]
      const kept = answerHeaders(answer)
      for (let i = 0; i + 1 < kept.length; i += 2) lines.push(`${kept[i]}: ${kept[i + 1]}`)
      // the body is relayed decoded: without a length it runs to the end of the connection
      socket.write(lines.join("\r\n") + "\r\nConnection: close\r\n\r\n")
      answer.pipe(socket)
    })
    upstream.once("error", (error) => {
      clearTimeout(timer)
      if (switched) return
      answerRefusalOnSocket(
        socket,
        appUnreachable(app.name, error instanceof AnswerTimeout ? `did not answer within ${answerTimeoutMs / 1000} s` : "is not answering on its port")
      )
    })
    upstream.end()
  }

  return {
    request,
    upgrade,
    close: () => {
      agent.destroy()
      peers.destroy()
    }
  }
}

export type AppProxy = ReturnType<typeof makeAppProxy>

class AnswerTimeout extends Error {
  constructor() {
    super("the app did not answer in time")
  }
}
