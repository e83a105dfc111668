/**
 * An upgraded connection after its 101: the client's socket and the app's joined as bytes both
 * ways (AppConnections.ts, AppProxy.ts).
 */
import type { Duplex } from "node:stream"

/**
 * Pipes `client` and `app` into each other until either ends. Then what was written is flushed
 * and both are closed: node's server sockets allow half-open, so a side that never ended its half
 * would hold the pair, and the gateway's shutdown, for ever. A side that fails or closes takes the
 * other with it.
 */
export const splice = (client: Duplex, app: Duplex): void => {
  app.on("error", () => client.destroy())
  client.on("error", () => app.destroy())
  app.pipe(client)
  client.pipe(app)
  const finish = (side: Duplex) => side.end(() => side.destroy())
  const endBoth = () => {
    finish(client)
    finish(app)
  }
  client.once("end", endBoth)
  app.once("end", endBoth)
  app.once("close", () => client.destroy())
  client.once("close", () => app.destroy())
}
