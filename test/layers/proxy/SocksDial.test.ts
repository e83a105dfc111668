/**
 * What the proxy says to its SOCKS5 upstream (docs/proxy.md "Upstream"), read off the wire by a
 * recording SOCKS5 server in the test (RFC 1928, RFC 1929): a name goes as ATYP 3 (never resolved
 * here), an address as ATYP 1; an isolation key goes as the username beside no-auth; the
 * upstream's refusal of a destination and the upstream being away are told apart.
 */
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { DialFailed, dialThroughSocks, isolationKey } from "../../../src/layers/proxy/SocksDial.js"

interface Seen {
  methods: Array<number>
  username?: string
  atyp?: number
  host?: string
  port?: number
}

/** A SOCKS5 server that records the handshake and answers `reply` (0 success, 4 host unreachable). */
const startRecorder = async (reply: number) => {
  const seen: Array<Seen> = []
  const server = net.createServer((socket) => {
    const record: Seen = { methods: [] }
    seen.push(record)
    let buffer = Buffer.alloc(0)
    let stage: "greeting" | "auth" | "request" = "greeting"
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk])
      if (stage === "greeting" && buffer.length >= 2 && buffer.length >= 2 + buffer[1]!) {
        record.methods = [...buffer.subarray(2, 2 + buffer[1]!)]
        buffer = buffer.subarray(2 + buffer[1]!)
        const userPass = record.methods.includes(2)
        socket.write(Buffer.from([5, userPass ? 2 : 0]))
        stage = userPass ? "auth" : "request"
      }
      if (stage === "auth" && buffer.length >= 2) {
        const ulen = buffer[1]!
        if (buffer.length < 2 + ulen + 1) return
        const plen = buffer[2 + ulen]!
        if (buffer.length < 3 + ulen + plen) return
        record.username = buffer.subarray(2, 2 + ulen).toString()
        buffer = buffer.subarray(3 + ulen + plen)
        socket.write(Buffer.from([1, 0]))
        stage = "request"
      }
      if (stage === "request" && buffer.length >= 5) {
        record.atyp = buffer[3]!
        if (record.atyp === 3) {
          const n = buffer[4]!
          if (buffer.length < 5 + n + 2) return
          record.host = buffer.subarray(5, 5 + n).toString()
          record.port = buffer.readUInt16BE(5 + n)
        } else if (record.atyp === 1) {
          if (buffer.length < 10) return
          record.host = [...buffer.subarray(4, 8)].join(".")
          record.port = buffer.readUInt16BE(8)
        }
        socket.write(Buffer.from([5, reply, 0, 1, 127, 0, 0, 1, 0, 80]))
        if (reply !== 0) socket.end()
      }
    })
    socket.on("error", () => {})
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  const port = (server.address() as net.AddressInfo).port
  closers.push(() => server.close())
  return { seen, upstream: { host: "127.0.0.1", port } }
}

const closers: Array<() => void> = []
afterEach(() => {
  for (const close of closers.splice(0)) close()
})

const failureOf = async (promise: Promise<net.Socket>): Promise<DialFailed> => {
  try {
    const socket = await promise
    socket.destroy()
  } catch (error) {
    if (error instanceof DialFailed) return error
    throw error
  }
  throw new Error("the dial succeeded")
}

describe("dialThroughSocks", () => {
  it("sends a name as ATYP 3, as given, with no credential when no isolation is asked", async () => {
    const recorder = await startRecorder(0)
    const socket = await dialThroughSocks(recorder.upstream, { host: "dest.example", port: 443 }, 5_000)
    socket.destroy()
    expect(recorder.seen).toEqual([{ methods: [0], atyp: 3, host: "dest.example", port: 443 }])
  })

  it("sends an address as ATYP 1 and an isolation key as the username beside no-auth", async () => {
    const recorder = await startRecorder(0)
    const key = isolationKey("user", "shop", "0xabc")
    const socket = await dialThroughSocks(recorder.upstream, { host: "8.8.8.8", port: 80 }, 5_000, key)
    socket.destroy()
    expect(recorder.seen).toEqual([{ methods: [0, 2], username: key, atyp: 1, host: "8.8.8.8", port: 80 }])
    expect(key).toMatch(/^[0-9a-f]{32}$/)
    expect(isolationKey("user", "shop", "0xdef")).not.toBe(key)
  })

  it("tells the upstream's refusal of a destination from the upstream being away", async () => {
    const refusing = await startRecorder(4)
    expect((await failureOf(dialThroughSocks(refusing.upstream, { host: "gone.example", port: 443 }, 5_000))).side).toBe("destination")
    expect((await failureOf(dialThroughSocks(undefined, { host: "dest.example", port: 443 }, 5_000))).side).toBe("upstream")
    const closed = net.createServer()
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", () => r()))
    const port = (closed.address() as net.AddressInfo).port
    await new Promise<void>((r) => closed.close(() => r()))
    expect((await failureOf(dialThroughSocks({ host: "127.0.0.1", port }, { host: "dest.example", port: 443 }, 5_000))).side).toBe("upstream")
  })
})
