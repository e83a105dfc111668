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
 * deadline (the deadline runs from the moment the run arrives). A socket's persistent instance
 * (a session) has a thread of its own for its life, outside the pool; each of its entries has the
 * function's deadline, and an entry that outlives it ends the session with its thread.
 */
import { Worker } from "node:worker_threads"
import { MessageChannel, type MessagePort } from "node:worker_threads"
import type { Ending, FromRunner, HostAnswer, SessionEntry, Start, ThreadReport, ToRunner, ToThread } from "./Protocol.js"

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

const spawnWorker = (onReport: (report: ThreadReport) => void, onDeath: (message: string) => void) => {
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
  worker.on("message", onReport)
  worker.on("error", (error) => onDeath(describeThreadError(error)))
  worker.on("exit", () => onDeath("the instance's thread stopped"))
  return { worker, signal: new Int32Array(flag), answers: channel.port1 }
}

const spawnThread = (): Thread => {
  const thread: Thread = {
    ...spawnWorker(
      (report) => onReport(thread, report),
      (message) => {
        if (!pool.includes(thread)) return
        const current = thread.running
        replace(thread)
        if (current !== undefined) finish(current, { kind: "trap", message })
      }
    ),
    running: undefined
  }
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
  if (entry === undefined || report.t === "ready") return
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
  thread.worker.postMessage({ t: "run", ...entry.run.job, module } satisfies ToThread)
}

interface Session {
  readonly id: number
  readonly thread: Omit<Thread, "running">
  /** The entry running: when it started and its deadline's timer. */
  started: number
  timer: ReturnType<typeof setTimeout> | undefined
}

const sessions = new Map<number, Session>()

/** Ends a session: its thread and instance go; nothing is sent (the gateway heard its last ending). */
const endSession = (session: Session) => {
  if (sessions.get(session.id) !== session) return
  sessions.delete(session.id)
  if (session.timer !== undefined) clearTimeout(session.timer)
  void session.thread.worker.terminate()
  session.thread.answers.close()
}

/** Runs one step of a session (its opening or an entry) under the deadline. */
const step = (session: Session, message: ToThread, timeoutMs: number) => {
  session.started = performance.now()
  session.timer = setTimeout(() => {
    send({ t: "done", id: session.id, ms: performance.now() - session.started, kind: "timeout" })
    endSession(session)
  }, timeoutMs)
  session.thread.worker.postMessage(message)
}

const onOpen = (open: Start) => {
  const compiled = moduleOf(open)
  if (compiled === undefined) return send({ t: "need-module", id: open.id })
  let session: Session | undefined
  const ended = (ending: Ending) => {
    if (session === undefined || sessions.get(open.id) !== session) return
    send({ t: "done", id: open.id, ms: performance.now() - session.started, ...ending } as FromRunner)
    endSession(session)
  }
  const thread = spawnWorker(
    (report) => {
      if (session === undefined || sessions.get(open.id) !== session) return
      if (report.t === "ready") {
        compiled.then(
          (module) => {
            if (sessions.get(open.id) === session) step(session!, { t: "open", ...open.job, module }, open.timeoutMs)
          },
          (e: unknown) => ended({ kind: "compile-failed", message: e instanceof Error ? e.message : String(e) })
        )
      } else if (report.t === "host") send({ t: "host", id: open.id, name: report.name, args: report.args })
      else if (report.t === "log") send({ t: "log", id: open.id, level: report.level, message: report.message })
      else {
        const { t: _t, ...ending } = report
        if (ending.kind !== "returned") return ended(ending)
        if (session.timer !== undefined) clearTimeout(session.timer)
        session.timer = undefined
        send({ t: "done", id: open.id, ms: performance.now() - session.started, ...ending })
      }
    },
    (message) => ended({ kind: "trap", message })
  )
  session = { id: open.id, thread, started: performance.now(), timer: undefined }
  sessions.set(open.id, session)
}

const onEntry = (id: number, entry: SessionEntry, timeoutMs: number) => {
  const session = sessions.get(id)
  if (session === undefined) return send({ t: "done", id, ms: 0, kind: "trap", message: "the instance is gone" })
  step(session, { t: "entry", ...entry }, timeoutMs)
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
  const pooled = active.get(id)?.thread
  const thread = pooled !== undefined && pooled.running?.run.id === id ? pooled : sessions.get(id)?.thread
  if (thread === undefined) return
  thread.answers.postMessage(answer)
  Atomics.store(thread.signal, 0, 1)
  Atomics.notify(thread.signal, 0)
}

for (let i = 0; i < threads; i++) pool.push(spawnThread())

process.on("message", (message: ToRunner) => {
  switch (message.t) {
    case "run":
      return onRun(message)
    case "open":
      return onOpen(message)
    case "entry":
      return onEntry(message.id, message, message.timeoutMs)
    case "end": {
      const session = sessions.get(message.id)
      return session === undefined ? undefined : endSession(session)
    }
    case "answer":
      return onAnswer(message.id, message.answer)
    case "warm":
      if (!modules.has(message.key)) void moduleOf(message)?.catch(() => undefined)
  }
})
// the runner lives only as long as the gateway that started it
process.on("disconnect", () => process.exit(0))
send({ t: "ready" })
