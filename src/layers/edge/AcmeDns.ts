/**
 * This node's DNS answer for the edge's DNS-01 challenges (docs/edge.md, "The wildcard
 * certificate"): with `PORTICO_ACME_DNS` set, a small authoritative server on UDP and TCP that
 * answers TXT questions about `_acme-challenge.<base>` (and `_acme-challenge.` names below the
 * base domain) from the records the edges presented (AcmeChallenges.ts), read from the registry,
 * so any node answers for an order any node's edge started. The operator delegates the name to
 * the nodes once (`_acme-challenge.<base> NS <a node>`), as with acme-dns.
 *
 * It is no resolver: every other name is REFUSED, so it cannot be used to reflect traffic at
 * anyone; answers are small (a few TXT strings of 43 characters). A registry that does not answer
 * is SERVFAIL, which a CA's resolver retries.
 */
import * as dnsPacket from "dns-packet"
import { Context, Effect, Layer, Runtime } from "effect"
import * as dgram from "node:dgram"
import * as net from "node:net"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { AcmeChallenges, type AcmeChallengesService } from "./AcmeChallenges.js"
import { canonicalName } from "./Names.js"

export interface AcmeDnsService {
  /** Where the server listens (its port once bound), or undefined when it is off. */
  readonly address: { readonly host: string; readonly port: number } | undefined
}

const REFUSED = 5
const SERVFAIL = 2
/** Challenge records change within seconds: resolvers must not keep them. */
const TTL = 0
/** A DNS message over TCP is at most this long (its length prefix is 16 bits); a question is far shorter. */
const MAX_TCP_QUERY = 4096
const MAX_TCP_CONNECTIONS = 256

/** The answer to one query, encoded; undefined when the query is not one to answer at all. */
export const answerQuery = async (
  query: dnsPacket.DecodedPacket,
  challenges: Pick<AcmeChallengesService, "isChallengeName">,
  records: (name: string) => Promise<ReadonlyArray<string> | undefined>
): Promise<Buffer | undefined> => {
  if (query.type !== "query") return undefined
  const questions = query.questions ?? []
  const base = { type: "response" as const, id: query.id ?? 0, questions }
  const q = questions[0]
  const flags = dnsPacket.AUTHORITATIVE_ANSWER
  if (q === undefined || questions.length !== 1 || q.class !== "IN" || !challenges.isChallengeName(q.name)) {
    return dnsPacket.encode({ ...base, flags: REFUSED })
  }
  const name = canonicalName(q.name)
  const soa: dnsPacket.Answer = {
    type: "SOA",
    name,
    ttl: TTL,
    class: "IN",
    data: { mname: name, rname: `hostmaster.${name}`, serial: Math.floor(Date.now() / 1000), refresh: 60, retry: 60, expire: 300, minimum: TTL }
  }
  if (q.type === "SOA") return dnsPacket.encode({ ...base, flags, answers: [soa] })
  if (q.type !== "TXT") return dnsPacket.encode({ ...base, flags, answers: [], authorities: [soa] })
  const values = await records(name)
  if (values === undefined) return dnsPacket.encode({ ...base, flags: SERVFAIL })
  const answers: Array<dnsPacket.Answer> = values.map((value) => ({ type: "TXT", name, ttl: TTL, class: "IN", data: [value] }))
  return dnsPacket.encode({ ...base, flags, answers, ...(answers.length === 0 ? { authorities: [soa] } : {}) })
}

const listen = (challenges: AcmeChallengesService, host: string, port: number) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const records = (name: string) =>
      Runtime.runPromise(runtime)(
        challenges.records(name).pipe(
          Effect.catchAll((e) => Effect.as(Effect.logWarning(`DNS-01 records of ${name} not read: ${e.detail}`), undefined))
        )
      )
    const reply = async (message: Buffer): Promise<Buffer | undefined> => {
      let query: dnsPacket.DecodedPacket
      try {
        query = dnsPacket.decode(message)
      } catch {
        return undefined // not DNS: dropped
      }
      return answerQuery(query, challenges, records)
    }

    const tcp = net.createServer((socket) => {
      let pending = Buffer.alloc(0)
      socket.setTimeout(10_000, () => socket.destroy())
      socket.on("error", () => socket.destroy())
      socket.on("data", (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk])
        if (pending.length > MAX_TCP_QUERY + 2) return socket.destroy()
        while (pending.length >= 2) {
          const size = pending.readUInt16BE(0)
          if (pending.length < 2 + size) break
          const message = pending.subarray(2, 2 + size)
          pending = pending.subarray(2 + size)
          void reply(message).then((answer) => {
            if (answer === undefined) return socket.destroy()
            const prefix = Buffer.alloc(2)
            prefix.writeUInt16BE(answer.length)
            socket.write(Buffer.concat([prefix, answer]))
          })
        }
      })
    })
    // a CA's resolver opens a few at a time; more are refused, each idle one closed after 10 s
    tcp.maxConnections = MAX_TCP_CONNECTIONS
    const udp = dgram.createSocket(net.isIPv6(host) ? "udp6" : "udp4")
    udp.on("message", (message, peer) => {
      void reply(message).then((answer) => {
        if (answer !== undefined) udp.send(answer, peer.port, peer.address)
      })
    })
    udp.on("error", () => undefined)

    const bound = yield* Effect.async<number, Error>((resume) => {
      tcp.once("error", (e) => resume(Effect.fail(e)))
      tcp.listen(port, host, () => {
        const tcpPort = (tcp.address() as net.AddressInfo).port
        udp.once("error", (e) => resume(Effect.fail(e)))
        udp.bind(tcpPort, host, () => resume(Effect.succeed(tcpPort)))
      })
    })
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        udp.close()
        tcp.close(() => resume(Effect.void))
      })
    )
    yield* Effect.logInfo(`answering DNS-01 challenges on ${host}:${bound} (udp, tcp)`)
    return { host, port: bound }
  })

export class AcmeDns extends Context.Tag("portico/AcmeDns")<AcmeDns, AcmeDnsService>() {
  static readonly Live = Layer.scoped(
    AcmeDns,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const challenges = yield* AcmeChallenges
      if (config.acmeDns === undefined) return { address: undefined }
      const address = yield* listen(challenges, config.acmeDns.host, config.acmeDns.port).pipe(Effect.orDie)
      return { address }
    })
  )

  /** Off, as on the test settings: the edge suite runs the Live server in a gateway. */
  static readonly Test = Layer.suspend(() => AcmeDns.Live.pipe(Layer.provide(AcmeChallenges.Test), Layer.provide(PorticoConfig.Test)))
}
