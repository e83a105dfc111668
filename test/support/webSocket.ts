/**
 * Just enough of RFC 6455 for tests: a server side that accepts an upgrade and echoes text
 * frames, and a client that opens one through any HTTP server (the gateway's proxy), sends a text
 * frame and reads one. Single-frame messages only; Node 20 has no WebSocket client of its own.
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import type { Duplex } from "node:stream"

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

const acceptOf = (key: string) => crypto.createHash("sha1").update(key + GUID).digest("base64")

const frame = (text: string, mask: boolean): Buffer => {
  const payload = Buffer.from(text, "utf8")
  const head: Array<number> = [0x81]
  const maskBit = mask ? 0x80 : 0
  if (payload.length < 126) head.push(maskBit | payload.length)
  else if (payload.length < 65536) head.push(maskBit | 126, payload.length >> 8, payload.length & 0xff)
  else throw new Error("test frames stay under 64 KiB")
  if (!mask) return Buffer.concat([Buffer.from(head), payload])
  const key = crypto.randomBytes(4)
  const masked = Buffer.from(payload.map((b, i) => b ^ (key[i % 4] as number)))
  return Buffer.concat([Buffer.from(head), key, masked])
}

/** Reads whole frames out of `buffer`: the texts and what is left over. */
const parseFrames = (buffer: Buffer): { texts: Array<string>; rest: Buffer } => {
  const texts: Array<string> = []
  let at = 0
  for (;;) {
    if (buffer.length - at < 2) break
    const second = buffer[at + 1] as number
    let length = second & 0x7f
    let offset = at + 2
    if (length === 126) {
      if (buffer.length - offset < 2) break
      length = buffer.readUInt16BE(offset)
      offset += 2
    } else if (length === 127) break
    const masked = (second & 0x80) !== 0
    const key = masked ? buffer.subarray(offset, offset + 4) : undefined
    if (masked) offset += 4
    if (buffer.length - offset < length) break
    const payload = Buffer.from(buffer.subarray(offset, offset + length))
    if (key !== undefined) for (let i = 0; i < payload.length; i++) payload[i] = (payload[i] as number) ^ (key[i % 4] as number)
    texts.push(payload.toString("utf8"))
    at = offset + length
  }
  return { texts, rest: buffer.subarray(at) }
}

/** The server side: answers 101 and echoes each text frame back as `echo:<text>`. */
export const acceptEchoSocket = (req: http.IncomingMessage, socket: Duplex): void => {
  const key = req.headers["sec-websocket-key"]
  if (typeof key !== "string") {
    socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
    return
  }
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptOf(key)}\r\n\r\n`)
  let pending: Buffer = Buffer.alloc(0)
  socket.on("data", (chunk: Buffer) => {
    const { texts, rest } = parseFrames(Buffer.concat([pending, chunk]))
    pending = rest
    for (const text of texts) socket.write(frame(`echo:${text}`, false))
  })
  socket.on("error", () => socket.destroy())
  // node's server sockets allow half-open: close when the other side ends, or the server never closes
  socket.on("end", () => socket.destroy())
}

export interface TestWebSocket {
  readonly send: (text: string) => void
  readonly next: () => Promise<string>
  readonly close: () => void
}

/** Opens a WebSocket to `127.0.0.1:port` with the given `Host`; rejects with the status when not switched. */
export const openWebSocket = (port: number, host: string, path: string): Promise<TestWebSocket> =>
  new Promise((resolve, reject) => {
    const key = crypto.randomBytes(16).toString("base64")
    const req = http.request({
      host: "127.0.0.1",
      port,
      path,
      headers: { host, connection: "Upgrade", upgrade: "websocket", "sec-websocket-key": key, "sec-websocket-version": "13" }
    })
    req.once("response", (res) => {
      res.socket.destroy()
      reject(Object.assign(new Error(`not switched: ${res.statusCode}`), { status: res.statusCode }))
    })
    req.once("error", reject)
    req.once("upgrade", (res, socket, head) => {
      if (res.headers["sec-websocket-accept"] !== acceptOf(key)) return reject(new Error("wrong Sec-WebSocket-Accept"))
      let pending: Buffer = Buffer.from(head)
      const texts: Array<string> = []
      const waiting: Array<(text: string) => void> = []
      const deliver = () => {
        while (texts.length > 0 && waiting.length > 0) (waiting.shift() as (t: string) => void)(texts.shift() as string)
      }
      const take = (chunk: Buffer) => {
        const parsed = parseFrames(Buffer.concat([pending, chunk]))
        pending = parsed.rest
        texts.push(...parsed.texts)
        deliver()
      }
      socket.on("data", take)
      if (pending.length > 0) take(Buffer.alloc(0))
      resolve({
        send: (text) => socket.write(frame(text, true)),
        next: () =>
          new Promise((r) => {
            waiting.push(r)
            deliver()
          }),
        close: () => socket.destroy()
      })
    })
    req.end()
  })
