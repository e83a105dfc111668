/**
 * Canonical JSON, what both ends of a node-to-node call MAC (Coordination.ts): keys sorted, and
 * numbers written so the receiving end parses the same values back.
 */
import { LosslessNumber, stringify as losslessStringify } from "lossless-json"

/** Whether `JSON.stringify` writes `n` as text that parses back to it: a safe integer or a finite fraction. */
export const writtenExactly = (n: number): boolean => Number.isSafeInteger(n) || (Number.isFinite(n) && !Number.isInteger(n))

/**
 * A number written so the receiving end parses the same value back: `JSON.stringify` writes a
 * whole double past 2^53 as bare digits (read back as a 64-bit integer, or refused past it) and
 * ±Infinity as null. Exponent form keeps such a double a double; 1e999 reads back as Infinity.
 */
const exactNumber = (n: number): number | LosslessNumber =>
  writtenExactly(n)
    ? n
    : new LosslessNumber(Number.isFinite(n) ? n.toExponential() : n > 0 ? "1e999" : "-1e999")

/** JSON with object keys sorted and undefined members left out: what both ends MAC. */
const sortedKeys = (v: unknown): unknown =>
  typeof v === "number"
    ? exactNumber(v)
    : Array.isArray(v)
    ? v.map(sortedKeys)
    : v instanceof LosslessNumber
    ? v
    : v !== null && typeof v === "object"
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>)
            .filter(([, x]) => x !== undefined)
            .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
            .map(([k, x]) => [k, sortedKeys(x)])
        )
      : v

/**
 * Keys sorted at every depth, undefined members dropped; bigints (wide SQL arguments) as digits,
 * and every number as text that parses back to the same value (`exactNumber`).
 */
export const canonicalJson = (value: unknown): string => losslessStringify(sortedKeys(value)) ?? "null"
