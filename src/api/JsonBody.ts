/**
 * How a JSON request body is read, for both request paths (the app's request, LeanServerRequest.ts,
 * and the fast lane, FastLane.ts): strict UTF-8, then strict JSON, no body being `{}`.
 */
import type { Either } from "effect"
import { Either as E } from "effect"
import { strictJson, type StrictJsonInvalid } from "../domain/StrictJson.js"

/**
 * Bodies are read as strict UTF-8: a lenient decode turns every bad byte into U+FFFD, so distinct
 * bodies (`"a\xff"`, `"a\xfe"`) would read as the same text. `ignoreBOM` keeps a BOM in the text,
 * so the JSON reader refuses it rather than skipping it.
 */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** The body's text, or undefined when it is not UTF-8. */
export const utf8Text = (bytes: Uint8Array): string | undefined => {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

const empty: Either.Either<unknown, StrictJsonInvalid> = E.right({})

/** How deep a request body's JSON may nest; deeper is MALFORMED_JSON (docs/api.md). */
export const BODY_MAX_DEPTH = 128

/**
 * The body's JSON value: a member repeated in an object (also when spelled with escapes) is
 * refused instead of silently keeping the last one, so nothing can be smuggled past what a front
 * proxy or a log saw. No body is an empty object: a route whose members are all optional needs
 * none, and a route with required members names the missing one.
 */
export const jsonValue = (text: string, maxChars: number): Either.Either<unknown, StrictJsonInvalid> =>
  text === "" ? empty : strictJson(text, { maxChars, maxDepth: BODY_MAX_DEPTH })
