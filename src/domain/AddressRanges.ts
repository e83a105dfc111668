/**
 * Which network addresses a tenant-chosen destination may reach (spec §4.6, "a guarded client").
 * Pure: the rules over an address already resolved; the dial-time check that applies them lives in
 * src/layers/egress/GuardedFetch.ts. Range matching is node:net's BlockList.
 *
 * IPv4: every special-purpose range of the IANA registry (RFC 6890 and successors) is refused.
 * IPv6: only global unicast (2000::/3) is reachable at all, so loopback, unspecified, IPv4-mapped
 * and IPv4-compatible, NAT64, discard-only, unique-local, link-local, site-local and multicast are
 * all outside; inside it the IETF protocol block (Teredo, benchmarking, ORCHID), documentation and
 * 6to4 (which embeds an IPv4 address) are refused as well.
 */
import { Either } from "effect"
import { BlockList, isIP } from "node:net"

export type Family = "ipv4" | "ipv6"

interface Range {
  readonly network: string
  readonly prefix: number
  readonly family: Family
  readonly name: string
}

const v4 = (network: string, prefix: number, name: string): Range => ({ network, prefix, family: "ipv4", name })
const v6 = (network: string, prefix: number, name: string): Range => ({ network, prefix, family: "ipv6", name })

/** Ranges refused whatever else holds; the first match names the refusal. */
const refusedRanges: ReadonlyArray<Range> = [
  v4("0.0.0.0", 8, "unspecified (this network)"),
  v4("10.0.0.0", 8, "private (RFC 1918)"),
  v4("100.64.0.0", 10, "carrier-grade NAT"),
  v4("127.0.0.0", 8, "loopback"),
  v4("169.254.0.0", 16, "link-local"),
  v4("172.16.0.0", 12, "private (RFC 1918)"),
  v4("192.0.0.0", 24, "IETF protocol assignments"),
  v4("192.0.2.0", 24, "documentation"),
  v4("192.88.99.0", 24, "6to4 relay anycast"),
  v4("192.168.0.0", 16, "private (RFC 1918)"),
  v4("198.18.0.0", 15, "benchmarking"),
  v4("198.51.100.0", 24, "documentation"),
  v4("203.0.113.0", 24, "documentation"),
  v4("224.0.0.0", 4, "multicast"),
  v4("240.0.0.0", 4, "reserved"),
  v6("::", 128, "unspecified"),
  v6("::1", 128, "loopback"),
  v6("::ffff:0:0", 96, "IPv4-mapped"),
  v6("::", 96, "IPv4-compatible"),
  v6("64:ff9b::", 96, "NAT64 (IPv4-embedding)"),
  v6("64:ff9b:1::", 48, "local NAT64 (IPv4-embedding)"),
  v6("100::", 64, "discard-only"),
  v6("2001::", 23, "IETF protocol assignments (Teredo, benchmarking, ORCHID)"),
  v6("2001:db8::", 32, "documentation"),
  v6("2002::", 16, "6to4 (IPv4-embedding)"),
  v6("3fff::", 20, "documentation"),
  v6("fc00::", 7, "unique local"),
  v6("fe80::", 10, "link-local"),
  v6("fec0::", 10, "site-local"),
  v6("ff00::", 8, "multicast")
]

const single = (range: Range): BlockList => {
  const list = new BlockList()
  list.addSubnet(range.network, range.prefix, range.family)
  return list
}

const refused: ReadonlyArray<readonly [BlockList, Range]> = refusedRanges.map((range) => [single(range), range])

const globalUnicast = single(v6("2000::", 3, "global unicast"))

/** An address with its family, or none when `text` is not an IP literal (a zone id is dropped). */
export const ipLiteral = (text: string): { readonly address: string; readonly family: Family } | undefined => {
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text
  const address = bare.split("%")[0] ?? bare
  const version = isIP(address)
  return version === 4 ? { address, family: "ipv4" } : version === 6 ? { address, family: "ipv6" } : undefined
}

/** Operator-exempted ranges (`PORTICO_EGRESS_ALLOW_CIDRS`), as parsed by `parseCidrs`. */
export interface AllowList {
  readonly cidrs: ReadonlyArray<string>
  readonly list: BlockList
}

export const emptyAllowList: AllowList = { cidrs: [], list: new BlockList() }

/**
 * Comma-separated CIDRs (`127.0.0.0/8, ::1/128`; a bare address is its own /32 or /128). Left:
 * the first entry that is not one.
 */
export const parseCidrs = (text: string): Either.Either<AllowList, string> => {
  const list = new BlockList()
  const cidrs: Array<string> = []
  for (const raw of text.split(",")) {
    const entry = raw.trim()
    if (entry === "") continue
    const slash = entry.indexOf("/")
    const literal = ipLiteral(slash < 0 ? entry : entry.slice(0, slash))
    const prefixText = slash < 0 ? undefined : entry.slice(slash + 1)
    if (literal === undefined || literal.address.includes("%")) return Either.left(entry)
    const max = literal.family === "ipv4" ? 32 : 128
    if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return Either.left(entry)
    const prefix = prefixText === undefined ? max : Number(prefixText)
    if (prefix > max) return Either.left(entry)
    list.addSubnet(literal.address, prefix, literal.family)
    cidrs.push(`${literal.address}/${prefix}`)
  }
  return Either.right({ cidrs, list })
}

/** Whether an address may be dialled: `reason` names the range that refuses it. */
export type Verdict = { readonly permitted: true } | { readonly permitted: false; readonly reason: string }

const safeCheck = (list: BlockList, address: string, family: Family): boolean => {
  try {
    return list.check(address, family)
  } catch {
    return false
  }
}

/** Whether `text` is an IP literal inside `ranges` (the cluster's overlay, `PORTICO_OVERLAY_CIDRS`). */
export const inRanges = (ranges: AllowList, text: string): boolean => {
  const literal = ipLiteral(text)
  return literal !== undefined && safeCheck(ranges.list, literal.address, literal.family)
}

/**
 * The verdict on one resolved address. Anything that is not an IP literal is refused (a resolver
 * answer is always one); the allow-list is consulted first, so an operator can exempt a range.
 */
export const judgeAddress = (text: string, allow: AllowList = emptyAllowList): Verdict => {
  const literal = ipLiteral(text)
  if (literal === undefined) return { permitted: false, reason: "not an IP address" }
  const { address, family } = literal
  if (safeCheck(allow.list, address, family)) return { permitted: true }
  for (const [list, range] of refused) {
    // BlockList also matches across families (an IPv4 address against ::ffff:0:0/96): only a
    // range of the address's own family may name its refusal.
    if (range.family === family && safeCheck(list, address, family)) return { permitted: false, reason: range.name }
  }
  if (family === "ipv6" && !safeCheck(globalUnicast, address, family)) return { permitted: false, reason: "reserved (outside IPv6 global unicast)" }
  return { permitted: true }
}
