/**
 * The network routes' rules (spec §4.9 `/v1/network/status`, `connect`, `disconnect`;
 * docs/cluster.md "Routes"):
 *
 * - `status`: this node, the registry's voters and leader (rqlite's `/nodes`; none on the embedded
 *   registry), the cache and content engines, and how many peers answer a ping. Voters by their
 *   rqlite node id only (rqlite makes it the Raft address when `-node-id` is not set); no secret,
 *   no error text.
 * - `connect`: a node named by a strict multiaddr (src/domain/Multiaddr.ts) is dialled at its
 *   `POST /v1/internal/ping`, with a coordination MAC addressed to the node id named, within
 *   `CONNECT_DEADLINE_MS`. Only addresses inside `PORTICO_OVERLAY_CIDRS` are dialled (a `/dns/`
 *   name is resolved first and refused unless every address is inside; its addresses are tried in
 *   turn and the node is held at the first that answers, by IP, so it is not resolved again). When
 *   the node answers as itself it is held as a peer of this node, in memory, until `disconnect`
 *   (Membership.ts).
 * - `disconnect`: forgets a connected node; a node not connected is a no-op.
 */
import { Context, Effect, Either, Layer, Schema } from "effect"
import { lookup } from "node:dns/promises"
import { inRanges, ipLiteral, parseCidrs } from "../../domain/AddressRanges.js"
import { type ErrorOf, type NetworkCode, refusal } from "../../domain/Errors.js"
import { baseUrlOf, type NodeAddress, parseNodeAddress } from "../../domain/Multiaddr.js"
import { Cache } from "../cache/Cache.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient, internalPath } from "../coordination/InternalClient.js"
import { Health } from "../health/Health.js"
import { rqliteHttp } from "../registry/RqliteHttp.js"
import { RegistryStore } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { ContentEngine } from "../storage/ContentEngine.js"
import { EmbeddedContentEngine } from "../storage/EmbeddedContentEngine.js"
import { Membership } from "../cluster/Membership.js"

/** The network routes' body cap (spec §4.9: connect is 413 over 4 KiB). */
export const NETWORK_BODY_MAX_BYTES = 4096
/** A connect's dial (resolution, connection, the ping's answer) ends within this: 504 past it (spec §4.9). */
export const CONNECT_DEADLINE_MS = 10_000
/** The largest ping answer read; a longer one is no node's. */
const PING_ANSWER_MAX_BYTES = 64 * 1024
/** Each part of the status (a voter list, a cache ping, a peer's ping) answers within this. */
const STATUS_PART_MS = 2_000

export type NetworkRefused = ErrorOf<NetworkCode>

export interface RegistryVoter {
  readonly id: string
  readonly leader: boolean
  readonly reachable: boolean
}

export interface NetworkStatus {
  readonly node: string
  readonly version: string
  readonly registry: {
    readonly engine: "sqlite" | "rqlite"
    /** The registry answered a read within 2 s. */
    readonly ok: boolean
    /** rqlite's leader's node id; null on the embedded registry or when none is known. */
    readonly leader: string | null
    /** rqlite's voters; empty on the embedded registry (this node's own file). */
    readonly voters: ReadonlyArray<RegistryVoter>
  }
  readonly cache: { readonly engine: "memory" | "redis"; readonly ok: boolean }
  readonly storage: { readonly engine: "embedded" | "kubo" }
  readonly peers: {
    /** Every other node the membership knows, live or not. */
    readonly total: number
    /** The live peers (`/v1/network/peers` `active`, and seeds not known stale). */
    readonly active: number
    /** The live peers that answered a ping as themselves within 2 s. */
    readonly reachable: number
  }
}

export interface Connected {
  readonly node: string
  readonly internal_url: string
}

export interface NetworkService {
  readonly status: Effect.Effect<NetworkStatus>
  /** Dials the node `multiaddr` names and holds it as a peer when it answers as itself. */
  readonly connect: (multiaddr: string) => Effect.Effect<Connected, NetworkRefused>
  /** Forgets a connected node: whether it was connected. */
  readonly disconnect: (nodeId: string) => Effect.Effect<boolean>
}

const VoterRow = Schema.Struct({
  id: Schema.String,
  voter: Schema.optional(Schema.Boolean),
  leader: Schema.optional(Schema.Boolean),
  reachable: Schema.optional(Schema.Boolean)
})
/** rqlite's `/nodes?ver=2` (`{nodes: [...]}`), or the map by id of earlier versions. */
const NodesAnswer = Schema.Union(
  Schema.Struct({ nodes: Schema.Array(VoterRow) }),
  Schema.Record({ key: Schema.String, value: VoterRow })
)
const decodeNodes = Schema.decodeUnknownOption(Schema.parseJson(NodesAnswer))

const PingAnswer = Schema.parseJson(Schema.Struct({ status: Schema.Literal("ok"), node: Schema.String }))
const decodePing = Schema.decodeUnknownEither(PingAnswer)

const dialFailed = (error: string) => refusal("PEER_DIAL_FAILED", error, "check the address, the port and that a Portico node of this cluster listens there")

/** At most `max` bytes of a response's body, as text; undefined when it is longer. */
const boundedText = async (response: Response, max: number): Promise<string | undefined> => {
  if (response.body === null) return ""
  const reader = response.body.getReader()
  const chunks: Array<Uint8Array> = []
  let seen = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return Buffer.concat(chunks).toString("utf8")
    seen += value.length
    if (seen > max) {
      await reader.cancel()
      return undefined
    }
    chunks.push(value)
  }
}

export class Network extends Context.Tag("portico/Network")<Network, NetworkService>() {
  static readonly Live = Layer.effect(
    Network,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const membership = yield* Membership
      const coordination = yield* Coordination
      const store = yield* RegistryStore
      const cache = yield* Cache
      const content = yield* ContentEngine
      const health = yield* Health
      const overlay = Either.getOrThrow(parseCidrs(config.membership.overlayCidrs.join(",")))
      const inOverlay = (address: string): boolean => inRanges(overlay, address)
      const client = internalClient(coordination)
      const pingPath = internalPath("ping")

      /** rqlite's voters and leader, or none (the embedded registry, or rqlite did not answer). */
      const voters: Effect.Effect<ReadonlyArray<RegistryVoter>> = Effect.gen(function* () {
        const registry = config.registry
        if (registry.engine !== "rqlite") return []
        const http = rqliteHttp({ url: registry.url, user: registry.user, password: registry.password })
        const text = yield* Effect.tryPromise((signal) =>
          fetch(`${http.base}/nodes?ver=2`, { headers: http.headers, signal, redirect: "manual" }).then((r) => (r.ok ? boundedText(r, 1024 * 1024) : undefined))
        ).pipe(Effect.timeout(STATUS_PART_MS), Effect.orElseSucceed(() => undefined))
        const answer = text === undefined ? undefined : decodeNodes(text)
        if (answer === undefined || answer._tag === "None") return []
        const rows = "nodes" in answer.value && Array.isArray(answer.value.nodes) ? answer.value.nodes : Object.values(answer.value as Record<string, typeof VoterRow.Type>)
        return rows
          .filter((r) => r.voter !== false)
          .map((r) => ({ id: r.id, leader: r.leader === true, reachable: r.reachable === true }))
          .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      })

      /** Whether peer `id` answers a ping as itself within the status's bound. */
      const answers = (id: string): Effect.Effect<boolean> =>
        client.call(id, "ping", {}, STATUS_PART_MS).pipe(
          Effect.map((a) => a.status === 200 && Either.match(decodePing(a.text), { onLeft: () => false, onRight: (p) => p.node === id })),
          Effect.orElseSucceed(() => false)
        )

      const status = Effect.gen(function* () {
        const [registryOk, list, cacheOk, nodes, live] = yield* Effect.all(
          [
            Effect.map(Effect.either(Effect.timeout(store.query({ sql: "SELECT 1 AS ok" }), STATUS_PART_MS)), Either.isRight),
            voters,
            Effect.map(Effect.either(Effect.timeout(cache.ping, STATUS_PART_MS)), Either.isRight),
            Effect.orElseSucceed(membership.nodes, () => []),
            membership.peers
          ],
          { concurrency: "unbounded" }
        )
        const reachable = yield* Effect.forEach(live, (p) => answers(p.id), { concurrency: 8 })
        return {
          node: membership.self.id,
          version: health.version,
          registry: { engine: store.engine, ok: registryOk, leader: list.find((v) => v.leader)?.id ?? null, voters: list },
          cache: { engine: cache.engine, ok: cacheOk },
          storage: { engine: content.kind },
          peers: { total: nodes.filter((n) => !n.self).length, active: live.length, reachable: reachable.filter((r) => r).length }
        }
      })

      /** The IPs to dial for `address`, in the resolver's order, all inside the overlay; or why none. */
      const dialAddresses = (address: NodeAddress): Effect.Effect<ReadonlyArray<string>, NetworkRefused> =>
        Effect.gen(function* () {
          const outside = refusal(
            "VALIDATION_FAILED",
            "the address is outside the cluster's private network",
            "nodes are connected on their overlay address (PORTICO_OVERLAY_CIDRS)"
          )
          if (address.kind !== "dns") return inOverlay(address.host) ? [address.host] : yield* Effect.fail(outside)
          const resolved = yield* Effect.tryPromise(() => lookup(address.host, { all: true })).pipe(
            Effect.mapError(() => dialFailed("the host name did not resolve"))
          )
          // every address inside: a name that also points outside is not dialled at all
          if (resolved.length === 0 || !resolved.every((r) => inOverlay(r.address))) return yield* Effect.fail(outside)
          return resolved.map((r) => r.address)
        })

      /** The answer of `url`'s ping, signed for `nodeId`: the node id it answered as, or why none. */
      const ping = (url: string, nodeId: string): Effect.Effect<string, NetworkRefused> =>
        Effect.gen(function* () {
          const body = "{}"
          const headers = yield* coordination.sign(nodeId, "POST", pingPath, body)
          const answer = yield* Effect.tryPromise({
            try: async (signal) => {
              const response = await fetch(url + pingPath, {
                method: "POST",
                headers: { ...headers, "content-type": "application/json" },
                body,
                redirect: "manual",
                signal
              })
              return { status: response.status, text: await boundedText(response, PING_ANSWER_MAX_BYTES) }
            },
            catch: () => dialFailed("the address did not accept the connection")
          })
          if (answer.status === 403) return yield* Effect.fail(dialFailed(`the node there refused a call addressed to ${nodeId}: it is another node, or of another cluster`))
          if (answer.status !== 200 || answer.text === undefined) return yield* Effect.fail(dialFailed(`the address answered ${answer.status}, not as a Portico node`))
          return yield* Either.match(decodePing(answer.text), {
            onLeft: () => Effect.fail(dialFailed("the address answered, not as a Portico node")),
            onRight: (p) => Effect.succeed(p.node)
          })
        })

      const connect = (multiaddr: string): Effect.Effect<Connected, NetworkRefused> =>
        Effect.gen(function* () {
          const address = yield* Either.match(parseNodeAddress(multiaddr), {
            onLeft: (why) => Effect.fail(refusal("VALIDATION_FAILED", `not a node address: ${why}`, "/ip4/<address>/tcp/<port>/p2p/<node id>")),
            onRight: (a) => Effect.succeed(a)
          })
          if (address.nodeId === membership.self.id) return yield* Effect.fail(refusal("VALIDATION_FAILED", "the address names this node", "name another node of the cluster"))
          /** The node's URL at `ip`, once it answered there as the node named. */
          const at = (ip: string) =>
            Effect.gen(function* () {
              const url = baseUrlOf({ ...address, kind: ipLiteral(ip)?.family === "ipv6" ? "ip6" : "ip4", host: ip })
              const node = yield* ping(url, address.nodeId)
              if (node !== address.nodeId) return yield* Effect.fail(dialFailed(`the node there is ${node}, not ${address.nodeId}`))
              return url
            })
          // a name's addresses in turn: the first where the node answers (the last refusal when none)
          const dialled = yield* Effect.flatMap(dialAddresses(address), (ips) => Effect.firstSuccessOf(ips.map(at))).pipe(
            Effect.timeoutFail({
              duration: CONNECT_DEADLINE_MS,
              onTimeout: () => refusal("PEER_DIAL_TIMEOUT", `the address did not answer within ${CONNECT_DEADLINE_MS / 1000} s`, "check that the node is up and not overloaded")
            })
          )
          yield* membership.connect(address.nodeId, dialled)
          yield* Effect.logInfo("network: node connected").pipe(Effect.annotateLogs({ node: address.nodeId, url: dialled }))
          return { node: address.nodeId, internal_url: dialled }
        })

      return { status, connect, disconnect: membership.disconnect }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    Network.Live.pipe(
      Layer.provide(
        Layer.mergeAll(Cache.Test, Coordination.Test, EmbeddedContentEngine.Test, Health.Test, Membership.Test, PorticoConfig.Test, SqliteRegistryStore.Test)
      )
    )
  )
}
