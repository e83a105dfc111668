/**
 * Reads answered as stored: every cell comes back as the embedded engine answers it. rqlite
 * writes a blob as text, lossily, in any column it types as text or not at all (`SELECT X'00FF'`,
 * an untyped column), and turns values of DATE/DATETIME/TIMESTAMP and BOOLEAN columns into times
 * and booleans. Only the columns of those declared types are touched (`cellsSql`); the others pass
 * through, where rqlite already answers as stored. Of those, a column rqlite takes for text, where
 * it alters blobs alone, passes through too and is checked for blobs (the read is sent again
 * wrapped when one holds any); the others are wrapped.
 *
 * Pure: the texts sent and the rows read back. Sending them is `RqliteReads.ts`'s.
 */
import type { SqlCell } from "../../domain/SqlAnswers.js"
import { tokenize } from "../../domain/SqlTokens.js"
import type { RqliteCell, RqliteResult } from "./RqliteAnswer.js"

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
export const asStored = (r: RqliteResult): boolean => {
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
export const cellsSql = (sql: string, wrapped: ReadonlyArray<boolean>, checked: ReadonlyArray<boolean> = []): string | undefined => {
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
export const typesSql = (sql: string): string | undefined => {
  const body = cteBody(sql)
  return body === undefined ? undefined : `WITH ${CELLS} AS (\n${body}\n) SELECT * FROM ${CELLS} LIMIT 0`
}

/** Every one of `columns` wrapped: for a read whose declared types are not known. */
export const allWrapped = (columns: number): ReadonlyArray<boolean> => Array.from({ length: columns }, () => true)

/** A cell of a wrapped column back as stored. */
const storedCell = (cell: RqliteCell): SqlCell =>
  typeof cell !== "string" ? cell : cell.startsWith("b") ? Buffer.from(cell.slice(1), "hex") : cell.slice(1)

/**
 * The rows of a `cellsSql` read: its wrapped columns back as stored, the others as they came, the
 * blob check (`checked`: the last cell) left out. Undefined when a checked column holds a blob.
 */
export const storedRows = (r: RqliteResult, wrapped: ReadonlyArray<boolean>, checked = false): ReadonlyArray<ReadonlyArray<SqlCell>> | undefined => {
  const rows = r.values ?? []
  const out: Array<ReadonlyArray<SqlCell>> = []
  for (const row of rows) {
    const width = checked ? row.length - 1 : row.length
    // any other answer than 0 (false) is taken for a blob: the read is then sent again wrapped
    if (checked && row[width] !== 0) return undefined
    const cells: Array<SqlCell> = []
    for (let i = 0; i < width; i++) {
      const cell = row[i] as RqliteCell
      cells.push(wrapped[i] === true ? storedCell(cell) : cell)
    }
    out.push(cells)
  }
  return out
}

/** SQLite's answer when a CTE's column count no longer fits the statement in it. */
export const COLUMN_COUNT_CHANGED = /^table "?portico_cells"? has \d+ values for \d+ columns$/

/**
 * How a read is sent and answered, valid while the schema keeps its `version`: `sql` is the
 * text sent, its `cellsSql` (undefined for a read that cannot be wrapped, answered as rqlite
 * gives it), `wrapped` which of its columns come wrapped, `columns` its names (a wrapped read
 * no longer answers them). The read itself is never sent in its place, even when no column
 * needs wrapping: SQLite can give a column of the read as a CTE another declared type than
 * the read's own (a compound SELECT's column is typed by its first part alone, but as a CTE
 * by the affinity of all parts), and `typesSql` gives the CTE's.
 */
export interface Wrapping {
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

/**
 * The wrapping of a read whose columns are `columns`, from `typed`, the answer of its
 * `typesSql`: only the columns whose declared type rqlite alters are wrapped. Without it
 * (EXPLAIN, or a read the CTE cannot hold) all are, and the wrapped read says what is wrong.
 */
export const wrappingOf = (sql: string, columns: ReadonlyArray<string>, typed: RqliteResult | undefined, version: unknown): Wrapping => {
  const types = typed !== undefined && typed.error === undefined && typed.types?.length === columns.length ? typed.types : undefined
  const altered = types === undefined ? allWrapped(columns.length) : types.map(alteredUnder)
  const exact = wrappingWith(cellsSql(sql, altered), altered, false, undefined, columns, version)
  if (types === undefined || !types.some(textUnder)) return exact
  const wrapped = types.map(convertedUnder)
  return wrappingWith(cellsSql(sql, wrapped, types.map(textUnder)), wrapped, true, exact, columns, version)
}
