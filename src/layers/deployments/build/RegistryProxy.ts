/**
 * The one door of a Node.js install's sandbox: an HTTP CONNECT proxy on the gateway's loopback
 * that opens tunnels to the public registry's HTTPS port and nothing else (docs/deployments.md,
 * "Preparing an app"). The install's sandbox may connect to this proxy only (every other address
 * is refused by its socket rules), so "only the public registry is reached" (spec §4.8) holds in
 * the kernel, not just in npm's configuration; and the registry's name is resolved here, on the
 * host, since the sandbox's resolver (DNS over TCP) is not answered by every host's DNS server.
 * TLS runs end to end between npm and the registry: the proxy sees only the tunnel.
 */
import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"

export interface RegistryProxy {
  readonly port: number
  /** Tunnels opened (a test's proof that the install went through here). */
  readonly tunnels: () => number
  /** Stops listening and ends every open tunnel. */
  readonly close: () => Promise<void>
}

/** Starts a proxy on 127.0.0.1 admitting `CONNECT <host>:443` for the given host only. */
export const startRegistryProxy = (registryHost: string): Promise<RegistryProxy> =>
  new Promise((resolve, reject) => {
    const sockets = new Set<net.Socket>()
    let tunnels = 0
    const track = (socket: net.Socket) => {
      sockets.add(socket)
      socket.once("close", () => sockets.delete(socket))
    }
    // Plain requests (http:// through a proxy) are refused: the registry is reached over TLS only.
    const server = http.createServer((_, res) => {
      res.writeHead(405, { connection: "close" }).end()
    })
    server.on("connection", track)
    server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
      const target = req.url ?? ""
      if (target.toLowerCase() !== `${registryHost.toLowerCase()}:443`) {
        client.end("HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n")
        return
      }
      tunnels += 1
      const upstream = net.connect({ host: registryHost, port: 443 })
      track(upstream)
      upstream.once("connect", () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
        if (head.length > 0) upstream.write(head)
        upstream.pipe(client)
        client.pipe(upstream)
      })
      const end = () => {
        upstream.destroy()
        client.destroy()
      }
      upstream.once("error", () => {
        if (!client.destroyed && upstream.connecting) client.end("HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
        else end()
      })
      client.once("error", end)
      upstream.once("close", end)
      client.once("close", end)
    })
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        port,
        tunnels: () => tunnels,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })
