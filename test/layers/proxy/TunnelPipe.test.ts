/**
 * The tunnel's back-pressure (docs/proxy.md "Tunnels"), on real sockets over loopback: a client
 * that stops reading makes the pipe pause its TCP stream (the destination's writes then stall), and
 * a destination that stops reading makes it pause the WebSocket; in neither case does the gateway's
 * buffering grow with what the fast side offers. Once the slow side reads again, every byte arrives
 * in order.
 */
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { HIGH_WATER, joinPipe } from "../../../src/layers/proxy/TunnelPipe.js"

const MiB = 1024 * 1024
const limits = { maxBytes: 1024 * MiB, idleMs: 60_000, lifetimeMs: 60_000 }
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms))

const listen = (server: net.Server | WebSocketServer): Promise<number> =>
  new Promise((resolve) => {
    if (server instanceof WebSocketServer) server.once("listening", () => resolve((server.address() as net.AddressInfo).port))
    else server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port))
  })

const closers: Array<() => void> = []
afterEach(() => {
  for (const close of closers.splice(0)) close()
})

/** A gateway side in miniature: each WebSocket joined to a new TCP stream to `destinationPort`. */
const startPipeServer = async (destinationPort: number) => {
  const wss = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate: false })
  const port = await listen(wss)
  const joined: Array<{ ws: WebSocket; tcp: net.Socket }> = []
  wss.on("connection", (ws) => {
    const tcp = net.connect(destinationPort, "127.0.0.1")
    joined.push({ ws, tcp })
    joinPipe(ws, tcp, limits, () => {})
  })
  closers.push(() => {
    for (const c of wss.clients) c.terminate()
    wss.close()
  })
  return { port, joined }
}

describe("TunnelPipe back-pressure", () => {
  it("pauses the TCP stream while the client does not read, and delivers every byte once it does", async () => {
    const total = 96 * MiB
    let written = 0
    const destination = net.createServer((socket) => {
      const chunk = Buffer.alloc(64 * 1024)
      const pump = () => {
        while (written < total) {
          chunk.fill(written / chunk.length % 251)
          written += chunk.length
          if (!socket.write(chunk)) return void socket.once("drain", pump)
        }
        socket.end()
      }
      pump()
    })
    const destinationPort = await listen(destination)
    closers.push(() => destination.close())
    const { port, joined } = await startPipeServer(destinationPort)

    const client = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false })
    let received = 0
    let inOrder = true
    client.on("message", (data: Buffer) => {
      // every 64 KiB the destination wrote is filled with its index mod 251
      for (let i = 0; i < data.length; i += 4093) if (data[i] !== Math.floor((received + i) / (64 * 1024)) % 251) inOrder = false
      received += data.length
    })
    await new Promise<void>((r) => client.once("open", () => r()))
    client.pause()
    await wait(1500)
    const side = joined[0]!
    // what the gateway holds is its high-water mark and a chunk; the rest sits in kernel buffers
    expect(side.ws.bufferedAmount).toBeLessThan(HIGH_WATER + 512 * 1024)
    expect(side.tcp.isPaused()).toBe(true)
    expect(written).toBeLessThan(48 * MiB)
    const closed = new Promise<number>((r) => client.once("close", (code) => r(code)))
    client.resume()
    expect(await closed).toBe(1000)
    expect(received).toBe(total)
    expect(inOrder).toBe(true)
  }, 30_000)

  it("pauses the WebSocket while the destination does not read", async () => {
    let destinationSocket: net.Socket | undefined
    let got = 0
    const destination = net.createServer((socket) => {
      destinationSocket = socket
      socket.pause()
      socket.on("data", (c: Buffer) => (got += c.length))
    })
    const destinationPort = await listen(destination)
    closers.push(() => destination.close())
    const { port, joined } = await startPipeServer(destinationPort)
    const client = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false })
    await new Promise<void>((r) => client.once("open", () => r()))
    const frame = Buffer.alloc(64 * 1024, 1)
    const total = 64 * MiB
    // offer it all at once: the client's own buffer holds what the gateway does not take
    for (let sent = 0; sent < total; sent += frame.length) client.send(frame, { binary: true })
    await wait(1500)
    const side = joined[0]!
    expect(side.tcp.writableLength).toBeLessThan(8 * MiB)
    expect(client.bufferedAmount).toBeGreaterThan(16 * MiB)
    destinationSocket!.resume()
    for (let i = 0; i < 200 && got < total; i++) await wait(50)
    expect(got).toBe(total)
    client.terminate()
  }, 30_000)
})
