/**
 * Headers that describe one connection, not the message (RFC 9110 §7.6.1, plus the legacy
 * `Keep-Alive` and `Proxy-Connection`): a proxy drops them in both directions. Each proxy adds the
 * headers it sets itself.
 */
export const HOP_BY_HOP_HEADERS: ReadonlyArray<string> = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade"
]

/**
 * The marker on a request one gateway relays to another that runs the app (spec §4.8's
 * `X-Svc-Proxy-Node`, named for Portico): its value is the relaying node. Honoured only from an
 * internal source (src/layers/deployments/serving/HostRouting.ts); never passed to an app.
 */
export const PROXY_NODE_HEADER = "x-portico-proxy-node"
