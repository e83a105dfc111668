/**
 * A WebSocket handshake the route's gate admitted, its query decoded by the route's schema
 * (src/api/Upgrades.ts): what the services behind the API's WebSocket routes take
 * (src/layers/proxy/ProxySockets.ts, src/layers/pubsub/PubSubSockets.ts). It lives beside the
 * refusals a handshake is answered with (AppAnswers.ts), which the apps' sockets use too.
 */
import type * as http from "node:http"
import type { Duplex } from "node:stream"
import type { Principal } from "../../../domain/Principal.js"
import type { AppRefusal } from "./AppAnswers.js"

export interface Handshake<Query> {
  readonly req: http.IncomingMessage
  readonly socket: Duplex
  readonly head: Buffer
  readonly query: Query
  /** The route's path parameters, by name, as the path has them (percent-decoded). */
  readonly params: Readonly<Record<string, string>>
  /** The gate's caller; undefined on an open route. */
  readonly caller: Principal | undefined
  /** Answers the handshake with this refusal (the envelope) and closes the socket. */
  readonly refuse: (refusal: AppRefusal) => void
  /** Tells the access log the handshake's answer, once: 101 when the service accepts the upgrade. */
  readonly answered: (status: number) => void
}
