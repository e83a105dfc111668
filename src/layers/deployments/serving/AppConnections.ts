/**
 * Connection-level forwarding to dynamic apps (docs/deployments.md, "Serving": "The fast path").
 * The gateway reads each new client connection's first request head with node's own parser
 * (Llhttp.ts). When its `Host` is a dynamic app served here, the connection is paired 1:1 with
 * its own connection to the app and stays the app's: every request on it is still parsed
 * (strictly, by llhttp), its `Host` checked, its hop-by-hop and forwarding headers replaced and its
 * body framed again (Content-Length as sent, chunked re-chunked), while the answers are moved as
 * bytes, parsed only to find where each ends. Anything else (an API host, a static site, an app not
 * served here, a head the parser refuses) is handed, with the bytes read so far, to node's HTTP
 * server as if it had just connected, its back-pressure on request bodies kept (NodeHandBack.ts).
 * A later request for another host, or a CONNECT, is handed the same way once the app has
 * answered everything before it.
 *
 * Why: node's server plus `http.request` build four stream objects per request; with the gateway
 * and the app on one CPU, that cost twice the app's own work (bench/deploy: 0.30 of direct).
 */
import { forwardedIn, type TrustedProxies } from "../../config/TrustedProxies.js"
import { isOverlaySource } from "../../coordination/Coordination.js"
import type * as http from "node:http"
import * as net from "node:net"
import { Code } from "../../../domain/Errors.js"
import { relayedClientOf } from "../../../domain/HopByHop.js"
import { answerRefusalOnSocket, type AppRefusal, appUnreachable } from "./AppAnswers.js"
import type { AppTarget } from "./AppHosts.js"
import { makeParser, methods, type Parser, PARSE_ON, SKIP_BODY, STOP_AFTER_HEAD } from "./Llhttp.js"
import { plainlyNoApp } from "./HeadPeek.js"
import { factsOf, headAsRead, headForApp, type RequestHead } from "./AppRequestHead.js"
import { handToNode } from "./NodeHandBack.js"
import { readShared, sharedReadOption } from "./SharedReads.js"
import { splice } from "./Splice.js"

/** node's server's own headers timeout in the gateway (Gateway.ts), for a head that never ends. */
const HEADERS_TIMEOUT_MS = 20_000
/** node's server's keep-alive timeout in the gateway: an idle client connection closes after it. */
const IDLE_TIMEOUT_MS = 65_000
/** Pipelined requests waiting for their answers before the client's reading pauses. */
const MAX_PENDING = 32

export interface AppConnectionsOptions {
  /** The app this `Host` is proxied to on this gateway, or undefined (node's server answers). */
  readonly appOf: (host: string | undefined) => AppTarget | undefined
  readonly answerTimeoutMs: number
  /** The access log's call, when request logging is on. */
  readonly onAnswered?: ((req: http.IncomingMessage, status: number, ms: number) => void) | undefined
  /** Proxies whose `X-Forwarded-For`/`-Proto` name the client (the edge); none when absent. */
  readonly proxies?: TrustedProxies | undefined
}

interface Pending {
  readonly method: string
  readonly url: string
  readonly upgrade: boolean
  readonly startedAt: number
  answered: boolean
  status: number
}

export const makeAppConnections = (options: AppConnectionsOptions) => {
  const live = new Set<AppConnection>()
  // one coarse clock for every deadline: no timer per request
  let now = performance.now()
  const ticker = setInterval(() => {
    now = performance.now()
    for (const connection of live) connection.tick(now)
  }, Math.min(1000, Math.max(50, options.answerTimeoutMs / 4)))
  ticker.unref()

  class AppConnection {
    private app: AppTarget | undefined
    private upstream: net.Socket | undefined
    private peeked: Array<Buffer> | undefined = []
    /** Made at the connection's first bytes that the peek leaves to it. */
    private parser: Parser | undefined
    private answers: Parser | undefined
    private readonly pending: Array<Pending> = []
    private partialHeaders: Array<string> | undefined
    private partialUrl = ""
    private chunked = false
    /** A request has begun and not completed (its head or body still arriving). */
    private inRequest = false
    private headStartedAt = 0
    private waitingSince = 0
    private lastSeen: number
    /** A 1xx (not 101) answer: the request waits for its final answer still. */
    private informational = false
    private switching = false
    /** After the 101: the two sockets are one pipe (`tunnel`). */
    private spliced = false
    private closeAfter = false
    private clientEnded = false
    private draining = false
    /** What goes to node's server once the app has answered everything before it. */
    private handBack: Buffer | undefined
    /** The answer to a head the parser refused, once the app has answered everything before it. */
    private refusal: AppRefusal | undefined
    /** What stops parsing after the current `execute`: hand to node, or the peeked bytes to node. */
    private stop: "node" | "handback" | "upgrade" | undefined
    private upgradeHead: Buffer | undefined
    private readonly forwardedFor: string
    private readonly proto: string
    /** The peer is a trusted proxy: each request's client is the one its headers name. */
    private readonly behindProxy: boolean

    constructor(
      private readonly client: net.Socket,
      private readonly toNode: (socket: net.Socket) => void
    ) {
      this.lastSeen = now
      this.forwardedFor = client.remoteAddress ?? ""
      this.proto = (client as net.Socket & { encrypted?: boolean }).encrypted === true ? "https" : "http"
      this.behindProxy = options.proxies?.trusts(client.remoteAddress) === true
      client.on("data", this.onClientData)
      client.on("end", this.onClientEnd)
      client.on("error", this.onClientGone)
      client.on("close", this.onClientGone)
      live.add(this)
    }

    private get requests(): Parser {
      return (this.parser ??= makeParser("request", {
        onMessageBegin: () => {
          this.inRequest = true
          this.headStartedAt = now
        },
        onHeaders: (headers, url) => {
          this.partialHeaders = (this.partialHeaders ?? []).concat(headers)
          this.partialUrl += url
        },
        onHeadersComplete: (major, minor, headers, method, url, _s, _m, upgrade, keepAlive) => {
          const all = headers ?? this.partialHeaders ?? []
          const target = url ?? this.partialUrl
          this.partialHeaders = undefined
          this.partialUrl = ""
          this.headStartedAt = 0
          return this.onRequestHead(major, minor, all, methods[method ?? -1] ?? "", target, upgrade, keepAlive)
        },
        onBody: (chunk) => this.onRequestBody(chunk),
        onMessageComplete: () => {
          if (this.stop === "node" || this.stop === "handback") return
          this.inRequest = false
          // the app's time to answer runs from the whole request
          if (this.pending.length === 1) this.waitingSince = now
          if (this.chunked) {
            this.chunked = false
            this.send("0\r\n\r\n")
          }
        }
      }))
    }

    private readonly onClientData = (chunk: Buffer): void => {
      this.lastSeen = now
      // a first head plainly no app's here (an API's, a static site's) is parsed by node's server alone
      if (this.parser === undefined && this.peeked?.length === 0 && plainlyNoApp(chunk, options.appOf)) return this.giveToNode(chunk)
      this.peeked?.push(chunk)
      const read = this.requests.execute(chunk)
      if (typeof read !== "number") {
        if (this.app === undefined) return this.giveToNode(Buffer.concat(this.peeked ?? []))
        return this.refuse(read.code === "HPE_HEADER_OVERFLOW"
          ? { code: Code.HEADERS_TOO_LARGE, error: "request headers too large" }
          : { code: Code.BAD_REQUEST, error: "malformed HTTP request" })
      }
      if (this.stop === "node") return this.giveToNode(Buffer.concat(this.peeked ?? []))
      if (this.stop === "handback") {
        this.handBack = Buffer.concat([this.handBack ?? Buffer.alloc(0), chunk.subarray(read)])
        this.client.pause()
        return this.settle()
      }
      if (this.stop === "upgrade") {
        this.upgradeHead = chunk.subarray(read)
        this.client.pause()
      }
    }

    private onRequestHead(
      major: number, minor: number, headers: Array<string>, method: string, url: string, upgrade: boolean, keepAlive: boolean
    ): number {
      const head: RequestHead = { major, minor, method, url, headers }
      const facts = factsOf(headers)
      // a relayed request only from another gateway, its client the relay's (HostRouting's rule; else node's server refuses it)
      const fromPeer = facts.relayed && !this.behindProxy && isOverlaySource(this.client.remoteAddress)
      const app = facts.hosts === 1 && method !== "CONNECT" && (!facts.relayed || fromPeer) ? options.appOf(facts.host) : undefined
      if (app === undefined || (this.app !== undefined && (app.id !== this.app.id || app.port !== this.app.port))) {
        if (this.app === undefined) {
          this.stop = "node"
          return STOP_AFTER_HEAD
        }
        // another host on this connection: node's server gets it, as read, after the app's answers
        this.handBack = headAsRead(head)
        this.stop = "handback"
        return STOP_AFTER_HEAD
      }
      if (this.upstream === undefined) this.connect(app)
      const client = facts.relayed
        ? relayedClientOf(headers)
        : this.behindProxy && options.proxies !== undefined
          ? forwardedIn(options.proxies, this.client.remoteAddress, headers, this.proto === "https")
          : ([this.forwardedFor, this.proto] as const)
      this.chunked = facts.chunked
      if (this.pending.length === 0) this.waitingSince = now
      this.pending.push({ method, url, upgrade, startedAt: options.onAnswered === undefined ? 0 : performance.now(), answered: false, status: 0 })
      this.send(headForApp(head, facts, client, upgrade, keepAlive))
      if (upgrade) this.stop = "upgrade"
      else if (this.pending.length >= MAX_PENDING) this.client.pause()
      return PARSE_ON
    }

    private onRequestBody(chunk: Buffer): void {
      if (this.chunked) this.send(`${chunk.length.toString(16)}\r\n`)
      this.send(chunk)
      if (this.chunked) this.send("\r\n")
    }

    /** Writes toward the app; a full buffer pauses the client until it drains. */
    private send(data: string | Buffer): void {
      const upstream = this.upstream
      if (upstream === undefined) return
      if (!(typeof data === "string" ? upstream.write(data, "latin1") : upstream.write(data)) && !this.client.isPaused()) {
        this.client.pause()
        upstream.once("drain", () => this.resume())
      }
    }

    private connect(app: AppTarget): void {
      if (this.app === undefined) readShared(this.client, this.onClientBytes)
      this.app = app
      this.peeked = undefined
      // the app's bytes come to `onAppBytes` from the shared buffer (SharedReads.ts)
      const upstream: net.Socket = net.connect({
        host: "127.0.0.1",
        port: app.port as number,
        noDelay: true,
        onread: sharedReadOption((chunk) => this.onAppBytes(upstream, chunk))
      })
      this.upstream = upstream
      this.answers = makeParser("response", {
        onMessageBegin: () => {
          const head = this.pending[0]
          // an answer nobody asked for: the app's stream cannot be trusted past here
          if (head === undefined) return void this.destroy()
          head.answered = true
        },
        onHeadersComplete: (_major, _minor, _headers, _method, _url, status, _message, upgrade, keepAlive) => {
          const head = this.pending[0]
          const code = status ?? 0
          if (head === undefined) return STOP_AFTER_HEAD
          if (code < 200 && code !== 101) {
            this.informational = true
            return PARSE_ON
          }
          head.status = code
          if (code === 101) {
            // a switch the client did not ask for would carry its later bytes unparsed: refused
            if (!head.upgrade || !upgrade) this.destroy()
            else this.switching = true
            return PARSE_ON
          }
          if (head.upgrade || !keepAlive) this.closeAfter = true
          return head.method === "HEAD" ? SKIP_BODY : PARSE_ON
        },
        onMessageComplete: () => {
          if (this.informational) {
            this.informational = false
            return
          }
          const done = this.pending.shift()
          this.waitingSince = now
          if (done !== undefined && options.onAnswered !== undefined) {
            options.onAnswered({ method: done.method, url: done.url } as http.IncomingMessage, done.status, performance.now() - done.startedAt)
          }
        }
      })
      upstream.on("end", this.onAppEnd)
      upstream.on("error", this.onAppError)
      upstream.on("close", this.onAppEnd)
    }

    /** The client's bytes from its first app request on (SharedReads.ts); once node's again, pushed as a stream's are. */
    private readonly onClientBytes = (chunk: Buffer): boolean => {
      if (!live.has(this)) return this.client.push(chunk)
      this.onClientData(chunk)
      return true
    }

    /** What the app sent (SharedReads.ts); let go once this upstream is not read (dropped, detached). */
    private onAppBytes(upstream: net.Socket, chunk: Buffer): boolean {
      if (this.spliced) return this.forwardSpliced(upstream, chunk)
      if (upstream === this.upstream && live.has(this)) this.onAppData(chunk)
      return true
    }

    /** After the 101: the app's bytes to the client as read, the app's reading paused while the client's buffer is full. */
    private forwardSpliced(upstream: net.Socket, chunk: Buffer): boolean {
      if (this.client.destroyed) return true
      if (this.client.write(chunk)) return true
      this.client.once("drain", () => upstream.resume())
      return false
    }

    private onAppData(chunk: Buffer): void {
      this.lastSeen = now
      const read = (this.answers as Parser).execute(chunk)
      if (typeof read !== "number") return this.destroy()
      if (this.client.destroyed) return
      if (!this.client.write(chunk) && !(this.upstream as net.Socket).isPaused()) {
        const upstream = this.upstream as net.Socket
        upstream.pause()
        this.client.once("drain", () => upstream.resume())
      }
      if (this.switching) return this.tunnel()
      this.settle()
    }

    /** After the app's answers: a pending hand-back, a refusal or an end goes once nothing is owed. */
    private settle(): void {
      if (this.pending.length > 0) {
        if (this.pending.length < MAX_PENDING && this.stop === undefined && this.client.isPaused()) this.resume()
        return
      }
      if (this.handBack !== undefined) {
        const bytes = this.handBack
        this.handBack = undefined
        this.upstream?.destroy()
        return this.giveToNode(bytes)
      }
      if (this.refusal !== undefined) return this.answerAndClose(this.refusal)
      if (this.closeAfter || this.clientEnded || this.draining) this.endClient()
    }

    private resume(): void {
      if (this.stop === undefined && this.pending.length < MAX_PENDING) this.client.resume()
    }

    /** The app's connection ended, failed or closed before every request was answered. */
    private readonly onAppEnd = (): void => {
      if (this.switching || this.upstream === undefined || !live.has(this)) return
      if (this.handBack === undefined) this.answers?.finish()
      this.appGone("is not answering on its port")
    }

    private readonly onAppError = (): void => {
      // kept after detach: a destroyed upstream's late error must not go unhandled
      if (this.switching || this.upstream === undefined || !live.has(this)) return
      this.appGone("is not answering on its port")
    }

    /**
     * The app closed an idle connection (node's servers do after 5 s): the client's connection
     * stays, on the gateway's own keep-alive, and its next request opens a new one to the app.
     */
    private dropUpstream(): void {
      const upstream = this.upstream as net.Socket
      upstream.off("end", this.onAppEnd)
      upstream.off("close", this.onAppEnd)
      upstream.off("error", this.onAppError)
      upstream.on("error", () => {})
      upstream.destroy()
      this.answers?.close()
      this.answers = undefined
      this.upstream = undefined
    }

    private appGone(why: string): void {
      const head = this.pending[0]
      if (head === undefined && !this.inRequest && this.handBack === undefined && this.refusal === undefined && !this.closeAfter && !this.clientEnded && !this.draining) {
        return this.dropUpstream()
      }
      if (head === undefined) return this.settleAfterAppGone()
      if (head.answered) return this.destroy()
      this.answerAndClose(appUnreachable((this.app as AppTarget).name, why))
    }

    private settleAfterAppGone(): void {
      this.upstream?.destroy()
      if (this.handBack !== undefined || this.refusal !== undefined) return this.settle()
      this.endClient()
    }

    /** A refusal of this connection's next request (a head the parser refused): after what is owed. */
    private refuse(refusal: AppRefusal): void {
      this.stop = "node"
      this.client.pause()
      this.refusal = refusal
      this.settle()
    }

    private answerAndClose(refusal: AppRefusal): void {
      this.detach()
      this.upstream?.destroy()
      answerRefusalOnSocket(this.client, refusal)
    }

    private endClient(): void {
      this.detach()
      this.upstream?.destroy()
      this.client.end(() => this.client.destroy())
    }

    private destroy(): void {
      this.detach()
      this.upstream?.destroy()
      this.client.destroy()
    }

    /** The connection is node's from here: its request head (or all read so far) is read again there (NodeHandBack.ts). */
    private giveToNode(bytes: Buffer): void {
      this.detach()
      handToNode(this.client, bytes, this.toNode)
    }

    private detach(): void {
      if (!live.delete(this)) return
      this.client.off("data", this.onClientData)
      this.client.off("end", this.onClientEnd)
      this.client.off("error", this.onClientGone)
      this.client.off("close", this.onClientGone)
      this.upstream?.off("end", this.onAppEnd)
      this.upstream?.off("close", this.onAppEnd)
      this.parser?.close()
      this.answers?.close()
    }

    /** The app said 101: from here both sockets are piped as bytes. */
    private tunnel(): void {
      const client = this.client
      const upstream = this.upstream as net.Socket
      this.detach()
      upstream.off("error", this.onAppError)
      if (this.upgradeHead !== undefined && this.upgradeHead.length > 0) upstream.write(this.upgradeHead)
      // the app's bytes reach the client through `onAppBytes`; the splice carries the rest
      this.spliced = true
      splice(client, upstream)
      upstream.resume()
      client.resume()
    }

    private readonly onClientEnd = (): void => {
      this.clientEnded = true
      if (this.app === undefined || this.inRequest) return this.destroy()
      this.settle()
    }

    private readonly onClientGone = (): void => this.destroy()

    /** The deadlines, on the shared clock. */
    tick(at: number): void {
      if (this.headStartedAt > 0 && at - this.headStartedAt > HEADERS_TIMEOUT_MS) {
        if (this.pending.length > 0) return this.destroy()
        return this.answerAndClose({ code: Code.REQUEST_TIMEOUT, error: "the request took too long to arrive" })
      }
      if (this.app === undefined) {
        if (at - this.lastSeen > HEADERS_TIMEOUT_MS) this.answerAndClose({ code: Code.REQUEST_TIMEOUT, error: "the request took too long to arrive" })
        return
      }
      const head = this.pending[0]
      // the head request is whole once a later one has begun: the app's time runs from then
      if (head !== undefined && !head.answered && (this.pending.length > 1 || !this.inRequest) && at - this.waitingSince > options.answerTimeoutMs) {
        return this.answerAndClose(appUnreachable((this.app as AppTarget).name, `did not answer within ${options.answerTimeoutMs / 1000} s`))
      }
      if (head === undefined && !this.inRequest && at - this.lastSeen > IDLE_TIMEOUT_MS) this.endClient()
    }

    /** Shutdown: an idle connection closes now, a busy one once answered. */
    drain(): void {
      this.draining = true
      if (this.app === undefined || (this.pending.length === 0 && !this.inRequest)) this.destroy()
    }

    close(): void {
      this.destroy()
    }
  }

  return {
    /**
     * Puts the app connections in front of node's server: its `connection` listeners get every
     * connection that is not an app's, with what was read of it put back.
     */
    takeConnections: (server: http.Server): void => {
      const nodes = server.listeners("connection") as Array<(socket: net.Socket) => void>
      server.removeAllListeners("connection")
      const toNode = (socket: net.Socket) => {
        for (const listener of nodes) listener.call(server, socket)
      }
      server.on("connection", (socket: net.Socket) => void new AppConnection(socket, toNode))
    },
    /** Shutdown, first step: idle connections close, the rest after their answers. */
    closeIdle: (): void => {
      for (const connection of live) connection.drain()
    },
    closeAll: (): void => {
      clearInterval(ticker)
      for (const connection of live) connection.close()
    }
  }
}

export type AppConnections = ReturnType<typeof makeAppConnections>
