/**
 * Publish/subscribe's WebSocket route past its handshake's gate and query schema (src/api/Upgrades.ts):
 * the socket is src/layers/pubsub/PubSubSockets.ts's to subscribe and serve.
 */
import type { PubSubSockets } from "../../layers/pubsub/PubSubSockets.js"
import { PubSubGroup } from "../groups/PubSubGroup.js"
import { upgradeHandler } from "../Upgrades.js"

export const pubSubSocketHandlers = (sockets: PubSubSockets) => [upgradeHandler(PubSubGroup, "ws", (handshake) => sockets.handle(handshake))]
