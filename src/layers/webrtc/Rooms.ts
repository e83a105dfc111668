/**
 * Rooms across the cluster (docs/webrtc.md, "Rooms across the cluster"): which nodes' media
 * servers are up, where a room goes, every node's rooms of a namespace, and a kick or mute sent to
 * every node. This node's media server is asked directly; another node's through its
 * `/v1/internal/webrtc/*` routes, signed for it. A node that does not answer in 1.5 s is left out
 * of placement and named in the answers that miss it; it is never an error.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { ControlAnswer, MediaHealth, NodeRoomsAnswer } from "../../api/groups/WebRtcWire.js"
import type { NamespaceName } from "../../domain/Names.js"
import { placeRoom } from "../../domain/SfuTicket.js"
import { Membership } from "../cluster/Membership.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Coordination, type PeerAnswer, type PeerUnreachable } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { type ControlOrder, MediaServer, type RoomView } from "./MediaServer.js"

export interface ClusterRoom extends RoomView {
  readonly node: string
}

export interface RoomsService {
  /** The node whose media server should host `room` now; undefined when none is up. */
  readonly place: (namespace: string, room: string) => Effect.Effect<string | undefined>
  /**
   * `place` on the spot (`now` in Unix ms) while the nodes' health read in the last 2 s stands:
   * `{ node }`; undefined when it must be read again, by `place`.
   */
  readonly placeNow: (namespace: string, room: string, now: number) => { readonly node: string | undefined } | undefined
  /** The namespace's rooms on every node, and the nodes that did not answer. */
  readonly list: (namespace: string) => Effect.Effect<{ readonly rooms: ReadonlyArray<ClusterRoom>; readonly unreachable: ReadonlyArray<string> }>
  /** A kick or mute on every node: how many peers it reached, and the nodes that did not answer. */
  readonly control: (order: ControlOrder) => Effect.Effect<{ readonly affected: number; readonly unreachable: ReadonlyArray<string> }>
}

const CALL_MS = 1_500
/** How long the set of nodes with a media server up is kept: joins in a burst probe once. */
const HEALTH_KEPT_MS = 2_000

export class Rooms extends Context.Tag("portico/Rooms")<Rooms, RoomsService>() {
  static readonly Live = Layer.effect(
    Rooms,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const membership = yield* Membership
      const media = yield* MediaServer
      const internal = internalClient(yield* Coordination)
      const self = config.nodeId
      const timeout = `${CALL_MS} millis` as const

      /** A peer's answer decoded as `schema`; undefined for anything else. */
      const decoded = <A, I>(schema: Schema.Schema<A, I>) => {
        const decode = Schema.decodeUnknownEither(Schema.parseJson(schema))
        return (call: Effect.Effect<PeerAnswer, PeerUnreachable>): Effect.Effect<A | undefined> =>
          call.pipe(
            Effect.map((answer) => {
              if (answer.status !== 200) return undefined
              const value = decode(answer.text)
              return value._tag === "Right" ? value.right : undefined
            }),
            Effect.catchAll(() => Effect.succeed(undefined))
          )
      }
      const healthOf = decoded(MediaHealth)
      const roomsOf = decoded(NodeRoomsAnswer)
      const controlOf = decoded(ControlAnswer)

      /**
       * Every node still a member (registered, not retired), this one first. While the registry
       * does not answer (an election), the list last read stands: this node alone would place a
       * room here that other gateways place elsewhere. Before any list was read, none: a join
       * is then 503 rather than placed blind.
       */
      let lastMembers: ReadonlyArray<string> = []
      const members = membership.nodes.pipe(
        Effect.map((nodes) => [self, ...nodes.filter((n) => n.id !== self && (n.status === "active" || n.status === "inactive")).map((n) => n.id)]),
        Effect.tap((read) => Effect.sync(() => (lastMembers = read))),
        Effect.orElse(() => Effect.sync(() => lastMembers))
      )

      const healthy = (node: string) =>
        node === self ? Effect.map(media.health, (h) => h !== undefined) : Effect.map(healthOf(internal.call(node, "webrtcHealth", {}, timeout)), (h) => h !== undefined)

      let kept: { readonly at: number; readonly nodes: ReadonlyArray<string> } | undefined
      const upNodes = Effect.suspend(() =>
        kept !== undefined && Date.now() - kept.at < HEALTH_KEPT_MS
          ? Effect.succeed(kept.nodes)
          : Effect.gen(function* () {
              const all = yield* members
              const up = yield* Effect.forEach(all, healthy, { concurrency: "unbounded" })
              const nodes = all.filter((_, i) => up[i])
              kept = { at: Date.now(), nodes }
              return nodes
            })
      )

      const ns = (namespace: string) => namespace as NamespaceName

      /**
       * `here` on this node and `there` on every other member, at once: each member with its answer
       * (undefined when it gave none), and the members that did not answer. A node without a
       * media server configured has no rooms, and is not unreachable.
       */
      const onEveryNode = <A,>(here: Effect.Effect<A | undefined>, there: (node: string) => Effect.Effect<A | undefined>) =>
        Effect.gen(function* () {
          const all = yield* members
          const answers = yield* Effect.forEach(all, (node) => (node === self ? here : there(node)), { concurrency: "unbounded" })
          return {
            answered: all.map((node, i) => ({ node, answer: answers[i] })),
            unreachable: all.filter((node, i) => answers[i] === undefined && (node !== self || media.configured))
          }
        })

      const list: RoomsService["list"] = (namespace) =>
        Effect.map(
          onEveryNode(media.rooms(namespace), (node) =>
            Effect.map(roomsOf(internal.call(node, "webrtcRooms", { namespace: ns(namespace) }, timeout)), (a) => a?.rooms)
          ),
          ({ answered, unreachable }) => ({
            rooms: answered
              .flatMap(({ node, answer }) => (answer ?? []).map((r): ClusterRoom => ({ ...r, node })))
              .sort((a, b) => (a.room < b.room ? -1 : a.room > b.room ? 1 : a.node < b.node ? -1 : 1)),
            unreachable
          })
        )

      const control: RoomsService["control"] = (order) =>
        Effect.map(
          onEveryNode(media.control(order), (node) =>
            Effect.map(
              controlOf(internal.call(node, "webrtcControl", { namespace: ns(order.ns), room: order.room, user: order.user, peer: order.peer, action: order.action }, timeout)),
              (a) => a?.affected
            )
          ),
          ({ answered, unreachable }) => ({ affected: answered.reduce((sum, { answer }) => sum + (answer ?? 0), 0), unreachable })
        )

      return {
        place: (namespace, room) => Effect.map(upNodes, (nodes) => placeRoom(namespace, room, nodes)),
        placeNow: (namespace, room, now) => (kept !== undefined && now - kept.at < HEALTH_KEPT_MS ? { node: placeRoom(namespace, room, kept.nodes) } : undefined),
        list,
        control
      }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    Rooms.Live.pipe(Layer.provide(Layer.mergeAll(PorticoConfig.Test, Membership.Test, MediaServer.Test, Coordination.Test)))
  )
}
