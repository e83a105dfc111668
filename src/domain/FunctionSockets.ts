/**
 * Functions' client sockets (docs/functions.md, "Sockets"): the wire shape of a socket in the
 * lists, how an id names the node holding it, and the close codes a client sees. Client-safe.
 */
import { Schema } from "effect"

/** A socket as the internal list route and `ws_list_clients` show it. */
export const SocketEntry = Schema.Struct({
  id: Schema.String,
  function: Schema.String,
  opened_at: Schema.Int
})
export type SocketEntry = typeof SocketEntry.Type

/** The node a socket id (`<node id>.<random>`) names; undefined for a malformed id. */
export const nodeOfSocket = (id: string): string | undefined => {
  const at = id.lastIndexOf(".")
  return at <= 0 || id.length > 256 ? undefined : id.slice(0, at)
}

/**
 * Close codes of a function's socket; the reason starts with the catalogue's code where there is
 * one (`FUNCTION_TIMEOUT: ...`), as pub/sub's sockets do.
 */
export const SocketClose = {
  /** The function closed it (ws_disconnect, or proc_exit(0) in an entry), or the client did. */
  normal: 1000,
  /** The gateway is stopping. */
  goingAway: 1001,
  /** A frame over the cap. */
  tooBig: 1009,
  /** The instance failed (a trap, a non-zero exit, output over its cap) or an entry ran past its timeout. */
  failed: 1011,
  /** The runner stopped: open the socket again. */
  unavailable: 1012,
  /** The client did not read what the function sent. */
  slowConsumer: 1013,
  /** The credential was revoked. */
  revoked: 4401,
  /** No answer to pings. */
  deadPeer: 4408
} as const
