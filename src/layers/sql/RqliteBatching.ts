/**
 * Which statements of a namespace's rqlite engine are sent in batches (Batcher.ts), from how
 * long each text last ran, and what a failed batch means for its statements.
 */
import { StoreError } from "../registry/RegistryStore.js"
import type { RqliteResult } from "./RqliteAnswer.js"
import { unavailable } from "./RqliteExchange.js"
import type { StatementOp } from "./SqliteProtocol.js"
import type { SqlRefused } from "./SqlRefused.js"

/** Statement texts remembered per store (run times here, read wrappings in RqliteReads.ts); a text longer than this is not. */
export const MAX_REMEMBERED = 512
export const MAX_REMEMBERED_SQL = 16 * 1024

/**
 * Batching (Batcher.ts). A statement joins a batch only when its text last ran in at most
 * FAST_SECONDS, and a batch holds statements whose last runs add up to at most a tenth of the
 * statement timeout (and BATCH_SECONDS): rqlite stops a request's statements at one deadline
 * counted from its start, so a statement in a batch keeps nearly all of its own timeout, and a
 * slow statement never holds up others. Texts not seen yet, slow ones and writes that return rows
 * go alone.
 */
const FAST_SECONDS = 0.002
const BATCH_SECONDS = 0.05
export const BATCH_ITEMS = 128
/** Statement text in one batch, in characters (its arguments included). */
const BATCH_CHARS = 1024 * 1024
/** Batched requests out at once, per store; more gather until one answers. */
export const BATCH_IN_FLIGHT = 2

/** A write that answers rows: its answer's size is the tenant's, so it is not mixed with others'. */
export const returnsRows = (sql: string): boolean => /returning/i.test(sql)

/** The batch is not answered as a whole: each of its statements is sent again alone. */
export const ALONE = Symbol("alone")

/** A statement waiting for its batch: the text sent, and the statement's own text for the bookkeeping. */
export interface BatchItem {
  readonly sql: string
  readonly text: string
}

/**
 * A failed batch: each statement alone when one of them may be the cause, else every
 * statement's refusal. rqlite refuses a request it cannot parse or rewrite (reason
 * `statement`) before running any of it, so even writes are sent again then; an answer over
 * the size limit comes after the writes were applied, so only reads are.
 */
export const batchFailure = (size: number, kind: StatementOp["kind"]) => (e: StoreError | SqlRefused): SqlRefused | typeof ALONE =>
  !(e instanceof StoreError)
    ? e
    : size > 1 && (e.reason === "statement" || (e.reason === "too_large" && kind === "read"))
      ? ALONE
      : unavailable(e)

export interface RunTimes {
  /** Notes how long `sql` ran, from its result's `time`. */
  readonly ranFor: (sql: string, r: RqliteResult | undefined) => void
  /** A text stopped at the timeout goes alone until it runs fast alone again. */
  readonly ranSlow: (sql: string) => void
  /** Whether a statement of this text joins a batch. */
  readonly batchable: (sql: string) => boolean
  /** A statement's share of a batch: its run time against the batch's, its text against the batch's. */
  readonly weigh: (item: BatchItem) => number
}

/** The run times of one store's statements, against its statement timeout. */
export const runTimes = (timeoutMs: number, stopsStatements: boolean): RunTimes => {
  /** How long each text last ran, in seconds; a text not here has not run alone yet. */
  const lastRun = new Map<string, number>()
  const ranFor = (sql: string, r: RqliteResult | undefined): void => {
    if (r?.time === undefined || sql.length > MAX_REMEMBERED_SQL) return
    if (lastRun.size >= MAX_REMEMBERED && !lastRun.has(sql)) lastRun.clear()
    lastRun.set(sql, r.time)
  }
  const ranSlow = (sql: string): void => {
    if (lastRun.has(sql)) lastRun.set(sql, Number.POSITIVE_INFINITY)
  }
  // without a statement timeout (none set, or longer than rqlite takes) only the cap applies
  const batchSeconds = stopsStatements ? Math.min(BATCH_SECONDS, timeoutMs / 10_000) : BATCH_SECONDS
  const batchable = (sql: string): boolean => {
    const seconds = lastRun.get(sql)
    return seconds !== undefined && seconds <= FAST_SECONDS && seconds <= batchSeconds
  }
  const weigh = (item: BatchItem) =>
    Math.max((lastRun.get(item.sql) ?? FAST_SECONDS) / batchSeconds, item.text.length / BATCH_CHARS)
  return { ranFor, ranSlow, batchable, weigh }
}
