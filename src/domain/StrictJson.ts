/**
 * Strict JSON: one value, no repeated keys at any depth (also when spelled with escapes), bounded
 * size and depth. Used where an attacker could smuggle a second value past a last-wins parser:
 * device proofs and JOSE headers.
 */
import { Data, type Effect, Either } from "effect"
import { parseExactJson } from "./ExactJson.js"

export class StrictJsonInvalid extends Data.TaggedError("StrictJsonInvalid")<{ readonly reason: string }> {}

/** Bounds on strict JSON input; proofs and JOSE headers are far smaller. */
export interface StrictJsonLimits {
  readonly maxChars: number
  readonly maxDepth: number
}
const DEFAULT_LIMITS: StrictJsonLimits = { maxChars: 65_536, maxDepth: 32 }

// The scanner runs on every JSON request body, so it reads char codes, slices instead of
// building strings a character at a time, and keeps its state in two module variables instead of
// a result object per value (it is synchronous: nothing interleaves). Each scan returns the
// position after what it read, or -1 having set `failure`; a key's unescaped text is left in
// `keyText`.
let failure = ""
let keyText = ""
// the next backslash at or after where a string scan last looked for one, in `backslashText`
let backslashText = ""
let backslashAt = 0
// whether a number literal of 16 characters or more was read: only those can be integers past 2^53
let longNumber = false
const fail = (reason: string): number => {
  failure = reason
  return -1
}

/** Runs a scan and lets go of the last key text after it (a key can be as long as the body). */
const scanned = <A>(scan: () => A): A => {
  try {
    return scan()
  } finally {
    keyText = ""
    backslashText = ""
  }
}

// space, tab, line feed, carriage return
const isWs = (c: number): boolean => c === 32 || c === 9 || c === 10 || c === 13
const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)
// the characters of JSON's grammar, as char codes
const QUOTE = 34 // "
const BACKSLASH = 92
const OPEN_OBJECT = 123 // {
const CLOSE_OBJECT = 125 // }
const OPEN_ARRAY = 91 // [
const CLOSE_ARRAY = 93 // ]
const COLON = 58
const COMMA = 44
const LOWER_T = 116
const LOWER_F = 102
const LOWER_N = 110
const LOWER_U = 117

const simpleEscape = (c: number): string | undefined => {
  switch (c) {
    case QUOTE:
      return '"'
    case BACKSLASH:
      return "\\"
    case 47:
      return "/"
    case 98:
      return "\b"
    case 102:
      return "\f"
    case 110:
      return "\n"
    case 114:
      return "\r"
    case 116:
      return "\t"
    default:
      return undefined
  }
}
const NUMBER_RE = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y

/** Scans one JSON value starting at `start`. */
const scanValue = (src: string, start: number, depth: number, limits: StrictJsonLimits): number => {
  const pos = skipWs(src, start)
  const c = src.charCodeAt(pos)
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
    if (depth >= limits.maxDepth) return fail("JSON nested too deeply")
    return c === OPEN_OBJECT ? scanObject(src, pos, depth + 1, limits) : scanArray(src, pos, depth + 1, limits)
  }
  if (c === QUOTE) return scanString(src, pos, false)
  if (c === LOWER_T && src.startsWith("true", pos)) return pos + 4
  if (c === LOWER_F && src.startsWith("false", pos)) return pos + 5
  if (c === LOWER_N && src.startsWith("null", pos)) return pos + 4
  NUMBER_RE.lastIndex = pos
  const m = NUMBER_RE.exec(src)
  if (m !== null && m[0].length > 0) {
    if (m[0].length >= 16) longNumber = true
    return pos + m[0].length
  }
  return fail(`unexpected character at ${pos}`)
}

const skipWs = (src: string, pos: number): number => {
  let i = pos
  while (i < src.length && isWs(src.charCodeAt(i))) i++
  return i
}

/**
 * Scans a string literal at `pos` (the opening quote); with `wantText`, leaves its unescaped
 * text in `keyText`.
 *
 * It jumps from escape to escape with `indexOf` (the next backslash is found once per text and
 * kept while it lies ahead) instead of reading every character: a long value, such as a vault
 * envelope's 90 KB of base64, costs a few microseconds instead of a quarter of a millisecond.
 * Control characters are not looked for here: `JSON.parse`, which every text that passes the
 * scan goes through, refuses them, and `strictJson` then says where (`controlCharacterAt`).
 */
const scanString = (src: string, pos: number, wantText: boolean): number => {
  let i = pos + 1
  let run = i
  let out = ""
  for (;;) {
    const close = src.indexOf('"', i)
    if (close < 0) return fail("unterminated string")
    if (backslashText !== src || backslashAt < i) {
      backslashText = src
      const found = src.indexOf("\\", i)
      backslashAt = found < 0 ? src.length : found
    }
    if (backslashAt > close) {
      if (wantText) keyText = out + src.slice(run, close)
      return close + 1
    }
    i = backslashAt
    const e = src.charCodeAt(i + 1)
    const simple = simpleEscape(e)
    if (simple !== undefined) {
      if (wantText) out += src.slice(run, i) + simple
      i += 2
    } else if (e === LOWER_U && isHex(src.charCodeAt(i + 2)) && isHex(src.charCodeAt(i + 3)) && isHex(src.charCodeAt(i + 4)) && isHex(src.charCodeAt(i + 5))) {
      // Keys compare by UTF-16 code units, exactly as JSON.parse builds property names.
      if (wantText) out += src.slice(run, i) + String.fromCharCode(parseInt(src.slice(i + 2, i + 6), 16))
      i += 6
    } else {
      return fail(`bad escape in string at ${i}`)
    }
    run = i
  }
}

/** Where the first control character inside a string literal is, or -1: why a scanned text failed to parse. */
const controlCharacterAt = (src: string): number => {
  let inString = false
  for (let i = 0; i < src.length; i++) {
    const c = src.charCodeAt(i)
    if (inString && c < 0x20) return i
    if (inString && c === BACKSLASH) i++
    else if (c === QUOTE) inString = !inString
  }
  return -1
}

const scanObject = (src: string, pos: number, depth: number, limits: StrictJsonLimits): number => {
  let i = skipWs(src, pos + 1)
  if (src.charCodeAt(i) === CLOSE_OBJECT) return i + 1
  // most objects have a few keys: an array beats a Set until there are many
  const seen: Array<string> = []
  let many: Set<string> | undefined
  for (;;) {
    if (src.charCodeAt(i) !== QUOTE) return fail(`expected a key at ${i}`)
    const afterKey = scanString(src, i, true)
    if (afterKey < 0) return afterKey
    const name = keyText
    if (many !== undefined ? many.has(name) : seen.includes(name)) return fail(`duplicate key "${name}"`)
    if (many !== undefined) many.add(name)
    else if (seen.push(name) === 16) many = new Set(seen)
    i = skipWs(src, afterKey)
    if (src.charCodeAt(i) !== COLON) return fail(`expected ":" at ${i}`)
    const afterValue = scanValue(src, i + 1, depth, limits)
    if (afterValue < 0) return afterValue
    i = skipWs(src, afterValue)
    const c = src.charCodeAt(i)
    if (c === CLOSE_OBJECT) return i + 1
    if (c !== COMMA) return fail(`expected "," or "}" at ${i}`)
    i = skipWs(src, i + 1)
  }
}

const scanArray = (src: string, pos: number, depth: number, limits: StrictJsonLimits): number => {
  let i = skipWs(src, pos + 1)
  if (src.charCodeAt(i) === CLOSE_ARRAY) return i + 1
  for (;;) {
    const afterValue = scanValue(src, i, depth, limits)
    if (afterValue < 0) return afterValue
    i = skipWs(src, afterValue)
    const c = src.charCodeAt(i)
    if (c === CLOSE_ARRAY) return i + 1
    if (c !== COMMA) return fail(`expected "," or "]" at ${i}`)
    i += 1
  }
}

/** JSON.parse that refuses duplicate keys at any depth, over-deep nesting and over-long input. */
export const strictJson = (text: string, limits: StrictJsonLimits = DEFAULT_LIMITS): Either.Either<unknown, StrictJsonInvalid> => {
  if (text.length > limits.maxChars) return Either.left(new StrictJsonInvalid({ reason: "JSON text too long" }))
  longNumber = false
  const end = scanned(() => scanValue(text, 0, 0, limits))
  if (end < 0) return Either.left(new StrictJsonInvalid({ reason: failure }))
  if (skipWs(text, end) !== text.length) {
    return Either.left(new StrictJsonInvalid({ reason: "trailing characters after the JSON value" }))
  }
  try {
    // integers past 2^53 arrive as bigint, not rounded (SQL arguments, ExactJson.ts); the scan
    // has seen every number literal, so a text without a long one takes the native parser at once
    return Either.right(longNumber ? parseExactJson(text) : JSON.parse(text))
  } catch {
    const at = controlCharacterAt(text)
    return Either.left(new StrictJsonInvalid({ reason: at < 0 ? "not valid JSON" : `control character in string at ${at}` }))
  }
}

/** `strictJson` as an effect. */
export const parseStrictJson = (text: string, limits: StrictJsonLimits = DEFAULT_LIMITS): Effect.Effect<unknown, StrictJsonInvalid> =>
  strictJson(text, limits)

/**
 * The source text of one member of a top-level JSON object, exactly as written (so a number
 * keeps every digit JSON.parse would round away); undefined when the text is not an object or
 * has no such member. Call it on text that has already passed `parseStrictJson`.
 */
export const memberSource = (text: string, name: string, limits: StrictJsonLimits = DEFAULT_LIMITS): string | undefined =>
  scanned(() => memberAt(text, name, limits))

const memberAt = (text: string, name: string, limits: StrictJsonLimits): string | undefined => {
  let i = skipWs(text, 0)
  if (text.charAt(i) !== "{") return undefined
  i = skipWs(text, i + 1)
  while (text.charAt(i) === '"') {
    const afterKey = scanString(text, i, true)
    if (afterKey < 0) return undefined
    const key = keyText
    i = skipWs(text, afterKey)
    if (text.charAt(i) !== ":") return undefined
    const start = skipWs(text, i + 1)
    const afterValue = scanValue(text, start, 1, limits)
    if (afterValue < 0) return undefined
    if (key === name) return text.slice(start, afterValue)
    i = skipWs(text, afterValue)
    if (text.charAt(i) !== ",") return undefined
    i = skipWs(text, i + 1)
  }
  return undefined
}