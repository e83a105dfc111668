/** Wire helpers shared by every route group. */
import { Schema } from "effect"

/** Refuses unknown members: a misspelt field is a 400, never silently ignored. */
export const strict = <S extends Schema.Schema.Any>(schema: S): S =>
  schema.annotations({ parseOptions: { onExcessProperty: "error" } }) as S

/**
 * The router's cap on one path parameter, counted decoded. find-my-way's default (100) would
 * refuse a sha2-512 CID (110); past this cap a parameter never reaches its route's own check.
 */
export const MAX_PATH_PARAM_LENGTH = 2048

/** Unix seconds, as every timestamp on the wire. */
export const UnixSeconds = Schema.Int.annotations({ description: "Unix time in seconds" })

export const toUnixSeconds = (ms: number): number => Math.floor(ms / 1000)

/**
 * Text that is valid Unicode: a lone UTF-16 surrogate (`"\ud800"`) has no UTF-8 form, so it would
 * be stored as U+FFFD and come back changed (or, on Redis, two names would share one key).
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
export const WellFormedText = Schema.String.pipe(
  Schema.filter((s) => !LONE_SURROGATE.test(s), { message: () => "text must be valid Unicode (no lone surrogates)" })
)

/** Well-formed text of at most `max` characters, counted as Unicode code points. */
export const TextOfAtMost = (max: number) =>
  WellFormedText.pipe(Schema.filter((s) => [...s].length <= max, { message: () => `at most ${max} characters` }))

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
