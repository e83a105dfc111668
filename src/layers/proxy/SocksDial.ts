/**
 * Opening a TCP stream to a destination through the SOCKS5 upstream (docs/proxy.md "Upstream").
 * The only way the proxy reaches anything: with no upstream configured it refuses, and it never
 * dials a destination itself. The destination goes to the upstream as the caller named it (ATYP
 * domain for a name: the `socks` client sends a name as is and never resolves it), so no DNS
 * lookup of a destination happens on the gateway.
 *
 * Stream isolation: a stream may carry an isolation key, sent as the SOCKS username (with a fixed
 * password) beside the no-auth method. Tor isolates streams by SOCKS credentials (IsolateSOCKSAuth,
 * on by default) and takes username/password when offered, so streams with different keys never
 * share a circuit; a SOCKS server without authentication configured picks no-auth and ignores it.
 *
 * Failures split by who failed: the upstream itself (not configured, not listening, a broken or
 * timed-out handshake) is `upstream`, answered 503 RELAY_UNAVAILABLE; the upstream's refusal of
 * the destination (SOCKS reply other than success: unreachable, refused, no such name) is
 * `destination`, which a tunnel answers 502 and an anon request reports in its 200 answer.
 */
import { createHash } from "node:crypto"
import type * as net from "node:net"
import { SocksClient } from "socks"
import type { Destination } from "../../domain/ProxyDestination.js"
import type { SocksUpstreamAddress } from "../config/ProxySettings.js"

export class DialFailed extends Error {
  constructor(
    readonly side: "upstream" | "destination",
    message: string
  ) {
    super(message)
  }
}

const rejectedPrefix = "Socks5 proxy rejected connection"

/** A stream to the destination through the upstream, or a `DialFailed` naming the side that failed. */
export const dialThroughSocks = async (
  upstream: SocksUpstreamAddress | undefined,
  destination: Pick<Destination, "host" | "port">,
  timeoutMs: number,
  isolation?: string
): Promise<net.Socket> => {
  if (upstream === undefined) throw new DialFailed("upstream", "no anonymity network is configured on this gateway")
  try {
    const { socket } = await SocksClient.createConnection({
      proxy: { host: upstream.host, port: upstream.port, type: 5, ...(isolation === undefined ? {} : { userId: isolation, password: "portico" }) },
      command: "connect",
      destination: { host: destination.host, port: destination.port },
      timeout: timeoutMs
    })
    return socket
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    if (message.startsWith(rejectedPrefix)) {
      // the reply code's name, e.g. "HostUnreachable": what the exit said, no gateway detail
      const why = message.slice(rejectedPrefix.length).replace(/^[\s-]+/, "")
      throw new DialFailed("destination", `the destination could not be reached through the anonymity network${why === "" ? "" : ` (${why})`}`)
    }
    throw new DialFailed("upstream", "the anonymity network is unavailable")
  }
}

/** An isolation key for `parts` (a user, a client address): 32 hex characters, the parts not readable from it. */
export const isolationKey = (...parts: ReadonlyArray<string>): string => createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 32)
