/**
 * Real-time media's WebSocket routes past their handshake (docs/webrtc.md, "Signalling"): the
 * `upgrade` listener (src/api/Upgrades.ts) has applied the client route's gate and query schema,
 * or the internal route's coordination MAC; src/layers/webrtc/SignalSockets.ts relays the socket.
 */
import type { SignalSockets } from "../../layers/webrtc/SignalSockets.js"
import { InternalGroup } from "../groups/InternalGroup.js"
import { WebRtcGroup } from "../groups/WebRtcGroup.js"
import { upgradeHandler } from "../Upgrades.js"

export const webRtcSocketHandlers = (sockets: SignalSockets) => [
  upgradeHandler(WebRtcGroup, "signal", (handshake) => sockets.client(handshake)),
  upgradeHandler(InternalGroup, "webrtcSignal", (handshake) => sockets.peer(handshake))
]
