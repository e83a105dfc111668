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

/**
 * What the gateway drops from a request it passes to an app (both app paths): the hop-by-hop
 * headers, and the forwarding headers and relay marker that only the gateway sets.
 */
export const DROPPED_TOWARD_APPS: ReadonlySet<string> = new Set([
  ...HOP_BY_HOP_HEADERS,
  "forwarded",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
  "x-forwarded-port",
  PROXY_NODE_HEADER
])

/**
 * The client of a request another gateway relayed (the marker above, from an internal source): the
 * one `X-Forwarded-For` value the relaying gateway set (the last, should more arrive) and its
 * `X-Forwarded-Proto`. `raw` is name, value, name, value … as received.
 */
export const relayedClientOf = (raw: ReadonlyArray<string>): readonly [string, "http" | "https"] => {
  let forwardedFor = ""
  let proto: "http" | "https" = "http"
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase()
    if (name === "x-forwarded-for") forwardedFor = raw[i + 1] as string
    else if (name === "x-forwarded-proto") proto = raw[i + 1] === "https" ? "https" : "http"
  }
  return [forwardedFor.split(",").pop()?.trim() ?? "", proto]
}
