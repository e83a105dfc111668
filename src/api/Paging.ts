/**
 * Lists and paging on the wire (docs/api.md, "Lists and paging"): every list that can grow takes
 * `limit` and `cursor` and answers `next_cursor`, the cursor of the page after this one or null
 * at the end. A cursor is the last row's ordering key (`Cursor`): opaque to clients, checked
 * against the list's key shape on the way in, so a cursor not of this list's form is a 400 like
 * any other bad parameter.
 */
import { Either, Encoding, Schema } from "effect"
import type { KeyValues, Page, PageRequest } from "../domain/Page.js"
import { QueryInteger, strict } from "./Wire.js"

/** Lists other than the audit trail (whose bounds are the spec's, §8: default 50, at most 200). */
export const PAGE_LIMIT = { default: 100, max: 1000 } as const

/**
 * The `limit` query parameter: how many items a page holds at most. On the wire a string of
 * digits; the document states what a client sends, an integer with its bounds.
 */
export const PageLimit = (max: number, byDefault: number) =>
  QueryInteger()
    .pipe(Schema.between(1, max))
    .annotations({
      description: `items per page, 1 to ${max}; default ${byDefault}`,
      jsonSchema: { type: "integer", minimum: 1, maximum: max, default: byDefault, description: `items per page, 1 to ${max}; default ${byDefault}` }
    })

/** A component of a list's ordering key: an integer (a time, an id) or a text (an id, a wallet, a name). */
export type KeyPart = "int" | "text"

/** Text components are keys of at most this many UTF-8 bytes (ids, wallets, names are far shorter). */
const TEXT_BYTES = 256
/** A part's form; a text alone in its key is not empty, so no cursor is the empty string. */
const partPattern = (part: KeyPart, alone: boolean): string =>
  part === "int" ? "[0-9]{1,15}" : `[A-Za-z0-9_-]{${alone ? 1 : 0},${Math.ceil((TEXT_BYTES * 4) / 3)}}`

/**
 * The `cursor` query parameter of a list whose ordering key has the parts `parts`: each part in
 * order, joined by `.`, an integer in decimal digits, a text in base64url of its UTF-8. Every
 * string of that form is a position in the list (the page after it), so the pattern the
 * document states is the whole rule: a client or a generator that keeps to it is never refused,
 * and anything else is a 400. Decodes to the key's values.
 */
export const Cursor = (parts: ReadonlyArray<KeyPart>) => {
  const body = parts.map((part) => partPattern(part, parts.length === 1)).join("\\.")
  const pattern = new RegExp(`^${body}$`)
  return Schema.transform(
    Schema.String.pipe(
      Schema.pattern(pattern, {
        message: () => "not a cursor of this list: send next_cursor from this list's previous page, or no cursor to start again"
      })
    ),
    Schema.Array(Schema.Union(Schema.Int, Schema.String)),
    {
      strict: true,
      decode: (text) =>
        text.split(".").map((piece, i) => (parts[i] === "int" ? Number(piece) : textOfPiece(piece))),
      encode: (values) => encodeCursor(values)
    }
  ).annotations({ description: "next_cursor of the previous page; absent for the first page" })
}

export const encodeCursor = (values: KeyValues): string =>
  values.map((v) => (typeof v === "number" ? String(v) : Encoding.encodeBase64Url(v))).join(".")

/**
 * A text part's UTF-8, decoded as node's Buffer does (a lone last character, which holds no whole
 * byte, is ignored), with Effect's Encoding rather than Buffer: the typed client encodes and
 * decodes cursors in a browser too (the web console, console/).
 */
const textOfPiece = (piece: string): string =>
  Either.match(Encoding.decodeBase64Url(piece.length % 4 === 1 ? piece.slice(0, -1) : piece), {
    onLeft: () => "",
    onRight: (bytes) => new TextDecoder().decode(bytes)
  })

/** The answer member naming the next page. */
export const NextCursor = Schema.NullOr(Schema.String).annotations({
  description: "send as cursor for the next page; null when this page is the last"
})

/** A list's `limit` and `cursor` query members, over a key of parts `key`. */
export const pageQueryFields = (key: ReadonlyArray<KeyPart>, max: number = PAGE_LIMIT.max, byDefault: number = PAGE_LIMIT.default) => ({
  limit: Schema.optional(PageLimit(max, byDefault)),
  cursor: Schema.optional(Cursor(key))
})

/** The page to read for decoded `limit` and `cursor` query members. */
export const pageRequest = (
  query: { readonly limit?: number | undefined; readonly cursor?: KeyValues | undefined },
  byDefault: number = PAGE_LIMIT.default
): PageRequest => ({ limit: query.limit ?? byDefault, after: query.cursor })

/** `next_cursor` for a page read. */
export const nextCursorOf = (page: Page<unknown>): string | null => (page.next === undefined ? null : encodeCursor(page.next))

/** Key shapes of the lists: `(created_at, id)` style pairs, single integer ids, names. */
export const TimeAndText: ReadonlyArray<KeyPart> = ["int", "text"]
export const IdKey: ReadonlyArray<KeyPart> = ["int"]
export const TextKey: ReadonlyArray<KeyPart> = ["text"]

// No identifier on a query struct: HttpApi's OpenAPI then describes no parameter at all.
/** The query of a list keyed by (time, text) with nothing else to ask: `limit` and `cursor`. */
export const TimeKeyedPage = strict(Schema.Struct(pageQueryFields(TimeAndText)))
/** The query of a list keyed by a name with nothing else to ask. */
export const NameKeyedPage = strict(Schema.Struct(pageQueryFields(TextKey)))
