/**
 * The anchor of bench/functions: a bare node:http server that compiles the bench's module once
 * (memory capped as the gateway caps it) and, per request, instantiates it in-process with the
 * request body on stdin, answers its one host call (`cache_get`) itself, and sends its stdout.
 * It uses the runner's own WASI (src/layers/functions/runner/Wasi.ts), so both sides pay the same
 * guest start; what the gateway adds is the HTTP API, its gate, the runner's process and thread
 * hops and the host call's round trip.
 *
 *   serve <port> <module.wasm> <memory pages>   prints READY when listening
 */
import * as fs from "node:fs"
import * as http from "node:http"
import { capMemory } from "../../src/domain/WasmBinary.js"
import { GuestExit, makeWasi } from "../../src/layers/functions/runner/Wasi.js"

const [, , command, portText, file, pagesText] = process.argv
if (command !== "serve" || portText === undefined || file === undefined || pagesText === undefined) {
  throw new Error("usage: anchor.ts serve <port> <module.wasm> <memory pages>")
}
const module = new WebAssembly.Module(capMemory(fs.readFileSync(file), Number(pagesText)))
const stub = new TextEncoder().encode("cached")

const run = (input: Uint8Array): Uint8Array => {
  let instance: WebAssembly.Instance | undefined
  const memory = () => instance!.exports["memory"] as WebAssembly.Memory
  const wasi = makeWasi(memory, { args: ["bench"], stdin: input, maxStdout: 8 * 1024 * 1024, stderrLine: () => undefined })
  const cacheGet = () => {
    const ptr = (instance!.exports["orama_alloc"] as (n: number) => number)(stub.length) >>> 0
    new Uint8Array(memory().buffer, ptr, stub.length).set(stub)
    return (BigInt(ptr) << 32n) | BigInt(stub.length)
  }
  instance = new WebAssembly.Instance(module, { wasi_snapshot_preview1: wasi.imports as WebAssembly.ModuleImports, env: { cache_get: cacheGet } })
  try {
    ;(instance.exports["_start"] as () => void)()
  } catch (e) {
    if (!(e instanceof GuestExit)) throw e
  }
  return wasi.stdout()
}

const server = http.createServer((req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    const out = run(Buffer.concat(chunks))
    res.writeHead(200, { "content-type": "application/json", "content-length": out.length })
    res.end(out)
  })
})
server.keepAliveTimeout = 65_000
server.listen(Number(portText), "127.0.0.1", () => process.stdout.write("READY\n"))
