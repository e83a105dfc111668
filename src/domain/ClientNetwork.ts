/**
 * The network a client address is charged to (IPv4 /24, IPv6 /64): every per-client rate limit
 * keys its bucket by it (src/layers/ratelimit/RateLimiter.ts, the vault's own buckets). Pure.
 */
import { isIPv4, isIPv6 } from "node:net"

/**
 * The eight 16-bit groups of an IPv6 address written any legal way, or undefined when it is not
 * one. `URL` validates the address and writes it canonically (lower case, no leading zeros, a
 * dotted IPv4 tail in hex, the longest run of zero groups as the one `::`), so two spellings of
 * one address agree; what is left is to put the zero groups back where `::` stands.
 */
const ipv6Groups = (text: string): ReadonlyArray<number> | undefined => {
  if (!isIPv6(text)) return undefined
  let canonical: string
  try {
    canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1)
  } catch {
    // node:net and the URL parser disagree about this text: not an address a socket reports
    return undefined
  }
  const [head = "", tail] = canonical.split("::")
  const groupsOf = (part: string | undefined) => (part === undefined || part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)))
  const before = groupsOf(head)
  const after = groupsOf(tail)
  return [...before, ...Array.from({ length: 8 - before.length - after.length }, () => 0), ...after]
}

// Every request with a body asks for its client's network (BodyGuard.ts), most of them from an
// address asked about a moment before: its network is kept, not worked out again with a split, a
// regex and an address check each time (IPv6 parses a URL). Bounded: cleared when full.
const NETWORKS_KEPT = 4096
const networks = new Map<string, string>()

/**
 * The network a client address belongs to (IPv4 /24, IPv6 /64), so one host cannot dodge limits
 * by rotating through the addresses it holds. An IPv4-mapped IPv6 address is its IPv4 network, so
 * a dual-stack listener charges one client to one bucket whichever way it connected.
 */
export const clientNetwork = (address: string | undefined): string => {
  if (address === undefined || address === "") return "unknown"
  const known = networks.get(address)
  if (known !== undefined) return known
  const network = networkOf(address)
  if (networks.size >= NETWORKS_KEPT) networks.clear()
  networks.set(address, network)
  return network
}

const networkOf = (address: string): string => {
  // a zone names the local interface, not a different network
  const bare = address.split("%")[0]?.toLowerCase().replace(/^\[(.*)\]$/, "$1") ?? ""
  if (bare === "") return "unknown"
  if (isIPv4(bare)) return bare.slice(0, bare.lastIndexOf(".")) + ".0/24"
  const groups = ipv6Groups(bare)
  // Not from a socket in practice; keyed by itself so an unknown form cannot throttle everyone.
  if (groups === undefined) return bare
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0xffff) {
    return [g6 >> 8, g6 & 0xff, g7 >> 8].join(".") + ".0/24"
  }
  return groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":") + "::/64"
}

