/**
 * Writes on a namespace's rqlite engine: a known fast write joins a batch of writes sent as one
 * transaction (RqliteBatching.ts); the others go alone.
 */
import { Effect, Either } from "effect"
import type { AnswerShape } from "../../domain/SqlAnswers.js"
import { batcher } from "./Batcher.js"
import { resultJson, type RqliteResult } from "./RqliteAnswer.js"
import { ALONE, BATCH_IN_FLIGHT, BATCH_ITEMS, type BatchItem, batchFailure, returnsRows, type RunTimes } from "./RqliteBatching.js"
import { type RqliteExchange, statementText, TIMED_OUT } from "./RqliteExchange.js"
import type { StatementOp } from "./SqliteProtocol.js"
import type { SqlRefused } from "./SqlRefused.js"

/** One write, answered with its counts. */
export const rqliteWrites = (
  { answered, exchange, failure, noResult, partial, paths: { execute: EXECUTE, executeBatch: EXECUTE_BATCH } }: RqliteExchange,
  { batchable, ranFor, ranSlow, weigh }: RunTimes
): ((op: StatementOp, shape: AnswerShape) => Effect.Effect<string, SqlRefused>) => {
  /** A write's result as the route answers it. */
  const written = (op: StatementOp, shape: AnswerShape, r: RqliteResult | undefined): Effect.Effect<string, SqlRefused> => {
    if (r === undefined) return Effect.fail(noResult)
    if (r.error !== undefined) {
      if (TIMED_OUT.has(r.error)) ranSlow(op.sql)
      return Effect.fail(failure(r.error, undefined))
    }
    ranFor(op.sql, r)
    return Effect.succeed(resultJson(r, op.kind, shape))
  }
  /** One write alone in its request: its result. */
  const writeAlone = (text: string): Effect.Effect<RqliteResult | undefined, SqlRefused> =>
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
  const writeBatch = batcher<BatchItem, Either.Either<RqliteResult | undefined, SqlRefused>, SqlRefused | typeof ALONE>({
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
  return write
}
