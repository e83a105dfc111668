/**
 * bench/proxy's destination, a child process of its own (so its sending does not share an event
 * loop with the bench client that reads): two TCP servers on port 443, each of a loopback address
 * that only the bench's SOCKS server knows by name.
 *
 * - the source (argv[2]): to each connection, DEST_BYTES as fast as the socket takes them (one
 *   1 MiB buffer written again and again, waiting for drain), then the end of the stream;
 * - the sink (argv[3]): reads each connection's bytes and, once DEST_BYTES have arrived, answers
 *   one byte (`k`) so the sender knows its last byte got through.
 *
 * Prints `ready` on stdout once both listen.
 */
import * as net from "node:net"

const [sourceAddress, sinkAddress] = process.argv.slice(2)
const total = Number(process.env.DEST_BYTES)
if (sourceAddress === undefined || sinkAddress === undefined || !(total > 0)) {
  process.stderr.write("usage: DEST_BYTES=n destination.ts <source address> <sink address>\n")
  process.exit(2)
}
const chunk = Buffer.alloc(1024 * 1024)
for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 31 + 7) & 0xff

const source = net.createServer((socket) => {
  socket.on("error", () => socket.destroy())
  let sent = 0
  const pump = () => {
    while (sent < total && !socket.destroyed) {
      const n = Math.min(chunk.length, total - sent)
      sent += n
      if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void socket.once("drain", pump)
    }
    if (sent >= total) socket.end()
  }
  pump()
})

const sink = net.createServer((socket) => {
  socket.on("error", () => socket.destroy())
  let received = 0
  socket.on("data", (data: Buffer) => {
    const before = received
    received += data.length
    if (before < total && received >= total) socket.write("k")
  })
})

const listen = (server: net.Server, address: string) =>
  new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(443, address, () => resolve())
  })

await Promise.all([listen(source, sourceAddress), listen(sink, sinkAddress)])
process.stdout.write("ready\n")
process.stdin.resume()
process.stdin.on("end", () => process.exit(0))
