/**
 * A namespace's cluster SQL store on its own rqlite cluster, over rqlite's HTTP API: reads on
 * `/db/query`, writes on `/db/execute`, a transaction as one `/db/request?transaction` (a single
 * Raft entry run in one SQLite transaction: rqlite stops at the first failing statement and rolls
 * all back), export from `/db/backup`, import through `/db/load`.
 *
 * Every statement carries rqlite's `db_timeout`, the statement timeout of the embedded engine:
 * rqlite interrupts SQLite past it (a write too, on the leader and again if the Raft log is
 * replayed) and answers the statement's result with an error instead of rows.
 *
 * Reads are wrapped so that every cell comes back as the embedded engine answers it (see
 * `cellsSql`): rqlite writes a blob as text, lossily, in any column it types as text or not at
 * all (`SELECT X'00FF'`, an untyped column), and turns values of DATE/DATETIME/TIMESTAMP and
 * BOOLEAN columns into times and booleans. Only the columns of those declared types are
 * touched; the others pass through, where rqlite already answers as stored. Of those, a column
 * rqlite takes for text, where it alters blobs alone, passes through too and is checked for blobs
 * (the read is sent again wrapped when one holds any); the others are wrapped.
 */
import { Cause, Duration, Effect, Either, Exit, Schema } from "effect"
import { createReadStream, createWriteStream } from "node:fs"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { Code } from "../../domain/Errors.js"
import { stringifyExactJson } from "../../domain/ExactJson.js"
import { execAnswer, readAnswer, type AnswerShape, type SqlCell } from "../../domain/SqlAnswers.js"
import { tokenize } from "../../domain/SqlTokens.js"
import { StoreError } from "../registry/RegistryStore.js"
import { rqliteHttp, type RqliteHttpConfig } from "../registry/RqliteHttp.js"
import type { StatementOp } from "./SqliteProtocol.js"
import type { SqlEngine } from "./SqlEngine.js"
import { refuse, statementTimedOut, type SqlRefused } from "./SqlRefused.js"
import { type Batched, batcher } from "./Batcher.js"

// integers past 2^53 arrive as bigint (parseAnswer in RqliteHttp.ts)
const Int = Schema.Union(Schema.Number, Schema.BigIntFromSelf)
const Cell = Schema.Union(Schema.String, Int, Schema.Boolean, Schema.Null)
const Result = Schema.Struct({
  error: Schema.optional(Schema.String),
  columns: Schema.optional(Schema.Array(Schema.String)),
  types: Schema.optional(Schema.Array(Schema.String)),
  values: Schema.optional(Schema.Array(Schema.Array(Cell))),
  rows_affected: Schema.optional(Int),
  last_insert_id: Schema.optional(Int),
  /** Seconds the statement ran (`timings`), for whether it may join a batch. */
  time: Schema.optional(Schema.Number)
})
type Result = typeof Result.Type
export const RqliteAnswer = Schema.Struct({ results: Schema.optional(Schema.Array(Result)) })

const isInt = (v: unknown): boolean => typeof v === "number" || typeof v === "bigint"
const isCell = (v: unknown): boolean => v === null || typeof v === "string" || typeof v === "boolean" || isInt(v)
const optional = (v: unknown, is: (v: unknown) => boolean): boolean => v === undefined || is(v)
const isTexts = (v: unknown): boolean => Array.isArray(v) && v.every((t) => typeof t === "string")
const isRows = (v: unknown): boolean => Array.isArray(v) && v.every((row) => Array.isArray(row) && row.every(isCell))
const isResult = (r: unknown): r is Result => {
  if (typeof r !== "object" || r === null || Array.isArray(r)) return false
  const o = r as Record<string, unknown>
  return (
    optional(o.error, (v) => typeof v === "string") &&
    optional(o.columns, isTexts) &&
    optional(o.types, isTexts) &&
    optional(o.values, isRows) &&
    optional(o.rows_affected, isInt) &&
    optional(o.last_insert_id, isInt) &&
    optional(o.time, (v) => typeof v === "number")
  )
}

/**
 * The results of an answer that `RqliteAnswer` accepts, or undefined. A plain check rather than
 * the schema's decode: every rqlite answer passes here, and ParseResult's walk over a batch's
 * results was ~6% of a batched read's CPU. Members the schema does not name are left in place
 * (nothing reads them). test/layers/sql/RqliteSqlEngine.test.ts holds it to the schema.
 */
export const rqliteResults = (answer: unknown): ReadonlyArray<Result> | undefined => {
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) return undefined
  const results = (answer as { readonly results?: unknown }).results
  if (results === undefined) return []
  return Array.isArray(results) && results.every(isResult) ? (results as ReadonlyArray<Result>) : undefined
}

const unavailable = (e: StoreError): SqlRefused =>
  e.reason === "statement"
    ? refuse(400, Code.SQL_ERROR, e.detail.replace(/^rqlite rejected the request: /, ""))
    : e.reason === "too_large"
      ? refuse(413, Code.PAYLOAD_TOO_LARGE, "the answer is over the result size limit", "select fewer rows or columns, or page with LIMIT and OFFSET")
      : refuse(503, Code.UNAVAILABLE, "the SQL store is unavailable (no leader or past its deadline)", "retry shortly", 1)

/**
 * A result error from `db_timeout`: rqlite's own texts (ErrQueryTimeout, ErrExecuteTimeout in
 * its db/db.go), and SQLite's for an interrupt, which only `db_timeout` causes in rqlite.
 */
const TIMED_OUT: ReadonlySet<string> = new Set(["query timeout", "execute timeout", "interrupted"])

/**
 * The HTTP deadline sits this far past the statement timeout, so that rqlite's own answer for a
 * stopped statement (a 400 `STATEMENT_TIMEOUT`) arrives before the gateway gives up on it (503).
 */
const ANSWER_GRACE_MS = 5_000

/** Go's time.ParseDuration overflows past ~292 years; longer is no timeout at all. */
const MAX_DB_TIMEOUT_MS = 9_000_000_000_000

// A write answers its counts, as on the embedded engine, also with RETURNING: rqlite then sends
// the returned rows instead of counts, so their number is the count (and no last_insert_id).
const resultJson = (r: Result, kind: StatementOp["kind"], shape: AnswerShape): string =>
  kind === "read"
    ? readAnswer(shape, r.columns ?? [], (r.values ?? []) as ReadonlyArray<ReadonlyArray<SqlCell>>)
    : execAnswer(r.rows_affected ?? r.values?.length ?? 0, r.last_insert_id ?? 0)

/**
 * rqlite's column types (a column's declared type, lower-cased) that it takes for text (its
 * isTextType, which also takes an untyped column): there it writes a blob as text, lossily, and
 * every other cell as stored.
 */
const textUnder = (type: string): boolean =>
  type === "" || type === "text" || type === "json" || /^(varchar|varying character|nchar|native character|nvarchar|clob)/.test(type)

/** The types under which its driver turns an integer or text into a time, an integer into a boolean (go-sqlite3's decltype conversions). */
const convertedUnder = (type: string): boolean => type === "boolean" || type === "date" || type === "datetime" || type === "timestamp"

/** The types under which a cell may not come back as stored. */
const alteredUnder = (type: string): boolean => textUnder(type) || convertedUnder(type)

/** Whether rqlite answered every cell as stored: no value in a column whose type alters it. */
const asStored = (r: Result): boolean => {
  const types = r.types ?? []
  const rows = r.values ?? []
  for (let c = 0; c < types.length; c++) {
    if (!alteredUnder(types[c] ?? "")) continue
    for (const row of rows) if (row[c] !== null && row[c] !== undefined) return false
  }
  return true
}

/** The CTE holding the tenant's rows; the guard refuses `portico_` names in tenant SQL. */
const CELLS = `"portico_cells"`

/** The read without its trailing `;`s, to stand in a CTE; undefined for EXPLAIN, which cannot. */
const cteBody = (sql: string): string | undefined => {
  const tokens = tokenize(sql)
  const first = tokens.find((t) => t.kind !== "whitespace")
  if (first === undefined || first.text.toUpperCase() === "EXPLAIN") return undefined
  // up to the last token that is not a comment, a space or a `;`
  let end = tokens.length - 1
  while (end >= 0 && (tokens[end]?.kind === "whitespace" || tokens[end]?.text === ";")) end--
  return sql.slice(0, tokens[end]?.end ?? 0)
}

/**
 * The read as a CTE in which the `wrapped` columns say their cells' storage class: a blob as
 * `b` + hex, text as `t` + text, numbers and NULL as they are, in a column without a declared
 * type, which rqlite leaves alone. The other columns pass through under their declared types,
 * and when any is `checked`, a last column says whether one of those holds a blob in the row.
 * The ORDER BY of the read stands: SQLite keeps a FROM subquery's ORDER BY when the outer query
 * is a plain scan of it. EXPLAIN cannot be a CTE and answers no blobs: undefined.
 *
 * Why `checked`: rqlited prepares every statement twice (once to see it reads only), and in a
 * batch of point reads that is most of its time; a CASE per column costs it about twice what a
 * check of the storage class does (docs/performance.md, eighth session).
 */
const cellsSql = (sql: string, wrapped: ReadonlyArray<boolean>, checked: ReadonlyArray<boolean> = []): string | undefined => {
  const body = cteBody(sql)
  if (wrapped.length === 0 || body === undefined) return undefined
  const names: Array<string> = []
  const cells: Array<string> = []
  const blobs: Array<string> = []
  for (let i = 0; i < wrapped.length; i++) {
    names.push(`c${i}`)
    cells.push(wrapped[i] === true ? `CASE typeof(c${i}) WHEN 'blob' THEN 'b' || hex(c${i}) WHEN 'text' THEN 't' || c${i} ELSE c${i} END AS c${i}` : `c${i}`)
    if (checked[i] === true && wrapped[i] !== true) blobs.push(`typeof(c${i}) = 'blob'`)
  }
  if (blobs.length > 0) cells.push(`${blobs.join(" OR ")} AS "portico_blobs"`)
  return `WITH ${CELLS}(${names.join(",")}) AS (\n${body}\n) SELECT ${cells.join(", ")} FROM ${CELLS}`
}

/**
 * The read's columns with no row: `types` then are the declared types SQLite gives them, which
 * decide rqlite's conversions. (With a row, rqlite fills an untyped column's type in from the
 * first row's value, so an expression answering an integer first looks like an INTEGER column.)
 */
const typesSql = (sql: string): string | undefined => {
  const body = cteBody(sql)
  return body === undefined ? undefined : `WITH ${CELLS} AS (\n${body}\n) SELECT * FROM ${CELLS} LIMIT 0`
}

const allWrapped = (columns: number): ReadonlyArray<boolean> => Array.from({ length: columns }, () => true)

/** A cell of a wrapped column back as stored. */
const storedCell = (cell: typeof Cell.Type): SqlCell =>
  typeof cell !== "string" ? cell : cell.startsWith("b") ? Buffer.from(cell.slice(1), "hex") : cell.slice(1)

/**
 * The rows of a `cellsSql` read: its wrapped columns back as stored, the others as they came, the
 * blob check (`checked`: the last cell) left out. Undefined when a checked column holds a blob.
 */
const storedRows = (r: Result, wrapped: ReadonlyArray<boolean>, checked = false): ReadonlyArray<ReadonlyArray<SqlCell>> | undefined => {
  const rows = r.values ?? []
  const out: Array<ReadonlyArray<SqlCell>> = []
  for (const row of rows) {
    const width = checked ? row.length - 1 : row.length
    // any other answer than 0 (false) is taken for a blob: the read is then sent again wrapped
    if (checked && row[width] !== 0) return undefined
    const cells: Array<SqlCell> = []
    for (let i = 0; i < width; i++) {
      const cell = row[i] as typeof Cell.Type
      cells.push(wrapped[i] === true ? storedCell(cell) : cell)
    }
    out.push(cells)
  }
  return out
}

/** SQLite's answer when a CTE's column count no longer fits the statement in it. */
const COLUMN_COUNT_CHANGED = /^table "?portico_cells"? has \d+ values for \d+ columns$/

/** The schema's version, read before and after a read (`versionOf`). */
const SCHEMA_VERSION: StatementOp = { sql: "SELECT schema_version FROM pragma_schema_version", params: [], kind: "read" }

/** Reads whose wrapping is remembered, per store; a text longer than this is wrapped anew each time. */
const MAX_REMEMBERED = 512
const MAX_REMEMBERED_SQL = 16 * 1024

/** Prepares everywhere, fails when run ("integer overflow"): ends a dry run, rolling it all back. */
const ROLLBACK_SENTINEL: StatementOp = { sql: "SELECT abs(-9223372036854775807 - 1)", params: [], kind: "read" }

// wide integers go to rqlite as JSON integers, digit for digit (rqlite binds them as int64)
const statementText = (op: StatementOp): string => stringifyExactJson([op.sql, ...op.params])
const body = (ops: ReadonlyArray<StatementOp>) => `[${ops.map(statementText).join(",")}]`

/**
 * Batching (Batcher.ts). A statement joins a batch only when its text last ran in at most
 * FAST_SECONDS, and a batch holds statements whose last runs add up to at most a tenth of the
 * statement timeout (and BATCH_SECONDS): rqlite stops a request's statements at one deadline
 * counted from its start, so a statement in a batch keeps nearly all of its own timeout, and a
 * slow statement never holds up others. Texts not seen yet, slow ones and writes that return rows
 * go alone, as before.
 */
const FAST_SECONDS = 0.002
const BATCH_SECONDS = 0.05
const BATCH_ITEMS = 128
/** Statement text in one batch, in characters (its arguments included). */
const BATCH_CHARS = 1024 * 1024
/** Batched requests out at once, per store; more gather until one answers. */
const BATCH_IN_FLIGHT = 2

/** A write that answers rows: its answer's size is the tenant's, so it is not mixed with others'. */
const returnsRows = (sql: string): boolean => /returning/i.test(sql)

/** The batch is not answered as a whole: each of its statements is sent again alone. */
const ALONE = Symbol("alone")

export const RqliteSqlEngine = {
  /** `config.timeout` is the statement timeout (default 10 s); each HTTP attempt gets 5 s more. */
  make: (config: RqliteHttpConfig): SqlEngine => {
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
    // `timings`: each result says how long its statement ran (see FAST_SECONDS). `noparse` on
    // reads: rqlite's own SQL parser, there to pin RANDOM() and the time functions of a write
    // for every node, has nothing to pin in a read and cost ~15% of a point read's time in
    // rqlited; SQLite then runs the text as the embedded engine does.
    const QUERY = withTimeout("/db/query?level=weak&timings&noparse")
    const EXECUTE = withTimeout("/db/execute?timings")
    const EXECUTE_BATCH = withTimeout("/db/execute?transaction&timings")
    const EXECUTE_TX = withTimeout("/db/execute?transaction")
    const REQUEST_TX = withTimeout("/db/request?transaction")

    /** A statement's own failure: stopped at the timeout, as the embedded engine says it, or SQLite's. */
    const failure = (error: string, at: number | undefined): SqlRefused =>
      TIMED_OUT.has(error)
        ? statementTimedOut(timeoutMs)
        : at === undefined
          ? refuse(400, Code.SQL_ERROR, error)
          : refuse(400, Code.TRANSACTION_FAILED, `transaction failed at op ${at}: ${error}`, "nothing was applied")

    /** The refusal for the first failing op of a transaction's results, if any op failed. */
    const firstFailure = (results: ReadonlyArray<Result>): SqlRefused | undefined => {
      const failed = results.findIndex((r) => r.error !== undefined)
      const error = results[failed]?.error
      return error === undefined ? undefined : failure(error, failed)
    }
    // Whole-database transfers get at least 5 minutes. Node cannot hold a timer past 2^31-1 ms
    // (it fires at once, and AbortSignal.timeout refuses an infinite one): no deadline then.
    const transferMs = Math.max(timeoutMs, 300_000)
    const transferTimeout = Number.isFinite(transferMs) && transferMs <= 2_147_483_647 ? transferMs : undefined

    const unexpected = refuse(503, Code.UNAVAILABLE, "the SQL store answered unexpectedly", "retry shortly", 1)
    const partial = refuse(503, Code.UNAVAILABLE, "the SQL store returned a partial answer", "retry shortly", 1)
    /** The results of a request's statements; the transport's failure as it came. */
    const exchange = (path: string, text: string, idempotent: boolean): Effect.Effect<ReadonlyArray<Result>, StoreError | SqlRefused> =>
      Effect.flatMap(http.post(path, text, idempotent), (answer) => {
        const results = rqliteResults(answer)
        return results === undefined ? Effect.fail(unexpected) : Effect.succeed(results)
      })
    /** `exchange` with the transport's failure as the route answers it. */
    const answered = (path: string, text: string, idempotent: boolean): Effect.Effect<ReadonlyArray<Result>, SqlRefused> =>
      Effect.mapError(exchange(path, text, idempotent), (e) => (e instanceof StoreError ? unavailable(e) : e))
    const post = (path: string, ops: ReadonlyArray<StatementOp>, idempotent: boolean) => answered(path, body(ops), idempotent)

    /** How long each text last ran, in seconds; a text not here has not run alone yet. */
    const lastRun = new Map<string, number>()
    const ranFor = (sql: string, r: Result | undefined): void => {
      if (r?.time === undefined || sql.length > MAX_REMEMBERED_SQL) return
      if (lastRun.size >= MAX_REMEMBERED && !lastRun.has(sql)) lastRun.clear()
      lastRun.set(sql, r.time)
    }
    /** A text stopped at the timeout goes alone until it runs fast alone again. */
    const ranSlow = (sql: string): void => {
      if (lastRun.has(sql)) lastRun.set(sql, Number.POSITIVE_INFINITY)
    }
    // without a statement timeout (none set, or longer than rqlite takes) only the cap applies
    const batchSeconds = stopsStatements ? Math.min(BATCH_SECONDS, timeoutMs / 10_000) : BATCH_SECONDS
    const batchable = (sql: string): boolean => {
      const seconds = lastRun.get(sql)
      return seconds !== undefined && seconds <= FAST_SECONDS && seconds <= batchSeconds
    }
    /** A statement's share of a batch: its run time against the batch's, its text against the batch's. */
    const weigh = (item: { readonly sql: string; readonly text: string }) =>
      Math.max((lastRun.get(item.sql) ?? FAST_SECONDS) / batchSeconds, item.text.length / BATCH_CHARS)
    /**
     * A failed batch: each statement alone when one of them may be the cause, else every
     * statement's refusal. rqlite refuses a request it cannot parse or rewrite (reason
     * `statement`) before running any of it, so even writes are sent again then; an answer over
     * the size limit comes after the writes were applied, so only reads are.
     */
    const batchFailure = (size: number, kind: StatementOp["kind"]) => (e: StoreError | SqlRefused): SqlRefused | typeof ALONE =>
      !(e instanceof StoreError)
        ? e
        : size > 1 && (e.reason === "statement" || (e.reason === "too_large" && kind === "read"))
          ? ALONE
          : unavailable(e)

    const noResult = refuse(503, Code.UNAVAILABLE, "the SQL store returned no result", "retry shortly", 1)
    /**
     * The schema's version around reads sent as [version, read…, version]: the same before and
     * after, or undefined. (rqlite cannot run a read transaction with db_timeout: a stopped read
     * fails the whole request; SQLite's schema version only grows, so equal ends bound the reads.)
     */
    const versionOf = (results: ReadonlyArray<Result>): unknown => {
      const before = results[0]?.values?.[0]?.[0]
      return before !== undefined && results.length > 1 && before === results[results.length - 1]?.values?.[0]?.[0] ? before : undefined
    }

    /**
     * How a read is sent and answered, valid while the schema keeps its `version`: `sql` is the
     * text sent, its `cellsSql` (undefined for a read that cannot be wrapped, answered as rqlite
     * gives it), `wrapped` which of its columns come wrapped, `columns` its names (a wrapped read
     * no longer answers them). The read itself is never sent in its place, even when no column
     * needs wrapping: SQLite can give a column of the read as a CTE another declared type than
     * the read's own (a compound SELECT's column is typed by its first part alone, but as a CTE
     * by the affinity of all parts), and `typesSql` gives the CTE's.
     */
    interface Wrapping {
      readonly sql: string | undefined
      readonly wrapped: ReadonlyArray<boolean>
      /** Whether `sql` ends in the blob check; `exact` then wraps the checked columns too, for a read that found a blob. */
      readonly checked: boolean
      readonly exact: Wrapping | undefined
      readonly columns: ReadonlyArray<string>
      readonly version: unknown
      /** `sql` and `columns` as JSON, made once: a point read is mostly these texts. */
      readonly sqlJson: string | undefined
      readonly columnsJson: string
    }
    const wrappingWith = (
      sql: string | undefined,
      wrapped: ReadonlyArray<boolean>,
      checked: boolean,
      exact: Wrapping | undefined,
      columns: ReadonlyArray<string>,
      version: unknown
    ): Wrapping => ({
      sql,
      wrapped,
      checked,
      exact,
      columns,
      version,
      sqlJson: sql === undefined ? undefined : JSON.stringify(sql),
      columnsJson: JSON.stringify(columns)
    })
    const wrappings = new Map<string, Wrapping>()
    const remember = (sql: string, wrapping: Wrapping) => {
      if (sql.length > MAX_REMEMBERED_SQL) return
      if (wrappings.size >= MAX_REMEMBERED) wrappings.clear()
      wrappings.set(sql, wrapping)
    }
    /**
     * The wrapping of a read whose columns are `columns`, from `typed`, the answer of its
     * `typesSql`: only the columns whose declared type rqlite alters are wrapped. Without it
     * (EXPLAIN, or a read the CTE cannot hold) all are, and the wrapped read says what is wrong.
     */
    const wrappingOf = (sql: string, columns: ReadonlyArray<string>, typed: Result | undefined, version: unknown): Wrapping => {
      const types = typed !== undefined && typed.error === undefined && typed.types?.length === columns.length ? typed.types : undefined
      const altered = types === undefined ? allWrapped(columns.length) : types.map(alteredUnder)
      const exact = wrappingWith(cellsSql(sql, altered), altered, false, undefined, columns, version)
      if (types === undefined || !types.some(textUnder)) return exact
      const wrapped = types.map(convertedUnder)
      return wrappingWith(cellsSql(sql, wrapped, types.map(textUnder)), wrapped, true, exact, columns, version)
    }

    /**
     * A read answered as stored. Known: one round trip, the read as `Wrapping` says beside the
     * schema's version, in a batch with other reads when it is fast. First seen: the read itself
     * and its declared types, answered as is when rqlite altered none of its cells, else once more
     * wrapped. `attempts` bounds re-learning a schema that keeps changing.
     */
    const read = (op: StatementOp, shape: AnswerShape, attempts: number): Effect.Effect<string, SqlRefused> => {
      const known = wrappings.get(op.sql)
      if (known?.sql !== undefined) {
        return batchable(op.sql) ? batchedRead(op, shape, known, attempts) : wrappedRead(op, shape, known, attempts)
      }
      const types = known === undefined ? typesSql(op.sql) : undefined
      const ops = types === undefined ? [SCHEMA_VERSION, op, SCHEMA_VERSION] : [SCHEMA_VERSION, op, { sql: types, params: op.params, kind: op.kind }, SCHEMA_VERSION]
      return Effect.flatMap(post(QUERY, ops, true), (results) => {
        const r = results[1]
        if (r === undefined) return Effect.fail(noResult)
        if (r.error !== undefined) return Effect.fail(failure(r.error, undefined))
        ranFor(op.sql, r)
        const columns = r.columns ?? []
        const wrapping = known ?? wrappingOf(op.sql, columns, types === undefined ? undefined : results[2], versionOf(results))
        if (known === undefined && wrapping.version !== undefined) remember(op.sql, wrapping)
        return wrapping.sql === undefined || asStored(r)
          ? Effect.succeed(readAnswer(shape, columns, (r.values ?? []) as ReadonlyArray<ReadonlyArray<SqlCell>>))
          : wrappedRead(op, shape, wrapping, attempts)
      })
    }

    /** A known read alone in its request. */
    const wrappedRead = (op: StatementOp, shape: AnswerShape, wrapping: Wrapping, attempts: number): Effect.Effect<string, SqlRefused> =>
      Effect.flatMap(post(QUERY, [SCHEMA_VERSION, { ...op, sql: wrapping.sql ?? op.sql }, SCHEMA_VERSION], true), (results) =>
        wrappedAnswer(op, shape, wrapping, attempts, results[1], versionOf(results), 1)
      )

    /** Whether a known read's result `r`, from a request that saw the schema at `version`, answers as is. */
    const fits = (wrapping: Wrapping, r: Result, version: unknown): boolean =>
      r.error === undefined && version !== undefined && version === wrapping.version

    /** A known read's result `r`, from a request of `size` reads that saw the schema at `version`. */
    const wrappedAnswer = (
      op: StatementOp,
      shape: AnswerShape,
      wrapping: Wrapping,
      attempts: number,
      r: Result | undefined,
      version: unknown,
      size: number
    ): Effect.Effect<string, SqlRefused> => {
      if (r === undefined) return Effect.fail(noResult)
      if (version === undefined || version !== wrapping.version || (r.error !== undefined && COLUMN_COUNT_CHANGED.test(r.error))) {
        // the schema changed since the names were learnt: learn them again
        wrappings.delete(op.sql)
        return attempts < 2
          ? read(op, shape, attempts + 1)
          : Effect.fail(refuse(503, Code.UNAVAILABLE, "the schema kept changing during the read", "retry shortly", 1))
      }
      if (r.error !== undefined) {
        if (TIMED_OUT.has(r.error)) {
          ranSlow(op.sql)
          // stopped at the batch's deadline, which other reads shared: its own timeout, alone
          if (size > 1) return wrappedRead(op, shape, wrapping, attempts)
        }
        return Effect.fail(failure(r.error, undefined))
      }
      const answer = answerOf(op, shape, wrapping, r)
      return answer !== undefined ? Effect.succeed(answer) : exactRead(op, shape, wrapping, attempts)
    }
    /** A known read's answer from its result, which `fits`; undefined when a checked column holds a blob. */
    const answerOf = (op: StatementOp, shape: AnswerShape, wrapping: Wrapping, r: Result): string | undefined => {
      ranFor(op.sql, r)
      const rows = storedRows(r, wrapping.wrapped, wrapping.checked)
      return rows === undefined ? undefined : readAnswer(shape, wrapping.columns, rows, wrapping.columnsJson)
    }
    /** A read whose checked columns held a blob, sent again alone with those wrapped. */
    const exactRead = (op: StatementOp, shape: AnswerShape, wrapping: Wrapping, attempts: number): Effect.Effect<string, SqlRefused> =>
      wrapping.exact === undefined ? Effect.die(new Error("a read without its blob check found a blob")) : wrappedRead(op, shape, wrapping.exact, attempts)

    /** A statement waiting for its batch: the text sent, and the statement's own text for the bookkeeping. */
    interface BatchItem {
      readonly sql: string
      readonly text: string
    }
    const versionText = statementText(SCHEMA_VERSION)
    /** Reads sent as [version, read…, version]: the two versions bound every read between them. */
    const readBatch = batcher<BatchItem, { readonly result: Result; readonly version: unknown }, SqlRefused | typeof ALONE>({
      maxInFlight: BATCH_IN_FLIGHT,
      maxItems: BATCH_ITEMS,
      maxWeight: 1,
      weigh,
      send: (items) => {
        const text = `[${versionText},${items.map((i) => i.text).join(",")},${versionText}]`
        return Effect.mapError(
          Effect.flatMap(exchange(QUERY, text, true), (results) => {
            if (results.length !== items.length + 2) return Effect.fail(unexpected)
            const seen = versionOf(results)
            return Effect.succeed(items.map((_, i) => ({ result: results[i + 1] as Result, version: seen })))
          }),
          batchFailure(items.length, "read")
        )
      }
    })
    type ReadOutcome = Exit.Exit<Batched<{ readonly result: Result; readonly version: unknown }>, SqlRefused | typeof ALONE>
    const readItem = (op: StatementOp, wrapping: Wrapping): BatchItem => ({
      sql: op.sql,
      text:
        wrapping.sqlJson === undefined
          ? statementText(op)
          : op.params.length === 0
            ? `[${wrapping.sqlJson}]`
            : `[${wrapping.sqlJson},${stringifyExactJson(op.params).slice(1)}`
    })
    /** A batched read's answer from its batch's outcome. */
    const afterBatch = (op: StatementOp, shape: AnswerShape, wrapping: Wrapping, attempts: number, exit: ReadOutcome): Effect.Effect<string, SqlRefused> => {
      if (Exit.isSuccess(exit)) return wrappedAnswer(op, shape, wrapping, attempts, exit.value.out.result, exit.value.out.version, exit.value.size)
      const failure = Cause.failureOrCause(exit.cause)
      return Either.isRight(failure)
        ? Effect.failCause(failure.right)
        : failure.left === ALONE
          ? wrappedRead(op, shape, wrapping, attempts)
          : Effect.fail(failure.left)
    }
    const batchedRead = (op: StatementOp, shape: AnswerShape, wrapping: Wrapping, attempts: number): Effect.Effect<string, SqlRefused> =>
      Effect.flatMap(Effect.exit(readBatch(readItem(op, wrapping))), (exit) => afterBatch(op, shape, wrapping, attempts, exit))

    /** A write's result as the route answers it. */
    const written = (op: StatementOp, shape: AnswerShape, r: Result | undefined): Effect.Effect<string, SqlRefused> => {
      if (r === undefined) return Effect.fail(noResult)
      if (r.error !== undefined) {
        if (TIMED_OUT.has(r.error)) ranSlow(op.sql)
        return Effect.fail(failure(r.error, undefined))
      }
      ranFor(op.sql, r)
      return Effect.succeed(resultJson(r, op.kind, shape))
    }
    /** One write alone in its request: its result. */
    const writeAlone = (text: string): Effect.Effect<Result | undefined, SqlRefused> =>
      Effect.map(answered(EXECUTE, `[${text}]`, false), (results) => results[0])

    /**
     * Writes sent as one transaction (`/db/execute?transaction`): one Raft entry, applied whole or
     * not at all. Not a plain multi-statement request: there rqlite stops every statement after a
     * stopped one at the request's shared deadline, or not, depending on a race in its SQLite
     * driver, so the nodes of a cluster could disagree on them. In a transaction a failing
     * statement rolls all of them back on every node; it answers its own failure, and the others
     * are sent again one at a time, in their order. So is the failing one when it was stopped at
     * the deadline after others had used some of it.
     */
    const writeBatch = batcher<BatchItem, Either.Either<Result | undefined, SqlRefused>, SqlRefused | typeof ALONE>({
      maxInFlight: BATCH_IN_FLIGHT,
      maxItems: BATCH_ITEMS,
      maxWeight: 1,
      weigh,
      send: (items) =>
        Effect.mapError(
          Effect.flatMap(exchange(EXECUTE_BATCH, `[${items.map((i) => i.text).join(",")}]`, false), (results) => {
            const failed = results.findIndex((r) => r.error !== undefined)
            if (failed < 0) {
              return results.length === items.length ? Effect.succeed(results.map((r) => Either.right(r))) : Effect.fail(partial)
            }
            const cause = results[failed]
            const own = failed === 0 || !TIMED_OUT.has(cause?.error ?? "")
            if (!own) ranSlow(items[failed]?.sql ?? "")
            return Effect.forEach(items, (item, i) =>
              i === failed && own ? Effect.succeed(Either.right(cause)) : Effect.either(writeAlone(item.text))
            )
          }),
          batchFailure(items.length, "write")
        )
    })
    const write = (op: StatementOp, shape: AnswerShape): Effect.Effect<string, SqlRefused> => {
      const alone = Effect.flatMap(writeAlone(statementText(op)), (r) => written(op, shape, r))
      if (!batchable(op.sql) || returnsRows(op.sql)) return alone
      return Effect.matchEffect(writeBatch({ sql: op.sql, text: statementText(op) }), {
        onFailure: (e) => (e === ALONE ? alone : Effect.fail(e)),
        onSuccess: ({ out }) => (Either.isLeft(out) ? Effect.fail(out.left) : written(op, shape, out.right))
      })
    }

    /** Streams to or from rqlite outside JSON; `what` names the step for the message. */
    const transfer = (what: string, run: (signal: AbortSignal) => Promise<void>) =>
      Effect.tryPromise({
        try: (signal) => run(transferTimeout === undefined ? signal : AbortSignal.any([signal, AbortSignal.timeout(transferTimeout)])),
        catch: (e) => refuse(503, Code.UNAVAILABLE, `the SQL store could not ${what}: ${e instanceof Error ? e.message : String(e)}`, "retry shortly", 5)
      })

    /**
     * The way a known fast read takes without a fiber: into a batch, and its answer made on the
     * spot when its result fits; anything else (a changed schema, a failure, a read stopped at
     * the batch's deadline) goes on as the effect would.
     */
    const readNow = (op: StatementOp, shape: AnswerShape, done: (exit: Exit.Exit<string, SqlRefused>) => void): boolean => {
      const known = wrappings.get(op.sql)
      if (known?.sql === undefined || !batchable(op.sql)) return false
      readBatch.offer(readItem(op, known), (exit) => {
        if (!Exit.isSuccess(exit) || !fits(known, exit.value.out.result, exit.value.out.version)) {
          return Effect.runCallback(afterBatch(op, shape, known, 0, exit), { onExit: done })
        }
        // a defect here is this read's, as in a fiber, and not its batch's
        let answer: Exit.Exit<string, SqlRefused> | undefined
        try {
          const text = answerOf(op, shape, known, exit.value.out.result)
          answer = text === undefined ? undefined : Exit.succeed(text)
        } catch (e) {
          answer = Exit.die(e)
        }
        if (answer === undefined) return Effect.runCallback(exactRead(op, shape, known, 0), { onExit: done })
        done(answer)
      })
      return true
    }

    return {
      kind: "rqlite",
      statement: (op, shape) => (op.kind === "read" ? read(op, shape, 0) : write(op, shape)),
      statementNow: (op, shape, done) => op.kind === "read" && readNow(op, shape, done),
      batch: (ops, returnResults) => {
        /** `wrapped`: per op, the column names of a read sent as `cellsSql`. */
        const answer = (results: ReadonlyArray<Result>, wrapped?: ReadonlyArray<ReadonlyArray<string> | undefined>) => {
          const failed = firstFailure(results)
          if (failed !== undefined) return Effect.fail(failed)
          if (results.length !== ops.length) {
            return Effect.fail(refuse(503, Code.UNAVAILABLE, "the SQL store returned a partial answer", "retry shortly", 1))
          }
          const texts = results.map((r, i) => {
            const columns = wrapped?.[i]
            return columns === undefined ? resultJson(r, ops[i]?.kind ?? "write", "counted") : readAnswer("counted", columns, storedRows(r, allWrapped(columns.length)) ?? [])
          })
          return Effect.succeed(
            returnResults ? `{"results":[${texts.join(",")}],"count":${texts.length}}` : `{"status":"ok","count":${texts.length}}`
          )
        }
        // rqlite's /db/execute?transaction rolls back at the first failing statement, however it
        // fails. Its /db/request?transaction, the only way to get rows back, does not for a
        // statement that fails to prepare (a missing table or function): it skips it and commits
        // the rest. So rows are asked for only when the caller wants them and a read op is there,
        // and then after a dry run that ends in a statement failing at run time, which rolls the
        // whole dry run back: a prepare failure shows up there with nothing applied. (A table
        // dropped by another writer between the dry run and the run can still slip through.)
        if (!returnResults || ops.every((op) => op.kind === "write")) {
          return Effect.flatMap(post(EXECUTE_TX, ops, false), answer)
        }
        return Effect.flatMap(post(REQUEST_TX, [...ops, ROLLBACK_SENTINEL], true), (dry) => {
          const failed = firstFailure(dry.slice(0, ops.length))
          if (failed !== undefined) return Effect.fail(failed)
          if (dry.length !== ops.length + 1 || dry[ops.length]?.error === undefined) {
            return Effect.fail(refuse(503, Code.UNAVAILABLE, "the SQL store answered the dry run unexpectedly", "retry shortly", 1))
          }
          // the reads again, wrapped to answer as stored; the dry run gave their column names
          const wrapped = ops.map((op, i) => (op.kind === "read" ? cellsSql(op.sql, allWrapped(dry[i]?.columns?.length ?? 0)) : undefined))
          const run = ops.map((op, i) => {
            const sql = wrapped[i]
            return sql === undefined ? op : { ...op, sql }
          })
          return Effect.flatMap(post(REQUEST_TX, run, false), (results) =>
            results.some((r) => r.error !== undefined && COLUMN_COUNT_CHANGED.test(r.error))
              ? Effect.fail(refuse(503, Code.UNAVAILABLE, "the schema changed during the transaction; nothing was applied", "retry shortly", 1))
              : answer(
                  results,
                  wrapped.map((sql, i) => (sql === undefined ? undefined : (dry[i]?.columns ?? [])))
                )
          )
        })
      },
      exportTo: (dest) =>
        transfer("export", async (signal) => {
          const response = await fetch(`${http.base}/db/backup`, { headers: http.headers, signal })
          if (response.status !== 200 || response.body === null) throw new Error(`backup answered ${response.status}`)
          await pipeline(Readable.fromWeb(response.body as import("node:stream/web").ReadableStream), createWriteStream(dest), { signal })
        }),
      importFrom: (source) =>
        transfer("import", async (signal) => {
          // a follower redirects to the leader; the file is sent again from the start
          let url = `${http.base}/db/load`
          for (let hop = 0; hop < 3; hop++) {
            const response = await fetch(url, {
              method: "POST",
              headers: { ...http.headers, "content-type": "application/octet-stream" },
              body: Readable.toWeb(createReadStream(source)) as unknown as ReadableStream<Uint8Array>,
              duplex: "half",
              redirect: "manual",
              signal
            } as RequestInit)
            const location = response.headers.get("location")
            if (response.status >= 300 && response.status < 400 && location !== null) {
              url = new URL(location, url).toString()
              continue
            }
            const text = await response.text()
            if (response.status !== 200) throw new Error(`load answered ${response.status}`)
            const parsed: unknown = JSON.parse(text)
            const results = typeof parsed === "object" && parsed !== null && "results" in parsed ? parsed.results : undefined
            const error = Array.isArray(results) ? results.find((r: unknown) => typeof r === "object" && r !== null && "error" in r) : undefined
            if (error !== undefined) throw new Error("the cluster refused the file")
            // a new schema, whose version may be one a remembered read was learnt under
            wrappings.clear()
            return
          }
          throw new Error("too many redirects")
        })
    }
  }
}
