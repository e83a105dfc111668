/**
 * Function modules for tests: Go functions under test/fixtures/functions built for wasip1 (once
 * per test run, cached by the sources' hash), and small hand-written modules assembled from WAT.
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import wabt from "wabt"
import { WebSocket } from "ws"

const fixtures = fileURLToPath(new URL("../fixtures/functions/", import.meta.url))

/**
 * The module of test/fixtures/functions/<name>, built with GOOS=wasip1 GOARCH=wasm: a WASI command,
 * or with `reactor` a reactor (`-buildmode=c-shared`), as socket functions are built.
 */
export const goFunction = (name: string, options: { readonly reactor?: boolean } = {}): Uint8Array => {
  const dir = path.join(fixtures, name)
  const hash = createHash("sha256")
  for (const file of readdirSync(dir).sort()) hash.update(file).update(readFileSync(path.join(dir, file)))
  if (options.reactor === true) hash.update("c-shared")
  const out = path.join(tmpdir(), "portico-fn-fixtures", `${name}-${hash.digest("hex").slice(0, 16)}.wasm`)
  if (!existsSync(out)) {
    mkdirSync(path.dirname(out), { recursive: true })
    // built beside it and renamed into place: a suite running at the same time reads a whole module or none
    const building = `${out}.${process.pid}`
    const built = spawnSync("go", ["build", ...(options.reactor === true ? ["-buildmode=c-shared"] : []), "-o", building, "."], {
      cwd: dir,
      env: { ...process.env, GOOS: "wasip1", GOARCH: "wasm", GOFLAGS: "-mod=mod", GOTOOLCHAIN: "local" },
      encoding: "utf8"
    })
    if (built.status !== 0) throw new Error(`go build of ${name} failed: ${built.stderr}`)
    renameSync(building, out)
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

/** A client of a function's socket (`GET /v1/functions/<name>/ws`), keeping every frame it receives. */
export interface FunctionSocket {
  readonly ws: WebSocket
  readonly frames: Array<string>
  readonly closed: Promise<{ readonly code: number; readonly reason: string }>
  /** The next frame not yet taken (frames are taken in order); fails after `ms`. */
  readonly next: (ms?: number) => Promise<any>
  /** Sends `message` as JSON and answers the next frame, parsed. */
  readonly ask: (message: unknown, ms?: number) => Promise<any>
}

export const openFunctionSocket = (baseUrl: string, name: string, token: string | undefined): Promise<FunctionSocket | { status: number; body: any }> =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(`${baseUrl.replace(/^http/, "ws")}/v1/functions/${name}/ws`, {
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      maxPayload: 64 * 1024 * 1024
    })
    const frames: Array<string> = []
    let taken = 0
    const waiters = new Set<() => void>()
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on("close", (code, reason) => r({ code, reason: reason.toString() })))
    ws.on("message", (data: Buffer) => {
      frames.push(data.toString("utf8"))
      for (const w of [...waiters]) w()
    })
    const next = (ms = 10_000) =>
      new Promise<any>((done, fail) => {
        const check = () => {
          if (frames.length <= taken) return
          clearTimeout(timer)
          waiters.delete(check)
          const frame = frames[taken++]!
          try {
            done(JSON.parse(frame))
          } catch {
            done(frame)
          }
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          fail(new Error(`waited ${ms} ms for frame ${taken + 1}; got ${JSON.stringify(frames).slice(0, 2000)}`))
        }, ms)
        waiters.add(check)
        check()
      })
    const ask = (message: unknown, ms?: number) => {
      ws.send(JSON.stringify(message))
      return next(ms)
    }
    ws.on("open", () => resolve({ ws, frames, closed, next, ask }))
    ws.on("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => {
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch {
          // not JSON: kept as text
        }
        resolve({ status: res.statusCode ?? 0, body })
      })
    })
    ws.on("error", (e) => reject(e))
  })
