/**
 * A request head on an app connection (AppConnections.ts), from the fields llhttp parsed: what it
 * says about routing and framing, and the head rebuilt for the app or for node's server
 * (docs/deployments.md, "The fast path": "Every request is still parsed").
 */
import { DROPPED_TOWARD_APPS, PROXY_NODE_HEADER } from "../../../domain/HopByHop.js"

/** The parsed parts of one request head. */
export interface RequestHead {
  readonly major: number
  readonly minor: number
  readonly method: string
  readonly url: string
  /** Names and values in turn, as sent. */
  readonly headers: ReadonlyArray<string>
}

/** What the head's own lines say, read in one pass. */
export interface HeadFacts {
  /** The last `Host` line's value, and how many `Host` lines there were. */
  readonly host: string | undefined
  readonly hosts: number
  /** Every `Connection` line's value, joined. */
  readonly connection: string | undefined
  readonly upgradeTo: string
  readonly chunked: boolean
  /** It carries another gateway's relay marker. */
  readonly relayed: boolean
}

export const factsOf = (headers: ReadonlyArray<string>): HeadFacts => {
  let host: string | undefined
  let hosts = 0
  let connection: string | undefined
  let upgradeTo = ""
  let [chunked, relayed] = [false, false]
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = (headers[i] as string).toLowerCase()
    if (name === "host") {
      host = headers[i + 1]
      hosts++
    } else if (name === "connection") connection = connection === undefined ? headers[i + 1] : `${connection},${headers[i + 1]}`
    else if (name === "upgrade") upgradeTo = headers[i + 1] as string
    else if (name === "transfer-encoding") chunked = true
    else if (name === PROXY_NODE_HEADER) relayed = true
  }
  return { host, hosts, connection, upgradeTo, chunked, relayed }
}

/** The head as it was read (its lines as parsed), for node's server to read again. */
export const headAsRead = (head: RequestHead): Buffer => {
  let text = `${head.method} ${head.url} HTTP/${head.major}.${head.minor}\r\n`
  for (let i = 0; i + 1 < head.headers.length; i += 2) text += `${head.headers[i]}: ${head.headers[i + 1]}\r\n`
  return Buffer.from(text + "\r\n", "latin1")
}

/**
 * The head the app gets: the client's lines minus hop-by-hop ones (and those its `Connection`
 * names) and the client's own forwarding headers, then the gateway's `X-Forwarded-*`, the
 * client's persistence, and the body's framing (chunked is framed again by the caller).
 */
export const headForApp = (
  head: RequestHead,
  facts: HeadFacts,
  client: readonly [forwardedFor: string, proto: string],
  upgrade: boolean,
  keepAlive: boolean
): string => {
  const named = facts.connection === undefined ? undefined : facts.connection.toLowerCase().split(",").map((t) => t.trim())
  let text = `${head.method} ${head.url} HTTP/${head.major}.${head.minor}\r\n`
  for (let i = 0; i + 1 < head.headers.length; i += 2) {
    const name = head.headers[i] as string
    const lower = name.toLowerCase()
    if (DROPPED_TOWARD_APPS.has(lower) || (named !== undefined && named.includes(lower))) continue
    text += `${name}: ${head.headers[i + 1]}\r\n`
  }
  text += `X-Forwarded-For: ${client[0]}\r\nX-Forwarded-Proto: ${client[1]}\r\nX-Forwarded-Host: ${facts.host}\r\n`
  // the connection's persistence is the client's: the app closes when the client asked it to
  if (upgrade) text += `Connection: Upgrade\r\nUpgrade: ${facts.upgradeTo}\r\n`
  else if (!keepAlive) text += "Connection: close\r\n"
  else if (head.major === 1 && head.minor === 0) text += "Connection: keep-alive\r\n"
  if (facts.chunked) text += "Transfer-Encoding: chunked\r\n"
  return text + "\r\n"
}
