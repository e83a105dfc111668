/**
 * Tenant SQL on SQLite files, off the gateway's event loop: a small pool of worker processes,
 * each file always served by the same one (so a file has one connection and its statements run
 * in order), a bounded queue per worker, and a statement timeout enforced by killing the worker.
 * better-sqlite3 cannot interrupt a running statement, and a thread busy in native code cannot be
 * terminated, so the workers are processes, not threads.
 */
import { Context, Data, Effect, Layer } from "effect"
import { type ChildProcess, fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { timeoutMessage } from "./SqlRefused.js"
import type { WorkerFailure, WorkerOptions, WorkerReply, WorkerRequest, WorkerValue } from "./SqliteProtocol.js"

export class SqliteFailure extends Data.TaggedError("SqliteFailure")<{
  /** WorkerFailure kinds, plus timeout (the statement ran too long) and overloaded (queue full). */
  readonly kind: WorkerFailure["kind"] | "timeout" | "overloaded"
  readonly message: string
  readonly index?: number | undefined
}> {}

export interface SqliteWorkersSettings {
  readonly workers: number
  readonly timeoutMs: number
  /** Requests waiting per worker before new ones are refused. */
  readonly maxQueue: number
  readonly worker: WorkerOptions
}

export interface SqliteWorkersService {
  /**
   * Runs one request on the worker that owns its file, stopped past `timeoutMs` (default: the
   * statement timeout; whole-file work such as backups passes the transfer budget).
   */
  readonly run: (request: WorkerRequest, timeoutMs?: number) => Effect.Effect<WorkerValue, SqliteFailure>
}

interface Pending {
  readonly request: WorkerRequest
  readonly timeoutMs: number
  readonly resume: (result: Effect.Effect<WorkerValue, SqliteFailure>) => void
  cancelled: boolean
}

const typescript = import.meta.url.endsWith(".ts")
const workerFile = fileURLToPath(new URL(`./sqliteWorker.${typescript ? "ts" : "js"}`, import.meta.url))
/**
 * A TypeScript checkout runs through tsx, which `portico` may have registered in-process (not
 * through flags a child inherits), so the child is given tsx's loader by absolute location.
 * Resolved when a worker starts, not on import: vitest's module runner has no
 * `import.meta.resolve`, and modules that only name the SQL services are imported there.
 */
const workerArgv = (): Array<string> => (typescript ? ["--import", import.meta.resolve("tsx")] : [])

/** One worker, one request at a time; a timeout replaces the worker. */
class Lane {
  /** Spawned when work arrives, so a worker that cannot start is not restarted in a loop. */
  private worker: ChildProcess | undefined
  private readonly queue: Array<Pending> = []
  private current: { readonly id: number; readonly pending: Pending; readonly timer: NodeJS.Timeout } | undefined
  private nextId = 0
  private closed = false

  constructor(private readonly settings: SqliteWorkersSettings) {
    this.worker = this.spawn()
  }

  private spawn(): ChildProcess {
    const worker = fork(workerFile, [], {
      execArgv: workerArgv(),
      serialization: "advanced",
      env: { ...process.env, PORTICO_SQLITE_WORKER: JSON.stringify(this.settings.worker) },
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
    worker.on("message", (reply: WorkerReply) => {
      if (this.worker === worker) this.onReply(reply)
    })
    worker.on("error", (e) => {
      if (this.worker === worker) this.onCrash(e.message)
    })
    worker.on("exit", () => {
      if (this.worker === worker && !this.closed) this.onCrash("worker exited")
    })
    return worker
  }

  submit(pending: Pending): boolean {
    if (this.queue.length >= this.settings.maxQueue) return false
    this.queue.push(pending)
    this.pump()
    return true
  }

  private pump(): void {
    while (this.current === undefined && this.queue.length > 0) {
      const pending = this.queue.shift()
      if (pending === undefined || pending.cancelled) continue
      const id = ++this.nextId
      const timer = setTimeout(() => this.onTimeout(id, pending.timeoutMs), pending.timeoutMs)
      this.current = { id, pending, timer }
      this.worker ??= this.spawn()
      this.worker.send({ id, request: pending.request })
    }
  }

  private settle(result: Effect.Effect<WorkerValue, SqliteFailure>): void {
    const current = this.current
    if (current === undefined) return
    clearTimeout(current.timer)
    this.current = undefined
    current.pending.resume(result)
  }

  private onReply(reply: WorkerReply): void {
    if (this.current === undefined || reply.id !== this.current.id) return
    this.settle(reply.ok ? Effect.succeed(reply.value) : Effect.fail(new SqliteFailure(reply.failure)))
    this.pump()
  }

  private discard(): void {
    const old = this.worker
    this.worker = undefined
    old?.kill("SIGKILL")
  }

  private onTimeout(id: number, timeoutMs: number): void {
    if (this.current?.id !== id) return
    this.discard()
    // a deliberate stop: have the next worker warm for what is queued
    this.worker = this.spawn()
    this.settle(Effect.fail(new SqliteFailure({ kind: "timeout", message: timeoutMessage(timeoutMs) })))
    this.pump()
  }

  private onCrash(message: string): void {
    if (this.closed) return
    this.discard()
    this.settle(Effect.fail(new SqliteFailure({ kind: "io", message })))
    this.pump()
  }

  close(): Promise<void> {
    this.closed = true
    for (const p of this.queue) p.resume(Effect.fail(new SqliteFailure({ kind: "io", message: "shutting down" })))
    this.queue.length = 0
    const worker = this.worker
    if (worker === undefined || worker.exitCode !== null || worker.signalCode !== null) return Promise.resolve()
    return new Promise((resolve) => {
      worker.once("exit", () => resolve())
      // a statement still running is not waited for
      worker.kill("SIGKILL")
    })
  }
}

/** FNV-1a: a stable worker for a file. */
const laneOf = (file: string, lanes: number): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < file.length; i++) h = Math.imul(h ^ file.charCodeAt(i), 0x01000193)
  return (h >>> 0) % lanes
}

export class SqliteWorkers extends Context.Tag("portico/SqliteWorkers")<SqliteWorkers, SqliteWorkersService>() {
  static readonly layer = (settings: SqliteWorkersSettings) =>
    Layer.scoped(
      SqliteWorkers,
      Effect.gen(function* () {
        const lanes = yield* Effect.acquireRelease(
          Effect.sync(() => Array.from({ length: Math.max(1, settings.workers) }, () => new Lane(settings))),
          (all) => Effect.promise(() => Promise.all(all.map((l) => l.close())))
        )
        return {
          run: (request, timeoutMs = settings.timeoutMs) =>
            Effect.async<WorkerValue, SqliteFailure>((resume) => {
              const lane = lanes[laneOf(request.file, lanes.length)]
              const pending: Pending = { request, timeoutMs, resume, cancelled: false }
              if (lane === undefined || !lane.submit(pending)) {
                resume(Effect.fail(new SqliteFailure({ kind: "overloaded", message: "too many statements waiting for this database" })))
                return
              }
              // an abandoned request that has not started is dropped; one already running finishes
              return Effect.sync(() => {
                pending.cancelled = true
              })
            })
        }
      })
    )
}
