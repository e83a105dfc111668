/**
 * Facts learned while handling a request that the access log needs afterwards (the namespace),
 * kept on the request object so nothing has to thread them through every handler.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type { Decision } from "./gate/Gate.js"

// On the platform's underlying request: the router may hand handlers a derived
// HttpServerRequest, but the source object stays the same for the whole exchange. A property of
// its own rather than a WeakMap entry: a WeakMap entry per request is an ephemeron the collector
// must trace, measurable on the hottest routes.
const NAMESPACE = Symbol("portico.request.namespace")
const CLIENT_CHARGED = Symbol("portico.request.clientCharged")
const GATED = Symbol("portico.request.gated")
interface Noted {
  [NAMESPACE]?: string
  [CLIENT_CHARGED]?: true
  [GATED]?: Decision
}
const sourceOf = (request: HttpServerRequest.HttpServerRequest): object =>
  typeof request.source === "object" && request.source !== null ? request.source : request

export const RequestMeta = {
  setNamespace: (request: HttpServerRequest.HttpServerRequest, namespace: string): void => {
    ;(sourceOf(request) as Noted)[NAMESPACE] = namespace
  },
  /** `setNamespace` by the platform's request itself (the fast lane has no HttpServerRequest). */
  setNamespaceOfSource: (source: object, namespace: string): void => {
    ;(source as Noted)[NAMESPACE] = namespace
  },
  /** The namespace by the platform's request itself (the node:http one), as the listener holds it. */
  namespaceOfSource: (source: object): string | undefined => (source as Noted)[NAMESPACE],
  /** The listener charged the request to its client network at its headers (src/api/BodyGuard.ts). */
  markClientCharged: (source: object): void => {
    ;(source as Noted)[CLIENT_CHARGED] = true
  },
  /** Whether the client network's rate limit was charged already: a route's gate then charges it no more. */
  clientCharged: (request: HttpServerRequest.HttpServerRequest): boolean => (sourceOf(request) as Noted)[CLIENT_CHARGED] === true,
  /** `clientCharged` by the platform's request itself. */
  clientChargedSource: (source: object): boolean => (source as Noted)[CLIENT_CHARGED] === true,
  /**
   * The fast lane ran the gate and then left the request to the app (src/api/FastLane.ts): the
   * route's gate takes this decision rather than deciding, and charging the limits, a second time.
   */
  setGated: (source: object, decision: Decision): void => {
    ;(source as Noted)[GATED] = decision
  },
  gated: (request: HttpServerRequest.HttpServerRequest): Decision | undefined => (sourceOf(request) as Noted)[GATED]
}
