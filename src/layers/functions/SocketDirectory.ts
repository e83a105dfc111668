/**
 * Where functions' client sockets are, across the cluster (docs/functions.md, "Sockets"). A
 * socket's id names the node that holds it (`<node id>.<random>`), so a function running anywhere
 * reaches it through the membership (Membership.ts): a socket held here is written to directly, one held by another
 * node through that node's `/v1/serverless/ws/connections/*` routes (behind PeerGate, the
 * coordination MAC). Every call is scoped to a namespace: a socket of another namespace is, to
 * the caller, a socket that does not exist.
 */
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { randomBytes } from "node:crypto"
import type { NamespaceName } from "../../domain/Names.js"
import { nodeOfSocket, SocketEntry } from "../../domain/FunctionSockets.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Membership } from "../cluster/Membership.js"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"

/** A socket held by this gateway: what writes to it and closes it. */
export interface HeldSocket {
  readonly id: string
  readonly namespace: string
  readonly functionName: string
  readonly openedAt: number
  /** Queues a frame; false when the socket is closing or its client reads too slowly. */
  readonly send: (data: Uint8Array) => boolean
  readonly close: (code: number, reason: string) => void
}

export interface SocketDirectoryService {
  /** A fresh id for a socket this gateway is about to hold. */
  readonly newId: () => string
  /** Holds `socket` here until the returned function is called. */
  readonly register: (socket: HeldSocket) => () => void
  /** Writes a frame to socket `id` of `namespace`, wherever it is held: whether it was taken. */
  readonly send: (namespace: string, id: string, data: Uint8Array) => Effect.Effect<boolean>
  /** Closes socket `id` of `namespace` (1000, the function's doing), wherever it is held. */
  readonly close: (namespace: string, id: string) => Effect.Effect<boolean>
  /** The open sockets of `namespace`'s function `functionName` on every node that answers in time. */
  readonly list: (namespace: string, functionName: string) => Effect.Effect<ReadonlyArray<SocketEntry>>
  /** This gateway's part of each, for the internal routes. */
  readonly here: {
    readonly send: (namespace: string, id: string, data: Uint8Array) => boolean
    readonly close: (namespace: string, id: string) => boolean
    readonly list: (namespace: string, functionName: string | undefined) => ReadonlyArray<SocketEntry>
  }
  /** How many sockets this gateway holds (the operator's health, tests). */
  readonly size: () => number
}

const PEER_TIMEOUT = Duration.seconds(2)
const Sent = Schema.parseJson(Schema.Struct({ sent: Schema.Boolean }))
const Closed = Schema.parseJson(Schema.Struct({ closed: Schema.Boolean }))
const Listed = Schema.parseJson(Schema.Struct({ connections: Schema.Array(SocketEntry) }))

export class SocketDirectory extends Context.Tag("portico/SocketDirectory")<SocketDirectory, SocketDirectoryService>() {
  /** Over the test configuration (no peers): every socket is this gateway's. */
  static readonly Test = Layer.suspend(() => SocketDirectory.Live.pipe(Layer.provide(Layer.mergeAll(Coordination.Test, Membership.Test, PorticoConfig.Test))))
  static readonly Live = Layer.effect(
    SocketDirectory,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const internal = internalClient(yield* Coordination)
      const membership = yield* Membership
      const held = new Map<string, HeldSocket>()
      const mine = (namespace: string, id: string) => {
        const socket = held.get(id)
        return socket !== undefined && socket.namespace === namespace ? socket : undefined
      }
      const here: SocketDirectoryService["here"] = {
        send: (namespace, id, data) => mine(namespace, id)?.send(data) ?? false,
        close: (namespace, id) => {
          const socket = mine(namespace, id)
          socket?.close(1000, "closed by the function")
          return socket !== undefined
        },
        list: (namespace, functionName) =>
          [...held.values()]
            .filter((s) => s.namespace === namespace && (functionName === undefined || s.functionName === functionName))
            .map((s) => ({ id: s.id, function: s.functionName, opened_at: s.openedAt }))
      }
      /** A peer's answer read by `schema`, or `fallback` when it did not answer as the route does. */
      const fromPeer = <A>(call: Effect.Effect<{ status: number; text: string }, unknown>, schema: Schema.Schema<A, string>, fallback: A) =>
        call.pipe(
          Effect.flatMap((answer): Effect.Effect<A, unknown> => (answer.status === 200 ? Schema.decode(schema)(answer.text) : Effect.fail("refused"))),
          Effect.orElseSucceed(() => fallback)
        )
      /** The node holding socket `id` when it is not this one (the internal client finds it by its id). */
      const remote = (id: string) => {
        const node = nodeOfSocket(id)
        return node !== undefined && node !== config.nodeId ? node : undefined
      }
      const service: SocketDirectoryService = {
        newId: () => `${config.nodeId}.${randomBytes(12).toString("base64url")}`,
        register: (socket) => {
          held.set(socket.id, socket)
          return () => {
            if (held.get(socket.id) === socket) held.delete(socket.id)
          }
        },
        send: (namespace, id, data) => {
          const node = remote(id)
          if (node === undefined) return Effect.sync(() => here.send(namespace, id, data))
          const payload = { namespace: namespace as NamespaceName, id, data_base64: Buffer.from(data).toString("base64") }
          return Effect.map(fromPeer(internal.call(node, "wsSend", payload, PEER_TIMEOUT), Sent, { sent: false }), (a) => a.sent)
        },
        close: (namespace, id) => {
          const node = remote(id)
          if (node === undefined) return Effect.sync(() => here.close(namespace, id))
          return Effect.map(fromPeer(internal.call(node, "wsClose", { namespace: namespace as NamespaceName, id }, PEER_TIMEOUT), Closed, { closed: false }), (a) => a.closed)
        },
        list: (namespace, functionName) =>
          Effect.map(
            Effect.flatMap(membership.peers, (peers) =>
              Effect.forEach(
                peers,
                (peer) =>
                  fromPeer(internal.call(peer.id, "wsList", { namespace: namespace as NamespaceName, function: functionName }, PEER_TIMEOUT), Listed, {
                    connections: []
                  }),
                { concurrency: 8 }
              )
            ),
            (answers) => [...here.list(namespace, functionName), ...answers.flatMap((a) => a.connections)]
          ),
        here,
        size: () => held.size
      }
      return service
    })
  )
}
