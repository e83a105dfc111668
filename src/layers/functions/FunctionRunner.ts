/**
 * The gateway's side of the function runner (runner/functionRunner.ts): starts the runner process
 * on the first invocation (a gateway that runs no function pays nothing at start), hands it runs,
 * answers its host calls through the caller's `host`, and gives each run its ending. A socket's
 * persistent instance (`open`) is a session: its opening and then each entry is a step with its
 * own ending, the session living on while the steps return.
 *
 * The runner holds no platform secret: it is started with an empty environment, with no
 * descriptor but its IPC channel, and, when the gateway runs as root, as nobody in a jail without
 * the data directory or a network (RunnerJail.ts; docs/functions.md, "Isolation"). If it stops or stops answering (a run outliving its deadline by
 * the grace below), it is killed, every run in it ends `unavailable`, and the next run starts a
 * new one.
 */
import { Context, Effect, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { loaderArgv } from "../ChildEntry.js"
import { runnerCommand } from "./RunnerJail.js"
import { defaultSandboxOptions } from "../deployments/sandbox/Sandbox.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { Ending, FromRunner, HostAnswer, HostArg, RunJob, SessionEntry, ToRunner } from "./runner/Protocol.js"

export type RunEnding = (Ending | { readonly kind: "unavailable"; readonly message: string }) & { readonly ms: number }

export interface RunRequest {
  /** The compiled module's identity: its CID and memory cap. */
  readonly key: string
  /** The module's bytes, memory capped; read only when the runner has not got them. */
  readonly wasm: () => Promise<Uint8Array>
  readonly job: Omit<RunJob, "module">
  readonly timeoutMs: number
  readonly host: (name: string, args: ReadonlyArray<HostArg>) => Promise<HostAnswer>
  readonly log: (level: "info" | "error", message: string) => void
}

/** A compiled module's identity in the runner: its CID and its memory cap. */
export const moduleKey = (cid: string, memoryMb: number): string => `${cid}:${memoryMb}`

/** A socket's persistent instance in the runner, after its opening returned. */
export interface RunnerSession {
  /** Runs one entry; any ending but `returned` has ended the session. */
  readonly entry: (entry: SessionEntry) => Promise<RunEnding>
  /** Drops the instance and its thread (idempotent). */
  readonly end: () => void
}

export interface OpenRequest extends RunRequest {
  /** The session ended between entries (the runner stopped). */
  readonly gone: (message: string) => void
}

export interface FunctionRunnerService {
  readonly run: (request: RunRequest) => Promise<RunEnding>
  /**
   * Opens a persistent instance (`_initialize`, then `ws_open`): its opening's ending, and the
   * session when that ending is `returned`.
   */
  readonly open: (request: OpenRequest) => Promise<{ readonly ending: RunEnding; readonly session: RunnerSession | undefined }>
  /**
   * Hands the runner a module just deployed (its bytes, memory capped), starting it if need be, so
   * that the first invocation on this gateway neither reads content storage nor compiles.
   */
  readonly warm: (key: string, wasm: Uint8Array) => void
  /** The runner's process id while one runs (tests kill it). */
  readonly pid: () => number | undefined
}

export class FunctionRunner extends Context.Tag("portico/FunctionRunner")<FunctionRunner, FunctionRunnerService>() {
  static readonly Live = Layer.suspend(() =>
    Layer.scoped(
      FunctionRunner,
      Effect.gen(function* () {
        const config = yield* PorticoConfig
        return yield* scopedRunner({
          threads: config.functions.threads,
          moduleCache: config.functions.moduleCache,
          heapMb: config.functions.threadHeapMb,
          dataDir: config.dataDir,
          execHelper: defaultSandboxOptions().execHelper
        })
      })
    )
  )
  /** A runner of one thread; its process starts at the first run, as in production. */
  static readonly Test = Layer.suspend(() => Layer.scoped(FunctionRunner, scopedRunner({ threads: 1, moduleCache: 10, heapMb: 64, dataDir: "/nonexistent" })))
}

/** How long past a run's deadline the runner may take to answer it before it is taken for wedged. */
const GRACE_MS = 5_000
/** What an opening may take to start its thread, beyond the grace (its deadline starts once the thread listens). */
const THREAD_START_MS = 30_000

const typescript = import.meta.url.endsWith(".ts")
const runnerFile = fileURLToPath(new URL(`./runner/functionRunner.${typescript ? "ts" : "js"}`, import.meta.url))

export interface RunnerOptions {
  readonly threads: number
  readonly moduleCache: number
  readonly heapMb: number
  /** The gateway's data directory: hidden from the runner (RunnerJail.ts). */
  readonly dataDir: string
  /** portico-sandbox-exec, which puts Landlock and seccomp on the jailed runner (RunnerJail.ts). */
  readonly execHelper?: string | undefined
}

interface Pending {
  readonly request: RunRequest
  /** The step waiting for its ending (a run, a session's opening or entry); none between a session's entries. */
  resolve: ((ending: RunEnding) => void) | undefined
  backstop: ReturnType<typeof setTimeout> | undefined
  sentWasm: boolean
  /** A session's: told when it ends with no step waiting. */
  readonly gone?: ((message: string) => void) | undefined
  readonly kind: "run" | "open"
}

export const makeFunctionRunner = (options: RunnerOptions) => {
  let child: ChildProcess | undefined
  let nextId = 1
  const pending = new Map<number, Pending>()
  /** Keys whose bytes this runner process was sent (it may have dropped some since: it asks). */
  const sent = new Set<string>()

  const endAll = (message: string) => {
    for (const [id, entry] of pending) {
      clearTimeout(entry.backstop)
      pending.delete(id)
      if (entry.resolve !== undefined) entry.resolve({ kind: "unavailable", message, ms: 0 })
      else entry.gone?.(message)
    }
  }

  const stop = (proc: ChildProcess, message: string) => {
    if (child === proc) {
      child = undefined
      sent.clear()
    }
    proc.kill("SIGKILL")
    endAll(message)
  }

  const post = (message: ToRunner) => {
    try {
      child?.send(message)
    } catch {
      // the channel closed under us: the exit handler ends what was pending
    }
  }

  const start = (): ChildProcess => {
    const command = runnerCommand(
      runnerFile,
      [...loaderArgv(typescript), runnerFile, String(options.threads), String(options.moduleCache), String(options.heapMb)],
      options.dataDir,
      options.execHelper
    )
    const proc = spawn(command.file, [...command.args], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      serialization: "advanced",
      env: {},
      cwd: "/",
      ...(command.uid === undefined ? {} : { uid: command.uid, gid: command.uid })
    })
    proc.on("message", (message: FromRunner) => onMessage(message))
    proc.on("exit", () => {
      if (child === proc) stop(proc, "the function runner stopped")
    })
    proc.on("error", () => stop(proc, "the function runner could not start"))
    return proc
  }

  const sendRun = async (id: number, entry: Pending, withWasm: boolean) => {
    let wasm: Uint8Array | undefined
    if (withWasm) {
      try {
        wasm = await entry.request.wasm()
      } catch (e) {
        finish(id, { kind: "unavailable", message: e instanceof Error ? e.message : String(e), ms: 0 })
        return
      }
      if (!pending.has(id)) return
      entry.sentWasm = true
      sent.add(entry.request.key)
    }
    post({ t: entry.kind, id, key: entry.request.key, wasm, job: entry.request.job, timeoutMs: entry.request.timeoutMs })
  }

  /** A step's ending: a session lives on past a `returned` one, anything else ends what `id` was. */
  const finish = (id: number, ending: RunEnding) => {
    const entry = pending.get(id)
    if (entry === undefined) return
    clearTimeout(entry.backstop)
    entry.backstop = undefined
    const resolve = entry.resolve
    entry.resolve = undefined
    if (ending.kind !== "returned") pending.delete(id)
    resolve?.(ending)
  }

  /** Waits for step `id`'s ending, the runner taken for wedged when it outlives its deadline by the grace. */
  const waitFor = (entry: Pending, resolve: (ending: RunEnding) => void, extraMs = 0) => {
    const proc = child!
    entry.resolve = resolve
    entry.backstop = setTimeout(() => stop(proc, "the function runner stopped answering"), entry.request.timeoutMs + GRACE_MS + extraMs)
  }

  const onMessage = (message: FromRunner) => {
    if (message.t === "ready") return
    const entry = pending.get(message.id)
    if (entry === undefined) return
    switch (message.t) {
      case "need-module":
        sent.delete(entry.request.key)
        if (entry.sentWasm) finish(message.id, { kind: "unavailable", message: "the runner refused the module", ms: 0 })
        else void sendRun(message.id, entry, true)
        return
      case "host":
        entry.request.host(message.name, message.args).then(
          (answer) => post({ t: "answer", id: message.id, answer }),
          () => post({ t: "answer", id: message.id, answer: { ok: false } })
        )
        return
      case "log":
        entry.request.log(message.level, message.message)
        return
      case "done": {
        const { t: _t, id, ...ending } = message
        finish(id, ending as RunEnding)
      }
    }
  }

  const service: FunctionRunnerService = {
    pid: () => child?.pid,
    warm: (key, wasm) => {
      child ??= start()
      sent.add(key)
      post({ t: "warm", key, wasm })
    },
    run: (request) =>
      new Promise<RunEnding>((resolve) => {
        child ??= start()
        const id = nextId++
        const entry: Pending = { request, resolve: undefined, backstop: undefined, sentWasm: false, kind: "run" }
        waitFor(entry, resolve)
        pending.set(id, entry)
        void sendRun(id, entry, !sent.has(request.key))
      }),
    open: (request) => {
      const id = nextId++
      return new Promise<RunEnding>((resolve) => {
        child ??= start()
        const entry: Pending = { request, resolve: undefined, backstop: undefined, sentWasm: false, kind: "open", gone: request.gone }
        // an opening starts a thread first, which a loaded machine may take a while to give
        waitFor(entry, resolve, THREAD_START_MS)
        pending.set(id, entry)
        void sendRun(id, entry, !sent.has(request.key))
      }).then((ending) => {
        if (ending.kind !== "returned") return { ending, session: undefined }
        const session: RunnerSession = {
          entry: (step) =>
            new Promise<RunEnding>((resolve) => {
              const entry = pending.get(id)
              if (entry === undefined || child === undefined) return resolve({ kind: "unavailable", message: "the instance is gone", ms: 0 })
              if (entry.resolve !== undefined) return resolve({ kind: "trap", message: "an entry is already running", ms: 0 })
              waitFor(entry, resolve)
              post({ t: "entry", id, timeoutMs: entry.request.timeoutMs, ...step })
            }),
          end: () => {
            const entry = pending.get(id)
            if (entry === undefined) return
            pending.delete(id)
            clearTimeout(entry.backstop)
            entry.resolve?.({ kind: "unavailable", message: "the socket closed", ms: 0 })
            post({ t: "end", id })
          }
        }
        return { ending, session }
      })
    }
  }
  const close = () => {
    if (child !== undefined) stop(child, "the gateway is stopping")
  }
  return { service, close }
}

const scopedRunner = (options: RunnerOptions) =>
  Effect.gen(function* () {
    const { service, close } = makeFunctionRunner(options)
    yield* Effect.addFinalizer(() => Effect.sync(close))
    return service
  })
