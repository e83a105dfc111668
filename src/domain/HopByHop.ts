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
