/**
 * Every lookup by route, built once from the endpoints' own facts (`HttpApi.reflect` over the
 * annotations of RouteFacts.ts and the gate each endpoint names): the policy the gate applies,
 * the body cap and streaming the listener needs at the headers, the fast lane's routes, and the
 * paths and methods that tell 404 from 405, the WebSocket routes and their query schemas. It refuses to build, so the gateway refuses to start,
 * when an endpoint has no policy, no gate or two, or a gate that does not fit its policy.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Context, Option, type Schema } from "effect"
import { PorticoApi } from "../Api.js"
import { Authentication, OpenGate, OptionalAuthentication, PeerGate, SessionAuthentication } from "../Gates.js"
import type { Policy } from "../Policy.js"
import { BodyCap, type BodyCapName, FastLaneRoute, type LaneName, RoutePolicy, StreamedBody, type StreamedBodyFacts, WebSocketRoute } from "../RouteFacts.js"

export type GateName = "authentication" | "session" | "peer" | "open" | "optional"

export interface RouteEntry {
  /** `group.endpoint`, as the handlers know it: `proxy.tunnel`. */
  readonly name: string
  readonly method: string
  /** As the router writes it: `/v1/storage/get/:cid`. */
  readonly path: string
  readonly policy: Policy
  readonly gate: GateName
  readonly bodyCap: BodyCapName | undefined
  readonly streamed: StreamedBodyFacts | undefined
  readonly lane: LaneName | undefined
  /** A WebSocket route (its WebSocketRoute annotation), answered by the `upgrade` listener. */
  readonly webSocket: boolean
  /** The endpoint's query schema, which the `upgrade` listener decodes as the app does. */
  readonly query: Schema.Schema<unknown, unknown> | undefined
  /** Whether the path has no parameter. */
  readonly fixed: boolean
  readonly pattern: RegExp
}

const gates: ReadonlyArray<readonly [unknown, GateName]> = [
  [Authentication, "authentication"],
  [SessionAuthentication, "session"],
  [PeerGate, "peer"],
  [OpenGate, "open"],
  [OptionalAuthentication, "optional"]
]

/** The gate a policy needs: a credential's policies go through `Authentication`. */
const gateFor = (policy: Policy): GateName =>
  policy.kind === "session"
    ? "session"
    : policy.kind === "internal"
      ? "peer"
      : policy.kind === "open"
        ? "open"
        : policy.kind === "grant-if-credential"
          ? "optional"
          : "authentication"

const patternOf = (path: string): RegExp =>
  new RegExp("^" + path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[A-Za-z]+/g, "[^/]+") + "/?$")

/** The API's routes with their facts; throws naming every endpoint whose facts do not hold together. */
export const routeEntries = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
  api: HttpApi.HttpApi<Id, Groups, E, R>
): ReadonlyArray<RouteEntry> => {
  const entries: Array<RouteEntry> = []
  const problems: Array<string> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group, mergedAnnotations, middleware }) => {
      const name = `${endpoint.method} ${endpoint.path}`
      const policy = Context.getOption(mergedAnnotations, RoutePolicy)
      const named = gates.filter(([tag]) => [...middleware].includes(tag as never)).map(([, gate]) => gate)
      if (Option.isNone(policy)) return void problems.push(`${name}: no RoutePolicy annotation`)
      if (named.length !== 1) return void problems.push(`${name}: ${named.length} gates (${named.join(", ")}); exactly one is needed`)
      if (named[0] !== gateFor(policy.value)) {
        return void problems.push(`${name}: policy ${policy.value.kind} needs the ${gateFor(policy.value)} gate, not ${named[0]}`)
      }
      const webSocket = Option.isSome(Context.getOption(mergedAnnotations, WebSocketRoute))
      if (webSocket && endpoint.method !== "GET") return void problems.push(`${name}: a WebSocket route is a GET`)
      entries.push({
        name: `${group.identifier}.${endpoint.name}`,
        method: endpoint.method,
        path: endpoint.path,
        policy: policy.value,
        gate: named[0],
        bodyCap: Option.getOrUndefined(Context.getOption(mergedAnnotations, BodyCap)),
        streamed: Option.getOrUndefined(Context.getOption(mergedAnnotations, StreamedBody)),
        lane: Option.getOrUndefined(Context.getOption(mergedAnnotations, FastLaneRoute)),
        webSocket,
        query: Option.getOrUndefined(endpoint.urlParamsSchema) as Schema.Schema<unknown, unknown> | undefined,
        fixed: !endpoint.path.includes(":"),
        pattern: patternOf(endpoint.path)
      })
    }
  })
  if (problems.length > 0) throw new Error("route facts do not hold together:\n" + problems.join("\n"))
  return entries
}

const withHead = (methods: ReadonlyArray<string>) => (methods.includes("GET") ? [...methods, "HEAD"] : methods)

export interface RouteIndex {
  readonly entries: ReadonlyArray<RouteEntry>
  /** The route the router matched, by its method and path pattern. */
  readonly byRoute: (method: string, path: string) => RouteEntry | undefined
  /** The route a request path reaches, for the routes with body facts (cap or streaming). */
  readonly bodyRoute: (method: string, path: string) => RouteEntry | undefined
  /**
   * The methods a path is served with; HEAD wherever GET is, as the router answers it there. A path
   * that is a fixed route (`/v1/namespace/members/transfer`) is that resource only: a parametric
   * sibling (`DELETE /v1/namespace/members/:wallet`) would take its last segment as an id it can
   * never be, so its method is not offered there.
   */
  readonly allowedMethods: (path: string) => ReadonlyArray<string>
  /** The methods of the fixed routes that are exactly this path (none when it is no fixed route). */
  readonly fixedMethods: (path: string) => ReadonlyArray<string>
  /** The WebSocket route a request path reaches, whatever its method (the handshake's shape is checked after). */
  readonly webSocketRoute: (path: string) => RouteEntry | undefined
}

export const makeRouteIndex = (entries: ReadonlyArray<RouteEntry>): RouteIndex => {
  const byKey = new Map(entries.map((e) => [`${e.method} ${e.path}`, e]))
  const withBody = entries.filter((e) => e.bodyCap !== undefined || e.streamed !== undefined)
  const fixedBodies = new Map(withBody.filter((e) => e.fixed).map((e) => [`${e.method} ${e.path}`, e]))
  const parametricBodies = withBody.filter((e) => !e.fixed)
  const webSockets = entries.filter((e) => e.webSocket)
  return {
    entries,
    byRoute: (method, path) => byKey.get(`${method} ${path}`),
    bodyRoute: (method, path) =>
      fixedBodies.get(`${method} ${path}`) ?? parametricBodies.find((e) => e.method === method && e.pattern.test(path)),
    allowedMethods: (path) => {
      const matching = entries.filter((e) => e.pattern.test(path))
      const fixed = matching.filter((e) => e.fixed)
      return withHead((fixed.length > 0 ? fixed : matching).map((e) => e.method))
    },
    fixedMethods: (path) => withHead(entries.filter((e) => e.fixed && e.pattern.test(path)).map((e) => e.method)),
    webSocketRoute: (path) => webSockets.find((e) => e.fixed && e.pattern.test(path)) ?? webSockets.find((e) => e.pattern.test(path))
  }
}

let built: RouteIndex | undefined

/** The gateway's routes, indexed on first use (the gateway builds it at start-up). */
export const routeIndex = (): RouteIndex => (built ??= makeRouteIndex(routeEntries(PorticoApi)))
