/**
 * The address `/v1/network/connect` takes (spec §4.9 `{multiaddr}`; docs/cluster.md "Connect"):
 * a multiaddr of exactly `/ip4|ip6|dns/<host>/tcp/<port>/p2p/<node id>`, parsed strictly. A
 * Portico node answers HTTP on that host and port, and `<node id>` is the node id it must answer
 * as. Anything else (another protocol, a missing `/p2p/`, a trailing part) is not one. Pure.
 */
import { Either } from "effect"
import { isIPv4, isIPv6 } from "node:net"

export interface NodeAddress {
  readonly kind: "ip4" | "ip6" | "dns"
  readonly host: string
  readonly port: number
  readonly nodeId: string
}

/** A node id as the cluster writes them (`node-<12 hex>`, or an operator's `PORTICO_NODE_ID`). */
export const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

/** A DNS name: labels of letters, digits and hyphens, at most 253 characters, no trailing dot. */
const DNS_NAME = /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/

const PORT = /^[1-9][0-9]{0,4}$/

/** The node address `text` names, or why it is not one (the refusal's text). */
export const parseNodeAddress = (text: string): Either.Either<NodeAddress, string> => {
  const parts = text.split("/")
  // "/a/b" splits as ["", "a", "b"]: a multiaddr starts with "/" and has no empty part
  if (parts[0] !== "" || parts.slice(1).some((p) => p === "")) return Either.left("a multiaddr is /-separated parts, starting with /")
  const [, kind, host, tcp, port, p2p, nodeId, ...rest] = parts
  if (kind !== "ip4" && kind !== "ip6" && kind !== "dns") return Either.left("the address starts /ip4/, /ip6/ or /dns/")
  if (host === undefined) return Either.left(`/${kind}/ names no host`)
  if (kind === "ip4" && !isIPv4(host)) return Either.left("/ip4/ names no IPv4 address")
  if (kind === "ip6" && (!isIPv6(host) || host.includes("%"))) return Either.left("/ip6/ names no IPv6 address")
  if (kind === "dns" && !DNS_NAME.test(host)) return Either.left("/dns/ names no host name")
  if (tcp !== "tcp" || port === undefined) return Either.left("the host is followed by /tcp/<port>")
  if (!PORT.test(port) || Number(port) > 65535) return Either.left("the port is 1-65535")
  if (p2p !== "p2p" || nodeId === undefined) return Either.left("the address names no node: /p2p/<node id> ends it")
  if (!NODE_ID.test(nodeId)) return Either.left("the node id is 1-128 of letters, digits, '.', '_' and '-'")
  if (rest.length > 0) return Either.left("nothing follows /p2p/<node id>")
  return Either.right({ kind, host, port: Number(port), nodeId })
}

/** The base URL a node at `address` answers at (an IPv6 host bracketed). */
export const baseUrlOf = (address: NodeAddress): string =>
  `http://${address.kind === "ip6" ? `[${address.host}]` : address.host}:${address.port}`
