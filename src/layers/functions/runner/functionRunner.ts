/**
 * The function runner: a process of its own that runs tenant WebAssembly in a pool of threads
 * (instanceThread.ts), started by the gateway (FunctionRunner.ts) with a fixed, empty environment,
 * as an unprivileged user when the gateway is root, and holding no platform secret: what tenant
 * code could reach by escaping V8 is this process, not the gateway (docs/functions.md,
 * "Isolation").
 *
 * It keeps compiled modules by key (a CID and a memory cap) in a small LRU, asks the gateway for
 * a module's bytes when it has not got them, runs each invocation on a free thread or queues it,
 * passes host calls up and answers down, and terminates a thread whose invocation outlives its
 * deadline (the deadline runs from the moment the run arrives).
 */
import { Worker } from "node:worker_threads"
import { MessageChannel, type MessagePort } from "node:worker_threads"
import type { Ending, FromRunner, HostAnswer, ThreadReport, ToRunner } from "./Protocol.js"

type Run = Extract<ToRunner, { t: "run" }>

const threads = Math.max(1, Number(process.argv[2] ?? "2"))
const moduleCacheSize = Math.max(1, Number(process.argv[3] ?? "100"))
const heapMb = Math.max(16, Number(process.argv[4] ?? "64"))

const send = (message: FromRunner) => process.send?.(message)

interface Thread {
  worker: Worker
  readonly signal: Int32Array
  readonly answers: MessagePort
  running: Active | undefined
}

interface Active {
  readonly run: Run
  readonly started: number
  timer: ReturnType<typeof setTimeout> | undefined
  thread: Thread | undefined
  over: boolean
}

const typescript = import.meta.url.endsWith(".ts")
const threadFile = new URL(`./instanceThread.${typescript ? "ts" : "js"}`, import.meta.url)
/**
 * A TypeScript checkout's thread registers tsx itself before importing its module: the loader
 * the runner was started with does not reach its threads on Node 20.
 */
const threadEntry = (): URL | string =>
  typeof import.meta.resolve === "function" && typescript
    ? `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((api) => { api.register(); return import(${JSON.stringify(threadFile.href)}) })`
    : threadFile

const pool: Array<Thread> = []
const queue: Array<Active> = []
const active = new Map<number, Active>()
const modules = new Map<string, Promise<WebAssembly.Module>>()

const spawnThread = (): Thread => {
  const flag = new SharedArrayBuffer(4)
  const channel = new MessageChannel()
  const entry = threadEntry()
  const worker = new Worker(entry, {
    eval: typeof entry === "string",
    workerData: { flag, answers: channel.port2 },
    transferList: [channel.port2],
    env: {},
    resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 16, codeRangeSizeMb: 64 },
    stdout: false,
    stderr: false
  })
  const thread: Thread = { worker, signal: new Int32Array(flag), answers: channel.port1, running: undefined }
  worker.on("message", (report: ThreadReport) => onReport(thread, report))
  worker.on("error", (error) => {
    const current = thread.running
    replace(thread)
    if (current !== undefined) finish(current, { kind: "trap", message: describeThreadError(error) })
  })
  worker.on("exit", () => {
    if (pool.includes(thread)) {
      const current = thread.running
      replace(thread)
      if (current !== undefined) finish(current, { kind: "trap", message: "the instance's thread stopped" })
    }
  })
  return thread
}

const describeThreadError = (error: unknown): string => {
  const code = (error as { code?: string }).code
  if (code === "ERR_WORKER_OUT_OF_MEMORY") return "out of memory"
  return error instanceof Error ? error.message : String(error)
}

/** Swaps a thread that was terminated or died for a fresh one. */
const replace = (thread: Thread) => {
  const at = pool.indexOf(thread)
  if (at < 0) return
  thread.running = undefined
  void thread.worker.terminate()
  thread.answers.close()
  pool[at] = spawnThread()
  next()
}

const finish = (entry: Active, ending: Ending) => {
  if (entry.over) return
  entry.over = true
  if (entry.timer !== undefined) clearTimeout(entry.timer)
  active.delete(entry.run.id)
  if (entry.thread !== undefined && entry.thread.running === entry) entry.thread.running = undefined
  const message = { t: "done", id: entry.run.id, ms: performance.now() - entry.started, ...ending } as FromRunner
  send(message)
  next()
}

const onReport = (thread: Thread, report: ThreadReport) => {
  const entry = thread.running
  if (entry === undefined) return
  if (report.t === "host") send({ t: "host", id: entry.run.id, name: report.name, args: report.args })
  else if (report.t === "log") send({ t: "log", id: entry.run.id, level: report.level, message: report.message })
  else {
    const { t: _t, ...ending } = report
    finish(entry, ending)
  }
}

const moduleOf = (run: Pick<Run, "key" | "wasm">): Promise<WebAssembly.Module> | undefined => {
  const known = modules.get(run.key)
  if (known !== undefined) {
    // most recently used last
    modules.delete(run.key)
    modules.set(run.key, known)
    return known
  }
  if (run.wasm === undefined) return undefined
  const compiled = WebAssembly.compile(run.wasm)
  modules.set(run.key, compiled)
  compiled.catch(() => modules.delete(run.key))
  while (modules.size > moduleCacheSize) modules.delete(modules.keys().next().value as string)
  return compiled
}

const next = () => {
  while (queue.length > 0) {
    const thread = pool.find((t) => t.running === undefined)
    if (thread === undefined) return
    const entry = queue.shift()!
    if (entry.over) continue
    void start(entry, thread)
  }
}

const start = async (entry: Active, thread: Thread) => {
  thread.running = entry
  entry.thread = thread
  let module: WebAssembly.Module
  try {
    module = await moduleOf(entry.run)!
  } catch (e) {
    finish(entry, { kind: "compile-failed", message: e instanceof Error ? e.message : String(e) })
    return
  }
  if (entry.over) return
  thread.worker.postMessage({ ...entry.run.job, module })
}

const onRun = (run: Run) => {
  if (moduleOf(run) === undefined) {
    send({ t: "need-module", id: run.id })
    return
  }
  const entry: Active = { run, started: performance.now(), timer: undefined, thread: undefined, over: false }
  active.set(run.id, entry)
  entry.timer = setTimeout(() => {
    const thread = entry.thread
    // a deadline is enforced from outside the instance: its thread is terminated wherever it is
    if (thread !== undefined && thread.running === entry) replace(thread)
    finish(entry, { kind: "timeout" })
  }, run.timeoutMs)
  queue.push(entry)
  next()
}

const onAnswer = (id: number, answer: HostAnswer) => {
  const thread = active.get(id)?.thread
  if (thread === undefined || thread.running?.run.id !== id) return
  thread.answers.postMessage(answer)
  Atomics.store(thread.signal, 0, 1)
  Atomics.notify(thread.signal, 0)
}

for (let i = 0; i < threads; i++) pool.push(spawnThread())

process.on("message", (message: ToRunner) => {
  if (message.t === "run") onRun(message)
  else if (message.t === "answer") onAnswer(message.id, message.answer)
  else if (!modules.has(message.key)) void moduleOf(message)?.catch(() => undefined)
})
// the runner lives only as long as the gateway that started it
process.on("disconnect", () => process.exit(0))
send({ t: "ready" })
