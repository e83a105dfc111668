/**
 * The peer channel's WebSocket route past its handshake (docs/cluster.md, "Peer channels"): the
 * `upgrade` listener (src/api/Upgrades.ts) has checked the coordination MAC over the channel's
 * envelope; src/layers/coordination/PeerChannel.ts takes the socket and its framed calls.
 */
import type { ChannelServer } from "../../layers/coordination/PeerChannel.js"
import { InternalGroup } from "../groups/InternalGroup.js"
import { upgradeHandler } from "../Upgrades.js"

export const peerChannelHandlers = (server: ChannelServer) => [
  upgradeHandler(InternalGroup, "peerChannel", async (handshake) => server.accept(handshake))
]
