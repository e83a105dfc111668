/**
 * `POST /v1/proxy/anon`: one HTTP request made for the caller through the SOCKS upstream
 * (docs/proxy.md "One-shot requests"). The request is judged whole before anything is sent (URL
 * and destination, headers, body size); then the stream is opened through the upstream, TLS is
 * spoken over it for https (the destination's name as SNI and the name checked against its
 * certificate, the system's trust plus NODE_EXTRA_CA_CERTS), and HTTP/1.1 over that.
 *
 * What the upstream refuses is a 503; anything after the upstream accepted (the destination
 * unreachable, TLS refused, a malformed answer, the timeout, a response body over its cap) is a
 * failed upstream request: the answer is 200 with `error`. The response is read into memory only
 * up to its cap, and the read stops there, so a destination that streams forever costs the cap.
 */
import { Effect } from "effect"
import { HOP_BY_HOP_HEADERS } from "../../domain/HopByHop.js"
import * as http from "node:http"
import type * as net from "node:net"
import * as tls from "node:tls"
import type { ProxyCode } from "../../domain/Errors.js"
import { judgeUrl, type UrlTarget } from "../../domain/ProxyDestination.js"
import { refuse, type Refused } from "../Refused.js"
import type { ProxySettings } from "../config/ProxySettings.js"
import { DialFailed, dialThroughSocks, isolationKey } from "./SocksDial.js"

export const anonMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const
export type AnonMethod = (typeof anonMethods)[number]

export interface AnonRequest {
  readonly method: AnonMethod
  readonly url: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** The request body, base64. */
  readonly body?: string | undefined
}

export type AnonAnswer =
  | { readonly status_code: number; readonly headers: Record<string, string>; readonly body: string }
  | { readonly error: string }

/** At most this many request headers, each value at most 8 KiB. */
export const MAX_REQUEST_HEADERS = 64
export const MAX_HEADER_VALUE = 8 * 1024

/**
 * Headers that describe one connection, not the message (RFC 9110 §7.6.1), and those the gateway
 * sets itself: dropped from the caller's request and from the destination's answer.
 */
const hopByHop = new Set([
  ...HOP_BY_HOP_HEADERS,
  "host",
  "content-length"
])

const tokenPattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/
/** A field value: visible characters, spaces and tabs, obs-text; never CR, LF or NUL. */
const valuePattern = /^[\t\x20-\x7e\x80-\xff]*$/
const base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

type Judged = { readonly target: UrlTarget; readonly headers: Record<string, string>; readonly body: Buffer | undefined }

/** The request judged: the refusal of the first thing wrong, or what will be sent. */
export const judgeAnonRequest = (request: AnonRequest, maxBodyBytes: number): Judged | Refused<ProxyCode> => {
  const target = judgeUrl(request.url)
  if (target._tag === "Left") return refuse(target.left.code, `url: ${target.left.reason}`)
  const given = Object.entries(request.headers ?? {})
  if (given.length > MAX_REQUEST_HEADERS) return refuse("VALIDATION_FAILED", `headers: at most ${MAX_REQUEST_HEADERS}`)
  const headers: Record<string, string> = {}
  const named = new Set<string>()
  const seen = new Set<string>()
  for (const [name, value] of given) {
    if (!tokenPattern.test(name)) return refuse("VALIDATION_FAILED", `headers: ${JSON.stringify(name)} is not a header name`)
    if (!valuePattern.test(value) || value.length > MAX_HEADER_VALUE) {
      return refuse("VALIDATION_FAILED", `headers: the value of ${name} holds CR, LF, NUL or a control character, or is over 8 KiB`)
    }
    const lower = name.toLowerCase()
    // names are case-insensitive: two spellings of one name are one header given twice, read
    // strictly as a body's repeated member is, never one of them silently dropped
    if (seen.has(lower)) return refuse("VALIDATION_FAILED", `headers: ${name} is given twice (header names are case-insensitive; join the values with ", ")`)
    seen.add(lower)
    if (lower === "connection") for (const listed of value.split(",")) named.add(listed.trim().toLowerCase())
    if (!hopByHop.has(lower)) headers[lower] = value
  }
  for (const listed of named) delete headers[listed]
  let body: Buffer | undefined
  if (request.body !== undefined && request.body !== "") {
    if (!base64Pattern.test(request.body)) return refuse("VALIDATION_FAILED", "body: not base64 (standard alphabet, padded)")
    if ((request.body.length / 4) * 3 - 2 > maxBodyBytes) return refuse("PAYLOAD_TOO_LARGE", `body: over ${maxBodyBytes} bytes`)
    body = Buffer.from(request.body, "base64")
    if (body.length > maxBodyBytes) return refuse("PAYLOAD_TOO_LARGE", `body: over ${maxBodyBytes} bytes`)
  }
  return { target: target.right, headers, body }
}

const secure = (socket: net.Socket, target: UrlTarget, signal: AbortSignal): Promise<tls.TLSSocket> =>
  new Promise((resolve, reject) => {
    const stream = tls.connect({ socket, servername: target.kind === "name" ? target.host : undefined, host: target.host, ALPNProtocols: ["http/1.1"] })
    const onAbort = () => stream.destroy(new Error("timed out"))
    signal.addEventListener("abort", onAbort, { once: true })
    stream.once("secureConnect", () => {
      signal.removeEventListener("abort", onAbort)
      resolve(stream)
    })
    stream.once("error", (error) => {
      signal.removeEventListener("abort", onAbort)
      reject(error)
    })
  })

const answerHeaders = (raw: ReadonlyArray<string>): Record<string, string> => {
  // the headers the destination's Connection names describe its connection to the gateway, as the
  // caller's do in the request (RFC 9110 §7.6.1): dropped too; the body's length is kept
  const named = new Set<string>()
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() !== "connection") continue
    for (const listed of (raw[i + 1] as string).split(",")) named.add(listed.trim().toLowerCase())
  }
  named.delete("content-length")
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase()
    if ((hopByHop.has(name) && name !== "content-length") || named.has(name)) continue
    const value = raw[i + 1] as string
    // Set-Cookie values hold commas of their own, so several are joined by newlines
    out[name] = out[name] === undefined ? value : `${out[name]}${name === "set-cookie" ? "\n" : ", "}${value}`
  }
  return out
}

/** Sends the judged request over `stream` and reads the answer, its body at most `maxBytes`. */
const exchange = (stream: net.Socket, judged: Judged, method: AnonMethod, maxBytes: number, signal: AbortSignal): Promise<AnonAnswer> =>
  new Promise((resolve) => {
    const { target, body } = judged
    const headers: Record<string, string> = { ...judged.headers, host: target.hostHeader, connection: "close" }
    if (body !== undefined || method === "POST" || method === "PUT" || method === "PATCH") headers["content-length"] = String(body?.length ?? 0)
    let settled = false
    const settle = (answer: AnonAnswer) => {
      if (settled) return
      settled = true
      signal.removeEventListener("abort", onAbort)
      stream.destroy()
      resolve(answer)
    }
    const request = http.request({ method, path: target.path, headers, setHost: false, createConnection: () => stream })
    const onAbort = () => {
      request.destroy()
      settle({ error: "the request timed out" })
    }
    signal.addEventListener("abort", onAbort, { once: true })
    request.on("error", (error) => settle({ error: `the request failed: ${error.message}` }))
    // Upgrade is hop-by-hop and never sent, so a 101 is a malformed answer; without a listener node
    // drops the socket and the request waits for its timeout instead
    request.on("upgrade", (_response, socket: net.Socket) => {
      socket.destroy()
      settle({ error: "the destination answered 101 Switching Protocols to a request that asked for no upgrade" })
    })
    request.on("response", (response) => {
      const chunks: Array<Buffer> = []
      let size = 0
      response.on("data", (chunk: Buffer) => {
        size += chunk.length
        if (size > maxBytes) {
          response.destroy()
          settle({ error: `the response body is over the ${maxBytes}-byte cap; its read was stopped` })
          return
        }
        chunks.push(chunk)
      })
      response.on("error", (error) => settle({ error: `the response failed: ${error.message}` }))
      response.on("end", () =>
        settle({ status_code: response.statusCode ?? 0, headers: answerHeaders(response.rawHeaders), body: Buffer.concat(chunks).toString("base64") })
      )
    })
    request.end(body)
  })

const run = async (settings: ProxySettings, judged: Judged, method: AnonMethod, isolation: string, signal: AbortSignal): Promise<AnonAnswer | "upstream-down"> => {
  let stream: net.Socket
  try {
    stream = await dialThroughSocks(settings.socks, judged.target, Math.min(settings.connectTimeoutMs, settings.anonTimeoutMs), isolation)
  } catch (error) {
    if (error instanceof DialFailed && error.side === "destination") return { error: error.message }
    return "upstream-down"
  }
  if (signal.aborted) {
    stream.destroy()
    return { error: "the request timed out" }
  }
  if (judged.target.scheme === "https") {
    try {
      stream = await secure(stream, judged.target, signal)
    } catch (error) {
      stream.destroy()
      return { error: `TLS with the destination failed: ${error instanceof Error ? error.message : String(error)}` }
    }
  }
  return exchange(stream, judged, method, settings.anonMaxResponseBytes, signal)
}

export interface AnonRequests {
  /** One anon request for `caller` (namespace and subject: one user's requests share circuits, never another user's). */
  readonly send: (caller: { readonly namespace: string; readonly subject: string }, request: AnonRequest) => Effect.Effect<AnonAnswer, Refused<ProxyCode>>
  /** Requests in flight on this gateway. */
  readonly inFlight: () => number
}

/**
 * The gateway's anon requests, counted in flight per user and in all: each may hold its response
 * cap in memory, so the counts bound the memory they take together (429 past either).
 */
export const makeAnonRequests = (settings: ProxySettings): AnonRequests => {
  const perUser = new Map<string, number>()
  let total = 0
  const release = (user: string) => {
    total--
    const left = (perUser.get(user) ?? 1) - 1
    if (left <= 0) perUser.delete(user)
    else perUser.set(user, left)
  }
  const send: AnonRequests["send"] = (caller, request) => {
    const judged = judgeAnonRequest(request, settings.anonMaxRequestBytes)
    if ("_tag" in judged) return Effect.fail(judged)
    if (settings.socks === undefined) return Effect.fail(refuse("RELAY_UNAVAILABLE", "no anonymity network is configured on this gateway", "the operator sets PORTICO_PROXY_SOCKS_URL"))
    const user = `${caller.namespace}\u0000${caller.subject}`
    if ((perUser.get(user) ?? 0) >= settings.anonPerUser) {
      return Effect.fail(refuse("RATE_LIMITED", `at most ${settings.anonPerUser} anon requests in flight per user`, "wait for one to finish", 1))
    }
    if (total >= settings.anonPerNode) return Effect.fail(refuse("RATE_LIMITED", "this gateway carries its most anon requests", "retry later", 1))
    const counted = Effect.acquireRelease(
      Effect.sync(() => {
        perUser.set(user, (perUser.get(user) ?? 0) + 1)
        total++
      }),
      () => Effect.sync(() => release(user))
    )
    return Effect.scoped(
      Effect.zipRight(
        counted,
        Effect.flatMap(
          Effect.promise((interrupted) => {
            // a timer of our own, not AbortSignal.timeout: a timeout signal referenced only by
            // AbortSignal.any can be collected before it fires, and the request would never end
            const deadline = new AbortController()
            const timer = setTimeout(() => deadline.abort(), settings.anonTimeoutMs)
            const onInterrupt = () => deadline.abort()
            interrupted.addEventListener("abort", onInterrupt, { once: true })
            return run(settings, judged, request.method, isolationKey("user", caller.namespace, caller.subject), deadline.signal).finally(() => {
              clearTimeout(timer)
              interrupted.removeEventListener("abort", onInterrupt)
            })
          }),
          (answer) =>
            answer === "upstream-down"
              ? Effect.fail(refuse("RELAY_UNAVAILABLE", "the anonymity network is unavailable", "retry later", 5))
              : Effect.succeed(answer)
        )
      )
    )
  }
  return { send, inFlight: () => total }
}
