import { describe, expect, it } from "vitest"
import { unofferedImport } from "../../src/domain/FunctionHostCalls.js"
import { capMemory, inspectWasm, WasmInvalid } from "../../src/domain/WasmBinary.js"
import { watModule } from "../support/functions.js"

describe("WasmBinary", () => {
  it("reads imports, exports and memories", async () => {
    const bytes = await watModule(`(module (import "env" "log_info" (func (param i32 i32))) (memory (export "memory") 2 5) (func (export "_start")))`)
    const facts = inspectWasm(bytes)
    expect(facts.imports).toEqual([{ module: "env", name: "log_info", kind: "function" }])
    expect(facts.exports.map((e) => e.name).sort()).toEqual(["_start", "memory"])
    expect(facts.memories).toEqual([{ minPages: 2, maxPages: 5, shared: false, memory64: false }])
  })

  it("sets a maximum where there is none, lowers a larger one, keeps a smaller one, and the result validates", async () => {
    for (const [decl, cap, max] of [["1", 16, 16], ["1 100", 16, 16], ["1 4", 16, 4]] as const) {
      const capped = capMemory(await watModule(`(module (memory (export "memory") ${decl}) (func (export "_start")))`), cap)
      expect(inspectWasm(capped).memories[0]?.maxPages).toBe(max)
      expect(WebAssembly.validate(capped)).toBe(true)
    }
  })

  it("refuses what the runner cannot run: not a module, a memory larger at start than the cap, a truncated section", async () => {
    expect(() => inspectWasm(new TextEncoder().encode("hello"))).toThrow(WasmInvalid)
    const large = await watModule(`(module (memory 40))`)
    expect(() => capMemory(large, 16)).toThrow(/at start/)
    const bytes = await watModule(`(module (memory 1) (func (export "_start")))`)
    expect(() => inspectWasm(bytes.subarray(0, bytes.length - 3))).toThrow(WasmInvalid)
  })

  it("names the first import the gateway does not offer", () => {
    expect(unofferedImport([{ module: "env", name: "db_query", kind: "function" }])).toBeUndefined()
    expect(unofferedImport([{ module: "wasi_snapshot_preview1", name: "fd_write", kind: "function" }])).toBeUndefined()
    expect(unofferedImport([{ module: "env", name: "nope", kind: "function" }])?.name).toBe("nope")
    expect(unofferedImport([{ module: "other", name: "db_query", kind: "function" }])?.module).toBe("other")
    expect(unofferedImport([{ module: "env", name: "memory", kind: "memory" }])?.kind).toBe("memory")
  })
})
