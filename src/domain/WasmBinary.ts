/**
 * What a function's WebAssembly module says about itself, read from its binary before anything
 * compiles it: its imports (checked against the host calls at deploy), its exports, and its
 * memory, whose maximum is rewritten to the function's limit (docs/functions.md, "Memory").
 *
 * Why rewrite: V8 has no per-instance memory cap except the module's own declared maximum (its
 * flag is process-wide), and Go's wasip1 modules declare none, so a module could grow to 4 GiB.
 * With the maximum set to the function's `memory_limit_mb`, `memory.grow` past it fails inside
 * the guest, which the guest sees as out of memory.
 */

export const WASM_PAGE_BYTES = 64 * 1024

export type ExternKind = "function" | "table" | "memory" | "global" | "tag"

export interface WasmImport {
  readonly module: string
  readonly name: string
  readonly kind: ExternKind
}

export interface WasmMemory {
  readonly minPages: number
  readonly maxPages: number | undefined
  readonly shared: boolean
  readonly memory64: boolean
}

export interface WasmFacts {
  readonly imports: ReadonlyArray<WasmImport>
  readonly exports: ReadonlyArray<{ readonly name: string; readonly kind: ExternKind }>
  /** The module's own memories (imported ones are among the imports). */
  readonly memories: ReadonlyArray<WasmMemory>
}

/** The bytes are not a WebAssembly module this reader understands; `reason` is for the client. */
export class WasmInvalid extends Error {
  constructor(readonly reason: string) {
    super(reason)
  }
}

const KINDS: ReadonlyArray<ExternKind> = ["function", "table", "memory", "global", "tag"]
const MAGIC = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]
const IMPORT_SECTION = 2
const MEMORY_SECTION = 5
const EXPORT_SECTION = 7

class Reader {
  constructor(
    readonly bytes: Uint8Array,
    public at: number,
    readonly end: number
  ) {}

  byte(): number {
    if (this.at >= this.end) throw new WasmInvalid("the module ends inside a section")
    return this.bytes[this.at++]!
  }

  /** An unsigned LEB128 of at most `bits` bits, as a number (64-bit ones only up to 2^53). */
  uint(bits = 32): number {
    let result = 0
    let scale = 1
    for (let i = 0; i < Math.ceil(bits / 7); i++) {
      const b = this.byte()
      result += (b & 0x7f) * scale
      if ((b & 0x80) === 0) {
        if (result > Number.MAX_SAFE_INTEGER) throw new WasmInvalid("a number in the module is too large")
        return result
      }
      scale *= 128
    }
    throw new WasmInvalid("a number in the module is malformed")
  }

  name(): string {
    const length = this.uint()
    if (this.at + length > this.end) throw new WasmInvalid("a name runs past its section")
    const text = new TextDecoder("utf-8", { fatal: true }).decode(this.bytes.subarray(this.at, this.at + length))
    this.at += length
    return text
  }

  limits(): WasmMemory {
    const flags = this.byte()
    if (flags > 0x07) throw new WasmInvalid("a memory's limits are malformed")
    const memory64 = (flags & 0x04) !== 0
    const bits = memory64 ? 64 : 32
    const minPages = this.uint(bits)
    const maxPages = (flags & 0x01) !== 0 ? this.uint(bits) : undefined
    return { minPages, maxPages, shared: (flags & 0x02) !== 0, memory64 }
  }
}

interface Section {
  readonly id: number
  /** Offset of the section's id byte, and of its contents. */
  readonly start: number
  readonly contents: number
  readonly end: number
}

const sections = (bytes: Uint8Array): Array<Section> => {
  if (bytes.length < 8 || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new WasmInvalid("not a WebAssembly module (version 1): it must start with \\0asm 01 00 00 00")
  }
  const found: Array<Section> = []
  const reader = new Reader(bytes, 8, bytes.length)
  while (reader.at < bytes.length) {
    const start = reader.at
    const id = reader.byte()
    const size = reader.uint()
    const contents = reader.at
    if (contents + size > bytes.length) throw new WasmInvalid("a section runs past the end of the module")
    found.push({ id, start, contents, end: contents + size })
    reader.at = contents + size
  }
  return found
}

/** Reads the module's imports, exports and memories; throws `WasmInvalid` for malformed bytes. */
export const inspectWasm = (bytes: Uint8Array): WasmFacts => {
  const imports: Array<WasmImport> = []
  const exports: Array<{ name: string; kind: ExternKind }> = []
  const memories: Array<WasmMemory> = []
  for (const section of sections(bytes)) {
    const r = new Reader(bytes, section.contents, section.end)
    if (section.id === IMPORT_SECTION) {
      const count = r.uint()
      for (let i = 0; i < count; i++) {
        const module = r.name()
        const name = r.name()
        const kindByte = r.byte()
        const kind = KINDS[kindByte]
        if (kind === undefined) throw new WasmInvalid(`import ${module}.${name} has an unknown kind`)
        if (kind === "function") r.uint()
        else if (kind === "table") {
          r.byte()
          r.limits()
        } else if (kind === "memory") r.limits()
        else if (kind === "global") {
          r.byte()
          r.byte()
        } else {
          r.byte()
          r.uint()
        }
        imports.push({ module, name, kind })
      }
    } else if (section.id === MEMORY_SECTION) {
      const count = r.uint()
      for (let i = 0; i < count; i++) memories.push(r.limits())
    } else if (section.id === EXPORT_SECTION) {
      const count = r.uint()
      for (let i = 0; i < count; i++) {
        const name = r.name()
        const kind = KINDS[r.byte()]
        if (kind === undefined) throw new WasmInvalid(`export ${name} has an unknown kind`)
        r.uint()
        exports.push({ name, kind })
      }
    }
  }
  return { imports, exports, memories }
}

const leb = (value: number): Array<number> => {
  const out: Array<number> = []
  let v = value
  do {
    let b = v % 128
    v = Math.floor(v / 128)
    if (v > 0) b |= 0x80
    out.push(b)
  } while (v > 0)
  return out
}

/**
 * The module with its memory's maximum set to `maxPages` (lowered when it declared more, set when
 * it declared none). Throws `WasmInvalid` when the memory needs more than `maxPages` at start, or
 * is shared or 64-bit (neither is offered). A module without a memory of its own is returned as is.
 */
export const capMemory = (bytes: Uint8Array, maxPages: number): Uint8Array => {
  const memorySection = sections(bytes).find((s) => s.id === MEMORY_SECTION)
  if (memorySection === undefined) return bytes
  const r = new Reader(bytes, memorySection.contents, memorySection.end)
  const count = r.uint()
  const body: Array<number> = [...leb(count)]
  for (let i = 0; i < count; i++) {
    const memory = r.limits()
    if (memory.shared || memory.memory64) throw new WasmInvalid("shared and 64-bit memories are not offered")
    if (memory.minPages > maxPages) {
      throw new WasmInvalid(
        `the module needs ${Math.ceil((memory.minPages * WASM_PAGE_BYTES) / (1024 * 1024))} MiB of memory at start, more than its memory_limit_mb`
      )
    }
    body.push(0x01, ...leb(memory.minPages), ...leb(Math.min(memory.maxPages ?? maxPages, maxPages)))
  }
  const header = [MEMORY_SECTION, ...leb(body.length)]
  const out = new Uint8Array(memorySection.start + header.length + body.length + (bytes.length - memorySection.end))
  out.set(bytes.subarray(0, memorySection.start), 0)
  out.set(header, memorySection.start)
  out.set(body, memorySection.start + header.length)
  out.set(bytes.subarray(memorySection.end), memorySection.start + header.length + body.length)
  return out
}
