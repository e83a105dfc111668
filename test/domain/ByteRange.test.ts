import { describe, expect, it } from "vitest"
import { resolveRange } from "../../src/domain/ByteRange.js"

describe("one HTTP byte range", () => {
  it("answers the whole body without a usable single range", () => {
    for (const header of [undefined, "bytes=", "bytes=-", "items=0-1", "bytes=0-1,4-5", "bytes=5-3", "bytes=a-b"]) {
      expect(resolveRange(header, 100), String(header)).toEqual({ kind: "whole" })
    }
  })
  it("clamps the end, answers open and suffix ranges", () => {
    expect(resolveRange("bytes=10-19", 100)).toEqual({ kind: "partial", start: 10, end: 19 })
    expect(resolveRange("bytes=90-500", 100)).toEqual({ kind: "partial", start: 90, end: 99 })
    expect(resolveRange("bytes=95-", 100)).toEqual({ kind: "partial", start: 95, end: 99 })
    expect(resolveRange("bytes=-5", 100)).toEqual({ kind: "partial", start: 95, end: 99 })
    expect(resolveRange("bytes=-500", 100)).toEqual({ kind: "partial", start: 0, end: 99 })
  })
  it("is unsatisfiable past the end, for an empty body, or for a zero suffix", () => {
    expect(resolveRange("bytes=100-", 100)).toEqual({ kind: "unsatisfiable" })
    expect(resolveRange("bytes=0-0", 0)).toEqual({ kind: "unsatisfiable" })
    expect(resolveRange("bytes=-1", 0)).toEqual({ kind: "unsatisfiable" })
    expect(resolveRange("bytes=-0", 100)).toEqual({ kind: "unsatisfiable" })
  })
})
