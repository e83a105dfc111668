/**
 * A node's guardian (docs/vault.md, "Guardians"): what it checks before it stores or gives out its
 * share. It checks the client's signature again rather than trusting the gateway that called it,
 * so one gateway cannot write or read an identity's shares on the others without its key, and it
 * honours each pull signature once (its own store keeps the spent ones), so a pull replayed
 * through any gateway finds every guardian refusing it.
 */
import { isFresh, PULL_WINDOW_SECONDS, pullMessage, pushMessage, signatureProblem } from "../../domain/VaultRules.js"
import type { ShareStore, ShareWrite, StoredShare } from "./ShareStore.js"

export interface ShareOffer {
  readonly namespace: string
  readonly identity: string
  readonly version: number
  readonly threshold: number
  readonly digest: string
  readonly share: Uint8Array
  readonly pubkey: string
  readonly signature: string
}

export interface ShareAsk {
  readonly namespace: string
  readonly identity: string
  readonly timestamp: number
  readonly pubkey: string
  readonly signature: string
}

export type PutOutcome =
  | { readonly outcome: "stored" }
  | { readonly outcome: "conflict"; readonly version: number }
  | { readonly outcome: "refused"; readonly reason: string }

export type GetOutcome =
  | ({ readonly outcome: "found" } & StoredShare)
  | { readonly outcome: "none" }
  | { readonly outcome: "refused"; readonly reason: string; readonly replayed: boolean }

/** A put whose store failed (a full disk): the caller answers as its store failing. */
export interface StoreFailed {
  readonly outcome: "store failed"
  readonly error: unknown
}

export interface Guardian {
  /**
   * `verified`: the signature was checked in this process a moment ago (the vault's own call to
   * this node's guardian), so it is not checked twice; a call from another node always is.
   */
  readonly put: (offer: ShareOffer, verified?: boolean) => PutOutcome
  /**
   * `put` with the store's write joined to the others of this event-loop turn: one transaction,
   * one flush to disk for all of them, made once the turn's requests are read and the calls to
   * the other nodes have left (the flush holds the event loop). `done` gets the outcome once the
   * transaction has committed, or at once when the offer is refused before any write.
   */
  readonly putSoon: (offer: ShareOffer, verified: boolean, done: (outcome: PutOutcome | StoreFailed) => void) => void
  readonly get: (ask: ShareAsk, verified?: boolean) => GetOutcome
  readonly count: (namespace: string) => number
  readonly drop: (namespace: string) => number
}

/** A share is at least one byte and its x, which is never 0. */
const wellFormed = (share: Uint8Array): boolean => share.length >= 2 && share[share.length - 1] !== 0

/**
 * `maxShareBytes`: the largest share the vault makes (the envelope cap plus its x byte); a longer
 * one is refused before it is written.
 */
export const makeGuardian = (store: ShareStore, now: () => number = Date.now, maxShareBytes = Number.MAX_SAFE_INTEGER): Guardian => {
  /** Why `offer` is refused before any write, or undefined. */
  const refusal = (offer: ShareOffer, verified: boolean): PutOutcome | undefined => {
    const problem = verified ? undefined : signatureProblem(offer, pushMessage(offer.identity, offer.version, offer.digest))
    if (problem !== undefined) return { outcome: "refused", reason: problem.reason }
    if (!wellFormed(offer.share)) return { outcome: "refused", reason: "the share is malformed" }
    if (offer.share.length > maxShareBytes) return { outcome: "refused", reason: `the share is over the ${maxShareBytes} bytes this vault makes` }
    return undefined
  }
  let queued: Array<{ readonly write: ShareWrite; readonly done: (outcome: PutOutcome | StoreFailed) => void }> = []
  const flush = () => {
    const batch = queued
    queued = []
    let outcomes: ReadonlyArray<PutOutcome | { readonly outcome: "failed"; readonly error: unknown }>
    try {
      outcomes = store.writeMany(batch.map((q) => q.write), now())
    } catch (error) {
      for (const q of batch) q.done({ outcome: "store failed", error })
      return
    }
    batch.forEach((q, i) => {
      const outcome = outcomes[i]!
      q.done(outcome.outcome === "failed" ? { outcome: "store failed", error: outcome.error } : outcome)
    })
  }
  return {
    put: (offer, verified = false) => refusal(offer, verified) ?? store.write(offer.namespace, offer.identity, offer, now()),
    putSoon: (offer, verified, done) => {
      const refused = refusal(offer, verified)
      if (refused !== undefined) return done(refused)
      queued.push({ write: { namespace: offer.namespace, identity: offer.identity, share: offer }, done })
      if (queued.length === 1) setImmediate(flush)
    },
    get: (ask, verified = false) => {
      const problem = verified ? undefined : signatureProblem(ask, pullMessage(ask.identity, ask.timestamp))
      if (problem !== undefined) return { outcome: "refused", reason: problem.reason, replayed: false }
      const at = now()
      if (!isFresh(ask.timestamp, at)) {
        return { outcome: "refused", reason: `the timestamp is more than ${PULL_WINDOW_SECONDS} s from this node's clock`, replayed: false }
      }
      // kept until the timestamp leaves the window, after which freshness refuses it anyway
      if (!store.spend(`pull:${ask.signature}`, (ask.timestamp + PULL_WINDOW_SECONDS + 1) * 1000)) {
        return { outcome: "refused", reason: "this pull signature was used before", replayed: true }
      }
      const held = store.read(ask.namespace, ask.identity)
      return held === undefined ? { outcome: "none" } : { outcome: "found", ...held }
    },
    count: (namespace) => store.count(namespace),
    drop: (namespace) => store.drop(namespace)
  }
}
