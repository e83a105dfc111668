/**
 * One thread of the function runner (functionRunner.ts): runs one invocation at a time, each in a
 * fresh instance of its compiled module, or holds one persistent instance for a socket and runs its
 * entries in order (`ws_open`, `ws_frame`, `ws_close`); it is terminated from outside when an
 * invocation's or an entry's deadline passes. Host calls the gateway answers block this thread on `Atomics.wait` until the
 * runner's main thread hands the answer over on `answers`; the identity, environment and logging
 * calls are answered here, from what the invocation carries.
 */
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from "node:worker_threads"
import { ALLOC_EXPORTS, HOST_CALLS, HOST_MODULES, type HostCall, WASI_MODULE } from "../../../domain/FunctionHostCalls.js"
import type { Ending, HostAnswer, HostArg, RunJob, SessionEntry, ThreadReport, ToThread } from "./Protocol.js"
import { GuestExit, makeWasi, OutputOverflow } from "./Wasi.js"

const { flag, answers } = workerData as { flag: SharedArrayBuffer; answers: MessagePort }
const signal = new Int32Array(flag)
const port = parentPort!
const encoder = new TextEncoder()
const decoder = new TextDecoder()
const LOG_LINE_MAX = 16 * 1024

const report = (message: ThreadReport) => port.postMessage(message)

/** A host call's pointer or length reaches outside the guest's memory. */
class BadPointer extends Error {}

const askGateway = (name: string, args: ReadonlyArray<HostArg>): HostAnswer => {
  report({ t: "host", name, args })
  Atomics.wait(signal, 0, 0)
  Atomics.store(signal, 0, 0)
  const received = receiveMessageOnPort(answers)
  return received === undefined ? { ok: false } : (received.message as HostAnswer)
}

/** An instance with its WASI state and the host calls bound to it. */
const instantiate = (job: RunJob) => {
  let instance: WebAssembly.Instance | undefined
  const memory = (): WebAssembly.Memory => {
    const exported = instance?.exports["memory"]
    if (!(exported instanceof WebAssembly.Memory)) throw new BadPointer("the module exports no memory")
    return exported
  }
  let logs = 0
  let logBytes = 0
  const log = (level: "info" | "error", message: string) => {
    if (logs >= job.maxLogLines || logBytes >= job.maxLogBytes) return
    const line = message.length > LOG_LINE_MAX ? message.slice(0, LOG_LINE_MAX) : message
    logs++
    logBytes += line.length
    report({ t: "log", level, message: line })
  }
  const wasi = makeWasi(memory, {
    args: [job.name],
    stdin: job.input,
    maxStdout: job.maxStdout,
    stderrLine: (line) => log("error", line)
  })

  const readBytes = (ptr: number, len: number): Uint8Array => {
    const buffer = memory().buffer
    if (ptr < 0 || len < 0 || ptr + len > buffer.byteLength) throw new BadPointer()
    return new Uint8Array(buffer, ptr, len).slice()
  }

  /** Writes `bytes` into a buffer the guest allocates, answering its P64; 0n when it cannot. */
  const give = (bytes: Uint8Array): bigint => {
    if (bytes.length === 0) return 0n
    const alloc = ALLOC_EXPORTS.map((name) => instance?.exports[name]).find((f) => typeof f === "function") as
      | ((n: number) => number)
      | undefined
    if (alloc === undefined) return 0n
    const ptr = alloc(bytes.length) >>> 0
    const buffer = memory().buffer
    if (ptr === 0 || ptr + bytes.length > buffer.byteLength) return 0n
    new Uint8Array(buffer, ptr, bytes.length).set(bytes)
    return (BigInt(ptr) << 32n) | BigInt(bytes.length)
  }
  const giveText = (text: string | undefined): bigint => (text === undefined ? 0n : give(encoder.encode(text)))

  const local: Record<string, (args: ReadonlyArray<HostArg>) => bigint | number | undefined> = {
    get_caller_wallet: () => giveText(job.caller.wallet),
    get_caller_jwt_subject: () => giveText(job.caller.subject),
    get_caller_device_id: () => giveText(job.caller.device),
    get_caller_claim: () => 0n,
    get_request_id: () => giveText(job.requestId),
    get_ws_client_id: () => giveText(job.socket),
    get_env: ([key]) => giveText(job.env[decoder.decode(key as Uint8Array)]),
    log_info: ([message]) => void log("info", decoder.decode(message as Uint8Array)),
    log_error: ([message]) => void log("error", decoder.decode(message as Uint8Array))
  }

  const failure = (spec: HostCall): bigint | number | undefined =>
    spec.result === "void" ? undefined : spec.result === "i32" ? 0 : 0n

  const hostFunction = (name: string, spec: HostCall) => (...raw: Array<number | bigint>) => {
    try {
      const args: Array<HostArg> = []
      let i = 0
      for (const param of spec.params) {
        if (param === "s") {
          args.push(readBytes(Number(raw[i]) >>> 0, Number(raw[i + 1]) >>> 0))
          i += 2
        } else {
          args.push(raw[i++]!)
        }
      }
      if (spec.where === "local") return local[name]!(args)
      const answer = askGateway(name, args)
      if (!answer.ok) return failure(spec)
      const value = answer.value
      if (spec.result === "void") return undefined
      if (spec.result === "p64") return value instanceof Uint8Array ? give(value) : 0n
      if (spec.result === "i64") return typeof value === "bigint" ? value : BigInt(Number(value ?? 0))
      return Number(value ?? 0) | 0
    } catch (e) {
      if (e instanceof BadPointer) return failure(spec)
      throw e
    }
  }

  const imports: WebAssembly.Imports = { [WASI_MODULE]: wasi.imports as WebAssembly.ModuleImports }
  const table: WebAssembly.ModuleImports = {}
  for (const [name, spec] of Object.entries(HOST_CALLS)) table[name] = hostFunction(name, spec)
  for (const module of HOST_MODULES) imports[module] = table

  try {
    instance = new WebAssembly.Instance(job.module, imports)
  } catch (e) {
    return { failed: { kind: "link-failed", message: e instanceof Error ? e.message : String(e) } as Ending }
  }
  const exported = (name: string) => {
    const f = instance?.exports[name]
    return typeof f === "function" ? (f as (...args: Array<number>) => unknown) : undefined
  }

  /**
   * Calls export `name`: its ending as the instance sees it (a trap and output past the cap end
   * the instance; `proc_exit` is an exit with its code).
   */
  const call = (name: string, args: ReadonlyArray<number>, persistent: boolean): Ending => {
    try {
      exported(name)!(...args)
    } catch (e) {
      if (e instanceof GuestExit) {
        wasi.flush()
        return { kind: "exit", code: e.code, stdout: wasi.take() }
      }
      if (e instanceof OutputOverflow) return { kind: "output-overflow", message: e.message }
      wasi.flush()
      return { kind: "trap", message: e instanceof Error ? e.message : String(e) }
    }
    wasi.flush()
    return persistent ? { kind: "returned", stdout: wasi.take() } : { kind: "exit", code: 0, stdout: wasi.take() }
  }

  return { failed: undefined, exported, call, give, drop: () => (instance = undefined) }
}

type Instance = Extract<ReturnType<typeof instantiate>, { failed: undefined }>

const done = (ending: Ending) => report({ t: "done", ...ending })

const run = (job: RunJob) => {
  const made = instantiate(job)
  if (made.failed !== undefined) return done(made.failed)
  if (made.exported("_start") === undefined) return done({ kind: "no-entry", message: "it exports no _start (build it as a WASI command)" })
  const ending = made.call("_start", [], false)
  made.drop()
  done(ending)
}

/** The persistent instance this thread holds, for a socket. */
let held: Instance | undefined

const open = (job: RunJob) => {
  const made = instantiate(job)
  if (made.failed !== undefined) return done(made.failed)
  if (made.exported("ws_frame") === undefined) return done({ kind: "no-entry", message: "it exports no ws_frame (docs/functions.md, \"Sockets\")" })
  held = made
  // a reactor (Go's -buildmode=c-shared) initializes its runtime once, before any entry
  let opened: Ending = { kind: "returned", stdout: new Uint8Array() }
  for (const name of ["_initialize", "ws_open"]) {
    if (made.exported(name) === undefined) continue
    opened = made.call(name, [], true)
    if (opened.kind !== "returned") break
  }
  // what ws_open wrote is the socket's first frame
  done(opened)
}

const entry = (next: SessionEntry) => {
  if (held === undefined) return done({ kind: "trap", message: "no instance is open" })
  if (next.entry === "close") return done(held.exported("ws_close") === undefined ? { kind: "returned", stdout: new Uint8Array() } : held.call("ws_close", [], true))
  const packed = held.give(next.data)
  if (packed === 0n && next.data.length > 0) return done({ kind: "trap", message: "the frame could not be written into the instance (no orama_alloc or malloc export)" })
  done(held.call("ws_frame", [Number(packed >> 32n), Number(packed & 0xffffffffn)], true))
}

port.on("message", (message: ToThread) => {
  if (message.t === "run") run(message)
  else if (message.t === "open") open(message)
  else entry(message)
})
report({ t: "ready" })
