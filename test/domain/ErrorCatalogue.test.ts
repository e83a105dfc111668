/**
 * The error catalogue: every class goes on the wire as `{error, code, hint?}` exactly (no `_tag`,
 * no Retry-After seconds) and comes back as itself; a code has one class and one status; and
 * docs/api.md lists every code with that status.
 */
import { readFileSync } from "node:fs"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { type ApiError, catalogue, Code, errorCodes, fromRefusal, refusal, statusOf, statusOfCode, Wire } from "../../src/domain/Errors.js"

const tags = Object.keys(catalogue) as Array<keyof typeof catalogue>

describe("the error catalogue", () => {
  it.each(tags)("%s round-trips through its wire schema as {error, code, hint?}", (tag) => {
    const wire = Wire[tag] as unknown as Schema.Schema<ApiError, unknown>
    const cls = catalogue[tag] as unknown as new (props: Record<string, unknown>) => ApiError
    const code = new cls({ error: "" }).code
    for (const hint of [undefined, "a hint"]) {
      const error = new cls({ error: "what went wrong", ...(hint === undefined ? {} : { hint }), retryAfterSeconds: 7 })
      const body = Schema.encodeSync(wire)(error)
      expect(body).toEqual(hint === undefined ? { error: "what went wrong", code } : { error: "what went wrong", code, hint })
      expect(Object.keys(body as object).sort()).toEqual(hint === undefined ? ["code", "error"] : ["code", "error", "hint"])
      const back = Schema.decodeUnknownSync(wire)(body)
      expect(back).toBeInstanceOf(catalogue[tag])
      expect(back._tag).toBe(tag)
      expect(back.code).toBe(code)
      expect(back.error).toBe("what went wrong")
      expect(back.hint).toBe(hint)
    }
    // another code never decodes as this class, so a status shared by several classes is told apart by its code
    const other = errorCodes.find((c) => c !== code)
    expect(() => Schema.decodeUnknownSync(wire)({ error: "x", code: other })).toThrow()
  })

  it("has one class per code, and each code one status", () => {
    expect(new Set(errorCodes).size).toBe(tags.length)
    for (const code of errorCodes) {
      const error = refusal(code, "x")
      expect(error.code).toBe(code)
      expect(statusOf(error)).toBe(statusOfCode[code])
    }
    expect(Code.SESSION_REQUIRED).toBe("SESSION_REQUIRED")
    expect(statusOfCode.SESSION_REQUIRED).toBe(403)
  })

  it("builds a service's refusal as the class of its code, Retry-After only where the class carries it", () => {
    const down = fromRefusal({ code: "HOME_NODE_UNREACHABLE", reason: "gone", hint: "retry", retryAfterSeconds: 30 })
    expect(down._tag).toBe("HomeNodeUnreachable")
    expect(down.retryAfterSeconds).toBe(30)
    expect(refusal("UNAVAILABLE", "x").retryAfterSeconds).toBe(1)
    expect("retryAfterSeconds" in refusal("NOT_FOUND", "x", undefined, 5)).toBe(false)
    expect(fromRefusal({ code: "NOT_FOUND", reason: "no such key" })).toBeInstanceOf(catalogue.NotFound)
  })

  it("is listed in docs/api.md, every code with its status", () => {
    const doc = readFileSync(new URL("../../docs/api.md", import.meta.url), "utf8")
    const section = doc.slice(doc.indexOf("## Errors"), doc.indexOf("\n## ", doc.indexOf("## Errors") + 1))
    for (const code of errorCodes) {
      const row = section.split("\n").find((line) => line.startsWith("|") && line.split("|")[2]?.trim() === "`" + code + "`")
      expect(row, code).toBeDefined()
      expect(row!.split("|")[1]!.trim(), code).toBe(String(statusOfCode[code]))
    }
  })
})
