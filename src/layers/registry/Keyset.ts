/**
 * Keyset paging over the registry: a list is read in pages ordered by a key that is unique within
 * the list (one column, or a tuple such as `(created_at, id)` whose last column is unique), and
 * the next page starts after the last key of the page before. Not OFFSET: a page costs the same
 * however deep it is, and a row added or removed meanwhile neither repeats nor skips another.
 *
 * Every query is bounded: it reads at most `limit + 1` rows, the one past the page only telling
 * whether there is a next page. Plain SQL (`a > ? OR (a = ? AND b > ?)`), so both engines run it
 * unchanged.
 */
import { Effect } from "effect"
import type { RegistryStoreService, Row, SqlValue, Statement, StoreError } from "./RegistryStore.js"
import type { KeyValues, Page, PageRequest } from "../../domain/Page.js"

export type { KeyValues, Page, PageRequest }

export interface KeysetSpec {
  /** `SELECT … FROM …` without WHERE. */
  readonly select: string
  /** The list's own conditions, ANDed (e.g. `namespace = ?`), with their parameters. */
  readonly where: ReadonlyArray<string>
  readonly params: ReadonlyArray<SqlValue>
  /** The ordering key's columns, most significant first; together unique within the list. */
  readonly order: ReadonlyArray<string>
  readonly direction: "asc" | "desc"
}

/** The statement for one page: the list's conditions, after the cursor, in key order, `limit + 1` rows. */
export const pageStatement = (spec: KeysetSpec, page: PageRequest): Statement => {
  const where = [...spec.where]
  const params: Array<SqlValue> = [...spec.params]
  if (page.after !== undefined) {
    const op = spec.direction === "asc" ? ">" : "<"
    // (c1, c2, …) after (v1, v2, …): c1 past v1, or c1 equal and c2 past v2, and so on
    const alternatives = spec.order.map((column, i) => {
      const equal = spec.order.slice(0, i).map((c) => `${c} = ?`)
      return "(" + [...equal, `${column} ${op} ?`].join(" AND ") + ")"
    })
    where.push("(" + alternatives.join(" OR ") + ")")
    spec.order.forEach((_, i) => params.push(...page.after!.slice(0, i + 1)))
  }
  const dir = spec.direction === "asc" ? "ASC" : "DESC"
  params.push(page.limit + 1)
  return {
    sql: `${spec.select} WHERE ${where.join(" AND ")} ORDER BY ${spec.order.map((c) => `${c} ${dir}`).join(", ")} LIMIT ?`,
    params
  }
}

/** Cuts the `limit + 1` rows read to the page, and names the key of its last row when more follow. */
export const pageOf = <A>(rows: ReadonlyArray<Row>, spec: KeysetSpec, page: PageRequest, toItem: (row: Row) => A): Page<A> => {
  const more = rows.length > page.limit
  const kept = more ? rows.slice(0, page.limit) : rows
  const last = kept[kept.length - 1]
  return {
    items: kept.map(toItem),
    next: more && last !== undefined ? spec.order.map((c) => last[c] ?? "") : undefined
  }
}

/** Reads one page of a list from the registry. */
export const readPage = <A>(
  store: RegistryStoreService,
  spec: KeysetSpec,
  page: PageRequest,
  toItem: (row: Row) => A
): Effect.Effect<Page<A>, StoreError> => Effect.map(store.query(pageStatement(spec, page)), (rows) => pageOf(rows, spec, page, toItem))
