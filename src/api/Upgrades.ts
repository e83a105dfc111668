/**
 * The server's `upgrade` listener for the API's WebSocket routes: an endpoint annotated
 * WebSocketRoute (RouteFacts.ts) is found through the route index like any route, and its
 * handshake goes through what every request goes through, in the app's order: the endpoint's gate
 * under its RoutePolicy (Gate.ts), then its query schema, decoded as strictly as the app decodes
 * it (an unknown member, a malformed value: 400 VALIDATION_FAILED). Only then does the handler
 * registered for the endpoint (`upgradeHandler`) take the socket. Every refusal is the API's
 * envelope, written on the socket before any upgrade.
 *
 * A browser cannot set `Authorization` on a WebSocket handshake, so a handshake without one may
 * carry the credential as `?jwt=` (docs/api.md "WebSocket routes"); the route's query schema
 * declares `jwt` where the route takes it, so elsewhere it is an unknown member.
 */
import { clientAddressOf } from "./node/ClientAddress.js"
import * as HttpApiDecodeError from "@effect/platform/HttpApiError"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Effect, Either, Schema } from "effect"
import type * as http from "node:http"
import type { Duplex } from "node:stream"
import { Code, statusOfCode } from "../domain/Errors.js"
import type { Principal } from "../domain/Principal.js"
import type { Handshake } from "../layers/deployments/serving/SocketHandshake.js"
import { type AppRefusal, answerRefusalOnSocket, repeatedAuthorization } from "../layers/deployments/serving/AppAnswers.js"
import { headerLines } from "../layers/deployments/serving/HostRouting.js"
import { describeDecodeError } from "./ErrorResponses.js"
import type { GateRefusal, GateService } from "./gate/Gate.js"
import type { RouteEntry, RouteIndex } from "./gate/RouteIndex.js"

type Upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void

/** A handshake the gate admitted, with its decoded query: what a WebSocket route's handler takes. */
export type UpgradeRequest<Query> = Handshake<Query>

export interface UpgradeHandler {
  /** The endpoint's `group.name`, as the route index names it. */
  readonly route: string
  readonly handle: (request: UpgradeRequest<unknown>) => Promise<void>
}

type EndpointOf<Group, Name extends string> = HttpApiEndpoint.HttpApiEndpoint.WithName<HttpApiGroup.HttpApiGroup.Endpoints<Group>, Name>

/** The handler of a group's WebSocket endpoint, its query typed from the endpoint's own schema. */
export const upgradeHandler = <
  Group extends HttpApiGroup.HttpApiGroup.Any & { readonly identifier: string },
  Name extends HttpApiEndpoint.HttpApiEndpoint.Name<HttpApiGroup.HttpApiGroup.Endpoints<Group>>
>(
  group: Group,
  name: Name,
  handle: (request: UpgradeRequest<HttpApiEndpoint.HttpApiEndpoint.UrlParams<EndpointOf<Group, Name>>>) => Promise<void>
): UpgradeHandler => ({
  route: `${group.identifier}.${name}`,
  // the listener decodes the query with this very endpoint's schema before calling
  handle: handle as (request: UpgradeRequest<unknown>) => Promise<void>
})

const wsKey = /^[+/0-9A-Za-z]{22}==$/

/** The handshake's own shape: GET, Upgrade: websocket, version 13 and a key; a refusal otherwise. */
const handshakeRefusal = (req: http.IncomingMessage, path: string): AppRefusal | undefined => {
  if (req.method !== "GET" || (req.headers["upgrade"] ?? "").toLowerCase() !== "websocket") {
    return { code: Code.BAD_REQUEST, error: `${path} is a WebSocket`, hint: "open it with GET, Connection: Upgrade and Upgrade: websocket" }
  }
  if (headerLines(req.rawHeaders, "authorization") > 1) return repeatedAuthorization
  if (req.headers["sec-websocket-version"] !== "13" || !wsKey.test(req.headers["sec-websocket-key"] ?? "")) {
    return { code: Code.BAD_REQUEST, error: "a WebSocket handshake needs Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key" }
  }
  return undefined
}

const asRefusal = (e: GateRefusal): AppRefusal => ({
  code: e.code,
  error: e.error,
  hint: e.hint,
  retryAfterSeconds: "retryAfterSeconds" in e ? e.retryAfterSeconds : undefined
})

/** The query as the app reads it: a repeated member is an array, so a route taking one value refuses it. */
const recordOf = (params: URLSearchParams): Record<string, string | Array<string>> => {
  const record: Record<string, string | Array<string>> = {}
  for (const key of new Set(params.keys())) {
    const values = params.getAll(key)
    record[key] = values.length === 1 ? values[0]! : values
  }
  return record
}

const decodeQuery = (route: RouteEntry, params: URLSearchParams): Either.Either<unknown, AppRefusal> => {
  if (route.query === undefined) return Either.right({})
  return Either.mapLeft(Schema.decodeUnknownEither(route.query)(recordOf(params)), (error) => ({
    code: Code.VALIDATION_FAILED,
    error: describeDecodeError(Effect.runSync(HttpApiDecodeError.HttpApiDecodeError.fromParseError(error))),
    hint: "check the request against /v1/openapi.json"
  }))
}

/** The route's path parameters in `pathname` (it matched the route's pattern); undefined when one does not decode. */
const paramsOf = (routePath: string, pathname: string): Record<string, string> | undefined => {
  const names = routePath.split("/")
  const values = pathname.replace(/\/$/, "").split("/")
  const params: Record<string, string> = {}
  try {
    names.forEach((segment, i) => {
      if (segment.startsWith(":")) params[segment.slice(1)] = decodeURIComponent(values[i] ?? "")
    })
  } catch {
    return undefined
  }
  return params
}

export const makeUpgrades = (options: {
  readonly index: RouteIndex
  readonly gate: GateService
  readonly handlers: ReadonlyArray<UpgradeHandler>
  readonly isApiHost: (host: string | undefined) => boolean
  readonly onAnswered?: ((req: http.IncomingMessage, status: number, ms: number) => void) | undefined
  /**
   * Why a node-to-node handshake (a route of policy `internal`) is refused, or undefined: its
   * coordination MAC covers the envelope it carries in X-Portico-Forward-Envelope, as PeerGate
   * checks a streamed call's.
   */
  readonly peerRefusal?: ((req: http.IncomingMessage, path: string) => Promise<string | undefined>) | undefined
}) => {
  const byRoute = new Map(options.handlers.map((h) => [h.route, h]))
  const routes = options.index.entries.filter((e) => e.webSocket).map((e) => e.name)
  // as the route index does, the gateway refuses to start when routes and handlers do not match
  const unhandled = routes.filter((r) => !byRoute.has(r))
  const unrouted = [...byRoute.keys()].filter((r) => !routes.includes(r))
  if (unhandled.length > 0 || unrouted.length > 0) {
    throw new Error(
      `WebSocket routes and handlers do not match: ${[...unhandled.map((r) => `${r} has no handler`), ...unrouted.map((r) => `${r} is no WebSocket route`)].join("; ")}`
    )
  }

  const answer = async (route: RouteEntry, handler: UpgradeHandler, req: http.IncomingMessage, socket: Duplex, head: Buffer, url: URL) => {
    const startedAt = performance.now()
    let logged = false
    const answered = (status: number) => {
      if (logged) return
      logged = true
      options.onAnswered?.(req, status, performance.now() - startedAt)
    }
    const refuse = (refusal: AppRefusal) => {
      answered(statusOfCode[refusal.code])
      answerRefusalOnSocket(socket, refusal)
    }
    const shape = handshakeRefusal(req, url.pathname)
    if (shape !== undefined) return refuse(shape)
    let caller: Principal | undefined
    if (route.policy.kind === "internal") {
      const refused = options.peerRefusal === undefined ? "no peer is taken here" : await options.peerRefusal(req, route.path)
      if (refused !== undefined) return refuse({ code: Code.COORDINATION_REFUSED, error: refused })
    } else {
      const jwt = url.searchParams.get("jwt")
      const authorization = req.headers.authorization ?? (jwt === null ? undefined : `Bearer ${jwt}`)
      const request = { authorization, remoteAddress: clientAddressOf(req), clientCharged: false }
      // decided at once when no store must be read (as the fast lane does); else the whole gate
      // decides, the client network charged already
      const decision = options.gate.now(route.policy, request, Date.now())
      if (decision._tag === "Refused") return refuse(asRefusal(decision.error))
      if (decision._tag === "Admitted") caller = decision.principal
      else {
        const admitted = await Effect.runPromise(Effect.either(options.gate.run(route.policy, { ...request, clientCharged: true })))
        if (Either.isLeft(admitted)) return refuse(asRefusal(admitted.left))
        caller = admitted.right
      }
    }
    const query = decodeQuery(route, url.searchParams)
    if (Either.isLeft(query)) return refuse(query.left)
    const params = paramsOf(route.path, url.pathname)
    if (params === undefined) return refuse({ code: Code.BAD_REQUEST, error: "the path does not decode", hint: "percent-encode the path's segments" })
    try {
      await handler.handle({ req, socket, head, query: query.right, params, caller, refuse, answered })
    } catch {
      // a bug in the handler: a handshake not yet answered still hears the envelope, never a dropped socket
      if (!logged && socket.writable) refuse({ code: Code.INTERNAL, error: "internal error" })
      else socket.destroy()
    }
  }

  return {
    /** The server's `upgrade` listener: the API's WebSocket routes on the API's hosts, anything else to `next`. */
    inFront:
      (next: Upgrade): Upgrade =>
      (req, socket, head) => {
        const url = new URL(req.url ?? "/", "http://gateway")
        const route = options.isApiHost(req.headers.host) ? options.index.webSocketRoute(url.pathname) : undefined
        const handler = route === undefined ? undefined : byRoute.get(route.name)
        if (route === undefined || handler === undefined) return next(req, socket, head)
        // node leaves an upgraded socket without an error listener: a client reset while the
        // handshake is being answered must not become an uncaught error
        socket.on("error", () => socket.destroy())
        answer(route, handler, req, socket, head, url).catch(() => socket.destroy())
      }
  }
}
