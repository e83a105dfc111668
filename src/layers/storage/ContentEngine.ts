/**
 * Where content bytes live: the capability behind the storage routes. The embedded engine keeps
 * blocks on local disk; the cluster engine is Kubo plus IPFS Cluster. Both import with the
 * IPIP-499 `unixfs-v1-2025` profile, so the same bytes get the same CID on either.
 *
 * The engine knows blocks and pins, never namespaces: who holds what, and whether an unpin
 * removes the pin, is the storage service's business (`ContentIndex`).
 */
import { Context, Data, Duration, type Effect, type Scope } from "effect"
import type { ReclaimBusy } from "./ReclaimLock.js"
import { PIN_STATUSES, type PinStatusName } from "../../domain/Limits.js"

export { PIN_STATUSES, type PinStatusName }

/** The engine's view of a pin, aggregated over the peers it is allocated to. */
export interface PinState {
  readonly status: PinStatusName
  readonly replicationMin: number
  readonly replicationMax: number
  /** Peers holding it pinned now. */
  readonly replicationFactor: number
  /** Peers the pin is allocated to. */
  readonly peers: ReadonlyArray<string>
  /** Why a peer reports `error`, else "". */
  readonly error: string
}

export interface Imported {
  readonly cid: string
  /** The file's bytes (not counting the DAG's own nodes). */
  readonly size: number
}

/**
 * The engine could not do it. `unavailable` is retryable (engine down or past its deadline);
 * `missing` means the content is not here; `failed` is anything else. `detail` is for the log.
 */
export class ContentEngineError extends Data.TaggedError("ContentEngineError")<{
  readonly reason: "unavailable" | "missing" | "failed"
  readonly detail: string
  /** What `add`'s byte source threw, when that is what stopped it. */
  readonly cause?: unknown
}> {}

export interface ContentEngineService {
  readonly kind: "embedded" | "kubo"
  /**
   * Imports a byte stream and answers its CID. The blocks are written as they arrive. They are
   * protected from the sweep until the scope closes: the caller records its pin first.
   * An error thrown by `bytes` aborts the import and is passed through as the failure's cause.
   */
  readonly add: (bytes: AsyncIterable<Uint8Array>) => Effect.Effect<Imported, ContentEngineError, Scope.Scope>
  /** Byte size of the file behind a CID when this node holds its root, else undefined. */
  readonly size: (cid: string) => Effect.Effect<number | undefined, ContentEngineError>
  /** The file's bytes from `offset`, `length` of them; errors surface from the iterator. */
  readonly read: (cid: string, offset: number, length: number) => AsyncIterable<Uint8Array>
  /** Makes the content a pin (cluster-wide on the cluster engine). `missing` when it cannot be found. */
  readonly pin: (cid: string, name: string) => Effect.Effect<void, ContentEngineError>
  /** Removes the pin; the blocks stay until a sweep or an eviction. Unpinning an absent pin succeeds. */
  readonly unpin: (cid: string) => Effect.Effect<void, ContentEngineError>
  readonly status: (cid: string) => Effect.Effect<PinState, ContentEngineError>
  /**
   * Removes this node's blocks of `cid` now, keeping blocks that any of `keep` (the CIDs still
   * pinned, read once no import is in progress) reaches. True when every such block is gone from
   * this node; false when `cid` itself is pinned again. `ReclaimBusy` when an import in progress
   * held the node past `EVICT_WAIT`: nothing was removed.
   */
  readonly evict: <E>(cid: string, keep: Effect.Effect<ReadonlyArray<string>, E>) => Effect.Effect<boolean, ContentEngineError | E | ReclaimBusy>
  /** Reclaims blocks that none of `keep` (read once no import is in progress) reaches. */
  readonly sweep: <E>(keep: Effect.Effect<ReadonlyArray<string>, E>) => Effect.Effect<{ readonly removed: number }, ContentEngineError | E>
}

/**
 * How long an eviction waits for imports in progress to finish. Under the coordination timeout
 * (10 s), so a peer answers "not confirmed" itself instead of the asking node giving up on it.
 */
export const EVICT_WAIT = Duration.seconds(8)

export class ContentEngine extends Context.Tag("portico/ContentEngine")<ContentEngine, ContentEngineService>() {}
