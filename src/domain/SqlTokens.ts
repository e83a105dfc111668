/**
 * SQL text split exactly as SQLite's own tokenizer (`sqlite3GetToken`, tokenize.c) splits it, so
 * that rules written over these tokens see the same names, strings and statement breaks SQLite will.
 *
 * The scanner works on UTF-16 code units where SQLite works on UTF-8 bytes. That changes nothing:
 * every non-ASCII character becomes bytes >= 0x80, which SQLite treats as identifier characters,
 * except the byte-order mark U+FEFF (EF BB BF), which SQLite skips as whitespace at a token start.
 * A NUL character ends SQLite's input (everything after it is silently ignored), so it is scanned
 * as an `illegal` token here and guards refuse the text rather than judge a different string.
 */

export type TokenKind =
  | "whitespace"
  | "string"
  | "identifier"
  | "number"
  | "blob"
  | "variable"
  | "operator"
  | "illegal"

export interface Token {
  readonly kind: TokenKind
  /** The source slice: `sql.slice(start, end)`. */
  readonly text: string
  /**
   * Decoded text: a string or quoted identifier without its quotes and with doubled quotes
   * collapsed, a number without `_` separators, a blob's hex digits; otherwise `text`.
   */
  readonly value: string
  /** UTF-16 offsets into the source, end exclusive. */
  readonly start: number
  readonly end: number
  /** Identifiers only: true when written "double-quoted", [bracketed] or `backticked`. */
  readonly quoted?: boolean
}

// Character codes the scanner compares against.
const NUL = 0x00
const TAB = 0x09
const LF = 0x0a
const CR = 0x0d
const SPACE = 0x20
const BANG = 0x21
const DQUOTE = 0x22
const HASH = 0x23
const DOLLAR = 0x24
const SQUOTE = 0x27
const LPAREN = 0x28
const RPAREN = 0x29
const STAR = 0x2a
const PLUS = 0x2b
const MINUS = 0x2d
const DOT = 0x2e
const SLASH = 0x2f
const COLON = 0x3a
const LT = 0x3c
const EQ = 0x3d
const GT = 0x3e
const QUESTION = 0x3f
const AT = 0x40
const LBRACKET = 0x5b
const RBRACKET = 0x5d
const UNDERSCORE = 0x5f
const BACKTICK = 0x60
const PIPE = 0x7c
const BOM = 0xfeff

/** Single characters that are always a one-character operator token. */
const SINGLE_OPERATORS: ReadonlySet<number> = new Set([
  LPAREN,
  RPAREN,
  0x3b /* ; */,
  PLUS,
  STAR,
  0x25 /* % */,
  0x2c /* , */,
  0x26 /* & */,
  0x7e /* ~ */
])

/** The code unit at `i`, or NUL outside the text: SQLite's input is NUL-terminated and its loops stop there. */
const codeAt = (sql: string, i: number): number => (i >= 0 && i < sql.length ? sql.charCodeAt(i) : NUL)

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39
const isHexDigit = (c: number): boolean =>
  isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
const isLetter = (c: number): boolean => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)
/** `sqlite3Isspace`: tab, LF, VT, FF, CR and space (continues a whitespace run). */
const isSpace = (c: number): boolean => c === SPACE || (c >= TAB && c <= CR)
/** Characters whose class is CC_SPACE: may start a whitespace run (VT may not, only continue one). */
const startsSpace = (c: number): boolean => c === SPACE || c === TAB || c === LF || c === 0x0c || c === CR
/** `IdChar`: ASCII letters and digits, `_`, `$`, and any non-ASCII character. */
const isIdChar = (c: number): boolean => isLetter(c) || isDigit(c) || c === UNDERSCORE || c === DOLLAR || c >= 0x80

/** One scanned token before it is sliced out of the source. */
interface Scanned {
  readonly kind: TokenKind
  readonly end: number
  readonly value?: string
  readonly quoted?: boolean
}

const run = (sql: string, from: number, test: (c: number) => boolean): number => {
  let i = from
  while (test(codeAt(sql, i))) i++
  return i
}

/**
 * '...', "..." or `...`: a doubled delimiter stands for itself. Single quotes make a string, the
 * other two an identifier; without a closing delimiter the rest of the input is one illegal token.
 */
const scanQuoted = (sql: string, start: number, delim: number): Scanned => {
  let value = ""
  let pieceStart = start + 1
  let i = start + 1
  for (let c = codeAt(sql, i); c !== NUL; c = codeAt(sql, i)) {
    if (c === delim) {
      if (codeAt(sql, i + 1) !== delim) {
        value += sql.slice(pieceStart, i)
        return delim === SQUOTE
          ? { kind: "string", end: i + 1, value }
          : { kind: "identifier", end: i + 1, value, quoted: true }
      }
      // Keep one of the two delimiters and skip the other.
      value += sql.slice(pieceStart, i + 1)
      i += 2
      pieceStart = i
    } else {
      i++
    }
  }
  return { kind: "illegal", end: i }
}

/** [...]: SQL Server style, no escape at all; the first `]` closes it. */
const scanBracketed = (sql: string, start: number): Scanned => {
  const close = run(sql, start + 1, (c) => c !== RBRACKET && c !== NUL)
  return codeAt(sql, close) === RBRACKET
    ? { kind: "identifier", end: close + 1, value: sql.slice(start + 1, close), quoted: true }
    : { kind: "illegal", end: close }
}

/**
 * `_` is legal in a number (SQLite 3.46+) only between two digits (hex digits in a hex literal);
 * the tokenizer accepts any `_` run and the parser rejects the rest (`sqlite3DequoteNumber`).
 */
const separatorsValid = (text: string, hex: boolean): boolean => {
  const digit = hex ? isHexDigit : isDigit
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) === UNDERSCORE && !(digit(codeAt(text, i - 1)) && digit(codeAt(text, i + 1)))) return false
  }
  return true
}

/** Integers, decimals (also `.5`), exponents and 0x hex, with `_` separators; letters glued on make it illegal. */
const scanNumber = (sql: string, start: number): Scanned => {
  let separated = false
  const digits = (from: number, test: (c: number) => boolean): number => {
    let i = from
    for (;;) {
      const c = codeAt(sql, i)
      if (c === UNDERSCORE) separated = true
      else if (!test(c)) return i
      i++
    }
  }
  const hex = codeAt(sql, start) === 0x30 && (codeAt(sql, start + 1) | 0x20) === 0x78 && isHexDigit(codeAt(sql, start + 2))
  let i: number
  if (hex) {
    i = digits(start + 3, isHexDigit)
  } else {
    i = digits(start, isDigit)
    if (codeAt(sql, i) === DOT) i = digits(i + 1, isDigit)
    const e = codeAt(sql, i)
    const next = codeAt(sql, i + 1)
    if ((e | 0x20) === 0x65 && (isDigit(next) || ((next === PLUS || next === MINUS) && isDigit(codeAt(sql, i + 2))))) {
      i = digits(i + 2, isDigit)
    }
  }
  const glued = run(sql, i, isIdChar)
  const text = sql.slice(start, glued)
  if (glued > i || (separated && !separatorsValid(text, hex))) return { kind: "illegal", end: glued }
  return { kind: "number", end: glued, value: separated ? text.replaceAll("_", "") : text }
}

/** x'...': an even number of hex digits; anything else is illegal up to and including the next quote. */
const scanBlob = (sql: string, start: number): Scanned => {
  const i = run(sql, start + 2, isHexDigit)
  if (codeAt(sql, i) === SQUOTE && (i - start - 2) % 2 === 0) {
    return { kind: "blob", end: i + 1, value: sql.slice(start + 2, i) }
  }
  const close = run(sql, i, (c) => c !== SQUOTE && c !== NUL)
  return { kind: "illegal", end: codeAt(sql, close) === SQUOTE ? close + 1 : close }
}

/**
 * `:name`, `@name`, `$name`, `#name`, and the Tcl forms `$a::b` and `$a(anything-but-space)`.
 * With no identifier character after the sigil it is illegal (so a lone `#` or `:` is).
 */
const scanNamedVariable = (sql: string, start: number): Scanned => {
  let named = 0
  let i = start + 1
  for (let c = codeAt(sql, i); c !== NUL; c = codeAt(sql, i)) {
    if (isIdChar(c)) {
      named++
      i++
    } else if (c === LPAREN && named > 0) {
      const close = run(sql, i + 1, (d) => d !== NUL && d !== RPAREN && !isSpace(d))
      return codeAt(sql, close) === RPAREN ? { kind: "variable", end: close + 1 } : { kind: "illegal", end: close }
    } else if (c === COLON && codeAt(sql, i + 1) === COLON) {
      i += 2
    } else {
      break
    }
  }
  return { kind: named > 0 ? "variable" : "illegal", end: i }
}

/** `/* ... *\/`; unterminated, it runs to the end. A `/*` with nothing after it is a slash (then a star). */
const scanSlash = (sql: string, start: number): Scanned => {
  if (codeAt(sql, start + 1) !== STAR || codeAt(sql, start + 2) === NUL) return { kind: "operator", end: start + 1 }
  let i = start + 2
  for (let c = codeAt(sql, i); c !== NUL; c = codeAt(sql, i)) {
    if (c === STAR && codeAt(sql, i + 1) === SLASH) return { kind: "whitespace", end: i + 2 }
    i++
  }
  return { kind: "whitespace", end: i }
}

const operator = (start: number, length: number): Scanned => ({ kind: "operator", end: start + length })

/** One token starting at `start` (which is inside the text). */
const scanToken = (sql: string, start: number): Scanned => {
  const c = codeAt(sql, start)
  const next = codeAt(sql, start + 1)
  if (startsSpace(c)) return { kind: "whitespace", end: run(sql, start + 1, isSpace) }
  if (SINGLE_OPERATORS.has(c)) return operator(start, 1)
  switch (c) {
    case MINUS:
      if (next === MINUS) return { kind: "whitespace", end: run(sql, start + 2, (d) => d !== NUL && d !== LF) }
      if (next === GT) return operator(start, codeAt(sql, start + 2) === GT ? 3 : 2)
      return operator(start, 1)
    case SLASH:
      return scanSlash(sql, start)
    case EQ:
      return operator(start, next === EQ ? 2 : 1)
    case LT:
      return operator(start, next === EQ || next === GT || next === LT ? 2 : 1)
    case GT:
      return operator(start, next === EQ || next === GT ? 2 : 1)
    case BANG:
      return next === EQ ? operator(start, 2) : { kind: "illegal", end: start + 1 }
    case PIPE:
      return operator(start, next === PIPE ? 2 : 1)
    case SQUOTE:
    case DQUOTE:
    case BACKTICK:
      return scanQuoted(sql, start, c)
    case LBRACKET:
      return scanBracketed(sql, start)
    case DOT:
      return isDigit(next) ? scanNumber(sql, start) : operator(start, 1)
    case QUESTION:
      return { kind: "variable", end: run(sql, start + 1, isDigit) }
    case DOLLAR:
    case AT:
    case COLON:
    case HASH:
      return scanNamedVariable(sql, start)
    case BOM:
      return { kind: "whitespace", end: start + 1 }
    default:
      break
  }
  if (isDigit(c)) return scanNumber(sql, start)
  if ((c | 0x20) === 0x78 && next === SQUOTE) return scanBlob(sql, start)
  if (isLetter(c) || c === UNDERSCORE || c >= 0x80) {
    return { kind: "identifier", end: run(sql, start + 1, isIdChar), quoted: false }
  }
  // NUL, control characters, `\`, `]`, `^`, `{`, `}` and DEL start no token.
  return { kind: "illegal", end: start + 1 }
}

/** The whole text as tokens, whitespace and comments included, so offsets cover every character. */
export const tokenize = (sql: string): ReadonlyArray<Token> => {
  const tokens: Array<Token> = []
  let start = 0
  while (start < sql.length) {
    const scanned = scanToken(sql, start)
    const text = sql.slice(start, scanned.end)
    const value = scanned.value ?? text
    tokens.push(
      scanned.quoted === undefined
        ? { kind: scanned.kind, text, value, start, end: scanned.end }
        : { kind: scanned.kind, text, value, start, end: scanned.end, quoted: scanned.quoted }
    )
    start = scanned.end
  }
  return tokens
}
