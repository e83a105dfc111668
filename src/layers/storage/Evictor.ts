/**
 * The cluster-wide half of a privacy delete: this node evicts its blocks, and every other node the
 * membership knows (the seeds of `PORTICO_PEERS` and every registered node, live or not) is asked to
 * do the same through
 * `/v1/internal/storage/evict`. Only when all confirm is the answer `true`; a node that does not
 * answer in time, or keeps a block, makes it `partial` (the pin is gone everywhere already, so
 * its next sweep removes what stayed).
 */
import { Context, Data, Duration, Effect, Layer, Option, Schema } from "effect"
import { Coordination } from "../coordination/Coordination.js"
import { internalClient } from "../coordination/InternalClient.js"
import { Membership } from "../cluster/Membership.js"
import { ContentIndex } from "./ContentIndex.js"

const PEER_TIMEOUT = Duration.seconds(10)
const confirmed = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ evicted: Schema.Boolean })))

/** The registry could not list the pins to keep. */
export class PinListUnavailable extends Data.TaggedError("PinListUnavailable")<{}> {}

export interface EvictorService {
  /**
   * `local` is this node's eviction; it reads the pins to keep through the effect it is given,
   * once it holds the reclaim lock.
   */
  readonly evictEverywhere: <E>(
    cid: string,
    local: (keep: Effect.Effect<ReadonlyArray<string>, PinListUnavailable>) => Effect.Effect<boolean, E | PinListUnavailable>
  ) => Effect.Effect<"true" | "partial" | "skipped">
}

export class Evictor extends Context.Tag("portico/Evictor")<Evictor, EvictorService>() {
  static readonly Live = Layer.effect(
    Evictor,
    Effect.gen(function* () {
      const index = yield* ContentIndex
      const internal = internalClient(yield* Coordination)
      const membership = yield* Membership

      const askPeer = (nodeId: string, cid: string) =>
        internal.call(nodeId, "evict", { cid }, PEER_TIMEOUT).pipe(
          Effect.tap((answer) =>
            answer.status === 200 ? Effect.void : Effect.logWarning(`eviction on ${nodeId} not confirmed: it answered ${answer.status} ${answer.text.slice(0, 200)}`)
          ),
          Effect.map((answer) => answer.status === 200 && Option.exists(confirmed(answer.text), (a) => a.evicted)),
          Effect.catchAll((e) => Effect.as(Effect.logWarning(`eviction on ${nodeId} not confirmed: ${"detail" in e ? e.detail : String(e)}`), false))
        )

      return {
        evictEverywhere: (cid, local) =>
          Effect.gen(function* () {
            const here = yield* local(Effect.mapError(index.pinned, () => new PinListUnavailable())).pipe(
              Effect.map((evicted) => (evicted ? ("evicted" as const) : ("stayed" as const))),
              // without the pin list no node can tell which blocks other pins still need
              Effect.catchAll((e) => Effect.succeed(e instanceof PinListUnavailable ? ("unknown" as const) : ("stayed" as const)))
            )
            if (here === "unknown") return "skipped" as const
            // every node that may hold the blocks, live or not: a dead one's silence leaves it partial
            const nodes = yield* membership.known
            const there = yield* Effect.forEach(nodes, (node) => askPeer(node.id, cid), { concurrency: 8 })
            return here === "evicted" && there.every((ok) => ok) ? ("true" as const) : ("partial" as const)
          })
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    Evictor.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          ContentIndex.Test,
          Coordination.Test,
          Membership.Test
        )
      )
    )
  )
}
