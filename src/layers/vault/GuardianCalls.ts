/**
 * How the vault reaches each node's guardian: this node's in-process (the vault checked the
 * request's signature already, so the guardian does not again), every other node's through its
 * `/v1/internal/vault/*` routes (the one internal client, signed for that node). A guardian
 * that does not answer in time, or answers anything but its outcome, is `failed` with a generic
 * reason, never an error: the vault counts outcomes against its quorum.
 */
import { Effect, Schema } from "effect"
import { ShareCount, ShareGetAnswer, SharePutAnswer, SharesDropped } from "../../api/groups/VaultWire.js"
import type { NamespaceName } from "../../domain/Names.js"
import type { MembershipService } from "../cluster/Membership.js"
import type { PeerAnswer, PeerUnreachable } from "../coordination/Coordination.js"
import type { InternalClient } from "../coordination/InternalClient.js"
import { refuse, type Refused } from "../Refused.js"
import type { GetOutcome, Guardian, PutOutcome, ShareAsk, ShareOffer } from "./Guardian.js"

/** The cluster's guardians: every node still a member (sorted by id), and those live now. */
export interface Members {
  readonly all: ReadonlyArray<string>
  readonly live: ReadonlyArray<string>
}

type Failed = { readonly outcome: "failed"; readonly reason: string }

export interface GuardianCalls {
  readonly members: Effect.Effect<Members, Refused<"UNAVAILABLE">>
  readonly put: (node: string, offer: ShareOffer) => Effect.Effect<PutOutcome | Failed>
  readonly get: (node: string, ask: ShareAsk) => Effect.Effect<GetOutcome | Failed>
  /** The namespace's shares on `node`; null when it did not answer. */
  readonly count: (node: string, namespace: string) => Effect.Effect<number | null>
  readonly dropEverywhere: (namespace: string) => Effect.Effect<void, string>
}

/** How long the member list is kept: a push or pull in a burst reads the registry once. */
const MEMBERS_KEPT_MS = 1_000

export const makeGuardianCalls = (deps: {
  readonly self: string
  readonly guardian: Guardian
  readonly membership: MembershipService
  readonly internal: InternalClient
  readonly timeoutMs: number
}): GuardianCalls => {
  const { self, guardian, membership, internal } = deps
  const timeout = `${deps.timeoutMs} millis` as const
  let kept: { readonly at: number; readonly members: Members } | undefined

  const readMembers = Effect.map(membership.nodes, (nodes): Members => {
    // a member: registered and not retired; a seed that never registered holds nothing
    const current = nodes.filter((n) => n.status === "active" || n.status === "inactive" || n.status === "stopped")
    const all = [...new Set([self, ...current.map((n) => n.id)])].sort()
    const live = all.filter((id) => id === self || current.some((n) => n.id === id && n.status === "active"))
    return { all, live }
  })
  const members = Effect.suspend(() =>
    kept !== undefined && Date.now() - kept.at < MEMBERS_KEPT_MS
      ? Effect.succeed(kept.members)
      : readMembers.pipe(
          Effect.tap((m) => Effect.sync(() => (kept = { at: Date.now(), members: m }))),
          Effect.mapError(() => refuse("UNAVAILABLE", "the cluster's node list could not be read", "retry shortly", 5))
        )
  )

  /** A peer's answer decoded as `schema`, else a generic reason. */
  const decoded = <A, I>(schema: Schema.Schema<A, I>) => {
    const decode = Schema.decodeUnknownEither(Schema.parseJson(schema))
    return (call: Effect.Effect<PeerAnswer, PeerUnreachable>): Effect.Effect<A | Failed> =>
      call.pipe(
        Effect.map((answer) => {
          if (answer.status !== 200) return { outcome: "failed" as const, reason: `answered ${answer.status}` }
          const value = decode(answer.text)
          return value._tag === "Right" ? value.right : { outcome: "failed" as const, reason: "answered something else" }
        }),
        Effect.catchAll(() => Effect.succeed({ outcome: "failed" as const, reason: "unreachable" }))
      )
  }
  const putAnswer = decoded(SharePutAnswer)
  const getAnswer = decoded(ShareGetAnswer)
  const countAnswer = decoded(ShareCount)
  const dropAnswer = decoded(SharesDropped)
  // a namespace the gateway admitted is a valid name
  const ns = (namespace: string) => namespace as NamespaceName

  /**
   * This node's guardian, after the calls to the others are on their way: its share write waits
   * for the disk (synchronous SQLite), and the event loop it holds would otherwise hold back
   * those calls too.
   */
  const afterSends = <A,>(run: () => A): Effect.Effect<A | Failed> =>
    Effect.async<A | Failed>((resume) => void setImmediate(() => resume(local(run))))

  /** This node's store, whose failure (a full disk) is this node failing, as a peer's would be. */
  const local = <A,>(run: () => A): Effect.Effect<A | Failed> =>
    Effect.catchAll(
      Effect.try({ try: run, catch: (e) => e }),
      (e) => Effect.as(Effect.logWarning(`vault: this node's share store failed: ${String(e)}`), { outcome: "failed" as const, reason: "its store failed" })
    )

  return {
    members,
    put: (node, offer) =>
      node === self
        ? afterSends(() => guardian.put(offer, true))
        : putAnswer(
            internal.call(
              node,
              "vaultSharePut",
              { ...offer, namespace: ns(offer.namespace), share: Buffer.from(offer.share.buffer, offer.share.byteOffset, offer.share.byteLength).toString("base64") },
              timeout
            )
          ),
    get: (node, ask) =>
      node === self
        ? afterSends(() => guardian.get(ask, true))
        : Effect.map(getAnswer(internal.call(node, "vaultShareGet", { ...ask, namespace: ns(ask.namespace) }, timeout)), (answer) =>
            answer.outcome === "found" ? { ...answer, share: new Uint8Array(Buffer.from(answer.share, "base64")) } : answer
          ),
    count: (node, namespace) =>
      node === self
        ? Effect.map(local(() => guardian.count(namespace)), (n) => (typeof n === "number" ? n : null))
        : Effect.map(countAnswer(internal.call(node, "vaultShareCount", { namespace: ns(namespace) }, timeout)), (a) => ("shares" in a ? a.shares : null)),
    dropEverywhere: (namespace) =>
      Effect.gen(function* () {
        const here = yield* local(() => guardian.drop(namespace))
        if (typeof here !== "number") return yield* Effect.fail(`vault shares on this node: ${here.reason}`)
        // every node that has not stopped cleanly: a silent one keeps the part owed; one that
        // stopped cleanly drops the shares of namespaces that are gone when it starts again
        // (Vault.ts, `sweepGone`)
        const others = yield* membership.unstopped
        const missed = yield* Effect.forEach(
          others,
          (peer) => Effect.map(dropAnswer(internal.call(peer.id, "vaultShareDrop", { namespace: ns(namespace) }, timeout)), (a) => ("dropped" in a ? [] : [`${peer.id}: ${a.reason}`])),
          { concurrency: 8 }
        )
        if (missed.flat().length > 0) return yield* Effect.fail(`vault shares on ${missed.flat().join("; ")}`)
      })
  }
}
