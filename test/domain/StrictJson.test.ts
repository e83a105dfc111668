import { Either } from "effect"
import * as fc from "effect/FastCheck"
import { describe, expect, it } from "vitest"
import { memberSource, strictJson } from "../../src/domain/StrictJson.js"

const reason = (text: string, limits = { maxChars: 10_000, maxDepth: 8 }): string | undefined => {
  const parsed = strictJson(text, limits)
  return Either.isLeft(parsed) ? parsed.left.reason : undefined
}

const asNumbers = (value: unknown): unknown =>
  JSON.parse(JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? Number(v) : v)))

describe("strictJson", () => {
  it("gives what JSON.parse gives for any JSON without repeated keys", () => {
    fc.assert(
      fc.property(fc.json(), (text) => {
        const parsed = strictJson(text, { maxChars: 1e6, maxDepth: 1000 })
        // fc.json() writes no repeated keys; integers past 2^53 come back whole (as bigints)
        expect(Either.isRight(parsed)).toBe(true)
        if (Either.isRight(parsed)) expect(asNumbers(parsed.right)).toEqual(JSON.parse(text))
      }),
      { numRuns: 2000 }
    )
  })

  it("gives what JSON.parse gives for values whose strings are full of escapes", () => {
    // every control character, quote and backslash written escaped, long plain runs between them
    const text = fc.string({ unit: fc.constantFrom("a", "b", '"', "\\", "\n", "\u0001", "\u2028", "é", "x".repeat(300)) })
    fc.assert(
      fc.property(fc.dictionary(text, fc.oneof(text, fc.array(text))), (value) => {
        const json = JSON.stringify(value)
        expect(strictJson(json, { maxChars: 1e7, maxDepth: 8 })).toEqual(Either.right(JSON.parse(json)))
      }),
      { numRuns: 300 }
    )
  })

  it("finds what it refuses past long values: a repeated key, a control character, a bad escape", () => {
    const long = "A".repeat(100_000)
    const limits = { maxChars: 1e6, maxDepth: 8 }
    expect(reason(`{"a":"${long}","b\\\\":"x\\"","\\u0061":1}`, limits)).toBe('duplicate key "a"')
    expect(reason(`{"k":"${long}","a\\u0062":1,"ab":2}`, limits)).toBe('duplicate key "ab"')
    expect(reason(`{"k":"${long}\u0001"}`, limits)).toBe(`control character in string at ${long.length + 6}`)
    expect(reason(`{"k":"${long}","v":"\\q"}`, limits)).toBe(`bad escape in string at ${long.length + 13}`)
    expect(reason(`{"k":"${long}`, limits)).toBe("unterminated string")
    // a tab between members is whitespace, inside a string it is not
    expect(reason('{"a":1,\t"b":2}')).toBeUndefined()
    expect(reason('{"a":"\t"}')).toBe("control character in string at 6")
  })

  it("refuses a repeated key at any depth, also spelled with an escape", () => {
    expect(reason('{"a":1,"a":2}')).toBe('duplicate key "a"')
    expect(reason('{"a":1,"\\u0061":2}')).toBe('duplicate key "a"')
    expect(reason('[{"x":{"k":1,"k":1}}]')).toBe('duplicate key "k"')
    expect(reason('{"a\\nb":1,"a\\u000ab":2}')).toBe('duplicate key "a\nb"')
    // past the point where the scanner switches from a list of seen keys to a set
    const many = Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`)
    expect(reason(`{${many.join(",")}}`)).toBeUndefined()
    expect(reason(`{${many.join(",")},"k3":0}`)).toBe('duplicate key "k3"')
    expect(reason(`{${many.join(",")},"k39":0}`)).toBe('duplicate key "k39"')
  })

  it.each([
    ["", "unexpected character at 0"],
    ['{"a":1,}', "expected a key at 7"],
    ["[1,]", "unexpected character at 3"],
    ['{"a" 1}', 'expected ":" at 5'],
    ['{"a":1 "b":2}', 'expected "," or "}" at 7'],
    ["[1 2]", 'expected "," or "]" at 3'],
    ['"a\u0001"', "control character in string at 2"],
    ['"\\x"', "bad escape in string at 1"],
    ['"\\u12"', "bad escape in string at 1"],
    ['"abc', "unterminated string"],
    ["1 2", "trailing characters after the JSON value"],
    ["tru", "unexpected character at 0"],
    ["[[[[[[[[[1]]]]]]]]]", "JSON nested too deeply"],
    ["x".repeat(10_001), "JSON text too long"]
  ])("refuses %j: %s", (text, why) => {
    expect(reason(text)).toBe(why)
  })

  it("takes nesting up to the limit", () => {
    expect(reason("[".repeat(8) + "]".repeat(8))).toBeUndefined()
  })

  it("keeps integers past 2^53 whole", () => {
    expect(strictJson('{"id":9223372036854775806}')).toEqual(Either.right({ id: 9223372036854775806n }))
  })
})

describe("memberSource", () => {
  it("gives a member's text exactly as written", () => {
    const text = '{ "a\\u0062" : [1, 2.50] , "value" :  {"n": 12345678901234567890} }'
    expect(memberSource(text, "ab")).toBe("[1, 2.50]")
    expect(memberSource(text, "value")).toBe('{"n": 12345678901234567890}')
    expect(memberSource(text, "missing")).toBeUndefined()
    expect(memberSource("[1]", "a")).toBeUndefined()
  })
})
