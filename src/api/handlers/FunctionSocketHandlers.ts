/**
 * Functions' WebSocket route past its handshake's gate and query schema (src/api/Upgrades.ts):
 * the socket is src/layers/functions/FunctionSockets.ts's to open an instance for and serve.
 */
import type { FunctionSockets } from "../../layers/functions/FunctionSockets.js"
import { InvokeGroup } from "../groups/FunctionsGroup.js"
import { upgradeHandler } from "../Upgrades.js"

export const functionSocketHandlers = (sockets: FunctionSockets) => [upgradeHandler(InvokeGroup, "ws", (handshake) => sockets.handle(handshake))]
