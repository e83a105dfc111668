/**
 * Function modules for tests: Go functions under test/fixtures/functions built for wasip1 (once
 * per test run, cached by the sources' hash), and small hand-written modules assembled from WAT.
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import wabt from "wabt"

const fixtures = fileURLToPath(new URL("../fixtures/functions/", import.meta.url))

/** The module of test/fixtures/functions/<name>, built with GOOS=wasip1 GOARCH=wasm. */
export const goFunction = (name: string): Uint8Array => {
  const dir = path.join(fixtures, name)
  const hash = createHash("sha256")
  for (const file of readdirSync(dir).sort()) hash.update(file).update(readFileSync(path.join(dir, file)))
  const out = path.join(tmpdir(), "portico-fn-fixtures", `${name}-${hash.digest("hex").slice(0, 16)}.wasm`)
  if (!existsSync(out)) {
    mkdirSync(path.dirname(out), { recursive: true })
    const built = spawnSync("go", ["build", "-o", out, "."], {
      cwd: dir,
      env: { ...process.env, GOOS: "wasip1", GOARCH: "wasm", GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local" },
      encoding: "utf8"
    })
    if (built.status !== 0) throw new Error(`go build of ${name} failed: ${built.stderr}`)
  }
  return readFileSync(out)
}

let assembler: Awaited<ReturnType<typeof wabt>> | undefined

/** A module assembled from WebAssembly text. */
export const watModule = async (text: string): Promise<Uint8Array> => {
  assembler ??= await wabt()
  const parsed = assembler.parseWat("fixture.wat", text)
  try {
    return new Uint8Array(parsed.toBinary({}).buffer)
  } finally {
    parsed.destroy()
  }
}

/** A module that logs its input with `log_info` (up to 4 KiB): what a trigger gave it. */
export const inputLogger = (): Promise<Uint8Array> =>
  watModule(`(module
    (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
    (import "env" "log_info" (func $log (param i32 i32)))
    (memory (export "memory") 1)
    (func (export "_start")
      (i32.store (i32.const 0) (i32.const 64)) (i32.store (i32.const 4) (i32.const 4096))
      (drop (call $read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
      (call $log (i32.const 64) (i32.load (i32.const 8)))))`)

/** The multipart body of a deploy. */
export const deployForm = (fields: Record<string, string>, wasm: Uint8Array | undefined): FormData => {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  if (wasm !== undefined) form.append("wasm", new Blob([wasm]), "function.wasm")
  return form
}
