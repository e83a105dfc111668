/**
 * Facts learned while handling a request that the access log needs afterwards (the namespace),
 * kept beside the request object so nothing has to thread them through every handler.
 */
import type { HttpServerRequest } from "@effect/platform"

// Keyed by the platform's underlying request: the router may hand handlers a derived
// HttpServerRequest, but the source object stays the same for the whole exchange.
const namespaces = new WeakMap<object, string>()
const keyOf = (request: HttpServerRequest.HttpServerRequest): object =>
  typeof request.source === "object" && request.source !== null ? request.source : request

export const RequestMeta = {
  setNamespace: (request: HttpServerRequest.HttpServerRequest, namespace: string): void => {
    namespaces.set(keyOf(request), namespace)
  },
  /** `setNamespace` by the platform's request itself (the fast lane has no HttpServerRequest). */
  setNamespaceOfSource: (source: object, namespace: string): void => {
    namespaces.set(source, namespace)
  },
  /** The namespace by the platform's request itself (the node:http one), as the listener holds it. */
  namespaceOfSource: (source: object): string | undefined => namespaces.get(source)
}
