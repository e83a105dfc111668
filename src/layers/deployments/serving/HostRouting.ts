/**
 * Host routing in front of the API (docs/deployments.md, "Serving"): every request, and every
 * upgrade, is first matched by its `Host` (AppHosts.ts); an app's is answered here (a static site
 * from storage, a dynamic app through the proxy) and never reaches the API's listener, its body
 * caps, rate limits or fast lane; any other host goes on to the API unchanged.
 *
 * A dynamic app runs on its home node. Until requests are forwarded between gateways, a gateway
 * that is not the app's home node answers 503 for it (a static site is served by any gateway
 * that reaches its content).
 */
import type { TrustedProxies } from "../../config/TrustedProxies.js"
import * as http from "node:http"
import type { Duplex } from "node:stream"
import type { StorageService } from "../../storage/Storage.js"
import { answerRefusal, answerRefusalOnSocket, appNotRunning, noSuchApp, type AppRefusal } from "./AppAnswers.js"
import type { AppHostsService, AppTarget } from "./AppHosts.js"
import { makeAppConnections } from "./AppConnections.js"
import { ANSWER_TIMEOUT_MS, makeAppProxy } from "./AppProxy.js"
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
}

type Listener = (req: http.IncomingMessage, res: http.ServerResponse) => void

/** Why a dynamic app is not proxied here, or undefined when it is. */
const notHere = (app: AppTarget, nodeId: string): AppRefusal | undefined => {
  if (app.status !== "active") return appNotRunning(app.name, app.status)
  if (app.homeNode !== nodeId) return appNotRunning(app.name, "it runs on another node of the cluster")
  return undefined
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
      const app = route.app
      if (notHere(app, options.nodeId) !== undefined || app.port === undefined || app.port === options.ownPort()) return undefined
      return app
    },
    answerTimeoutMs: options.answerTimeoutMs ?? ANSWER_TIMEOUT_MS,
    proxies: options.proxies,
    onAnswered
  })

  /** The API's listener behind host routing. */
  const listener = (api: Listener): Listener => (req, res) => {
    const route = options.hosts.route(req.headers.host)
    if (route.kind === "api") return api(req, res)
    if (onAnswered !== undefined) {
      const startedAt = performance.now()
      res.once("close", () => onAnswered(req, res.headersSent ? res.statusCode : 499, performance.now() - startedAt))
    }
    if (route.kind === "unknown") return answerRefusal(res, noSuchApp(route.host), req.method)
    const app = route.app
    if (app.type === "static") return sites.serve(req, res, app)
    const refused = notHere(app, options.nodeId)
    if (refused !== undefined) return answerRefusal(res, refused, req.method)
    proxy.request(req, res, app)
  }

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
    const refused = notHere(app, options.nodeId)
    if (refused !== undefined) return answerRefusalOnSocket(socket, refused)
    proxy.upgrade(req, socket, head, app)
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
