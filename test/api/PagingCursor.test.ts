/**
 * Cursors are encoded and decoded with Effect's Encoding, not node's Buffer, since the typed client
 * runs in a browser too (the web console): the text they make and read must stay what Buffer made
 * and read, or a cursor from an older gateway or client would page elsewhere.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { Cursor, encodeCursor, TextKey, TimeAndText } from "../../src/api/Paging.js"

describe("list cursors", () => {
  it("encode text parts as Buffer's base64url of their UTF-8, and decode them back", () => {
    for (const text of ["key_abc", "0xAbC", "ünïcödé ☃ 𝄞", "a", "ab", "abc", "x".repeat(200)]) {
      const encoded = encodeCursor([1_700_000_000, text])
      expect(encoded).toBe(`1700000000.${Buffer.from(text, "utf8").toString("base64url")}`)
      expect(Schema.decodeSync(Cursor(TimeAndText))(encoded)).toEqual([1_700_000_000, text])
    }
  })

  it("read any piece of the cursor's form as Buffer read it, a lone last character ignored", () => {
    for (const piece of ["Q", "QU", "QUJ", "QUJD", "QUJDR", "_-_-", "AAAAA", "wq", "4pyT"]) {
      expect(Schema.decodeSync(Cursor(TextKey))(piece)).toEqual([Buffer.from(piece, "base64url").toString("utf8")])
    }
  })
})
