/**
 * What free text people name things with may hold: labels, pin names, device names. They are
 * stored, listed, logged and sent back as JSON, so they are valid Unicode with no control
 * characters.
 */
import { Schema } from "effect"

/**
 * A lone UTF-16 surrogate (`"\ud800"`) has no UTF-8 form: it would be stored as U+FFFD and come
 * back changed (on Redis two names would share one key), and strict JSON parsers refuse it.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** C0 controls and DEL: NUL cuts C strings short, the rest forge lines in logs and terminals. */
const CONTROL = /[\u0000-\u001f\u007f]/
const CONTROLS = /[\u0000-\u001f\u007f]/g

/** Text that is valid Unicode (no lone surrogates). */
export const WellFormedText = Schema.String.pipe(
  Schema.filter((s) => !LONE_SURROGATE.test(s), { message: () => "text must be valid Unicode (no lone surrogates)" })
)

/** Well-formed text with no control character: names and labels. */
export const PlainText = WellFormedText.pipe(
  Schema.filter((s) => !CONTROL.test(s), {
    message: () => "no control characters (U+0000-U+001F, U+007F)",
    jsonSchema: { pattern: "^[^\\x00-\\x1f\\x7f]*$" }
  })
)

export const isPlainText: (u: unknown) => u is string = Schema.is(PlainText)

/** A name taken from elsewhere (an uploaded file's name) with its control characters dropped. */
export const withoutControls = (s: string): string => (CONTROL.test(s) ? s.replace(CONTROLS, "") : s)
