/**
 * Who the client is behind a proxy of our own (docs/edge.md, "Client addresses"): with the edge in
 * front, every request's peer is the edge, so the rate limits, body budgets, logs and apps' own
 * `X-Forwarded-For` would all see one client. A request whose peer is a trusted proxy
 * (`PORTICO_TRUSTED_PROXIES`, addresses or CIDR ranges; none by default) is the client that proxy
 * names: the right-most address of `X-Forwarded-For` that is not itself a trusted proxy (the
 * ones left of it were written by whoever sent them, so a client cannot pick its own address),
 * and its `X-Forwarded-Proto` when `http` or `https`. A peer that is not trusted is the client,
 * whatever it sends.
 *
 * Which address a request came from stays the socket's for the checks that are about the
 * network itself (a peer node's overlay source, the node's own machine): a proxy is never a
 * cluster peer, and the edge answers `/v1/internal/` itself.
 */
import * as net from "node:net"

export interface TrustedProxies {
  /** Whether any proxy is trusted: when not, every request's client is its peer, unread. */
  readonly any: boolean
  readonly trusts: (address: string | undefined) => boolean
}

const plain = (address: string) => (address.startsWith("::ffff:") && net.isIPv4(address.slice(7)) ? address.slice(7) : address)

/** Parses `PORTICO_TRUSTED_PROXIES` entries (`ip` or `ip/prefix`); an entry that is neither is the error's text. */
export const parseTrustedProxies = (entries: ReadonlyArray<string>): TrustedProxies | string => {
  const list = new net.BlockList()
  for (const raw of entries) {
    const entry = raw.trim()
    if (entry === "") continue
    const [address = "", prefix] = entry.split("/")
    const family = net.isIPv4(address) ? "ipv4" : net.isIPv6(address) ? "ipv6" : undefined
    if (family === undefined) return `"${entry}" is not an IP address or CIDR range`
    if (prefix === undefined) {
      list.addAddress(address, family)
      continue
    }
    const bits = /^\d{1,3}$/.test(prefix) ? Number(prefix) : -1
    if (bits < 0 || bits > (family === "ipv4" ? 32 : 128)) return `"${entry}" has no valid prefix length`
    list.addSubnet(address, bits, family)
  }
  const any = entries.some((e) => e.trim() !== "")
  return {
    any,
    trusts: (address) => {
      if (!any || address === undefined) return false
      const ip = plain(address)
      return list.check(ip, net.isIPv4(ip) ? "ipv4" : "ipv6")
    }
  }
}

export const NO_TRUSTED_PROXIES: TrustedProxies = { any: false, trusts: () => false }

/**
 * The client of a request from `peer` carrying `forwardedFor` (the `X-Forwarded-For` value, joined
 * when repeated): the peer itself unless it is trusted.
 */
export const clientBehind = (proxies: TrustedProxies, peer: string | undefined, forwardedFor: string | undefined): string | undefined => {
  if (!proxies.trusts(peer) || forwardedFor === undefined) return peer
  const hops = forwardedFor.split(",")
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = (hops[i] ?? "").trim()
    if (net.isIP(hop) === 0) return peer // a malformed chain names no one: the proxy is the client
    if (!proxies.trusts(hop)) return hop
  }
  return peer
}

/** The scheme the client used: the trusted proxy's `X-Forwarded-Proto`, else the connection's own. */
export const protoBehind = (proxies: TrustedProxies, peer: string | undefined, forwardedProto: string | undefined, encrypted: boolean): "http" | "https" => {
  if (proxies.trusts(peer)) {
    const proto = forwardedProto?.split(",")[0]?.trim().toLowerCase()
    if (proto === "https" || proto === "http") return proto
  }
  return encrypted ? "https" : "http"
}

/**
 * The client and scheme of a request from `peer` whose headers are `raw` (name, value, …, as a
 * parser gives them): `clientBehind` and `protoBehind` over its `X-Forwarded-For` (repeats
 * joined) and first `X-Forwarded-Proto`.
 */
export const forwardedIn = (proxies: TrustedProxies, peer: string | undefined, raw: ReadonlyArray<string>, encrypted: boolean): readonly [string, "http" | "https"] => {
  let forwardedFor: string | undefined
  let forwardedProto: string | undefined
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase()
    if (name === "x-forwarded-for") forwardedFor = forwardedFor === undefined ? raw[i + 1] : `${forwardedFor},${raw[i + 1]}`
    else if (name === "x-forwarded-proto") forwardedProto ??= raw[i + 1]
  }
  return [clientBehind(proxies, peer, forwardedFor) ?? "", protoBehind(proxies, peer, forwardedProto, encrypted)]
}
