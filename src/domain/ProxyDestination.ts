/**
 * Where the anonymity proxy may go (spec §4.7, docs/proxy.md "Destinations"). Pure: the rules over
 * a host and port as the caller wrote them, applied before anything is sent to the SOCKS upstream.
 *
 * The gateway never resolves a destination (the exit does), so the check is on the text that will
 * be sent: a name is judged by its shape (no local-network names), and an IP literal is judged by
 * its address whatever its spelling. The exit's resolver reads numeric names the way inet_aton
 * does (`2130706433`, `0177.0.0.1`, `0x7f000001`, `127.1` are all 127.0.0.1), so a host whose last
 * label is numeric is parsed that way here and refused unless it is a valid public address; a
 * numeric spelling that does not parse is refused too, as no exit should be asked to guess.
 * Address ranges are src/domain/AddressRanges.ts's (the egress guard's): loopback, RFC 1918,
 * link-local, carrier-grade NAT, multicast, 0/8, broadcast and every other special-purpose range,
 * and IPv6 outside global unicast (which takes in IPv4-mapped, unique-local and link-local).
 */
import { Either } from "effect"
import { isIP } from "node:net"
import { judgeAddress } from "./AddressRanges.js"

/** The ports a destination may have (spec §8). */
export const proxyPorts = [80, 443] as const
export type ProxyPort = (typeof proxyPorts)[number]

export interface Destination {
  /** What goes to the SOCKS upstream: a lowercased name without a trailing dot, or a canonical IP. */
  readonly host: string
  readonly kind: "name" | "ipv4" | "ipv6"
  readonly port: ProxyPort
}

export interface DestinationRefusal {
  /** `RELAY_DESTINATION_NOT_ALLOWED`: a well-formed destination the rules refuse; `VALIDATION_FAILED`: not a destination at all. */
  readonly code: "RELAY_DESTINATION_NOT_ALLOWED" | "VALIDATION_FAILED"
  readonly reason: string
}

const notAllowed = (reason: string): DestinationRefusal => ({ code: "RELAY_DESTINATION_NOT_ALLOWED", reason })
const invalid = (reason: string): DestinationRefusal => ({ code: "VALIDATION_FAILED", reason })

/** Names only a local network (or this machine) resolves: refused as private destinations. */
const localSuffixes = ["localhost", "local", "localdomain", "internal", "home.arpa", "lan", "intranet"] as const

const labelPattern = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/
const numericLabel = /^(?:0x[0-9a-f]*|[0-9]+)$/i

/** One part of an inet_aton address: decimal, octal (leading 0) or hex (0x); undefined when malformed. */
const numericPart = (part: string): number | undefined => {
  if (/^0x[0-9a-f]*$/i.test(part)) return part.length === 2 ? 0 : parseInt(part.slice(2), 16)
  if (/^0[0-7]*$/.test(part)) return part.length === 1 ? 0 : parseInt(part.slice(1), 8)
  if (/^[1-9][0-9]*$/.test(part)) return Number(part)
  return undefined
}

/**
 * An IPv4 address in any inet_aton spelling (1 to 4 parts; the last fills the remaining bytes),
 * as dotted decimal; undefined when it is not one (a part malformed or too large).
 */
export const parseLegacyIpv4 = (text: string): string | undefined => {
  const parts = text.split(".")
  if (parts.length < 1 || parts.length > 4 || parts.some((p) => p.length === 0 || p.length > 34)) return undefined
  const values: Array<number> = []
  for (const part of parts) {
    const value = numericPart(part)
    if (value === undefined || !Number.isFinite(value)) return undefined
    values.push(value)
  }
  const last = values.pop() as number
  if (values.some((v) => v > 255)) return undefined
  const lastBytes = 4 - values.length
  if (last >= 2 ** (8 * lastBytes)) return undefined
  const bytes = [...values]
  for (let i = lastBytes - 1; i >= 0; i--) bytes.push(Math.floor(last / 2 ** (8 * i)) % 256)
  return bytes.join(".")
}

/**
 * The host of a destination, judged: a name of the LDH shape or an IP literal (an IPv6 one with or
 * without brackets). Non-ASCII names are refused: send the punycode (`xn--`) form.
 */
export const judgeHost = (raw: string): Either.Either<Omit<Destination, "port">, DestinationRefusal> => {
  if (raw.length === 0) return Either.left(invalid("host is empty"))
  if (raw.length > 255) return Either.left(invalid("host is over 255 characters"))
  const bracketed = raw.startsWith("[") && raw.endsWith("]")
  const text = (bracketed ? raw.slice(1, -1) : raw).toLowerCase()
  if (text.includes("%")) return Either.left(notAllowed("an IPv6 zone id names a local interface"))
  if (isIP(text) === 6) {
    const verdict = judgeAddress(text)
    return verdict.permitted ? Either.right({ host: text, kind: "ipv6" as const }) : Either.left(notAllowed(`${raw} is ${verdict.reason}`))
  }
  if (bracketed) return Either.left(invalid("brackets hold an IPv6 address only"))
  const name = text.endsWith(".") ? text.slice(0, -1) : text
  if (!/^[\x21-\x7e]+$/.test(name)) return Either.left(invalid("host must be ASCII without spaces or controls (send an internationalised name in its xn-- form)"))
  const labels = name.split(".")
  if (numericLabel.test(labels[labels.length - 1] as string)) {
    const address = parseLegacyIpv4(name)
    if (address === undefined) return Either.left(notAllowed(`${raw} is a numeric host that is not an IPv4 address`))
    const verdict = judgeAddress(address)
    return verdict.permitted ? Either.right({ host: address, kind: "ipv4" as const }) : Either.left(notAllowed(`${raw} is ${address}, ${verdict.reason}`))
  }
  if (name.length > 253 || !labels.every((l) => labelPattern.test(l))) {
    return Either.left(invalid("host is not a hostname (letters, digits, '-', '_', dot-separated labels of 1-63) or an IP address"))
  }
  const local = localSuffixes.find((suffix) => name === suffix || name.endsWith(`.${suffix}`))
  if (local !== undefined) return Either.left(notAllowed(`${raw} is a local name (${local})`))
  if (labels.length < 2) return Either.left(notAllowed(`${raw} is a single-label name, which only a local network resolves`))
  return Either.right({ host: name, kind: "name" as const })
}

/** A port as a query gives it (digits only), defaulting to 443; only 80 and 443 are allowed. */
export const judgePort = (raw: string | number | undefined): Either.Either<ProxyPort, DestinationRefusal> => {
  if (raw === undefined || raw === "") return Either.right(443)
  const text = String(raw)
  if (!/^[0-9]{1,5}$/.test(text)) return Either.left(invalid("port must be a number (80 or 443)"))
  const port = Number(text)
  return port === 80 || port === 443 ? Either.right(port) : Either.left(notAllowed(`port ${port} is not allowed: only 80 and 443`))
}

/** A tunnel's destination from its query: host required, port 80 or 443 (default 443). */
export const judgeDestination = (host: string | undefined, port: string | number | undefined): Either.Either<Destination, DestinationRefusal> =>
  host === undefined
    ? Either.left(invalid("host is required"))
    : Either.flatMap(judgeHost(host), (h) => Either.map(judgePort(port), (p) => ({ ...h, port: p })))

export interface UrlTarget extends Destination {
  readonly scheme: "http" | "https"
  /** Path and query as sent on the request line (`/` at least). */
  readonly path: string
  /** The Host header value: the host, bracketed when IPv6, with the port when not the scheme's own. */
  readonly hostHeader: string
}

/**
 * An anon request's URL: absolute http or https, no credentials, no fragment sent; the host judged
 * as above on its WHATWG-normalised form (which already reads numeric spellings) and the port
 * the scheme's default or an explicit 80 or 443.
 */
export const judgeUrl = (raw: string): Either.Either<UrlTarget, DestinationRefusal> => {
  if (raw.length > 8192) return Either.left(invalid("url is over 8192 characters"))
  if (/[\x00-\x20\x7f]/.test(raw)) return Either.left(invalid("url must not hold spaces or control characters"))
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return Either.left(invalid("url is not an absolute URL"))
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return Either.left(invalid("url must be http or https"))
  if (url.username !== "" || url.password !== "") return Either.left(invalid("url must not carry credentials (send an Authorization header)"))
  const scheme = url.protocol === "http:" ? "http" : "https"
  const port = url.port === "" ? (scheme === "http" ? 80 : 443) : url.port
  return Either.flatMap(judgeDestination(url.hostname, port), (d) => {
    const shown = d.kind === "ipv6" ? `[${d.host}]` : d.host
    const defaultPort = scheme === "http" ? 80 : 443
    return Either.right({
      ...d,
      scheme,
      path: `${url.pathname}${url.search}` || "/",
      hostHeader: d.port === defaultPort ? shown : `${shown}:${d.port}`
    })
  })
}
