/**
 * A node's guardian (docs/vault.md, "Guardians"): what it checks before it stores or gives out its
 * share. It checks the client's signature again rather than trusting the gateway that called it,
 * so one gateway cannot write or read an identity's shares on the others without its key, and it
 * honours each pull signature once (its own store keeps the spent ones), so a pull replayed
 * through any gateway finds every guardian refusing it.
 */
import { isFresh, PULL_WINDOW_SECONDS, pullMessage, pushMessage, signatureProblem } from "../../domain/VaultRules.js"
import type { ShareStore, StoredShare } from "./ShareStore.js"

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

export interface Guardian {
  /**
   * `verified`: the signature was checked in this process a moment ago (the vault's own call to
   * this node's guardian), so it is not checked twice; a call from another node always is.
   */
  readonly put: (offer: ShareOffer, verified?: boolean) => PutOutcome
  readonly get: (ask: ShareAsk, verified?: boolean) => GetOutcome
  readonly count: (namespace: string) => number
  readonly drop: (namespace: string) => number
}

/** A share is at least one byte and its x, which is never 0. */
const wellFormed = (share: Uint8Array): boolean => share.length >= 2 && share[share.length - 1] !== 0

export const makeGuardian = (store: ShareStore, now: () => number = Date.now): Guardian => ({
  put: (offer, verified = false) => {
    const problem = verified ? undefined : signatureProblem(offer, pushMessage(offer.identity, offer.version, offer.digest))
    if (problem !== undefined) return { outcome: "refused", reason: problem.reason }
    if (!wellFormed(offer.share)) return { outcome: "refused", reason: "the share is malformed" }
    return store.write(offer.namespace, offer.identity, offer, now())
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
})
