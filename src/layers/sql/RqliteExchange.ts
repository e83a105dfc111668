/**
 * The HTTP exchange of a namespace's rqlite engine with its cluster, over rqlite's HTTP API:
 * reads on `/db/query`, writes on `/db/execute`, a transaction as one `/db/request?transaction` (a single
 * Raft entry run in one SQLite transaction: rqlite stops at the first failing statement and rolls
 * all back), export from `/db/backup`, import through `/db/load`.
 *
 * Every statement carries rqlite's `db_timeout`, the statement timeout of the embedded engine:
 * rqlite interrupts SQLite past it (a write too, on the leader and again if the Raft log is
 * replayed) and answers the statement's result with an error instead of rows.
 *
 * Also here: how rqlite's refusals, and a statement's own failure, become the route's refusals.
 */
import { Duration, Effect } from "effect"
import { Code } from "../../domain/Errors.js"
import { stringifyExactJson } from "../../domain/ExactJson.js"
import { StoreError } from "../registry/RegistryStore.js"
import { rqliteHttp, type RqliteHttp, type RqliteHttpConfig } from "../registry/RqliteHttp.js"
import { rqliteResults, type RqliteResult } from "./RqliteAnswer.js"
import type { StatementOp } from "./SqliteProtocol.js"
import { refuse, statementTimedOut, type SqlRefused } from "./SqlRefused.js"

/** The transport's failure as the route answers it. */
export const unavailable = (e: StoreError): SqlRefused =>
  e.reason === "statement"
    ? refuse(Code.SQL_ERROR, e.detail.replace(/^rqlite rejected the request: /, ""))
    : e.reason === "too_large"
      ? refuse(Code.PAYLOAD_TOO_LARGE, "the answer is over the result size limit", "select fewer rows or columns, or page with LIMIT and OFFSET")
      : refuse(Code.UNAVAILABLE, "the SQL store is unavailable (no leader or past its deadline)", "retry shortly", 1)

/**
 * A result error from `db_timeout`: rqlite's own texts (ErrQueryTimeout, ErrExecuteTimeout in
 * its db/db.go), and SQLite's for an interrupt, which only `db_timeout` causes in rqlite.
 */
export const TIMED_OUT: ReadonlySet<string> = new Set(["query timeout", "execute timeout", "interrupted"])

/**
 * The HTTP deadline sits this far past the statement timeout, so that rqlite's own answer for a
 * stopped statement (a 400 `STATEMENT_TIMEOUT`) arrives before the gateway gives up on it (503).
 */
const ANSWER_GRACE_MS = 5_000

/** Go's time.ParseDuration overflows past ~292 years; longer is no timeout at all. */
const MAX_DB_TIMEOUT_MS = 9_000_000_000_000

// wide integers go to rqlite as JSON integers, digit for digit (rqlite binds them as int64)
export const statementText = (op: StatementOp): string => stringifyExactJson([op.sql, ...op.params])
const body = (ops: ReadonlyArray<StatementOp>) => `[${ops.map(statementText).join(",")}]`

/** The paths of rqlite's HTTP API the engine posts to, each with the statement timeout. */
export interface RqlitePaths {
  /** Reads, at weak consistency, each result with its run time. */
  readonly query: string
  /** One write alone, with its run time. */
  readonly execute: string
  /** Writes batched as one transaction, each with its run time. */
  readonly executeBatch: string
  /** A caller's transaction of writes. */
  readonly executeTx: string
  /** A caller's transaction that answers rows. */
  readonly requestTx: string
}

export interface RqliteExchange {
  readonly http: RqliteHttp
  /** The statement timeout, in milliseconds. */
  readonly timeoutMs: number
  /** Whether rqlite stops statements at `timeoutMs` (`db_timeout`): set, and short enough for Go. */
  readonly stopsStatements: boolean
  readonly paths: RqlitePaths
  /** A statement's own failure: stopped at the timeout, as the embedded engine says it, or SQLite's. */
  readonly failure: (error: string, at: number | undefined) => SqlRefused
  /** The refusal for the first failing op of a transaction's results, if any op failed. */
  readonly firstFailure: (results: ReadonlyArray<RqliteResult>) => SqlRefused | undefined
  /** The results of a request's statements; the transport's failure as it came. */
  readonly exchange: (path: string, text: string, idempotent: boolean) => Effect.Effect<ReadonlyArray<RqliteResult>, StoreError | SqlRefused>
  /** `exchange` with the transport's failure as the route answers it. */
  readonly answered: (path: string, text: string, idempotent: boolean) => Effect.Effect<ReadonlyArray<RqliteResult>, SqlRefused>
  /** `answered` for the statements `ops`. */
  readonly post: (path: string, ops: ReadonlyArray<StatementOp>, idempotent: boolean) => Effect.Effect<ReadonlyArray<RqliteResult>, SqlRefused>
  /** Streams to or from rqlite outside JSON; `what` names the step for the message. */
  readonly transfer: (what: string, run: (signal: AbortSignal) => Promise<void>) => Effect.Effect<void, SqlRefused>
  readonly unexpected: SqlRefused
  readonly partial: SqlRefused
  readonly noResult: SqlRefused
}

/** `config.timeout` is the statement timeout (default 10 s); each HTTP attempt gets 5 s more. */
export const rqliteExchange = (config: RqliteHttpConfig): RqliteExchange => {
  const timeoutMs = Duration.toMillis(Duration.decode(config.timeout ?? Duration.seconds(10)))
  const stopsStatements = timeoutMs > 0 && timeoutMs <= MAX_DB_TIMEOUT_MS
  const http = rqliteHttp({
    ...config,
    timeout: Duration.millis(timeoutMs + ANSWER_GRACE_MS),
    // an attempt still running at the deadline is not a statement rqlite would stop: a retry
    // would only wait as long again
    retryPastDeadline: false
  })
  // Built once: the transport caches request options by URL. Whole milliseconds, which Go's
  // time.ParseDuration reads ("1500ms"); rqlite refuses a value it cannot parse with a 400.
  const dbTimeout = stopsStatements ? `db_timeout=${Math.ceil(timeoutMs)}ms` : ""
  const withTimeout = (path: string) => (dbTimeout === "" ? path : `${path}${path.includes("?") ? "&" : "?"}${dbTimeout}`)
  // `timings`: each result says how long its statement ran (see FAST_SECONDS in RqliteBatching.ts). `noparse` on
  // reads: rqlite's own SQL parser, there to pin RANDOM() and the time functions of a write
  // for every node, has nothing to pin in a read and cost ~15% of a point read's time in
  // rqlited; SQLite then runs the text as the embedded engine does.
  const QUERY = withTimeout("/db/query?level=weak&timings&noparse")
  const EXECUTE = withTimeout("/db/execute?timings")
  const EXECUTE_BATCH = withTimeout("/db/execute?transaction&timings")
  const EXECUTE_TX = withTimeout("/db/execute?transaction")
  const REQUEST_TX = withTimeout("/db/request?transaction")

  const failure = (error: string, at: number | undefined): SqlRefused =>
    TIMED_OUT.has(error)
      ? statementTimedOut(timeoutMs)
      : at === undefined
        ? refuse(Code.SQL_ERROR, error)
        : refuse(Code.TRANSACTION_FAILED, `transaction failed at op ${at}: ${error}`, "nothing was applied")

  const firstFailure = (results: ReadonlyArray<RqliteResult>): SqlRefused | undefined => {
    const failed = results.findIndex((r) => r.error !== undefined)
    const error = results[failed]?.error
    return error === undefined ? undefined : failure(error, failed)
  }
  // Whole-database transfers get at least 5 minutes. Node cannot hold a timer past 2^31-1 ms
  // (it fires at once, and AbortSignal.timeout refuses an infinite one): no deadline then.
  const transferMs = Math.max(timeoutMs, 300_000)
  const transferTimeout = Number.isFinite(transferMs) && transferMs <= 2_147_483_647 ? transferMs : undefined

  const unexpected = refuse(Code.UNAVAILABLE, "the SQL store answered unexpectedly", "retry shortly", 1)
  const partial = refuse(Code.UNAVAILABLE, "the SQL store returned a partial answer", "retry shortly", 1)
  const exchange = (path: string, text: string, idempotent: boolean): Effect.Effect<ReadonlyArray<RqliteResult>, StoreError | SqlRefused> =>
    Effect.flatMap(http.post(path, text, idempotent), (answer) => {
      const results = rqliteResults(answer)
      return results === undefined ? Effect.fail(unexpected) : Effect.succeed(results)
    })
  const answered = (path: string, text: string, idempotent: boolean): Effect.Effect<ReadonlyArray<RqliteResult>, SqlRefused> =>
    Effect.mapError(exchange(path, text, idempotent), (e) => (e instanceof StoreError ? unavailable(e) : e))
  const post = (path: string, ops: ReadonlyArray<StatementOp>, idempotent: boolean) => answered(path, body(ops), idempotent)
  const noResult = refuse(Code.UNAVAILABLE, "the SQL store returned no result", "retry shortly", 1)
  const transfer = (what: string, run: (signal: AbortSignal) => Promise<void>) =>
    Effect.tryPromise({
      try: (signal) => run(transferTimeout === undefined ? signal : AbortSignal.any([signal, AbortSignal.timeout(transferTimeout)])),
      catch: (e) => refuse(Code.UNAVAILABLE, `the SQL store could not ${what}: ${e instanceof Error ? e.message : String(e)}`, "retry shortly", 5)
    })

  return {
    http,
    timeoutMs,
    stopsStatements,
    paths: { query: QUERY, execute: EXECUTE, executeBatch: EXECUTE_BATCH, executeTx: EXECUTE_TX, requestTx: REQUEST_TX },
    failure,
    firstFailure,
    exchange,
    answered,
    post,
    transfer,
    unexpected,
    partial,
    noResult
  }
}
