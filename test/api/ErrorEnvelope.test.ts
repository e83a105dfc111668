/**
 * The error envelope has one writer (`envelopeText`, src/domain/errors/Wire.ts): every path that
 * answers a refusal (the app, the fast lane, the listener, node's parser refusals, app hosts,
 * WebSocket handshakes) sends the same members in the same order.
 */
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { describe, expect, it } from "vitest"
import { envelopeText } from "../../src/domain/Errors.js"

const root = path.resolve(import.meta.dirname, "../../src")
const sources = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []
  )

describe("the error envelope", () => {
  it("is error, code, then hint only when there is one", () => {
    expect(envelopeText({ error: "e", code: "C", hint: "h" })).toBe('{"error":"e","code":"C","hint":"h"}')
    expect(envelopeText({ error: "e", code: "C" })).toBe('{"error":"e","code":"C"}')
    expect(envelopeText({ error: "e", code: "C", hint: undefined })).toBe('{"error":"e","code":"C"}')
  })

  it("is written by envelopeText alone: no module stringifies an object with a code of its own", () => {
    const writer = path.join(root, "domain/errors/Wire.ts")
    const writers = sources(root).filter(
      (file) => file !== writer && /JSON\.stringify\(\s*\{[^}]*\bcode\b/.test(readFileSync(file, "utf8"))
    )
    expect(writers.map((f) => path.relative(root, f))).toEqual([])
  })
})
