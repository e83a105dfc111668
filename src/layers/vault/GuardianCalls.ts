/**
 * How the vault reaches each node's guardian: this node's in-process (the vault checked the
 * request's signature already, so the guardian does not again), every other node's through its
 * `/v1/internal/vault/*` routes, signed for that node. A share goes as bytes both ways (its order
 * or its facts in a header, VaultWire.ts); the count and the drop through the one internal
 * client. A guardian that does not answer in time, or answers anything but its outcome, is
 * `failed` with a generic reason, never an error: the vault counts outcomes against its quorum.
 */
import { Effect, Schema } from "effect"
import {
  SHARE_BYTES_TYPE,
  SHARE_FOUND_HEADER,
  ShareCount,
  ShareFound,
  ShareGetAnswer,
  ShareGetOrder,
  SharePutAnswer,
  SharePutEnvelope,
  SharesDropped
} from "../../api/groups/VaultWire.js"
import type { NamespaceName } from "../../domain/Names.js"
import type { MembershipService } from "../cluster/Membership.js"
import type { CoordinationService, PeerAnswer, PeerUnreachable } from "../coordination/Coordination.js"
import { type InternalClient, internalPath } from "../coordination/InternalClient.js"
import type { PeerBytesAnswer } from "../coordination/PeerHttp.js"
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
  readonly coordination: CoordinationService
  readonly timeoutMs: number
}): GuardianCalls => {
  const { self, guardian, membership, internal, coordination } = deps
  const timeout = `${deps.timeoutMs} millis` as const
  let kept: { readonly at: number; readonly members: Members } | undefined

  const readMembers = Effect.map(membership.nodes, (nodes): Members => {
    // a member: registered and not retired; a seed that never registered holds nothing
    const current = nodes.filter((n) => n.status === "active" || n.status === "inactive" || n.status === "stopped")
    const all = [...new Set([self, ...current.map((n) => n.id)])].sort()
    // live: active, and with an address to call it at (a node that has not listened yet has none)
    const live = all.filter((id) => id === self || current.some((n) => n.id === id && n.status === "active" && n.internalUrl !== ""))
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

  /** A call that got no answer: the caller sees a generic reason, the node's log says why. */
  const unreachable = (e: PeerUnreachable): Effect.Effect<Failed> =>
    Effect.as(Effect.logWarning(`vault: node ${e.nodeId} did not answer: ${e.detail}`), { outcome: "failed" as const, reason: "unreachable" })

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
        Effect.catchAll(unreachable)
      )
  }
  const countAnswer = decoded(ShareCount)
  const dropAnswer = decoded(SharesDropped)
  // a namespace the gateway admitted is a valid name
  const ns = (namespace: string) => namespace as NamespaceName

  const putPath = internalPath("vaultSharePut")
  const getPath = internalPath("vaultShareGet")
  const encodePut = Schema.encodeSync(SharePutEnvelope)
  const encodeGet = Schema.encodeSync(ShareGetOrder)
  const putAnswer = Schema.decodeUnknownEither(Schema.parseJson(SharePutAnswer))
  const getAnswer = Schema.decodeUnknownEither(Schema.parseJson(ShareGetAnswer))
  const foundFacts = Schema.decodeUnknownEither(Schema.parseJson(ShareFound))
  /** A peer's bytes answer as `read` makes it out, else a generic reason. */
  const bytesAnswer = <A,>(call: Effect.Effect<PeerBytesAnswer, PeerUnreachable>, read: (answer: PeerBytesAnswer) => A | undefined): Effect.Effect<A | Failed> =>
    call.pipe(
      Effect.map((answer): A | Failed => {
        if (answer.status !== 200) return { outcome: "failed", reason: `answered ${answer.status}` }
        return read(answer) ?? { outcome: "failed", reason: "answered something else" }
      }),
      Effect.catchAll(unreachable)
    )
  const json = <A,>(decode: (text: string) => { readonly _tag: "Left" } | { readonly _tag: "Right"; readonly right: A }) => (answer: PeerBytesAnswer): A | undefined => {
    if (answer.headers["content-type"]?.startsWith("application/json") !== true) return undefined
    const value = decode(answer.bytes.toString("utf8"))
    return value._tag === "Right" ? value.right : undefined
  }
  const putJson = json(putAnswer)
  const getJson = json(getAnswer)
  /** A get's answer: a share's bytes with its facts in a header, or an outcome in JSON. */
  const readGet = (answer: PeerBytesAnswer): GetOutcome | undefined => {
    if (answer.headers["content-type"] !== SHARE_BYTES_TYPE) return getJson(answer)
    const facts = answer.headers[SHARE_FOUND_HEADER]
    const found = typeof facts === "string" ? foundFacts(facts) : undefined
    return found?._tag === "Right" ? { outcome: "found", ...found.right, share: new Uint8Array(answer.bytes.buffer, answer.bytes.byteOffset, answer.bytes.byteLength) } : undefined
  }

  /**
   * This node's guardian, its write joined to the turn's others (Guardian.ts `putSoon`), made
   * once the calls to the others are on their way: its flush to disk holds the event loop, which
   * would otherwise hold back those calls too.
   */
  const putHere = (offer: ShareOffer): Effect.Effect<PutOutcome | Failed> =>
    Effect.async<PutOutcome | Failed>((resume) =>
      guardian.putSoon(offer, true, (outcome) =>
        resume(
          outcome.outcome === "store failed"
            ? Effect.as(Effect.logWarning(`vault: this node's share store failed: ${String(outcome.error)}`), { outcome: "failed" as const, reason: "its store failed" })
            : Effect.succeed(outcome)
        )
      )
    )
  /** This node's guardian, after the calls to the others are on their way (see `putHere`). */
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
    put: (node, offer) => {
      if (node === self) return putHere(offer)
      const { namespace, identity, version, threshold, digest, pubkey, signature } = offer
      const envelope = encodePut({ namespace: ns(namespace), identity, version, threshold, digest, pubkey, signature })
      return bytesAnswer(coordination.postBytes(node, putPath, { envelope, bytes: offer.share }, timeout), putJson)
    },
    get: (node, ask) =>
      node === self
        ? afterSends(() => guardian.get(ask, true))
        : bytesAnswer(coordination.postBytes(node, getPath, { json: encodeGet({ ...ask, namespace: ns(ask.namespace) }) }, timeout), readGet),
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
