/**
 * One tenant SQL statement as SQLite will read it, over SQLite's own tokens (SqlTokens): exactly
 * one statement per text, its kind by the spec's verb rule, whether it only reads (an
 * allow-list), and the token helpers the guards (SqlGuard.ts) decide with. ASCII case folding
 * as SQLite's.
 */
import { type Token, tokenize } from "./SqlTokens.js"

export type StatementKind = "read" | "write"

/** Why a statement is refused. `status` 400 = malformed/not allowed shape, 403 = SQL_NOT_ALLOWED. */
export interface SqlRefusal {
  readonly status: 400 | 403
  readonly code: "SQL_NOT_ALLOWED" | "VALIDATION_FAILED"
  readonly reason: string
}

export interface Inspected {
  readonly kind: StatementKind
  /** Upper-case main keyword, e.g. "SELECT", "INSERT", "CREATE"; "EXPLAIN" for any EXPLAIN; "" when none. */
  readonly verb: string
  /**
   * Whether the statement leaves the database and the connection as they were (see `readsOnly`):
   * what a read-only route (`/v1/rqlite/query`, a transaction's `query` op) may run. Narrower
   * than `kind === "read"`: ANALYZE is a read by the spec's verb rule and writes all the same.
   */
  readonly readOnly: boolean
  /** Every token of the submitted text, whitespace and comments included. */
  readonly tokens: ReadonlyArray<Token>
}

export type Checked =
  | { readonly ok: true; readonly statement: Inspected }
  | { readonly ok: false; readonly refusal: SqlRefusal }

const invalid = (reason: string): Checked => ({
  ok: false,
  refusal: { status: 400, code: "VALIDATION_FAILED", reason }
})

export const notAllowed = (reason: string): Checked => ({
  ok: false,
  refusal: { status: 403, code: "SQL_NOT_ALLOWED", reason }
})

// SQLite folds only ASCII letters when it compares keywords and names (sqlite3StrICmp); JS case
// mapping would also fold e.g. the Kelvin sign into "k" and name a table SQLite considers different.
const asciiUpper = (text: string): string => text.replace(/[a-z]+/g, (letters) => letters.toUpperCase())
export const asciiLower = (text: string): string => text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase())

/** A name as deny-lists compare it: trimmed (a padded name is refused too), ASCII-lower-cased. */
export const nameKey = (value: string): string => asciiLower(value.trim())

/** Tokens SQLite acts on: whitespace and comments dropped. */
export const significant = (tokens: ReadonlyArray<Token>): ReadonlyArray<Token> =>
  tokens.filter((token) => token.kind !== "whitespace")

/** The upper-cased word when the token is a bare identifier (only bare words can be keywords). */
export const bareWord = (token: Token | undefined): string =>
  token !== undefined && token.kind === "identifier" && token.quoted !== true ? asciiUpper(token.value) : ""

export const isWord = (token: Token | undefined, word: string): boolean => bareWord(token) === word

export const isPunct = (token: Token | undefined, text: string): boolean =>
  token !== undefined && token.kind === "operator" && token.text === text

/** Tokens SQLite may take as a name: identifiers in any quoting and, where its grammar says `nm`, string literals. */
export const isNameToken = (token: Token | undefined): token is Token =>
  token !== undefined && (token.kind === "identifier" || token.kind === "string")

/** Index just past the parenthesised group opening at `open`; undefined when it never closes. */
const skipParens = (tokens: ReadonlyArray<Token>, open: number): number | undefined => {
  let depth = 0
  for (let i = open; i < tokens.length; i++) {
    // Parentheses inside strings and quoted names are inside those tokens, so they never count.
    if (isPunct(tokens[i], "(")) depth++
    else if (isPunct(tokens[i], ")")) depth--
    if (depth === 0) return i + 1
  }
  return undefined
}

/**
 * Index of the main verb after `WITH [RECURSIVE] name [(cols)] AS [NOT] [MATERIALIZED] (...) [, ...]`
 * starting at the WITH token; undefined when the clause does not have that shape.
 */
const skipWith = (tokens: ReadonlyArray<Token>, at: number): number | undefined => {
  let i = at + 1
  if (isWord(tokens[i], "RECURSIVE")) i++
  for (;;) {
    // A CTE name is SQLite's `nm`, which also admits a string literal.
    if (!isNameToken(tokens[i])) return undefined
    i++
    if (isPunct(tokens[i], "(")) {
      const afterColumns = skipParens(tokens, i)
      if (afterColumns === undefined) return undefined
      i = afterColumns
    }
    if (!isWord(tokens[i], "AS")) return undefined
    i++
    if (isWord(tokens[i], "NOT")) i++
    if (isWord(tokens[i], "MATERIALIZED")) i++
    if (!isPunct(tokens[i], "(")) return undefined
    const afterBody = skipParens(tokens, i)
    if (afterBody === undefined) return undefined
    i = afterBody
    if (!isPunct(tokens[i], ",")) return i
    i++
  }
}

/** How a statement opens, over its significant tokens. */
export interface Head {
  /** The first word ("" when the statement does not open with a bare word). */
  readonly first: string
  readonly explain: boolean
  /** The verb after EXPLAIN [QUERY PLAN] and any WITH clause; "WITH" when that clause is unreadable. */
  readonly verb: string
  /** Index of `verb` in the significant tokens. */
  readonly at: number
  readonly unreadableWith: boolean
}

export const head = (tokens: ReadonlyArray<Token>): Head => {
  let i = 0
  while (isPunct(tokens[i], ";")) i++
  const first = bareWord(tokens[i])
  const explain = first === "EXPLAIN"
  if (explain) {
    i++
    if (isWord(tokens[i], "QUERY") && isWord(tokens[i + 1], "PLAN")) i += 2
  }
  if (isWord(tokens[i], "WITH")) {
    const verbAt = skipWith(tokens, i)
    if (verbAt === undefined) return { first, explain, verb: "WITH", at: i, unreadableWith: true }
    i = verbAt
  }
  return { first, explain, verb: bareWord(tokens[i]), at: i, unreadableWith: false }
}

const WRITE_VERBS: ReadonlySet<string> = new Set([
  "INSERT",
  "UPDATE",
  "DELETE",
  "CREATE",
  "DROP",
  "ALTER",
  "TRUNCATE",
  "REPLACE"
])

/**
 * Statement kind: writes are INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, TRUNCATE, REPLACE, also
 * behind a WITH clause; EXPLAIN of anything and every other verb is a read. A WITH clause that
 * cannot be followed to its verb counts as a write, the stricter kind (SQLite will reject it anyway).
 */
export const statementKind = (tokens: ReadonlyArray<Token>): { readonly kind: StatementKind; readonly verb: string } => {
  const opening = head(significant(tokens))
  if (opening.explain) return { kind: "read", verb: "EXPLAIN" }
  if (opening.unreadableWith) return { kind: "write", verb: "WITH" }
  return { kind: WRITE_VERBS.has(opening.verb) ? "write" : "read", verb: opening.verb }
}

/** Reporting pragmas whose parenthesised argument is what to report on, not a value to set. */
const QUERY_PRAGMAS_WITH_ARGUMENT: ReadonlySet<string> = new Set([
  "table_info",
  "table_xinfo",
  "table_list",
  "index_list",
  "index_info",
  "index_xinfo",
  "foreign_key_list",
  "foreign_key_check",
  "integrity_check",
  "quick_check"
])

/** Pragmas that only report when given no value (`PRAGMA user_version`): those above and these. */
const QUERY_PRAGMAS: ReadonlySet<string> = new Set([
  ...QUERY_PRAGMAS_WITH_ARGUMENT,
  "foreign_keys",
  "defer_foreign_keys",
  "user_version",
  "application_id",
  "page_count",
  "freelist_count"
])

/** `PRAGMA [schema.]name [(arg)]` that only reports: a name in QUERY_PRAGMAS, no `= value`, no value in parentheses. */
const pragmaReadsOnly = (tokens: ReadonlyArray<Token>, at: number): boolean => {
  let i = at + 1
  if (isPunct(tokens[i + 1], ".")) i += 2
  const name = tokens[i]
  if (!isNameToken(name)) return false
  const key = asciiLower(name.value)
  if (!QUERY_PRAGMAS.has(key)) return false
  const next = tokens[i + 1]
  if (next === undefined || isPunct(next, ";")) return true
  return isPunct(next, "(") && QUERY_PRAGMAS_WITH_ARGUMENT.has(key)
}

/**
 * Whether the statement only reads, by an allow-list rather than the absence of write verbs:
 * SELECT and VALUES (also behind WITH), the reporting form of a few pragmas (QUERY_PRAGMAS), and
 * EXPLAIN [QUERY PLAN] of one of those. Everything else may change the file or the connection
 * (ANALYZE, REINDEX, VACUUM, `PRAGMA x = v`, writes with RETURNING, ...). EXPLAIN of a write is
 * not read-only either: SQLite's sqlite3_stmt_readonly says the same of it, and rqlite's
 * `/db/query`, which asks SQLite, refuses it, so both engines agree.
 */
export const readsOnly = (tokens: ReadonlyArray<Token>): boolean => {
  const opening = head(significant(tokens))
  if (opening.unreadableWith) return false
  if (opening.verb === "SELECT" || opening.verb === "VALUES") return true
  return opening.verb === "PRAGMA" && pragmaReadsOnly(significant(tokens), opening.at)
}

// Statement ends, as sqlite3_complete (complete.c) finds them: a `;` ends a statement except inside
// a CREATE TRIGGER body, which only `; END ;` ends. Token classes and states keep complete.c's numbers.
const SEMI = 0
const WS = 1
const OTHER = 2
const START = 1
const NORMAL = 2
const TRANSITIONS: ReadonlyArray<ReadonlyArray<number>> = [
  /*                SEMI  WS  OTHER  EXPLAIN  CREATE  TEMP  TRIGGER  END */
  /* 0 INVALID */ [1, 0, 2, 3, 4, 2, 2, 2],
  /* 1 START   */ [1, 1, 2, 3, 4, 2, 2, 2],
  /* 2 NORMAL  */ [1, 2, 2, 2, 2, 2, 2, 2],
  /* 3 EXPLAIN */ [1, 3, 3, 2, 4, 2, 2, 2],
  /* 4 CREATE  */ [1, 4, 2, 2, 2, 4, 5, 2],
  /* 5 TRIGGER */ [6, 5, 5, 5, 5, 5, 5, 5],
  /* 6 SEMI    */ [6, 6, 5, 5, 5, 5, 5, 7],
  /* 7 END     */ [1, 7, 5, 5, 5, 5, 5, 5]
]
const TRIGGER_WORDS: Readonly<Record<string, number>> = { EXPLAIN: 3, CREATE: 4, TEMP: 5, TEMPORARY: 5, TRIGGER: 6, END: 7 }

const tokenClass = (token: Token): number => {
  if (token.kind === "whitespace") return WS
  if (isPunct(token, ";")) return SEMI
  return TRIGGER_WORDS[bareWord(token)] ?? OTHER
}

/** Statements in the text; empty ones (`;` alone) do not count. */
const countStatements = (tokens: ReadonlyArray<Token>): number => {
  let state = START
  let count = 0
  let open = false
  for (const token of tokens) {
    const tokenKind = tokenClass(token)
    const next = TRANSITIONS[state]?.[tokenKind] ?? NORMAL
    if (tokenKind === SEMI && next === START) {
      if (open) count++
      open = false
    } else if (tokenKind !== WS && tokenKind !== SEMI) {
      open = true
    }
    state = next
  }
  return open ? count + 1 : count
}

const describeIllegal = (token: Token): string => {
  const opening = token.text.charAt(0)
  if (opening === "\u0000") return "SQL text contains a NUL character"
  if (opening === "'") return "unterminated string literal"
  if (opening === '"' || opening === "`" || opening === "[") return "unterminated quoted identifier"
  const shown = token.text.length > 32 ? `${token.text.slice(0, 32)}…` : token.text
  return `unrecognized token: ${JSON.stringify(shown)}`
}

/**
 * Exactly one statement: before and after it only whitespace, comments and `;`s. Blank text is
 * "empty statement", a second statement "one statement per call", and a token SQLite would reject
 * (unterminated string, stray character) a 400 as well. An unterminated block comment is a
 * comment to the end of the text, as in SQLite.
 */
export const singleStatement = (sql: string): Checked => {
  const tokens = tokenize(sql)
  const illegal = tokens.find((token) => token.kind === "illegal")
  if (illegal !== undefined) return invalid(describeIllegal(illegal))
  const count = countStatements(tokens)
  if (count === 0) return invalid("empty statement")
  if (count > 1) return invalid("one statement per call")
  return { ok: true, statement: { ...statementKind(tokens), readOnly: readsOnly(tokens), tokens } }
}
