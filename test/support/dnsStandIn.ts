/**
 * A DNS server for tests, speaking the real wire protocol (RFC 1035) on 127.0.0.1: UDP, and TCP
 * (two-byte length prefix, RFC 7766) for answers that do not fit a UDP datagram, which it then
 * answers truncated (TC) so the resolver asks again over TCP as it would of a real server.
 * Packets are encoded and decoded by `dns-packet`.
 *
 * It answers TXT and A questions from a table the test sets; a name the table does not hold is NXDOMAIN,
 * another record type of a held name is an empty NOERROR answer (no data). A name can be set to
 * fail with an rcode (SERVFAIL, REFUSED), and the whole server can go silent (every question
 * dropped, as an unreachable server looks). Every question received is recorded.
 */
import * as dnsPacket from "dns-packet"
import * as dgram from "node:dgram"
import * as net from "node:net"

export interface DnsQuestion {
  readonly name: string
  readonly type: string
  readonly transport: "udp" | "tcp"
}

type Entry =
  | {
      readonly kind: "records"
      readonly txt: ReadonlyArray<ReadonlyArray<string>> | undefined
      readonly a: ReadonlyArray<string> | undefined
    }
  | { readonly kind: "fail"; readonly rcode: number }

export interface DnsStandIn {
  readonly port: number
  /** `127.0.0.1:<port>`, as PORTICO_DNS_SERVERS takes it. */
  readonly server: string
  /**
   * The TXT records of `name` (each record a string, or its character-strings when split);
   * undefined removes the name (NXDOMAIN again).
   */
  readonly setTxt: (name: string, records: ReadonlyArray<string | ReadonlyArray<string>> | undefined) => void
  /** The IPv4 addresses of `name` (A records); undefined removes them. */
  readonly setA: (name: string, addresses: ReadonlyArray<string> | undefined) => void
  /** Questions about `zone` and names below it go to the server at `host:port` (an NS delegation). */
  readonly delegate: (zone: string, host: string, port: number) => void
  /** Answers every question about `name` with this rcode (2 SERVFAIL, 5 REFUSED). */
  readonly fail: (name: string, rcode: number) => void
  /** While silent, every question is dropped unanswered. */
  readonly setSilent: (silent: boolean) => void
  readonly questions: () => ReadonlyArray<DnsQuestion>
  readonly close: () => Promise<void>
}

/** RFC 1035's UDP payload limit when the question carries no EDNS option naming a larger one. */
const CLASSIC_UDP_BYTES = 512

const NXDOMAIN = 3

/** A TXT character-string holds at most 255 bytes: longer values go out as several. */
const chunked = (value: string): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < value.length; i += 255) out.push(value.slice(i, i + 255))
  return out.length === 0 ? [""] : out
}

export const startDnsStandIn = async (): Promise<DnsStandIn> => {
  const table = new Map<string, Entry>()
  const asked: Array<DnsQuestion> = []
  let silent = false

  /** Zones handed to another server (`delegate`): its address by the zone's name. */
  const delegated = new Map<string, { readonly host: string; readonly port: number }>()
  const delegateOf = (name: string) => {
    const lower = name.toLowerCase().replace(/\.$/, "")
    for (const [zone, server] of delegated) if (lower === zone || lower.endsWith(`.${zone}`)) return server
    return undefined
  }
  /** Asks the zone's server over UDP, as a resolver following the delegation would; undefined when it is silent. */
  const forward = (message: Buffer, server: { readonly host: string; readonly port: number }) =>
    new Promise<Buffer | undefined>((resolve) => {
      const socket = dgram.createSocket("udp4")
      const timer = setTimeout(() => {
        socket.close()
        resolve(undefined)
      }, 3000)
      socket.once("message", (reply) => {
        clearTimeout(timer)
        socket.close()
        resolve(reply)
      })
      socket.send(message, server.port, server.host)
    })
  const respond = async (message: Buffer, query: dnsPacket.DecodedPacket, transport: "udp" | "tcp"): Promise<Buffer | undefined> => {
    const q = (query.questions ?? [])[0]
    const server = q === undefined || silent ? undefined : delegateOf(q.name)
    if (server === undefined || q === undefined) return answer(query, transport)
    asked.push({ name: q.name.toLowerCase(), type: q.type, transport })
    return forward(message, server)
  }

  const answer = (query: dnsPacket.DecodedPacket, transport: "udp" | "tcp"): Buffer | undefined => {
    const questions = query.questions ?? []
    for (const q of questions) asked.push({ name: q.name.toLowerCase(), type: q.type, transport })
    if (silent) return undefined
    const base = { type: "response" as const, id: query.id ?? 0, questions }
    const q = questions[0]
    const entry = q === undefined ? undefined : table.get(q.name.toLowerCase())
    // authoritative, recursion as asked: what a resolver expects of the zone's server
    const flags = dnsPacket.AUTHORITATIVE_ANSWER | (query.flag_rd ? dnsPacket.RECURSION_DESIRED : 0) | dnsPacket.RECURSION_AVAILABLE
    if (q === undefined || entry === undefined) return dnsPacket.encode({ ...base, flags: flags | NXDOMAIN })
    if (entry.kind === "fail") return dnsPacket.encode({ ...base, flags: flags | entry.rcode })
    const answers: Array<dnsPacket.Answer> =
      q.type === "TXT"
        ? (entry.txt ?? []).map((data) => ({ type: "TXT", name: q.name, ttl: 60, class: "IN", data: [...data] }))
        : q.type === "A"
          ? (entry.a ?? []).map((data) => ({ type: "A", name: q.name, ttl: 60, class: "IN", data }))
          : []
    const whole = dnsPacket.encode({ ...base, flags, answers })
    if (transport === "tcp") return whole
    const opt = (query.additionals ?? []).find((a) => a.type === "OPT") as { udpPayloadSize?: number } | undefined
    const room = Math.max(CLASSIC_UDP_BYTES, opt?.udpPayloadSize ?? CLASSIC_UDP_BYTES)
    return whole.length <= room ? whole : dnsPacket.encode({ ...base, flags: flags | dnsPacket.TRUNCATED_RESPONSE, answers: [] })
  }

  const onMessage = (socket: dgram.Socket) => (message: Buffer, peer: dgram.RemoteInfo) => {
    let query: dnsPacket.DecodedPacket
    try {
      query = dnsPacket.decode(message)
    } catch {
      return // not DNS: dropped, as a server would
    }
    void respond(message, query, "udp").then((reply) => {
      if (reply !== undefined) socket.send(reply, peer.port, peer.address)
    })
  }

  const tcp = net.createServer((socket) => {
    let pending = Buffer.alloc(0)
    socket.on("error", () => socket.destroy())
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      while (pending.length >= 2) {
        const size = pending.readUInt16BE(0)
        if (pending.length < 2 + size) break
        const message = pending.subarray(2, 2 + size)
        pending = pending.subarray(2 + size)
        let query: dnsPacket.DecodedPacket
        try {
          query = dnsPacket.decode(message)
        } catch {
          socket.destroy()
          return
        }
        void respond(message, query, "tcp").then((reply) => {
          if (reply === undefined) return
          const prefix = Buffer.alloc(2)
          prefix.writeUInt16BE(reply.length)
          socket.write(Buffer.concat([prefix, reply]))
        })
      }
    })
  })

  // one port for both transports, as DNS uses: take a free TCP port, then bind UDP to it (another
  // process may hold that UDP port; then try another)
  let port = 0
  let udp: dgram.Socket
  for (let attempt = 0; ; attempt++) {
    await new Promise<void>((resolve, reject) => {
      tcp.once("error", reject)
      tcp.listen(0, "127.0.0.1", () => {
        tcp.off("error", reject)
        resolve()
      })
    })
    port = (tcp.address() as net.AddressInfo).port
    const socket = dgram.createSocket("udp4")
    const bound = await new Promise<boolean>((resolve) => {
      const onError = () => resolve(false)
      socket.once("error", onError)
      socket.bind(port, "127.0.0.1", () => {
        socket.off("error", onError)
        resolve(true)
      })
    })
    if (bound) {
      socket.on("message", onMessage(socket))
      udp = socket
      break
    }
    socket.close()
    await new Promise<void>((resolve) => tcp.close(() => resolve()))
    if (attempt === 20) throw new Error("no free port for both UDP and TCP")
  }

  /** Replaces one kind of a name's records (undefined: none of that kind); a name left with neither is gone (NXDOMAIN). */
  const set = (key: string, kind: "txt" | "a", records: ReadonlyArray<ReadonlyArray<string>> | ReadonlyArray<string> | undefined) => {
    const held = table.get(key)
    const before = held?.kind === "records" ? held : { txt: undefined, a: undefined }
    const next = { kind: "records" as const, txt: before.txt, a: before.a, [kind]: records }
    if (next.txt === undefined && next.a === undefined) table.delete(key)
    else table.set(key, next as Entry)
  }

  return {
    port,
    server: `127.0.0.1:${port}`,
    setTxt: (name, records) => {
      const key = name.toLowerCase().replace(/\.$/, "")
      set(key, "txt", records === undefined ? undefined : records.map((r) => (typeof r === "string" ? chunked(r) : [...r])))
    },
    delegate: (zone, host, port) => {
      delegated.set(zone.toLowerCase().replace(/\.$/, ""), { host, port })
    },
    setA: (name, addresses) => {
      set(name.toLowerCase().replace(/\.$/, ""), "a", addresses)
    },
    fail: (name, rcode) => {
      table.set(name.toLowerCase().replace(/\.$/, ""), { kind: "fail", rcode })
    },
    setSilent: (value) => {
      silent = value
    },
    questions: () => [...asked],
    close: () =>
      new Promise<void>((resolve) => {
        udp.close()
        tcp.close(() => resolve())
      })
  }
}
