/**
 * JSON whose integers keep every digit. SQLite's INTEGER is 64 bits and a JSON number has no
 * width, but `JSON.parse` rounds any integer past 2^53 to a double: a row id 9223372036854775806
 * sent as a bound argument would silently match another row. Here an integer literal outside the
 * safe range becomes a bigint; every other value is exactly what `JSON.parse` gives.
 *
 * Texts without a run of 16 digits cannot hold such an integer and take the native parser; the
 * rest go through lossless-json (a pure-JS parser, several times slower).
 */
import { parse as losslessParse, stringify as losslessStringify } from "lossless-json"

const INTEGER = /^-?\d+$/
const LONG_DIGITS = /\d{16}/

const exactNumber = (text: string): number | bigint => {
  const n = Number(text)
  return Number.isSafeInteger(n) || !INTEGER.test(text) ? n : BigInt(text)
}

export const parseExactJson = (text: string): unknown =>
  LONG_DIGITS.test(text) ? losslessParse(text, null, exactNumber) : JSON.parse(text)

const hasBigInt = (value: unknown): boolean => {
  if (typeof value === "bigint") return true
  if (typeof value !== "object" || value === null) return false
  // loops rather than `some`: statements' arguments go through here on every call
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (hasBigInt(value[i])) return true
    return false
  }
  for (const member of Object.values(value)) if (hasBigInt(member)) return true
  return false
}

/** `JSON.stringify`, with bigints written as their digits. */
export const stringifyExactJson = (value: unknown): string =>
  hasBigInt(value) ? (losslessStringify(value) ?? "null") : JSON.stringify(value)
