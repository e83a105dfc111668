import { describe, expect, it } from "vitest"
import { type Token, tokenize } from "../../src/domain/SqlTokens.js"

/** `kind:value` of every token that is not whitespace, for compact expectations. */
const shape = (sql: string): Array<string> =>
  tokenize(sql)
    .filter((token) => token.kind !== "whitespace")
    .map((token) => `${token.kind}:${token.value}`)

const only = (sql: string): Token => {
  const tokens = tokenize(sql)
  expect(tokens).toHaveLength(1)
  return tokens[0] as Token
}

describe("tokenize", () => {
  it("covers the whole text with contiguous slices", () => {
    const sql = "SELECT a.b, 'x''y' FROM \"t\" -- c\nWHERE [c] = ?1 /* d */;"
    const tokens = tokenize(sql)
    expect(tokens.map((token) => token.text).join("")).toBe(sql)
    let at = 0
    for (const token of tokens) {
      expect(token.start).toBe(at)
      expect(sql.slice(token.start, token.end)).toBe(token.text)
      at = token.end
    }
    expect(at).toBe(sql.length)
    expect(tokenize("")).toEqual([])
  })

  it("splits a statement like SQLite", () => {
    expect(shape("SELECT a.b, 'x''y' FROM \"t\" WHERE [c] = ?1;")).toEqual([
      "identifier:SELECT",
      "identifier:a",
      "operator:.",
      "identifier:b",
      "operator:,",
      "string:x'y",
      "identifier:FROM",
      "identifier:t",
      "identifier:WHERE",
      "identifier:c",
      "operator:=",
      "variable:?1",
      "operator:;"
    ])
  })

  describe("whitespace and comments", () => {
    it("treats comments as whitespace", () => {
      expect(tokenize("-- c\n").map((token) => [token.kind, token.text])).toEqual([
        ["whitespace", "-- c"],
        ["whitespace", "\n"]
      ])
      expect(only("/* a ; 'b */").kind).toBe("whitespace")
      expect(only("/**/").kind).toBe("whitespace")
      expect(shape("a/**/b--x\nc")).toEqual(["identifier:a", "identifier:b", "identifier:c"])
    })
    it("runs an unterminated block comment to the end, as SQLite does", () => {
      expect(shape("SELECT 1 /* open ; 'x")).toEqual(["identifier:SELECT", "number:1"])
      expect(only("/*/").kind).toBe("whitespace")
    })
    it("reads `/*` with nothing after it as slash and star", () => {
      expect(shape("1 /*")).toEqual(["number:1", "operator:/", "operator:*"])
    })
    it("uses SQLite's space characters: VT only continues a run, U+FEFF is a BOM", () => {
      expect(only(" \t\n\f\r\v").kind).toBe("whitespace")
      expect(only("\v").kind).toBe("illegal")
      expect(shape("\uFEFFSELECT")).toEqual(["identifier:SELECT"])
      // Other Unicode spaces are identifier characters to SQLite.
      expect(shape("a\u00A0b")).toEqual(["identifier:a\u00A0b"])
    })
  })

  describe("strings and quoted identifiers", () => {
    it("decodes strings with doubled quotes", () => {
      expect(only("'it''s'")).toMatchObject({ kind: "string", value: "it's", text: "'it''s'" })
      expect(only("''")).toMatchObject({ kind: "string", value: "" })
      expect(only("''''")).toMatchObject({ kind: "string", value: "'" })
      expect(only("'a\"b`c]d'")).toMatchObject({ kind: "string", value: "a\"b`c]d" })
    })
    it("decodes double-quoted and backticked identifiers", () => {
      expect(only('"ke""ys"')).toMatchObject({ kind: "identifier", value: 'ke"ys', quoted: true })
      expect(only("`a``b`")).toMatchObject({ kind: "identifier", value: "a`b", quoted: true })
      expect(only('""')).toMatchObject({ kind: "identifier", value: "", quoted: true })
    })
    it("reads brackets without any escape", () => {
      expect(only("[a b]")).toMatchObject({ kind: "identifier", value: "a b", quoted: true })
      expect(only("[]")).toMatchObject({ kind: "identifier", value: "" })
      expect(shape("[a]]")).toEqual(["identifier:a", "illegal:]"])
      expect(only("[a'\"b]").value).toBe("a'\"b")
    })
    it("makes an unterminated quote one illegal token to the end", () => {
      for (const sql of ["'abc", "'a''", '"abc', "`abc", "[abc"]) expect(only(sql).kind).toBe("illegal")
      expect(shape("SELECT 'x; DROP TABLE t")).toEqual(["identifier:SELECT", "illegal:'x; DROP TABLE t"])
    })
  })

  describe("bare identifiers", () => {
    it("use letters, digits, _, $ and any non-ASCII character", () => {
      expect(only("_a1$b")).toMatchObject({ kind: "identifier", value: "_a1$b", quoted: false })
      expect(only("kеys").value).toBe("kеys")
      expect(only("名前").kind).toBe("identifier")
      expect(only("é").kind).toBe("identifier")
      expect(shape("keys_count")).toEqual(["identifier:keys_count"])
    })
    it("keep keywords as identifiers; callers decide", () => {
      expect(only("select")).toMatchObject({ kind: "identifier", quoted: false })
    })
    it("read x followed by anything but a quote as a name", () => {
      expect(shape("xyz x")).toEqual(["identifier:xyz", "identifier:x"])
    })
  })

  describe("numbers", () => {
    it("reads integers, decimals, exponents and hex", () => {
      expect(shape("1 1.5 .5 1. 1e10 1E+3 2.5e-3 0x1F 0XaB")).toEqual([
        "number:1",
        "number:1.5",
        "number:.5",
        "number:1.",
        "number:1e10",
        "number:1E+3",
        "number:2.5e-3",
        "number:0x1F",
        "number:0XaB"
      ])
    })
    it("drops valid digit separators", () => {
      expect(only("1_000_000")).toMatchObject({ kind: "number", value: "1000000", text: "1_000_000" })
      expect(only("0x1_f").value).toBe("0x1f")
      expect(only(".5_0").value).toBe(".50")
      expect(only("1_0.2_5e1_0").value).toBe("10.25e10")
    })
    it("rejects misplaced separators and glued letters", () => {
      for (const sql of ["1_", "1__0", "1_.5", "1._5", "1e_5", "1abc", "1e", "0x", "0xg", "12é"]) {
        expect(only(sql).kind, sql).toBe("illegal")
      }
    })
    it("ends a number at a second dot", () => {
      expect(shape("1.5.3")).toEqual(["number:1.5", "number:.3"])
    })
  })

  describe("blobs", () => {
    it("reads an even number of hex digits", () => {
      expect(only("x'6b657973'")).toMatchObject({ kind: "blob", value: "6b657973" })
      expect(only("X''")).toMatchObject({ kind: "blob", value: "" })
    })
    it("rejects odd or non-hex contents up to the closing quote", () => {
      expect(shape("x'6b6' 1")).toEqual(["illegal:x'6b6'", "number:1"])
      expect(shape("x'zz' 1")).toEqual(["illegal:x'zz'", "number:1"])
      expect(only("x'12").kind).toBe("illegal")
    })
  })

  describe("variables", () => {
    it("reads positional and named parameters", () => {
      expect(shape("? ?12 :a @b $c #d")).toEqual([
        "variable:?",
        "variable:?12",
        "variable::a",
        "variable:@b",
        "variable:$c",
        "variable:#d"
      ])
      expect(shape("?a")).toEqual(["variable:?", "identifier:a"])
    })
    it("reads the Tcl forms", () => {
      expect(only("$a::b").kind).toBe("variable")
      expect(only("$a(x,y)").kind).toBe("variable")
      expect(shape("$a(x y)")).toEqual(["illegal:$a(x", "identifier:y", "operator:)"])
    })
    it("rejects a sigil with no name", () => {
      for (const sql of ["#", ":", "@", "$"]) expect(only(sql).kind, sql).toBe("illegal")
      expect(shape("# 1")).toEqual(["illegal:#", "number:1"])
      expect(shape(":(")).toEqual(["illegal::", "operator:("])
    })
  })

  describe("operators", () => {
    it("reads multi-character operators greedily", () => {
      expect(shape("|| -> ->> <= >= <> != == << >> | - < > = ; ( ) , . + * / % & ~")).toEqual(
        ["||", "->", "->>", "<=", ">=", "<>", "!=", "==", "<<", ">>", "|", "-", "<", ">", "=", ";", "(", ")", ",", ".", "+", "*", "/", "%", "&", "~"].map(
          (op) => `operator:${op}`
        )
      )
    })
    it("rejects a lone ! and characters SQLite has no use for", () => {
      for (const sql of ["!", "\\", "]", "^", "{", "}", "\u007f", "\u0001"]) expect(only(sql).kind, JSON.stringify(sql)).toBe("illegal")
    })
    it("makes NUL illegal: SQLite would silently stop reading there", () => {
      expect(shape("SELECT 1\u0000; DROP TABLE t")).toContain("illegal:\u0000")
      expect(shape("'a\u0000b'")[0]).toBe("illegal:'a")
    })
  })
})
