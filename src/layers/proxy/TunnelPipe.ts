/**
 * A WebSocket joined to a TCP stream (docs/proxy.md "Tunnels"): binary frames carry the stream's
 * bytes both ways; a text frame is a protocol violation and closes the tunnel (1003). Limits: a
 * byte cap each way (1009 past it), an idle time with no byte either way and a whole lifetime
 * (1000 with the reason), all closing both sides.
 *
 * Back-pressure both ways, so a slow reader never makes the gateway buffer without bound, with
 * the same marks each way: when the WebSocket's send buffer holds over HIGH_WATER bytes the TCP
 * stream is paused until the buffer drains below LOW_WATER; when the TCP stream's write buffer
 * holds over HIGH_WATER the WebSocket is paused (ws stops reading its socket) until it drains
 * below LOW_WATER. Marks rather than a write's `false` (node's 16 KiB) or `drain` (an empty
 * buffer): pausing at every frame and resuming only once the stream is empty would stop the
 * upload between frames (bench/proxy measured the upload at under half the SOCKS server's speed
 * that way), while the marks keep the stream's buffer fed.
 */
import type * as net from "node:net"
import type { WebSocket } from "ws"

export const HIGH_WATER = 1024 * 1024
export const LOW_WATER = 256 * 1024

export interface PipeLimits {
  readonly maxBytes: number
  readonly idleMs: number
  readonly lifetimeMs: number
}

/** Why a tunnel ended, for the log and the close frame. */
export type EndReason = "closed" | "destination-closed" | "text-frame" | "byte-cap" | "idle" | "lifetime" | "revoked" | "error"

const closeOf: Record<EndReason, readonly [number, string]> = {
  closed: [1000, "closed"],
  "destination-closed": [1000, "the destination closed the stream"],
  "text-frame": [1003, "text frames are not allowed: send binary frames"],
  "byte-cap": [1009, "the tunnel's byte cap is reached"],
  idle: [1000, "idle too long"],
  lifetime: [1000, "the tunnel's lifetime is over"],
  revoked: [1008, "the session or its device was revoked"],
  error: [1011, "the stream failed"]
}

export interface Pipe {
  /** Ends the tunnel (both sides) with a reason; later calls do nothing. */
  readonly end: (reason: EndReason) => void
  readonly bytesIn: () => number
  readonly bytesOut: () => number
}

export const joinPipe = (ws: WebSocket, tcp: net.Socket, limits: PipeLimits, onEnd: (reason: EndReason) => void): Pipe => {
  let ended = false
  let toDestination = 0
  let toClient = 0
  let wsPaused = false
  const end = (reason: EndReason) => {
    if (ended) return
    ended = true
    clearTimeout(idle)
    clearTimeout(lifetime)
    tcp.destroy()
    const [code, text] = closeOf[reason]
    if (ws.readyState === ws.OPEN) {
      ws.close(code, text)
      // a peer that never answers the close is cut after a while
      setTimeout(() => ws.terminate(), 5_000).unref()
    } else ws.terminate()
    onEnd(reason)
  }
  // each frame's bytes go out at once, as ws does on its own socket: Nagle would hold the tail of
  // a frame (or a small interactive write) until the upstream acknowledges the previous one
  tcp.setNoDelay(true)
  // one timer re-armed per chunk (refresh), not a new one each time
  const idle = setTimeout(() => end("idle"), limits.idleMs)
  const touch = () => void idle.refresh()
  const lifetime = setTimeout(() => end("lifetime"), limits.lifetimeMs)

  // each runs as a write of its direction reaches the kernel, so the buffer has shrunk
  const afterTcpWrite = () => {
    if (wsPaused && !ended && tcp.writableLength < LOW_WATER) {
      wsPaused = false
      ws.resume()
    }
  }
  const afterWsSend = () => {
    if (tcp.isPaused() && !ended && ws.bufferedAmount < LOW_WATER) tcp.resume()
  }

  ws.on("message", (data: Buffer | ArrayBuffer | Array<Buffer>, isBinary: boolean) => {
    if (ended) return
    if (!isBinary) return end("text-frame")
    const chunk = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)
    toDestination += chunk.length
    if (toDestination > limits.maxBytes) return end("byte-cap")
    touch()
    tcp.write(chunk, afterTcpWrite)
    // ws may still emit frames it had read before the pause: they only add to the buffer
    if (!wsPaused && tcp.writableLength > HIGH_WATER) {
      wsPaused = true
      ws.pause()
    }
  })
  tcp.on("data", (chunk: Buffer) => {
    if (ended) return
    toClient += chunk.length
    if (toClient > limits.maxBytes) return end("byte-cap")
    touch()
    ws.send(chunk, { binary: true }, afterWsSend)
    if (ws.bufferedAmount > HIGH_WATER) tcp.pause()
  })
  tcp.on("end", () => end("destination-closed"))
  tcp.on("close", () => end("destination-closed"))
  tcp.on("error", () => end("error"))
  ws.on("close", () => end("closed"))
  ws.on("error", () => end("error"))
  return { end, bytesIn: () => toDestination, bytesOut: () => toClient }
}
