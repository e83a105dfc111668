/**
 * The gateway's own answers on an app's host (no such app, not running, unreachable): the API's
 * envelope `{error, code, hint}` in the catalogue's codes, written straight to node's response,
 * since app traffic never enters the HttpApi.
 */
import type * as http from "node:http"
import type * as net from "node:net"
import { Code, envelopeText, type ErrorCode, statusOfCode } from "../../../domain/Errors.js"

export interface AppRefusal {
  readonly code: ErrorCode
  readonly error: string
  readonly hint?: string | undefined
  readonly retryAfterSeconds?: number | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}

const bodyOf = (refusal: AppRefusal) => envelopeText(refusal)

const headersOf = (refusal: AppRefusal, body: string): Record<string, string> => ({
  "content-type": "application/json",
  "content-length": String(Buffer.byteLength(body)),
  "cache-control": "no-store",
  ...(refusal.retryAfterSeconds === undefined ? {} : { "retry-after": String(refusal.retryAfterSeconds) }),
  ...refusal.headers
})

/** Answers the refusal unless something was already sent (then the response is cut). */
export const answerRefusal = (res: http.ServerResponse, refusal: AppRefusal, method: string | undefined): void => {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = bodyOf(refusal)
  res.writeHead(statusOfCode[refusal.code], headersOf(refusal, body))
  res.end(method === "HEAD" ? undefined : body)
}

/** The same answer on a socket an upgrade request left to us; the connection then closes. */
export const answerRefusalOnSocket = (socket: net.Socket | import("node:stream").Duplex, refusal: AppRefusal): void => {
  if (!socket.writable) {
    socket.destroy()
    return
  }
  const body = bodyOf(refusal)
  const status = statusOfCode[refusal.code]
  const lines = Object.entries({ ...headersOf(refusal, body), connection: "close" }).map(([k, v]) => `${k}: ${v}`)
  // destroyed once written: node's server sockets allow half-open, and an upgrade's client may
  // never close its side, which would hold the gateway's shutdown
  socket.end(`HTTP/1.1 ${status} ${statusText[status] ?? "Error"}\r\n${lines.join("\r\n")}\r\n\r\n${body}`, () => socket.destroy())
}

const statusText: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable"
}

export const noSuchApp = (host: string): AppRefusal => ({
  code: Code.NOT_FOUND,
  error: `no app is deployed at ${host.slice(0, 253)}`,
  hint: "check the URL portico deploy printed"
})

/** A static site that is not active (deploying, failed, stopped): as if absent. */
export const siteNotActive = (name: string): AppRefusal => ({
  code: Code.NOT_FOUND,
  error: `the site ${name} is not being served`,
  hint: "deploy it again, or wait for its deploy to finish"
})

export const appNotRunning = (name: string, status: string): AppRefusal => ({
  code: Code.UNAVAILABLE,
  error: `the app ${name} is not running (${status})`,
  hint: "its deploy may still be in progress; see portico deployments events",
  retryAfterSeconds: 5
})

export const appUnreachable = (name: string, why: string): AppRefusal => ({
  code: Code.APP_UNREACHABLE,
  error: `the app ${name} ${why}`,
  hint: "the app must listen on PORT and answer; see its logs"
})

/**
 * A request with more than one `Host` header (RFC 9112 §3.2: a server must answer it 400). Taking
 * the first, as node's parser does, would let a proxy in front that reads the last one route the
 * request to one host while the gateway serves another; the connection closes after the answer.
 */
export const repeatedHost: AppRefusal = {
  code: Code.BAD_REQUEST,
  error: "the request has more than one Host header",
  hint: "send exactly one Host header",
  headers: { connection: "close" }
}

/**
 * An API request with more than one `Authorization` header (a field that is never a list, RFC 9110
 * §11.6.2): node keeps the first, a proxy in front may have read or added the other, so the
 * request's credential is ambiguous and it is refused rather than decided on the first.
 */
export const repeatedAuthorization: AppRefusal = {
  code: Code.BAD_REQUEST,
  error: "the request has more than one Authorization header",
  hint: "send exactly one credential"
}

/**
 * A CONNECT request, on any host: the gateway is no forward proxy and hands CONNECT to no app, so
 * its target (an authority, not a resource of any route) allows no method (the empty `Allow`,
 * RFC 9110 §10.2.1). Answered rather than dropped, which is what node does with a CONNECT nobody
 * listens for.
 */
export const connectRefused: AppRefusal = {
  code: Code.METHOD_NOT_ALLOWED,
  error: "CONNECT is not served: the gateway is no forward proxy",
  hint: "a tunnel through the anonymity proxy is GET /v1/proxy/tunnel, a WebSocket",
  headers: { allow: "" }
}

export const methodNotAllowed: AppRefusal = {
  code: Code.METHOD_NOT_ALLOWED,
  error: "a static site answers GET and HEAD only",
  headers: { allow: "GET, HEAD" }
}
