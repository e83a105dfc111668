/**
 * The proxy's WebSocket routes past their handshake (docs/proxy.md "Tunnels"): the `upgrade`
 * listener (src/api/Upgrades.ts) has applied each endpoint's gate and query schema; the socket is
 * src/layers/proxy/ProxySockets.ts's to answer.
 */
import type { ProxySockets } from "../../layers/proxy/ProxySockets.js"
import { ProxyGroup } from "../groups/ProxyGroup.js"
import { upgradeHandler } from "../Upgrades.js"

export const proxySocketHandlers = (sockets: ProxySockets) => [
  upgradeHandler(ProxyGroup, "tunnel", (handshake) => sockets.tunnel(handshake)),
  upgradeHandler(ProxyGroup, "relay", (handshake) => sockets.relay(handshake))
]
