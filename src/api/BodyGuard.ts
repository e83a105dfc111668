/**
 * What the listener decides about a request when its headers arrive, before any of its body is
 * read, for both request paths (the fast lane and the HttpApi app):
 *
 * - the request is charged to its client network's rate limit (node-to-node routes excepted, as
 *   in docs/api.md, "Rate limits"), so a client cannot open more requests than its limit allows
 *   by never finishing their bodies;
 * - its body's bytes are reserved against the in-flight caps per client network and per process
 *   (src/layers/ratelimit/BodyBudget.ts): 429 or 503 with `Retry-After` beyond them;
 * - a body being received is watched: one that arrives slower than the minimum rate over a whole
 *   window, or a JSON body not all there by its deadline, is cut with 408.
 *
 * A refusal is answered at once with `Connection: close`, so a client that already started
 * sending a body stops; a cut body's connection is closed after its 408 (or at once when an
 * answer has already gone out). A reservation is given back when the request is done with (node's
 * `close` on the request, which also fires when the connection is lost), or, for a small JSON body
 * that has come whole by the end of the turn it was admitted in, then (`SMALL_JSON_BYTES`).
 */
import { isLoopbackSource } from "../layers/nodes/NodeEnrolment.js"
import { clientAddressOf } from "./node/ClientAddress.js"
import type * as http from "node:http"
import type * as net from "node:net"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Code, envelopeText } from "../domain/Errors.js"
import type { BodySettings } from "../layers/config/PorticoConfig.js"
import { isOverlaySource } from "../layers/coordination/Coordination.js"
import { BodyBudget } from "../layers/ratelimit/BodyBudget.js"
import { clientNetwork, type RateLimiterService } from "../layers/ratelimit/RateLimiter.js"
import { rateLimited } from "./gate/Gate.js"
import { RequestMeta } from "./RequestMeta.js"

/** How a request's body will be read: none, whole as JSON within its cap, or streamed. */
export type BodyKind = "none" | "json" | "stream"

/**
 * Admits a request at its headers, or answers it and says with which status. `cap` is the
 * route's body cap: an announced body over it is left alone here (the listener answers 413).
 */
export type Admission = (req: http.IncomingMessage, res: http.ServerResponse, kind: BodyKind, cap: number) => number | undefined

/**
 * What a streamed body may hold in memory at once: the body reader's queue (FlowingBody.ts,
 * 1 MiB) and node's buffers before it. A streamed upload is reserved this much, not its size.
 */
export const STREAM_READ_AHEAD_BYTES = 2 * 1024 * 1024

const INTERNAL_PREFIX = "/v1/internal/"

/**
 * A JSON body this small is settled at the end of the turn it was admitted in (`settle`): whole by
 * then, its reservation is given back at once, as what it holds is no longer in flight; still
 * arriving, it is watched from then on. A larger one keeps its reservation until its request is
 * done with, as it may be held while its handler works.
 */
const SMALL_JSON_BYTES = 16 * 1024

const envelope = (error: string, code: string, hint: string): string => envelopeText({ error, code, hint })

/**
 * How long a connection closed after a refusal still reads (and drops) what the client sends.
 * node would close it the moment the answer is out, and a client still writing its body is then
 * reset and loses the answer it had not read yet; ending our side first tells it to stop.
 */
const CLOSE_GRACE_MS = 1000

function closeAfterGrace(this: net.Socket): void {
  this.end()
  setTimeout(() => this.destroy(), CLOSE_GRACE_MS).unref()
}

/** An answer from the listener itself; `close` when the client may still be sending a body. */
const answer = (res: http.ServerResponse, status: number, body: string, retryAfter: number | undefined, close: boolean): void => {
  if (res.headersSent || res.writableEnded) return
  const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
  if (retryAfter !== undefined) headers["retry-after"] = String(retryAfter)
  if (close) {
    // node closes the connection once this answer is out, and serves none of the body
    res.shouldKeepAlive = false
    headers["connection"] = "close"
    const socket = res.socket
    if (socket !== null) socket.destroySoon = closeAfterGrace
  }
  res.writeHead(status, headers)
  res.end(body)
}

/**
 * A full garbage collection, asked for. The chunks of a body abandoned mid-way are garbage once
 * its connection is gone, but they have lived long enough to sit in the old generation, and an
 * idle process may not collect it for minutes: the memory stays taken though nothing uses it.
 * Undefined where the runtime does not allow it.
 */
const collectGarbage: (() => void) | undefined = (() => {
  const exposed = (globalThis as { gc?: () => void }).gc
  if (typeof exposed === "function") return exposed
  try {
    setFlagsFromString("--expose-gc")
    const gc: unknown = runInNewContext("gc")
    return typeof gc === "function" ? (gc as () => void) : undefined
  } catch {
    return undefined
  }
})()

/** Abandoned body bytes that make a collection worth its pause, and the least time between two. */
const COLLECT_AFTER_BYTES = 16 * 1024 * 1024
const COLLECT_DELAY_MS = 2000
const COLLECT_INTERVAL_MS = 10_000

// The request's watch, on the request itself (as RequestMeta.ts keeps its notes), so one `close`
// listener serves every request: a closure per request, made on the hottest routes (each has a
// body), was measurable (docs/performance-history.md, 2026-12-05).
const WATCH = Symbol("portico.bodyGuard.watch")
interface Watched {
  [WATCH]?: Watch
}

/** `close` comes when the request is done with: its body read or dumped, or its connection gone. */
function releaseOnClose(this: http.IncomingMessage): void {
  ;(this as Watched)[WATCH]?.release()
}

/** One body being received: its reservation and its progress. */
class Watch {
  readonly startedAt: number
  windowStart: number
  windowBytes: number
  released = false

  constructor(
    readonly guard: Guard,
    readonly req: http.IncomingMessage,
    readonly res: http.ServerResponse,
    readonly kind: BodyKind,
    readonly network: string | undefined,
    readonly reserved: number,
    startedAt: number,
    now: number
  ) {
    this.startedAt = startedAt
    this.windowStart = now
    this.windowBytes = req.socket.bytesRead
  }

  /** Gives the reservation back, once; a release by the sweep leaves `close` to find it released. */
  release(): void {
    if (this.released) return
    this.released = true
    this.guard.done(this)
  }
}

class Guard {
  readonly budget: BodyBudget
  private readonly watching = new Set<Watch>()
  // Small JSON bodies admitted this turn, in columns reused from turn to turn: nearly every one has
  // come whole with its headers by the end of the turn, and is then only given its reservation
  // back; a watch, its set entry and its `close` listener are made for the others alone
  private readonly youngReq: Array<http.IncomingMessage> = []
  private readonly youngRes: Array<http.ServerResponse> = []
  private readonly youngNetwork: Array<string | undefined> = []
  private readonly youngBytes: Array<number> = []
  private readonly youngAt: Array<number> = []
  private readonly settleYoung = (): void => this.settle(Date.now())
  private timer: NodeJS.Timeout | undefined = undefined
  private readonly tickMs: number
  private readonly minWindowBytes: number
  private readonly retryAfter: number
  private readonly tick = (): void => this.sweep(Date.now())
  /** Reserved bytes of bodies given up before their end since the last collection. */
  private abandoned = 0
  private collecting: NodeJS.Timeout | undefined = undefined
  private lastCollected = 0
  private readonly collect = (): void => {
    this.collecting = undefined
    this.abandoned = 0
    this.lastCollected = Date.now()
    collectGarbage?.()
  }

  constructor(
    readonly settings: BodySettings,
    readonly limiter: RateLimiterService | undefined,
    readonly onCut: ((req: http.IncomingMessage, status: number, ms: number) => void) | undefined
  ) {
    this.budget = new BodyBudget({ perNetworkBytes: settings.inFlightPerNetworkBytes, perProcessBytes: settings.inFlightBytes })
    // a cut comes at most a tenth of the shorter bound late
    this.tickMs = Math.max(50, Math.min(1000, Math.floor(Math.min(settings.rateWindowMs, settings.jsonDeadlineMs) / 10)))
    this.minWindowBytes = (settings.minBytesPerSecond * settings.rateWindowMs) / 1000
    // a stalled body holding room is cut within two windows
    this.retryAfter = Math.max(1, Math.ceil((2 * settings.rateWindowMs) / 1000))
  }

  readonly admit: Admission = (req, res, kind, cap) => {
    const address = clientAddressOf(req)
    // a peer gateway's call on behalf of clients it charged already, or a call from this node's
    // own machine (the edge's storage and checks, the node's stamped calls; deployed apps cannot
    // reach loopback), either one no proxy relayed; from anywhere else an internal path is
    // charged like every other request (its route refuses it, 403)
    const peer = req.socket.remoteAddress
    const internal =
      (req.url ?? "/").startsWith(INTERNAL_PREFIX) && req.headers["x-forwarded-for"] === undefined && (isOverlaySource(peer) || isLoopbackSource(peer))
    const now = Date.now()
    // exempt: no route's gate charges it either
    if (internal) RequestMeta.markClientCharged(req)
    else if (this.limiter !== undefined) {
      const decision = this.limiter.checkClientNow(address, now)
      RequestMeta.markClientCharged(req)
      if (!decision.allowed) {
        const limited = rateLimited(decision.retryAfterSeconds, "network")
        answer(res, 429, envelope(limited.error, limited.code, limited.hint ?? ""), decision.retryAfterSeconds, kind !== "none")
        return 429
      }
    }
    if (kind === "none") return undefined
    const announced = req.headers["content-length"]
    const length = announced === undefined ? undefined : Number(announced)
    // over the route's cap: the listener's 413, which reads a bounded part of it
    if (length !== undefined && length > cap) return undefined
    const bytes = kind === "stream" ? Math.min(length ?? STREAM_READ_AHEAD_BYTES, STREAM_READ_AHEAD_BYTES) : (length ?? cap)
    const network = internal ? undefined : clientNetwork(address)
    const refused = this.budget.reserve(network, bytes)
    if (refused === "network") {
      answer(
        res,
        429,
        envelope("too many request bodies in flight from this network", Code.RATE_LIMITED, `retry after ${this.retryAfter} s, once the bodies already sent have arrived`),
        this.retryAfter,
        true
      )
      return 429
    }
    if (refused === "process") {
      answer(res, 503, envelope("the gateway is receiving too many request bodies", Code.UNAVAILABLE, `retry after ${this.retryAfter} s`), this.retryAfter, true)
      return 503
    }
    if (kind === "json" && bytes <= SMALL_JSON_BYTES) {
      if (this.youngReq.length === 0) setImmediate(this.settleYoung)
      this.youngReq.push(req)
      this.youngRes.push(res)
      this.youngNetwork.push(network)
      this.youngBytes.push(bytes)
      this.youngAt.push(now)
    } else this.watch(new Watch(this, req, res, kind, network, bytes, now, now))
    return undefined
  }

  private watch(watch: Watch): void {
    this.watching.add(watch)
    ;(watch.req as Watched)[WATCH] = watch
    watch.req.on("close", releaseOnClose)
    if (this.timer === undefined) {
      this.timer = setInterval(this.tick, this.tickMs)
      this.timer.unref()
    }
  }

  /** The turn's JSON bodies: a whole one's reservation given back, one still arriving watched from now. */
  private settle(now: number): void {
    const count = this.youngReq.length
    for (let i = 0; i < count; i++) {
      const req = this.youngReq[i]!
      if (req.complete) this.budget.release(this.youngNetwork[i], this.youngBytes[i]!)
      else if (req.socket.destroyed) {
        this.budget.release(this.youngNetwork[i], this.youngBytes[i]!)
        this.abandonedBytes(this.youngBytes[i]!)
      } else this.watch(new Watch(this, req, this.youngRes[i]!, "json", this.youngNetwork[i], this.youngBytes[i]!, this.youngAt[i]!, now))
    }
    this.youngReq.length = 0
    this.youngRes.length = 0
    this.youngNetwork.length = 0
    this.youngBytes.length = 0
    this.youngAt.length = 0
  }

  done(watch: Watch): void {
    this.watching.delete(watch)
    this.budget.release(watch.network, watch.reserved)
    if (!watch.req.complete) this.abandonedBytes(watch.reserved)
  }

  /** Once enough of them add up, the memory of abandoned bodies is collected shortly after (a burst of them, once). */
  private abandonedBytes(bytes: number): void {
    this.abandoned += bytes
    if (collectGarbage === undefined || this.collecting !== undefined || this.abandoned < COLLECT_AFTER_BYTES) return
    const wait = Math.max(COLLECT_DELAY_MS, this.lastCollected + COLLECT_INTERVAL_MS - Date.now())
    this.collecting = setTimeout(this.collect, wait)
    this.collecting.unref()
  }

  private sweep(now: number): void {
    // The timer stops a tick after the last body rather than with it: under load the set empties
    // and fills again every turn, and a timer made and cleared each time was measurable.
    if (this.watching.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer)
      this.timer = undefined
      return
    }
    for (const watch of this.watching) {
      const req = watch.req
      const socket = req.socket
      if (req.complete || socket.destroyed) {
        watch.release()
        continue
      }
      if (watch.kind === "json" && now - watch.startedAt > this.settings.jsonDeadlineMs) {
        this.cut(watch, "the request body did not arrive in time", `send the whole body within ${Math.ceil(this.settings.jsonDeadlineMs / 1000)} s`)
        continue
      }
      if (now - watch.windowStart < this.settings.rateWindowMs) continue
      const arrived = socket.bytesRead - watch.windowBytes
      // bytes that arrived but wait unread are the gateway's own backpressure, not a slow client
      const heldHere = req.readableLength > 0
      if (!heldHere && arrived < this.minWindowBytes) {
        this.cut(
          watch,
          "the request body is arriving too slowly",
          `send at least ${this.settings.minBytesPerSecond} bytes per second`
        )
        continue
      }
      watch.windowStart = now
      watch.windowBytes = socket.bytesRead
    }
  }

  /** 408 when an answer can still be written, then the connection is closed; else it is cut now. */
  private cut(watch: Watch, error: string, hint: string): void {
    watch.release()
    const { req, res } = watch
    if (res.headersSent || res.writableEnded) {
      req.socket.destroy()
      return
    }
    answer(res, 408, envelope(error, Code.REQUEST_TIMEOUT, hint), undefined, true)
    // the body's reader (a streamed route still importing, holding what it holds) must hear that
    // no more is coming: once the answer has finished, node takes the request off its connection,
    // and the connection closing later would not tell it; ending the request does
    res.once("finish", () => req.destroy())
    // a JSON body is cut while the listener still reads it, before any route has the request; a
    // streamed one's route logs its request's answer itself
    if (watch.kind === "json") this.onCut?.(req, 408, Date.now() - watch.startedAt)
    // node ends the connection once the answer is out; a client that does not read it is not waited for
    const socket = req.socket
    setTimeout(() => socket.destroy(), 2000).unref()
  }
}

/**
 * The listener's admission over the gateway's rate limiter (undefined: no client rate limit
 * here, only the body caps and watch). `onCut` hears of a body cut with 408, for the access log.
 */
export const makeAdmission = (
  settings: BodySettings,
  limiter: RateLimiterService | undefined,
  onCut?: (req: http.IncomingMessage, status: number, ms: number) => void
): { readonly admit: Admission; readonly budget: BodyBudget } => {
  const guard = new Guard(settings, limiter, onCut)
  return { admit: guard.admit, budget: guard.budget }
}
