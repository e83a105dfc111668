/**
 * The ORM routes' structured requests (spec §2.3) turned into one SELECT with bound arguments.
 * Table and column names given as data are quoted as identifiers, so they can never be read as
 * SQL; expression fragments (select lists, where clauses, join conditions, ordering) are SQL by
 * design, and the assembled statement goes through the SQL guard like any other.
 */

import { tokenize } from "./SqlTokens.js"

/** A value bound to a `?` parameter; booleans bind as 1 and 0, as SQLite stores them. */
export type OrmValue = string | number | bigint | boolean | null

export interface OrmJoin {
  /** INNER (default), LEFT or CROSS. */
  readonly kind?: "INNER" | "LEFT" | "CROSS" | undefined
  readonly table: string
  readonly alias?: string | undefined
  /** The join condition, an SQL expression. */
  readonly on?: string | undefined
}

export interface OrmWhere {
  /** How this clause joins the ones before it; AND by default. */
  readonly conj?: "AND" | "OR" | undefined
  /** An SQL expression with `?` placeholders. */
  readonly expr: string
  readonly args?: ReadonlyArray<OrmValue> | undefined
}

export interface OrmShaping {
  readonly joins?: ReadonlyArray<OrmJoin> | undefined
  readonly order_by?: ReadonlyArray<string> | undefined
  readonly group_by?: ReadonlyArray<string> | undefined
  readonly limit?: number | undefined
  readonly offset?: number | undefined
}

export interface OrmSelect extends OrmShaping {
  readonly table: string
  readonly alias?: string | undefined
  readonly select?: ReadonlyArray<string> | undefined
  readonly where?: ReadonlyArray<OrmWhere> | undefined
}

export interface OrmFind {
  readonly table: string
  /** Column → value; all must match (`IS NULL` for null). */
  readonly criteria: Readonly<Record<string, OrmValue>>
  readonly options?: OrmShaping | undefined
}

export interface BuiltQuery {
  readonly sql: string
  readonly params: ReadonlyArray<string | number | bigint | null>
}

/**
 * An identifier in backticks, doubled inside. Not double quotes: rqlite's SQLite keeps the
 * "double-quoted string" fallback on, so an unknown `"column"` became the string 'column' there
 * and a misspelt criterion matched every row. A backticked name is only ever an identifier.
 */
export const quoteIdentifier = (name: string): string => `\`${name.replaceAll("`", "``")}\``

/** A criterion's column: `table.column` names a joined table's column. */
const quoteColumn = (name: string): string => {
  const dot = name.indexOf(".")
  return dot > 0 ? `${quoteIdentifier(name.slice(0, dot))}.${quoteIdentifier(name.slice(dot + 1))}` : quoteIdentifier(name)
}

const bind = (v: OrmValue): string | number | bigint | null => (typeof v === "boolean" ? (v ? 1 : 0) : v)

const shaping = (s: OrmShaping, params: Array<string | number | bigint | null>, oneRow: boolean): string => {
  let sql = ""
  if (s.group_by !== undefined && s.group_by.length > 0) sql += ` GROUP BY ${s.group_by.join(", ")}`
  if (s.order_by !== undefined && s.order_by.length > 0) sql += ` ORDER BY ${s.order_by.join(", ")}`
  const limit = oneRow ? 1 : s.limit
  if (limit !== undefined) {
    sql += " LIMIT ?"
    params.push(limit)
  }
  if (s.offset !== undefined) {
    // SQLite has no OFFSET without LIMIT: -1 is its "no limit"
    if (limit === undefined) sql += " LIMIT -1"
    sql += " OFFSET ?"
    params.push(s.offset)
  }
  return sql
}

const joins = (list: ReadonlyArray<OrmJoin> | undefined): string =>
  (list ?? [])
    .map((j) => {
      const alias = j.alias === undefined ? "" : ` AS ${quoteIdentifier(j.alias)}`
      const on = j.on === undefined || j.kind === "CROSS" ? "" : ` ON ${j.on}`
      return ` ${j.kind ?? "INNER"} JOIN ${quoteIdentifier(j.table)}${alias}${on}`
    })
    .join("")

/** How many `?` a fragment binds, or why its placeholders cannot be bound where they stand. */
const placeholders = (fragment: string): number | string => {
  let count = 0
  for (const token of tokenize(fragment)) {
    if (token.kind !== "variable") continue
    // `?NNN`, `:name`, `@name` and `$name` address the statement's whole argument list, not
    // the fragment's own: they would reach another clause's values
    if (token.text !== "?") return `only a bare ? placeholder is allowed here, not ${token.text}`
    count++
  }
  return count
}

/**
 * Why a request's fragments and arguments do not line up, or undefined when they do. Each
 * `where` clause binds exactly its own `args`, in order; every other fragment binds nothing.
 * Without this, a clause with too many values fed its extras to the next clause's (or LIMIT's)
 * placeholders, and a request with one value short silently matched against NULL.
 */
export const bindingProblem = (request: OrmSelect | OrmFind): string | undefined => {
  const fragments: Array<[string, string]> = []
  const shapingOf = "criteria" in request ? (request.options ?? {}) : request
  if (!("criteria" in request)) for (const [i, c] of (request.select ?? []).entries()) fragments.push([`select[${i}]`, c])
  for (const [i, j] of (shapingOf.joins ?? []).entries()) if (j.on !== undefined) fragments.push([`joins[${i}].on`, j.on])
  for (const [i, o] of (shapingOf.order_by ?? []).entries()) fragments.push([`order_by[${i}]`, o])
  for (const [i, g] of (shapingOf.group_by ?? []).entries()) fragments.push([`group_by[${i}]`, g])
  for (const [where, text] of fragments) {
    const n = placeholders(text)
    if (typeof n === "string") return `${where}: ${n}`
    if (n > 0) return `${where} has a ? placeholder, but only where clauses take arguments`
  }
  if ("criteria" in request) return undefined
  for (const [i, w] of (request.where ?? []).entries()) {
    const n = placeholders(w.expr)
    if (typeof n === "string") return `where[${i}].expr: ${n}`
    const given = w.args?.length ?? 0
    if (n !== given) return `where[${i}].expr has ${n} ? placeholder${n === 1 ? "" : "s"} but ${given} arg${given === 1 ? "" : "s"}`
  }
  return undefined
}

/** `select`: the table, optional columns, clauses, joins and shaping; `oneRow` adds LIMIT 1. */
export const buildSelect = (s: OrmSelect, oneRow: boolean): BuiltQuery => {
  const params: Array<string | number | bigint | null> = []
  const columns = s.select === undefined || s.select.length === 0 ? "*" : s.select.join(", ")
  const alias = s.alias === undefined ? "" : ` AS ${quoteIdentifier(s.alias)}`
  let sql = `SELECT ${columns} FROM ${quoteIdentifier(s.table)}${alias}${joins(s.joins)}`
  const where = s.where ?? []
  where.forEach((w, i) => {
    sql += i === 0 ? " WHERE " : ` ${w.conj ?? "AND"} `
    sql += `(${w.expr})`
    for (const a of w.args ?? []) params.push(bind(a))
  })
  sql += shaping(s, params, oneRow)
  return { sql, params }
}

/** `find` and `find-one`: equality on every criterion. */
export const buildFind = (f: OrmFind, oneRow: boolean): BuiltQuery => {
  const params: Array<string | number | bigint | null> = []
  const conditions = Object.entries(f.criteria).map(([column, value]) => {
    if (value === null) return `${quoteColumn(column)} IS NULL`
    params.push(bind(value))
    return `${quoteColumn(column)} = ?`
  })
  const options = f.options ?? {}
  let sql = `SELECT * FROM ${quoteIdentifier(f.table)}${joins(options.joins)}`
  if (conditions.length > 0) sql += ` WHERE ${conditions.join(" AND ")}`
  sql += shaping(options, params, oneRow)
  return { sql, params }
}
