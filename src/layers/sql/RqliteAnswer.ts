/**
 * rqlite's answers (`{results: [...]}`) as the engine reads them, and one statement's result as
 * the route answers it.
 */
import { Schema } from "effect"
import { execAnswer, readAnswer, type AnswerShape, type SqlCell } from "../../domain/SqlAnswers.js"
import type { StatementOp } from "./SqliteProtocol.js"

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
/** One statement's result in an rqlite answer. */
export type RqliteResult = Result
/** A cell of a result's rows. */
export type RqliteCell = typeof Cell.Type
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

// A write answers its counts, as on the embedded engine, also with RETURNING: rqlite then sends
// the returned rows instead of counts, so their number is the count (and no last_insert_id).
export const resultJson = (r: Result, kind: StatementOp["kind"], shape: AnswerShape): string =>
  kind === "read"
    ? readAnswer(shape, r.columns ?? [], (r.values ?? []) as ReadonlyArray<ReadonlyArray<SqlCell>>)
    : execAnswer(r.rows_affected ?? r.values?.length ?? 0, r.last_insert_id ?? 0)
