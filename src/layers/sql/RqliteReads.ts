/**
 * Reads on a namespace's rqlite engine, answered as stored (RqliteStoredCells.ts): a read seen
 * for the first time is sent with its declared types and the schema's version around it, and its
 * `Wrapping` is remembered; a known read is sent as that wrapping says in one round trip, in a
 * batch with other reads when it is fast (RqliteBatching.ts), and its wrapping learnt again when
 * the schema changed.
 */
import { Cause, Effect, Either, Exit } from "effect"
import { Code } from "../../domain/Errors.js"
import { stringifyExactJson } from "../../domain/ExactJson.js"
import { readAnswer, type AnswerShape, type SqlCell } from "../../domain/SqlAnswers.js"
import { type Batched, batcher } from "./Batcher.js"
import type { RqliteResult } from "./RqliteAnswer.js"
import { ALONE, BATCH_IN_FLIGHT, BATCH_ITEMS, type BatchItem, batchFailure, MAX_REMEMBERED, MAX_REMEMBERED_SQL, type RunTimes } from "./RqliteBatching.js"
import { type RqliteExchange, statementText, TIMED_OUT } from "./RqliteExchange.js"
import { asStored, COLUMN_COUNT_CHANGED, storedRows, typesSql, type Wrapping, wrappingOf } from "./RqliteStoredCells.js"
import type { StatementOp } from "./SqliteProtocol.js"
import { refuse, type SqlRefused } from "./SqlRefused.js"

/** The schema's version, read before and after a read (`versionOf`). */
const SCHEMA_VERSION: StatementOp = { sql: "SELECT schema_version FROM pragma_schema_version", params: [], kind: "read" }

export interface RqliteReads {
  /** A read answered as stored; `attempts` (0 for a caller) bounds re-learning a changing schema. */
  readonly read: (op: StatementOp, shape: AnswerShape, attempts: number) => Effect.Effect<string, SqlRefused>
  /**
   * The way a known fast read takes without a fiber (`SqlEngine.statementNow`): true, and `done`
   * gets the outcome once; false, and nothing was done.
   */
  readonly readNow: (op: StatementOp, shape: AnswerShape, done: (exit: Exit.Exit<string, SqlRefused>) => void) => boolean
  /** Forgets every read's wrapping: the whole database was replaced. */
  readonly forget: () => void
}

export const rqliteReads = (
  { exchange, failure, noResult, paths: { query: QUERY }, post, unexpected }: RqliteExchange,
  { batchable, ranFor, ranSlow, weigh }: RunTimes
): RqliteReads => {
  /**
   * The schema's version around reads sent as [version, read…, version]: the same before and
   * after, or undefined. (rqlite cannot run a read transaction with db_timeout: a stopped read
   * fails the whole request; SQLite's schema version only grows, so equal ends bound the reads.)
   */
  const versionOf = (results: ReadonlyArray<RqliteResult>): unknown => {
    const before = results[0]?.values?.[0]?.[0]
    return before !== undefined && results.length > 1 && before === results[results.length - 1]?.values?.[0]?.[0] ? before : undefined
  }

  const wrappings = new Map<string, Wrapping>()
  const remember = (sql: string, wrapping: Wrapping) => {
    if (sql.length > MAX_REMEMBERED_SQL) return
    if (wrappings.size >= MAX_REMEMBERED) wrappings.clear()
    wrappings.set(sql, wrapping)
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
  const fits = (wrapping: Wrapping, r: RqliteResult, version: unknown): boolean =>
    r.error === undefined && version !== undefined && version === wrapping.version

  /** A known read's result `r`, from a request of `size` reads that saw the schema at `version`. */
  const wrappedAnswer = (
    op: StatementOp,
    shape: AnswerShape,
    wrapping: Wrapping,
    attempts: number,
    r: RqliteResult | undefined,
    version: unknown,
    size: number
  ): Effect.Effect<string, SqlRefused> => {
    if (r === undefined) return Effect.fail(noResult)
    if (version === undefined || version !== wrapping.version || (r.error !== undefined && COLUMN_COUNT_CHANGED.test(r.error))) {
      // the schema changed since the names were learnt: learn them again
      wrappings.delete(op.sql)
      return attempts < 2
        ? read(op, shape, attempts + 1)
        : Effect.fail(refuse(Code.UNAVAILABLE, "the schema kept changing during the read", "retry shortly", 1))
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
  const answerOf = (op: StatementOp, shape: AnswerShape, wrapping: Wrapping, r: RqliteResult): string | undefined => {
    ranFor(op.sql, r)
    const rows = storedRows(r, wrapping.wrapped, wrapping.checked)
    return rows === undefined ? undefined : readAnswer(shape, wrapping.columns, rows, wrapping.columnsJson)
  }
  /** A read whose checked columns held a blob, sent again alone with those wrapped. */
  const exactRead = (op: StatementOp, shape: AnswerShape, wrapping: Wrapping, attempts: number): Effect.Effect<string, SqlRefused> =>
    wrapping.exact === undefined ? Effect.die(new Error("a read without its blob check found a blob")) : wrappedRead(op, shape, wrapping.exact, attempts)

  const versionText = statementText(SCHEMA_VERSION)
  /** Reads sent as [version, read…, version]: the two versions bound every read between them. */
  const readBatch = batcher<BatchItem, { readonly result: RqliteResult; readonly version: unknown }, SqlRefused | typeof ALONE>({
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
          return Effect.succeed(items.map((_, i) => ({ result: results[i + 1] as RqliteResult, version: seen })))
        }),
        batchFailure(items.length, "read")
      )
    }
  })
  type ReadOutcome = Exit.Exit<Batched<{ readonly result: RqliteResult; readonly version: unknown }>, SqlRefused | typeof ALONE>
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

  return { read, readNow, forget: () => wrappings.clear() }
}
