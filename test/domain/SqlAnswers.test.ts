import { describe, expect, it } from "vitest"
import { parseExactJson, stringifyExactJson } from "../../src/domain/ExactJson.js"
import { readAnswer } from "../../src/domain/SqlAnswers.js"

describe("SQL answers", () => {
  it("gives every repeated column its own key, skipping suffixes another column has", () => {
    const text = readAnswer("items", ["a", "a", "a:2", "a"], [[1, 2, 3, 4]])
    expect(text).toBe('{"items":[{"a":1,"a:3":2,"a:2":3,"a:4":4}],"count":1}')
    expect(Object.keys((JSON.parse(text) as { items: Array<object> }).items[0] ?? {})).toHaveLength(4)
    expect(readAnswer("one", ["a:2", "a", "a"], [[1, 2, 3]])).toBe('{"a:2":1,"a":2,"a:3":3}')
    expect(readAnswer("objects", ["a", "a"], [[1, 2], [3, 4]])).toBe('[{"a":1,"a:2":2},{"a":3,"a:2":4}]')
  })

  it("writes 64-bit integers digit for digit", () => {
    expect(readAnswer("table", ["n"], [[9223372036854775807n], [-9223372036854775808n], [7]])).toBe(
      '{"columns":["n"],"rows":[[9223372036854775807],[-9223372036854775808],[7]]}'
    )
  })
})

describe("exact JSON", () => {
  it("keeps integers past 2^53 as bigint and leaves everything else as JSON.parse does", () => {
    expect(parseExactJson('{"a":[9007199254740993,-9223372036854775808,9007199254740991,1.5,1e300,"12345678901234567"]}')).toEqual({
      a: [9007199254740993n, -9223372036854775808n, 9007199254740991, 1.5, 1e300, "12345678901234567"]
    })
    expect(parseExactJson('{"a":1,"b":[true,null]}')).toEqual({ a: 1, b: [true, null] })
    // __proto__ stays a member, as JSON.parse keeps it
    const proto = parseExactJson('{"__proto__":{"x":1},"n":12345678901234567890}') as Record<string, unknown>
    expect(Object.keys(proto)).toEqual(["__proto__", "n"])
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype)
  })

  it("writes bigints as their digits", () => {
    expect(stringifyExactJson(["x", 9223372036854775807n, 1, null])).toBe('["x",9223372036854775807,1,null]')
    expect(stringifyExactJson({ a: 1 })).toBe('{"a":1}')
  })
})
