/** Wire helpers shared by every route group. */
import { Schema } from "effect"

/** Refuses unknown members: a misspelt field is a 400, never silently ignored. */
export const strict = <S extends Schema.Schema.Any>(schema: S): S =>
  schema.annotations({ parseOptions: { onExcessProperty: "error" } }) as S

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
