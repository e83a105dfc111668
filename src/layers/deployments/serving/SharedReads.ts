/**
 * Sockets read into one buffer that all of them share, their bytes handed to a callback instead of
 * through the stream's push and 'data' (net's `onread`). The app connections (AppConnections.ts)
 * read both of their sockets this way: it saves each read a 64 KiB allocation, a stream push and
 * an event, a few microseconds of every proxied request (docs/deployments.md, "Speed").
 *
 * Sharing one buffer is sound because every read is handed on before the next is made (the
 * process has one thread, and each read's callback returns before libuv reads again), and each
 * callback gets a copy of its bytes: nothing may keep a view of the shared buffer, since a write
 * that does not complete at once keeps its bytes until it does.
 */
import * as net from "node:net"

const shared = Buffer.allocUnsafe(64 * 1024)

/** What a read's callback answers: false stops the socket's reading until it is resumed. */
export type OnBytes = (chunk: Buffer) => boolean

/** `onread` for `net.connect`: the socket's reads as copies, to `onBytes`. */
export const sharedReadOption = (onBytes: OnBytes) => ({
  buffer: shared,
  callback: (n: number, buffer: Uint8Array) => onBytes(Buffer.from(buffer.subarray(0, n)))
})

/**
 * net's own keys for a socket's read buffer and callback (what `onread` sets), taken from a socket
 * made with one, since an accepted socket can only be given them afterwards. Undefined if this
 * node names them otherwise; such sockets stay streams.
 */
const keys = (() => {
  const probe = new net.Socket({ onread: sharedReadOption(() => true) } as net.SocketConstructorOpts)
  const own = Object.getOwnPropertySymbols(probe)
  probe.destroy()
  const [buffer, callback] = [own.find((k) => k.description === "kBuffer"), own.find((k) => k.description === "kBufferCb")]
  return buffer !== undefined && callback !== undefined ? { buffer, callback } : undefined
})()

type Reading = net.Socket & { _handle?: { useUserBuffer?: (b: Uint8Array) => void; constructor: { name: string } } | null } & Record<symbol, unknown>

/**
 * From now on, the reads of an accepted TCP socket go to `onBytes`; false (and nothing changed)
 * for any other socket (a TLS one reads through its own layer), or one whose stream holds bytes
 * not yet read (they would come after newer ones).
 */
export const readShared = (socket: net.Socket, onBytes: OnBytes): boolean => {
  const reading = socket as Reading
  const handle = reading._handle
  if (keys === undefined || handle?.constructor.name !== "TCP" || typeof handle.useUserBuffer !== "function" || socket.readableLength > 0) return false
  const option = sharedReadOption(onBytes)
  handle.useUserBuffer(option.buffer)
  reading[keys.buffer] = option.buffer
  reading[keys.callback] = option.callback
  return true
}
