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

const WS = new Set([" ", "\t", "\n", "\r"])
const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t"
}
const HEX4_RE = /^[0-9A-Fa-f]{4}$/
const NUMBER_RE = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y

type Scan = { readonly ok: true; readonly pos: number; readonly text?: string } | { readonly ok: false; readonly reason: string }
const fail = (reason: string): Scan => ({ ok: false, reason })

/** Scans one JSON value starting at `pos`; returns the position after it, or why it is not JSON. */
const scanValue = (src: string, start: number, depth: number, limits: StrictJsonLimits): Scan => {
  const pos = skipWs(src, start)
  const c = src.charAt(pos)
  if (c === "{" || c === "[") {
    if (depth >= limits.maxDepth) return fail("JSON nested too deeply")
    return c === "{" ? scanObject(src, pos, depth + 1, limits) : scanArray(src, pos, depth + 1, limits)
  }
  if (c === '"') return scanString(src, pos)
  for (const literal of ["true", "false", "null"]) {
    if (src.startsWith(literal, pos)) return { ok: true, pos: pos + literal.length }
  }
  NUMBER_RE.lastIndex = pos
  const m = NUMBER_RE.exec(src)
  if (m !== null && m[0].length > 0) return { ok: true, pos: pos + m[0].length }
  return fail(`unexpected character at ${pos}`)
}

const skipWs = (src: string, pos: number): number => {
  let i = pos
  while (i < src.length && WS.has(src.charAt(i))) i++
  return i
}

/** Scans a string literal at `pos` (the opening quote) and returns its unescaped text. */
const scanString = (src: string, pos: number): Scan => {
  let i = pos + 1
  let out = ""
  while (i < src.length) {
    const c = src.charAt(i)
    if (c === '"') return { ok: true, pos: i + 1, text: out }
    if (c.charCodeAt(0) < 0x20) return fail(`control character in string at ${i}`)
    if (c === "\\") {
      const e = src.charAt(i + 1)
      const simple = SIMPLE_ESCAPES[e]
      if (simple !== undefined) {
        out += simple
        i += 2
      } else if (e === "u" && HEX4_RE.test(src.slice(i + 2, i + 6))) {
        // Keys compare by UTF-16 code units, exactly as JSON.parse builds property names.
        out += String.fromCharCode(parseInt(src.slice(i + 2, i + 6), 16))
        i += 6
      } else {
        return fail(`bad escape in string at ${i}`)
      }
    } else {
      out += c
      i++
    }
  }
  return fail("unterminated string")
}

const scanObject = (src: string, pos: number, depth: number, limits: StrictJsonLimits): Scan => {
  const seen = new Set<string>()
  let i = skipWs(src, pos + 1)
  if (src.charAt(i) === "}") return { ok: true, pos: i + 1 }
  for (;;) {
    if (src.charAt(i) !== '"') return fail(`expected a key at ${i}`)
    const key = scanString(src, i)
    if (!key.ok) return key
    const name = key.text ?? ""
    if (seen.has(name)) return fail(`duplicate key "${name}"`)
    seen.add(name)
    i = skipWs(src, key.pos)
    if (src.charAt(i) !== ":") return fail(`expected ":" at ${i}`)
    const value = scanValue(src, i + 1, depth, limits)
    if (!value.ok) return value
    i = skipWs(src, value.pos)
    const c = src.charAt(i)
    if (c === "}") return { ok: true, pos: i + 1 }
    if (c !== ",") return fail(`expected "," or "}" at ${i}`)
    i = skipWs(src, i + 1)
  }
}

const scanArray = (src: string, pos: number, depth: number, limits: StrictJsonLimits): Scan => {
  let i = skipWs(src, pos + 1)
  if (src.charAt(i) === "]") return { ok: true, pos: i + 1 }
  for (;;) {
    const value = scanValue(src, i, depth, limits)
    if (!value.ok) return value
    i = skipWs(src, value.pos)
    const c = src.charAt(i)
    if (c === "]") return { ok: true, pos: i + 1 }
    if (c !== ",") return fail(`expected "," or "]" at ${i}`)
    i += 1
  }
}

/** JSON.parse that refuses duplicate keys at any depth, over-deep nesting and over-long input. */
export const strictJson = (text: string, limits: StrictJsonLimits = DEFAULT_LIMITS): Either.Either<unknown, StrictJsonInvalid> => {
  if (text.length > limits.maxChars) return Either.left(new StrictJsonInvalid({ reason: "JSON text too long" }))
  const scan = scanValue(text, 0, 0, limits)
  if (!scan.ok) return Either.left(new StrictJsonInvalid({ reason: scan.reason }))
  if (skipWs(text, scan.pos) !== text.length) {
    return Either.left(new StrictJsonInvalid({ reason: "trailing characters after the JSON value" }))
  }
  try {
    // integers past 2^53 arrive as bigint, not rounded (SQL arguments, ExactJson.ts)
    return Either.right(parseExactJson(text))
  } catch {
    return Either.left(new StrictJsonInvalid({ reason: "not valid JSON" }))
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
export const memberSource = (text: string, name: string, limits: StrictJsonLimits = DEFAULT_LIMITS): string | undefined => {
  let i = skipWs(text, 0)
  if (text.charAt(i) !== "{") return undefined
  i = skipWs(text, i + 1)
  while (text.charAt(i) === '"') {
    const key = scanString(text, i)
    if (!key.ok) return undefined
    i = skipWs(text, key.pos)
    if (text.charAt(i) !== ":") return undefined
    const start = skipWs(text, i + 1)
    const value = scanValue(text, start, 1, limits)
    if (!value.ok) return undefined
    if (key.text === name) return text.slice(start, value.pos)
    i = skipWs(text, value.pos)
    if (text.charAt(i) !== ",") return undefined
    i = skipWs(text, i + 1)
  }
  return undefined
}
