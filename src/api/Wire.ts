/** Wire helpers shared by every route group. */
import { Schema } from "effect"
import { PlainText } from "../domain/Text.js"

/** Refuses unknown members: a misspelt field is a 400, never silently ignored. */
export const strict = <S extends Schema.Schema.Any>(schema: S): S =>
  schema.annotations({ parseOptions: { onExcessProperty: "error" } }) as S

/**
 * A body with no members (`{}`, or an empty body, which is read as `{}`). Schema's empty struct
 * takes any value but null (an array, a number), whatever it holds, so `strict` alone would let
 * `{"force": true}` or `[]` through silently: this refuses anything but an empty object, as a 400
 * naming what it found. The document says so: an object with no properties, which may be left out.
 */
export const NoMembers = Schema.Struct({}).pipe(
  Schema.filter(
    (o: unknown) => {
      if (typeof o !== "object" || o === null || Array.isArray(o)) return "the body must be {} or empty: this route takes no members"
      const extra = Object.keys(o)
      return extra.length === 0 || `${extra[0]}: is unexpected; this route takes no members`
    },
    { jsonSchema: { type: "object", additionalProperties: false } }
  )
)

/**
 * The router's cap on one path parameter, counted decoded. find-my-way's default (100) would
 * refuse a sha2-512 CID (110); past this cap a parameter never reaches its route's own check.
 */
export const MAX_PATH_PARAM_LENGTH = 2048

/** Unix seconds, as every timestamp on the wire. */
export const UnixSeconds = Schema.Int.annotations({ description: "Unix time in seconds" })

export const toUnixSeconds = (ms: number): number => Math.floor(ms / 1000)

export { PlainText, WellFormedText } from "../domain/Text.js"

/** Plain text (valid Unicode, no control characters) of at most `max` characters, counted as code points. */
export const PlainTextOfAtMost = (max: number) =>
  PlainText.pipe(
    Schema.filter((s) => [...s].length <= max, {
      message: () => `at most ${max} characters`,
      // JSON Schema counts a string's length in code points, as this does
      jsonSchema: { maxLength: max }
    })
  )

/**
 * An integer query parameter, written as plain decimal digits (and a leading minus where
 * `signed`): `Number()` would also take `0x10`, `1e2`, `5.0` and ` 5`, so one value would have
 * many spellings and a proxy or cache keyed on the query would see different requests. Up to 15
 * digits, so every value is a safe integer; bounds go on the result (`.pipe(Schema.between(…))`).
 */
export const QueryInteger = (options: { readonly signed?: boolean } = {}) =>
  Schema.transform(
    Schema.String.pipe(
      Schema.pattern(options.signed === true ? /^-?[0-9]{1,15}$/ : /^[0-9]{1,15}$/, {
        message: () => (options.signed === true ? "an integer in decimal digits, optionally after -" : "a non-negative integer in decimal digits")
      })
    ),
    Schema.Int,
    { strict: true, decode: (s) => Number(s), encode: (n) => String(n) }
  )
