/**
 * The JSON texts of SQL answers (spec §2.2, §2.3), written by hand so that 64-bit integers keep
 * every digit: SQLite's INTEGER is 64 bits, a JSON number has no width, and a JavaScript number
 * would round anything past 2^53. Both database families and both engines answer through here.
 */

/** A cell as an engine hands it over: exact integers as bigint, blobs as bytes. */
export type SqlCell = string | number | bigint | boolean | Uint8Array | null

/** How a result is shaped on the wire. */
export type AnswerShape =
  /** `{columns, rows}`: node-local reads. */
  | "table"
  /** `{columns, rows, count}`: cluster-store reads. */
  | "counted"
  /** `{items: [{column: value}], count}`: find and select. */
  | "items"
  /** `[{column: value}]`: functions' `db_query` (docs/functions.md). */
  | "objects"
  /** the first row as an object, or `null`: find-one and `select` with `one`. */
  | "one"

/** Blobs travel as base64 text, as rqlite answers them. */
export const cellJson = (v: SqlCell): string => {
  if (v === null) return "null"
  switch (typeof v) {
    case "bigint":
      return v.toString()
    case "number":
      // SQLite can hold ±Inf (1e999) which JSON cannot: null, as JSON.stringify does
      return Number.isFinite(v) ? JSON.stringify(v) : "null"
    case "boolean":
      return v ? "1" : "0"
    case "string":
      return JSON.stringify(v)
    default:
      return JSON.stringify(Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64"))
  }
}

const rowArray = (row: ReadonlyArray<SqlCell>): string => {
  let out = "["
  for (let i = 0; i < row.length; i++) {
    if (i > 0) out += ","
    out += cellJson(row[i] ?? null)
  }
  return out + "]"
}

const rowObject = (names: ReadonlyArray<string>, row: ReadonlyArray<SqlCell>): string => {
  let out = "{"
  for (let i = 0; i < names.length; i++) {
    if (i > 0) out += ","
    out += names[i] + ":" + cellJson(row[i] ?? null)
  }
  return out + "}"
}

/**
 * Column names as JSON keys. A result may repeat a name (`SELECT a.id, b.id`); in an object the
 * later one would silently win in most parsers, so repeats get a `:2`, `:3` suffix, skipping any
 * suffixed name a column already has (`SELECT 1 AS a, 2 AS a, 3 AS "a:2"` gives a, a:3, a:2).
 */
const objectKeys = (columns: ReadonlyArray<string>): ReadonlyArray<string> => {
  const taken = new Set(columns)
  const used = new Set<string>()
  const suffix = new Map<string, number>()
  return columns.map((c) => {
    let key = c
    if (used.has(c)) {
      let n = suffix.get(c) ?? 1
      do key = `${c}:${++n}`
      while (taken.has(key) || used.has(key))
      suffix.set(c, n)
    }
    used.add(key)
    return JSON.stringify(key)
  })
}

/** The JSON text of a read result in the given shape. */
export const readAnswer = (
  shape: AnswerShape,
  columns: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<SqlCell>>,
  /** `JSON.stringify(columns)`, when the caller keeps it. */
  columnsJson?: string
): string => {
  switch (shape) {
    case "table":
    case "counted": {
      const body = `"columns":${columnsJson ?? JSON.stringify(columns)},"rows":[${rows.map(rowArray).join(",")}]`
      return shape === "table" ? `{${body}}` : `{${body},"count":${rows.length}}`
    }
    case "items": {
      const keys = objectKeys(columns)
      return `{"items":[${rows.map((r) => rowObject(keys, r)).join(",")}],"count":${rows.length}}`
    }
    case "objects": {
      const keys = objectKeys(columns)
      return `[${rows.map((r) => rowObject(keys, r)).join(",")}]`
    }
    case "one": {
      const first = rows[0]
      return first === undefined ? "null" : rowObject(objectKeys(columns), first)
    }
  }
}

/** The JSON text of a write result; both members always present. */
export const execAnswer = (rowsAffected: number | bigint, lastInsertId: number | bigint): string =>
  `{"rows_affected":${rowsAffected.toString()},"last_insert_id":${lastInsertId.toString()}}`
