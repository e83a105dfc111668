/**
 * Handing a client connection the app connections (AppConnections.ts) have read from to node's
 * HTTP server, as if it had just connected, with the bytes read so far (docs/deployments.md,
 * "Serving": "The hand-back"). Everything here is about keeping node's back-pressure on request
 * bodies, which rests on the socket's stream state, not on the bytes.
 *
 * node 20's server (`_http_server.js`, connectionListenerInternal) normally lets its parser read
 * the socket's handle directly (`parser.consume(socket._handle)`); the socket's JS stream then
 * never receives data again, and the parser stops and restarts the handle only through the
 * socket's 'pause' and 'resume' events (onSocketPause / onSocketResume → handle.readStop /
 * readStart). On a fresh connection that is sound because the JS stream is flowing, holds nothing,
 * and its `reading` flag stays set for good (node's own `resume` → `read(0)` set it, and no push
 * ever clears it), so the stream never calls its `_read` (→ handle.readStart) again. A connection
 * that was read through its JS stream first is not in that state, and two things break it
 * (measured with a request body the handler leaves unread, test/e2e/deployments-connections.test.ts):
 * - a `resume()` of ours (the earlier pause / unshift / resume) emits its 'resume' event a tick
 *   later, after the parser, fed the unshifted bytes, had already paused for the body: the late
 *   event restarts the handle while the stream counts itself paused;
 * - with no pause of ours, the stream's own `maybeReadMore` after the 'data' we were called from
 *   calls `_read` (its `reading` flag was cleared by that push) and restarts the handle just the same.
 * From then every `pause()` of the parser is a no-op (the stream is paused already, so no 'pause'
 * event), the handle reads on, and node's server pushes the whole body into the request's buffer
 * (a 200 MiB body was read whole in a second instead of stopping at 4 MiB).
 */
import type * as net from "node:net"

interface StreamInternals {
  readonly _handle?: { _consumed?: boolean } | null
}

/**
 * `bytes` are what was read of the connection so far, in order. `toNode` runs node's server's
 * own 'connection' listeners.
 *
 * - Called from the socket's 'data' (it is flowing and holds nothing, the first request was not an
 *   app's, the common case: every API connection): `read(0)` sets the stream's `reading` flag as
 *   node's own start does, with the handle already reading so `_read` does nothing, and the
 *   stream never calls `_read` again; node's parser then takes the handle as on a fresh
 *   connection, at no cost per request. The bytes go to node's 'data' listener at once, before
 *   libuv can deliver anything newer.
 * - Otherwise (a later request for another host, the client paused meanwhile, maybe with bytes
 *   in the stream's buffer): node's server is told the handle is taken (`_consumed`, node's own
 *   check), so it reads through the stream's 'data' and its pauses are the stream's: the
 *   buffer stops the handle at its high-water mark whatever a late 'resume' does. The stream
 *   is set flowing before node's listeners run, so their 'data' gets what the buffer holds
 *   after `bytes`.
 */
export const handToNode = (client: net.Socket, bytes: Buffer, toNode: (socket: net.Socket) => void): void => {
  const fresh = client.readableFlowing === true && client.readableLength === 0 && !client.isPaused()
  if (fresh) client.read(0)
  else {
    const handle = (client as net.Socket & StreamInternals)._handle
    if (handle !== undefined && handle !== null) handle._consumed = true
    client.resume()
  }
  toNode(client)
  if (bytes.length > 0) client.emit("data", bytes)
}
