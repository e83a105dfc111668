/**
 * Host routing in front of the API (docs/deployments.md, "Serving"): every request, and every
 * upgrade, is first matched by its `Host` (AppHosts.ts); an app's is answered here (a static site
 * from storage, a dynamic app through the proxy) and never reaches the API's listener, its body
 * caps, rate limits or fast lane; any other host goes on to the API unchanged.
 *
 * A dynamic app runs on its home node and its active replicas (docs/deployments.md, "Replicas"). A
 * gateway running it serves it from its own instance; any other relays the request to one that
 * runs it (the home node first, then the replicas; a node known down is skipped, and a bodyless
 * request whose connection is refused is asked of the next), marked with the relaying node
 * (`X-Portico-Proxy-Node`). A marked request from an internal source is never relayed again: it is
 * served here or refused, and its client is the one the relaying gateway named.
 */
import { clientAddressOf, noteRelayed } from "../../../api/node/ClientAddress.js"
import { isOverlaySource } from "../../coordination/Coordination.js"
import { Effect } from "effect"
import type { MembershipService } from "../../cluster/Membership.js"
import type { TrustedProxies } from "../../config/TrustedProxies.js"
import * as http from "node:http"
import type { Duplex } from "node:stream"
import type { StorageService } from "../../storage/Storage.js"
import { answerRefusal, answerRefusalOnSocket, appNotRunning, connectRefused, noSuchApp, repeatedAuthorization, repeatedHost, type AppRefusal } from "./AppAnswers.js"
import type { AppHostsService, AppTarget } from "./AppHosts.js"
import { makeAppConnections } from "./AppConnections.js"
import { ANSWER_TIMEOUT_MS, makeAppProxy, PROXY_NODE_HEADER, type Upstream } from "./AppProxy.js"
import { makeStaticSites } from "./StaticSite.js"

export interface HostRoutingOptions {
  readonly hosts: AppHostsService
  readonly storage: StorageService
  /** This gateway's node id: dynamic apps are proxied only on their home node. */
  readonly nodeId: string
  /** The gateway's own port once listening (the proxy never connects to it). */
  readonly ownPort: () => number | undefined
  /** The access log's call for app requests, when request logging is on. */
  readonly onAnswered?: ((req: http.IncomingMessage, status: number, ms: number) => void) | undefined
  readonly answerTimeoutMs?: number | undefined
  /** Proxies whose `X-Forwarded-For`/`-Proto` name the client (the edge). */
  readonly proxies?: TrustedProxies | undefined
  /** Where another node's gateway answers, and whether it is known down (Membership's); at once when it is held in memory. */
  readonly peerAddress?: ((node: string) => PeerAddress | Promise<PeerAddress>) | undefined
}

export interface PeerAddress {
  readonly url: string | undefined
  readonly down: string | undefined
}

/** Membership's address of a node: from memory when fresh, else read. */
export const peerAddressOf = (membership: MembershipService) => (node: string): PeerAddress | Promise<PeerAddress> =>
  membership.addressNow(node) ?? Effect.runPromise(Effect.all({ url: membership.urlOf(node), down: membership.downOf(node) }))

type Listener = (req: http.IncomingMessage, res: http.ServerResponse) => void

/** The port `app` answers on from this node's own instance: as its home node, or as an active replica. */
export const localPort = (app: AppTarget, nodeId: string): number | undefined =>
  app.homeNode === nodeId ? (app.status === "active" ? app.port : undefined) : app.replicas.find((r) => r.node === nodeId)?.port

/** `app` as served here: its port the local instance's. */
const servedHere = (app: AppTarget, nodeId: string): AppTarget | undefined => {
  if (app.status !== "active") return undefined
  const port = localPort(app, nodeId)
  return port === undefined ? undefined : port === app.port ? app : { ...app, port }
}

/** The nodes besides this one that run `app`, in the order they are asked: the home node, then the replicas. */
export const runningElsewhere = (app: AppTarget, nodeId: string): ReadonlyArray<string> =>
  app.status !== "active" ? [] : [app.homeNode, ...app.replicas.map((r) => r.node)].filter((node) => node !== nodeId)

/** A request another gateway relayed here: marked, from an internal source (a relayed one through the edge is no internal source). */
const relayed = (req: http.IncomingMessage): boolean => req.headers[PROXY_NODE_HEADER] !== undefined && isOverlaySource(clientAddressOf(req))

/**
 * How many lines of the header `lower` (a lowercase name) a request carries: node keeps only the
 * first `Host` or `Authorization` in `headers`, so only the raw lines tell that there were more.
 */
export const headerLines = (rawHeaders: ReadonlyArray<string>, lower: string): number => {
  let n = 0
  for (let i = 0; i < rawHeaders.length; i += 2) if ((rawHeaders[i] as string).length === lower.length && (rawHeaders[i] as string).toLowerCase() === lower) n++
  return n
}

type Upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void

/**
 * Every upgrade, on any host (the API's WebSocket routes included), refused 400 when it names more
 * than one `Host` (`repeatedHost`), before anything routes it.
 */
export const oneHostUpgrade =
  (next: Upgrade): Upgrade =>
  (req, socket, head) => {
    if (headerLines(req.rawHeaders, "host") <= 1) return next(req, socket, head)
    socket.on("error", () => socket.destroy())
    answerRefusalOnSocket(socket, repeatedHost)
  }

/** The server's `connect` event (CONNECT on any host; the app connections hand it back): 405, then closed. */
export const refuseConnect = (_req: http.IncomingMessage, socket: Duplex): void => {
  // node leaves such a socket without an error listener: a client's reset must not be uncaught
  socket.on("error", () => socket.destroy())
  answerRefusalOnSocket(socket, connectRefused)
}

export const makeHostRouting = (options: HostRoutingOptions) => {
  const sites = makeStaticSites(options.storage)
  const proxy = makeAppProxy({ ownPort: options.ownPort, answerTimeoutMs: options.answerTimeoutMs })
  const onAnswered = options.onAnswered
  // the fast path: a connection whose first request is a dynamic app's served here is the app's
  const connections = makeAppConnections({
    appOf: (host) => {
      const route = options.hosts.route(host)
      if (route.kind !== "app" || route.app.type === "static") return undefined
      const app = servedHere(route.app, options.nodeId)
      if (app === undefined || app.port === undefined || app.port === options.ownPort()) return undefined
      return app
    },
    answerTimeoutMs: options.answerTimeoutMs ?? ANSWER_TIMEOUT_MS,
    proxies: options.proxies,
    onAnswered
  })

  /** The API's listener behind host routing. */
  const listener = (api: Listener): Listener => (req, res) => {
    // before any host is chosen: which of several Host headers counts is never the gateway's guess
    if (headerLines(req.rawHeaders, "host") > 1) return answerRefusal(res, repeatedHost, req.method)
    const route = options.hosts.route(req.headers.host)
    if (route.kind === "api") {
      // which of two credentials the request stands on is never the gateway's guess either
      if (headerLines(req.rawHeaders, "authorization") > 1) return answerRefusal(res, repeatedAuthorization, req.method)
      return api(req, res)
    }
    if (onAnswered !== undefined) {
      const startedAt = performance.now()
      res.once("close", () => onAnswered(req, res.headersSent ? res.statusCode : 499, performance.now() - startedAt))
    }
    if (route.kind === "unknown") return answerRefusal(res, noSuchApp(route.host), req.method)
    const app = route.app
    if (app.type === "static") return sites.serve(req, res, app)
    const here = servedHere(app, options.nodeId)
    if (here !== undefined) {
      if (relayed(req)) noteRelayed(req)
      return proxy.request(req, res, here)
    }
    if (relayed(req)) return answerRefusal(res, appNotRunning(app.name, "it does not run on this node"), req.method)
    relay(req, res, app, runningElsewhere(app, options.nodeId))
  }

  /** Another node's gateway for `node`, unless it is known down or not known. */
  const upstreamOf = (address: PeerAddress | undefined): Upstream | undefined => {
    if (address?.url === undefined || address.down !== undefined) return undefined
    const url = new URL(address.url)
    return { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || (url.protocol === "https:" ? 443 : 80)), relayedBy: options.nodeId }
  }

  /** The first of `nodes` not known down, and the rest after it; at once when the addresses are in memory. */
  const firstUp = (nodes: ReadonlyArray<string>, done: (to: Upstream | undefined, rest: Array<string>) => void): void => {
    const rest = [...nodes]
    const next = (): void => {
      const node = rest.shift()
      if (node === undefined || options.peerAddress === undefined) return done(undefined, [])
      const address = options.peerAddress(node)
      const take = (found: PeerAddress | undefined) => {
        const to = upstreamOf(found)
        return to === undefined ? next() : done(to, rest)
      }
      if (address instanceof Promise) address.then(take, () => take(undefined))
      else take(address)
    }
    next()
  }

  /** The request relayed to the first of `nodes` that takes its connection. */
  const relay = (req: http.IncomingMessage, res: http.ServerResponse, app: AppTarget, nodes: ReadonlyArray<string>): void =>
    firstUp(nodes, (to, rest) => {
      if (to === undefined) return answerRefusal(res, appNotRunning(app.name, app.status === "active" ? "no node that runs it answers" : app.status), req.method)
      proxy.request(req, res, app, to, rest.length === 0 ? undefined : () => relay(req, res, app, rest))
    })

  /**
   * The server's `upgrade` event. An upgrade on an API host is answered by the API's listener as
   * an ordinary request (what node does when no `upgrade` listener exists), on a response bound
   * to the socket node has handed over.
   */
  const upgrade = (api: Listener) => (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    const route = options.hosts.route(req.headers.host)
    if (route.kind === "api") {
      const res = new http.ServerResponse(req)
      res.shouldKeepAlive = false
      res.assignSocket(socket as import("node:net").Socket)
      res.once("finish", () => {
        res.detachSocket(socket as import("node:net").Socket)
        // not left half-open: the client of an upgrade may never close its side
        socket.end(() => socket.destroy())
      })
      return api(req, res)
    }
    if (route.kind === "unknown") return answerRefusalOnSocket(socket, noSuchApp(route.host))
    const app = route.app
    if (app.type === "static") return answerRefusalOnSocket(socket, { code: "NOT_FOUND", error: "a static site has no WebSocket endpoint" })
    const here = servedHere(app, options.nodeId)
    if (here !== undefined) {
      if (relayed(req)) noteRelayed(req)
      return proxy.upgrade(req, socket, head, here)
    }
    firstUp(relayed(req) ? [] : runningElsewhere(app, options.nodeId), (to) => {
      if (to === undefined) return answerRefusalOnSocket(socket, appNotRunning(app.name, app.status === "active" ? "no node that runs it answers" : app.status))
      proxy.upgrade(req, socket, head, app, to)
    })
  }

  return {
    listener,
    upgrade,
    /** Puts the app connections in front of the server's own (AppConnections.ts). */
    takeConnections: connections.takeConnections,
    /** Shutdown: idle app connections close now, busy ones once answered. */
    closeIdleConnections: connections.closeIdle,
    closeAllConnections: connections.closeAll,
    close: () => {
      connections.closeAll()
      proxy.close()
    }
  }
}

export type HostRouting = ReturnType<typeof makeHostRouting>
