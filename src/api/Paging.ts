/**
 * Lists and paging on the wire (docs/api.md, "Lists and paging"): every list that can grow takes
 * `limit` and `cursor` and answers `next_cursor`, the cursor of the page after this one or null
 * at the end. A cursor is the last row's ordering key as JSON in base64url: opaque to clients,
 * checked against the list's key shape on the way in, so a cursor that is not one this list gave
 * is a 400 like any other bad parameter.
 */
import { ParseResult, Schema } from "effect"
import type { KeyValues, Page, PageRequest } from "../layers/registry/Keyset.js"
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

const CURSOR_MAX = 512
const CursorText = Schema.String.pipe(
  Schema.pattern(new RegExp(`^[A-Za-z0-9_-]{1,${CURSOR_MAX}}$`), { message: () => "a cursor is base64url text, as next_cursor gave it" })
)

const notOurs = "not a cursor of this list: send next_cursor from this list's previous page, or no cursor to start again"

/**
 * The `cursor` query parameter of a list whose ordering key has the shape `key` (a tuple of the
 * key's column values). Decodes to the key; anything else is a 400.
 */
export const Cursor = <A extends KeyValues>(key: Schema.Schema<A>) => {
  const decodeKey = Schema.decodeUnknownEither(key)
  return Schema.transformOrFail(CursorText, Schema.typeSchema(key), {
    strict: true,
    decode: (text, _, ast) => {
      let value: unknown
      try {
        value = JSON.parse(Buffer.from(text, "base64url").toString("utf8"))
      } catch {
        return ParseResult.fail(new ParseResult.Type(ast, text, notOurs))
      }
      const decoded = decodeKey(value)
      return decoded._tag === "Right" ? ParseResult.succeed(decoded.right) : ParseResult.fail(new ParseResult.Type(ast, text, notOurs))
    },
    encode: (values) => ParseResult.succeed(encodeCursor(values))
  }).annotations({ description: "next_cursor of the previous page; absent for the first page" })
}

export const encodeCursor = (values: KeyValues): string => Buffer.from(JSON.stringify(values), "utf8").toString("base64url")

/** The answer member naming the next page. */
export const NextCursor = Schema.NullOr(Schema.String).annotations({
  description: "send as cursor for the next page; null when this page is the last"
})

/** A list's `limit` and `cursor` query members, over a key of shape `key`. */
export const pageQueryFields = <A extends KeyValues>(key: Schema.Schema<A>, max: number = PAGE_LIMIT.max, byDefault: number = PAGE_LIMIT.default) => ({
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

/** Key shapes of the lists: `(created_at, id)` style pairs and single integer ids. */
export const TimeAndText = Schema.Tuple(Schema.Int, Schema.String.pipe(Schema.maxLength(256)))
export const IdKey = Schema.Tuple(Schema.Int)
export const TextKey = Schema.Tuple(Schema.String.pipe(Schema.maxLength(256)))

// No identifier on a query struct: HttpApi's OpenAPI then describes no parameter at all.
/** The query of a list keyed by (time, text) with nothing else to ask: `limit` and `cursor`. */
export const TimeKeyedPage = strict(Schema.Struct(pageQueryFields(TimeAndText)))
/** The query of a list keyed by a name with nothing else to ask. */
export const NameKeyedPage = strict(Schema.Struct(pageQueryFields(TextKey)))
