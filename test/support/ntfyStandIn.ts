/**
 * An ntfy-compatible server for tests (ntfy itself cannot be installed here; see docs/push.md).
 * It follows ntfy's documented wire format on 127.0.0.1:
 *
 * - publish: `POST|PUT /<topic>` (topic `[-_A-Za-z0-9]{1,64}`), body = message (empty: `triggered`),
 *   `Title`/`X-Title`/`t`, `Priority`/`X-Priority`/`p` (1-5 or min, low, default, high, max, urgent),
 *   `Tags`/`X-Tags`/`ta` (comma list); RFC 2047 encoded words in those headers are decoded. The
 *   answer is the message as JSON (`{id, time, expires, event: "message", topic, message, ...}`);
 *   errors are ntfy's `{code, http, error}`.
 * - access: with `tokens` set, publishing needs `Authorization: Bearer <one of them>` (none: 403
 *   40301, a wrong one: 401 40101); without, topics are open.
 * - subscribe: `GET /<topic>/json` streams NDJSON (`open` first, then each `message`, `keepalive`
 *   every `keepaliveMs`); `?poll=1` answers the cached messages and closes; `since=all` replays
 *   them first.
 *
 * It records each publish and can stall a topic (never answer) or answer it with a status.
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import { listenOnLoopback } from "./process.js"

export interface NtfyPublished {
  readonly topic: string
  readonly method: string
  readonly message: string
  readonly title: string | undefined
  readonly priority: number
  readonly tags: ReadonlyArray<string>
  readonly authorization: string | undefined
}

interface NtfyEvent {
  readonly id: string
  readonly time: number
  readonly expires?: number
  readonly event: "open" | "message" | "keepalive"
  readonly topic: string
  readonly message?: string
  readonly title?: string
  readonly priority?: number
  readonly tags?: ReadonlyArray<string>
}

export interface NtfyStandIn {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly published: Array<NtfyPublished>
  readonly stall: (topic: string) => void
  readonly answer: (topic: string, status: number) => void
  readonly stop: () => Promise<void>
}

export interface NtfyStandInOptions {
  /** Access tokens that may publish; unset means anyone may. */
  readonly tokens?: ReadonlyArray<string>
  readonly keepaliveMs?: number
}

const TOPIC = /^[-_A-Za-z0-9]{1,64}$/
const PRIORITIES: Record<string, number> = { "1": 1, "2": 2, "3": 3, "4": 4, "5": 5, min: 1, low: 2, default: 3, high: 4, max: 5, urgent: 5 }

/** Decodes RFC 2047 encoded words (`=?UTF-8?B?...?=`, `=?UTF-8?Q?...?=`), as ntfy does. */
const decodeWords = (value: string): string =>
  value.replace(/=\?([^?]+)\?([BbQq])\?([^?]*)\?=/g, (_, _charset: string, kind: string, text: string) =>
    kind.toUpperCase() === "B"
      ? Buffer.from(text, "base64").toString("utf8")
      : Buffer.from(text.replace(/_/g, " ").replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))), "latin1").toString("utf8"))

const firstHeader = (request: http.IncomingMessage, names: ReadonlyArray<string>): string | undefined => {
  for (const name of names) {
    const value = request.headers[name]
    if (typeof value === "string") return decodeWords(value)
  }
  return undefined
}

const newId = () => crypto.randomBytes(9).toString("base64url").slice(0, 12)

export const startNtfyStandIn = async (options: NtfyStandInOptions = {}): Promise<NtfyStandIn> => {
  const published: Array<NtfyPublished> = []
  const cache = new Map<string, Array<NtfyEvent>>()
  const subscribers = new Map<string, Set<http.ServerResponse>>()
  const marks = new Map<string, number | "stall">()
  const tokens = options.tokens === undefined ? undefined : new Set(options.tokens)
  const keepaliveMs = options.keepaliveMs ?? 45_000

  const fail = (response: http.ServerResponse, status: number, code: number, error: string) => {
    response.writeHead(status, { "content-type": "application/json" })
    response.end(JSON.stringify({ code, http: status, error }) + "\n")
  }

  const publish = (request: http.IncomingMessage, response: http.ServerResponse, topic: string, body: string) => {
    const authorization = request.headers["authorization"]
    if (tokens !== undefined) {
      if (authorization === undefined) return fail(response, 403, 40301, "forbidden")
      if (!authorization.startsWith("Bearer ") || !tokens.has(authorization.slice(7))) return fail(response, 401, 40101, "unauthorized")
    }
    const rawPriority = firstHeader(request, ["priority", "x-priority", "p", "prio"])
    const priority = rawPriority === undefined ? 3 : PRIORITIES[rawPriority.toLowerCase()]
    if (priority === undefined) return fail(response, 400, 40007, "invalid request: priority invalid")
    const mark = marks.get(topic)
    if (mark === "stall") return
    if (mark !== undefined) return fail(response, mark, mark * 100 + 1, http.STATUS_CODES[mark]?.toLowerCase() ?? "error")
    const title = firstHeader(request, ["title", "x-title", "ti", "t"])
    const rawTags = firstHeader(request, ["tags", "x-tags", "tag", "ta"])
    const tags = rawTags === undefined ? [] : rawTags.split(",").map((tag) => tag.trim()).filter((tag) => tag !== "")
    const message = body === "" ? "triggered" : body
    const time = Math.floor(Date.now() / 1000)
    const event: NtfyEvent = {
      id: newId(), time, expires: time + 43_200, event: "message", topic, message,
      ...(title === undefined ? {} : { title }),
      ...(priority === 3 ? {} : { priority }),
      ...(tags.length === 0 ? {} : { tags })
    }
    published.push({ topic, method: request.method ?? "", message, title, priority, tags, authorization })
    cache.set(topic, [...(cache.get(topic) ?? []), event])
    for (const subscriber of subscribers.get(topic) ?? []) subscriber.write(JSON.stringify(event) + "\n")
    response.writeHead(200, { "content-type": "application/json" })
    response.end(JSON.stringify(event) + "\n")
  }

  const subscribe = (request: http.IncomingMessage, response: http.ServerResponse, topic: string, query: URLSearchParams) => {
    response.writeHead(200, { "content-type": "application/x-ndjson; charset=utf-8" })
    const cached = query.get("since") === "all" || query.has("poll") ? cache.get(topic) ?? [] : []
    if (query.get("poll") === "1") {
      for (const event of cached) response.write(JSON.stringify(event) + "\n")
      return response.end()
    }
    response.write(JSON.stringify({ id: newId(), time: Math.floor(Date.now() / 1000), event: "open", topic }) + "\n")
    for (const event of cached) response.write(JSON.stringify(event) + "\n")
    const set = subscribers.get(topic) ?? new Set()
    subscribers.set(topic, set)
    set.add(response)
    const keepalive = setInterval(() => {
      response.write(JSON.stringify({ id: newId(), time: Math.floor(Date.now() / 1000), event: "keepalive", topic }) + "\n")
    }, keepaliveMs)
    request.on("close", () => {
      clearInterval(keepalive)
      set.delete(response)
    })
  }

  const server = http.createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1")
    const parts = url.pathname.split("/").slice(1)
    const topic = parts[0] ?? ""
    if (!TOPIC.test(topic)) return fail(response, 404, 40401, "page not found")
    if ((request.method === "POST" || request.method === "PUT") && parts.length === 1) {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => publish(request, response, topic, Buffer.concat(chunks).toString("utf8")))
      return
    }
    if (request.method === "GET" && parts.length === 2 && parts[1] === "json") return subscribe(request, response, topic, url.searchParams)
    fail(response, 404, 40401, "page not found")
  })

  const port = await listenOnLoopback(server)
  return {
    url: `http://127.0.0.1:${port}`,
    published,
    stall: (topic) => marks.set(topic, "stall"),
    answer: (topic, status) => marks.set(topic, status),
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
