/**
 * The worker processes behind SqliteWorkers and how requests reach them.
 *
 * Pipelined: a lane (one worker process) has up to `window` requests in flight, sent as one
 * frame per event-loop turn (WorkerFrames.ts) and answered one by one in order. The worker
 * writes each answer before it starts the next request, so the oldest unanswered request is the
 * one running: its clock starts when the answer before it arrives (or when the worker says it
 * is ready), and that is the statement the timeout stops.
 *
 * A file's requests all go to one lane while any of them is unanswered (one connection, one
 * writer, arrival order); an idle file goes to its lane by hash. Stopping a runaway statement:
 *
 * - Past `stallMs` the lane is stalled: no idle file is routed to it, and every other file whose
 *   requests on it are all reads that leave the database as it was (the guard's readOnly) moves
 *   to another lane with them, in order. Those already sent stay where they are too; whichever
 *   copy answers first is the answer, so a second run of a read is harmless. A file with a write
 *   in flight behind the runaway waits: its write must not run twice, nor its statements out of
 *   order.
 * - At the timeout the worker is killed (SIGKILL; SQLite rolls back what it had open) and a new
 *   one spawned at once. The answers the old one wrote before it died are still read; then the
 *   runaway, if still unanswered, fails with the timeout, and every request behind it goes to
 *   the new worker first, in order: none of them ran (or, killed mid-way, it rolled back).
 * - A worker that dies on its own fails the request it was running and re-queues the rest alike.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as os from "node:os"
import type { Readable, Writable } from "node:stream"
import { fileURLToPath } from "node:url"
import { loaderArgv } from "../ChildEntry.js"
import type { WorkerFailure, WorkerOptions, WorkerRequest, WorkerValue } from "./SqliteProtocol.js"
import { type Answer, FrameReader, readAnswer, READY_TAG, requestFrame } from "./WorkerFrames.js"

export interface PoolSettings {
  readonly workers: number
  readonly timeoutMs: number
  /** Requests waiting or in flight per worker before new ones are refused. */
  readonly maxQueue: number
  /** Requests sent to a worker ahead of their turn. */
  readonly window: number
  /** How long a statement runs before its worker counts as stalled (other files move away). */
  readonly stallMs: number
  readonly worker: WorkerOptions
}

/** What a request ends with: its answer, or one of the pool's own failures. */
export type Outcome =
  | { readonly ok: true; readonly value: WorkerValue }
  | { readonly ok: false; readonly failure: WorkerFailure | { readonly kind: "timeout" | "overloaded"; readonly message: string; readonly index?: undefined } }

export interface Pending {
  readonly request: WorkerRequest
  readonly timeoutMs: number
  /** May run twice: a statement that leaves the database and connection as they were. */
  readonly rerunnable: boolean
  readonly done: (outcome: Outcome) => void
  /** The caller gave up: dropped if not sent yet, its answer ignored if it was. */
  cancelled: boolean
  settled: boolean
  /** The lane whose answer counts (a rescued read keeps a copy on the stalled lane). */
  owner: Lane | undefined
}

const typescript = import.meta.url.endsWith(".ts")
const workerFile = fileURLToPath(new URL(`./sqliteWorker.${typescript ? "ts" : "js"}`, import.meta.url))
const workerArgv = (): Array<string> => loaderArgv(typescript)

interface Proc {
  readonly child: ChildProcess
  readonly input: Writable
  ready: boolean
  /** The lane it serves; none while it waits as the pool's spare. */
  owner: Lane | undefined
  /** Running at a lowered CPU priority since a statement of it stalled (see `lower`). */
  lowered: boolean
}

/**
 * The CPU priority of a worker whose statement runs past the stall point: a long statement
 * takes what CPU the gateway and the other workers leave, instead of a fair share of it, so the
 * other tenants' statements keep their pace while it runs to its timeout.
 */
const STALLED_NICE = 10

const setNice = (proc: Proc, nice: number): boolean => {
  try {
    if (proc.child.pid === undefined) return false
    os.setPriority(proc.child.pid, nice)
    return true
  } catch {
    // not permitted (raising a priority back needs privilege) or already gone
    return false
  }
}

/** Starts a worker process; its frames and its end go to whichever lane owns it then. */
const spawnProc = (options: WorkerOptions, owner: Lane | undefined, onSpareEnd: (proc: Proc) => void): Proc => {
  const child = spawn(process.execPath, [...workerArgv(), workerFile], {
    env: { ...process.env, PORTICO_SQLITE_WORKER: JSON.stringify(options) },
    // stdin: request frames; fd 3: answer frames; no IPC channel
    stdio: ["pipe", "inherit", "inherit", "pipe"]
  })
  const proc: Proc = { child, input: child.stdin as Writable, ready: false, owner, lowered: false }
  const answers = child.stdio[3] as Readable
  const frames = new FrameReader()
  answers.on("data", (chunk: Buffer) => {
    for (const frame of frames.push(chunk)) {
      if (frame[0] === READY_TAG) {
        proc.ready = true
        proc.owner?.onReady(proc)
      } else proc.owner?.onFrame(proc, frame)
    }
  })
  // a write to a worker that died is seen as its exit
  proc.input.on("error", () => {})
  answers.on("error", () => {})
  child.on("error", () => proc.owner?.onEnd(proc))
  child.on("close", () => (proc.owner === undefined ? onSpareEnd(proc) : proc.owner.onEnd(proc)))
  return proc
}

const timeoutFailure = (timeoutMs: number, message: (ms: number) => string): Outcome => ({
  ok: false,
  failure: { kind: "timeout", message: message(timeoutMs) }
})

/** One worker process and the requests it owes answers for. */
export class Lane {
  private proc: Proc | undefined
  /** The old process after a kill, whose last answers are still being read. */
  private retiring: Proc | undefined
  readonly waiting: Array<Pending> = []
  readonly inflight: Array<Pending> = []
  private headSince = 0
  private timer: NodeJS.Timeout | undefined
  private flushing = false
  private closed = false
  stalled = false

  constructor(
    private readonly pool: WorkerPool,
    private readonly settings: PoolSettings,
    private readonly timeoutMessage: (ms: number) => string
  ) {
    this.proc = this.spawn()
  }

  get load(): number {
    return this.waiting.length + this.inflight.length
  }

  /** A process for this lane: the pool's warm spare when it has one. */
  private spawn(): Proc {
    const proc = this.pool.takeSpare() ?? spawnProc(this.settings.worker, this, () => {})
    proc.owner = this
    if (proc.ready) this.onReady(proc)
    return proc
  }

  onReady(proc: Proc): void {
    if (proc === this.proc) this.headSince = performance.now()
  }

  onEnd(proc: Proc): void {
    if (this.retiring === proc) this.retired(proc)
    else if (this.proc === proc && !this.closed) {
      // died on its own: the request it was running is the one to fail
      this.replace(proc, undefined)
      this.retired(proc)
    }
  }

  onFrame(proc: Proc, frame: Buffer): void {
    const pending = this.inflight.shift()
    this.headSince = performance.now()
    this.stalled = false
    if (pending !== undefined && pending.owner === this) this.pool.finish(pending, readAnswer(frame) satisfies Answer)
    if (proc !== this.proc) return
    // the long statement finished: back to a fair share, or, where raising a priority is not
    // permitted, the worker is ended as soon as it owes nothing and the next request starts another
    if (proc.lowered && setNice(proc, 0)) proc.lowered = false
    if (proc.lowered && this.inflight.length === 0) {
      this.proc = undefined
      proc.owner = undefined
      proc.input.end()
    }
    this.schedule()
  }

  /** Takes a request unless the lane is full; `force` for requests moved here, which are not refused. */
  submit(pending: Pending, force = false): boolean {
    if (!force && this.load >= this.settings.maxQueue) return false
    pending.owner = this
    this.waiting.push(pending)
    this.schedule()
    return true
  }

  /** Requests submitted in one event-loop turn leave in one frame. */
  private schedule(): void {
    if (this.flushing || this.waiting.length === 0) return
    this.flushing = true
    setImmediate(() => {
      this.flushing = false
      this.flush()
    })
  }

  private flush(): void {
    if (this.closed || this.retiring !== undefined) return
    const batch: Array<WorkerRequest> = []
    const wasIdle = this.inflight.length === 0
    while (this.inflight.length < this.settings.window && this.waiting.length > 0) {
      const pending = this.waiting.shift()!
      if (pending.cancelled || pending.settled || pending.owner !== this) {
        if (pending.owner === this) this.pool.finish(pending, undefined)
        continue
      }
      this.inflight.push(pending)
      batch.push(pending.request)
    }
    if (batch.length === 0) return
    this.proc ??= this.spawn()
    if (wasIdle) this.headSince = performance.now()
    this.proc.input.write(requestFrame(batch))
    this.arm()
  }

  /** One timer per lane, for the head's stall point or timeout; a head that moved on re-arms it. */
  private arm(): void {
    if (this.timer !== undefined || this.inflight.length === 0) return
    const head = this.inflight[0]!
    const limit = this.stalled ? head.timeoutMs : Math.min(this.settings.stallMs, head.timeoutMs)
    const wait = Math.max(1, this.headSince + limit - performance.now())
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.check()
    }, wait)
    this.timer.unref()
  }

  private check(): void {
    const head = this.inflight[0]
    if (head === undefined || this.closed || this.retiring !== undefined || this.proc === undefined) return
    // a worker still starting has not begun the head; its ready frame starts the clock
    if (!this.proc.ready) {
      this.headSince = performance.now()
      return this.arm()
    }
    const elapsed = performance.now() - this.headSince
    if (elapsed >= head.timeoutMs) return this.replace(this.proc, head)
    if (elapsed >= this.settings.stallMs && !this.stalled) {
      this.stalled = true
      if (setNice(this.proc, STALLED_NICE)) this.proc.lowered = true
      this.pool.rescue(this, head)
    }
    this.arm()
  }

  /** The request the last kill was for; undefined when the worker died on its own. */
  private timedOut: Pending | undefined

  /**
   * Kills the process, for a runaway `head` or because it died. A deliberate stop spawns the
   * successor at once, warm for what is queued; after a death the next request spawns it, so a
   * worker that cannot start is not restarted in a loop (each death fails one request).
   */
  private replace(proc: Proc, head: Pending | undefined): void {
    this.timedOut = head
    this.retiring = proc
    this.proc = this.closed || head === undefined ? undefined : this.spawn()
    proc.child.kill("SIGKILL")
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }

  /** The old process's last answers are read: fail the one it was running, re-queue the rest. */
  private retired(proc: Proc): void {
    if (this.retiring !== proc) return
    this.retiring = undefined
    const timedOut = this.timedOut
    this.timedOut = undefined
    const unanswered = this.inflight.splice(0)
    const running = unanswered[0]
    if (running !== undefined && running.owner === this) {
      if (timedOut === undefined) {
        unanswered.shift()
        this.pool.finish(running, { ok: false, failure: { kind: "io", message: "worker exited" } })
      } else if (running === timedOut) {
        unanswered.shift()
        this.pool.finish(running, timeoutFailure(running.timeoutMs, this.timeoutMessage))
      }
      // else the runaway answered just in time, and this one was stopped with the worker: it
      // rolled back, and runs again like the rest
    }
    this.waiting.unshift(...unanswered.filter((p) => p.owner === this && !p.settled))
    this.stalled = false
    if (!this.closed) this.schedule()
  }

  close(): Promise<void> {
    this.closed = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    for (const p of [...this.inflight, ...this.waiting]) {
      if (p.owner === this) this.pool.finish(p, { ok: false, failure: { kind: "io", message: "shutting down" } })
    }
    this.inflight.length = 0
    this.waiting.length = 0
    const all = [this.proc, this.retiring].filter((p): p is Proc => p !== undefined)
    return Promise.all(
      all.map(
        ({ child }) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve()
            child.once("exit", () => resolve())
            // a statement still running is not waited for
            child.kill("SIGKILL")
          })
      )
    ).then(() => undefined)
  }
}

/** FNV-1a: a stable lane for a file. */
export const hashOf = (file: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < file.length; i++) h = Math.imul(h ^ file.charCodeAt(i), 0x01000193)
  return h >>> 0
}

export class WorkerPool {
  readonly lanes: ReadonlyArray<Lane>
  /** Files with unanswered requests: the lane they are on and how many. */
  private readonly files = new Map<string, { lane: Lane; unanswered: number }>()

  /**
   * A started worker no lane uses yet, so a killed worker's successor is ready at once (a start
   * costs ~0.3-1 s of CPU). Made when a lane first stalls, kept from then on.
   */
  private spare: Proc | undefined
  private closed = false

  constructor(private readonly settings: PoolSettings, timeoutMessage: (ms: number) => string) {
    this.lanes = Array.from({ length: Math.max(1, settings.workers) }, () => new Lane(this, settings, timeoutMessage))
  }

  private warmSpare(): void {
    if (this.spare !== undefined || this.closed) return
    this.spare = spawnProc(this.settings.worker, undefined, (proc) => {
      if (this.spare === proc) this.spare = undefined
    })
  }

  /** The spare, if it is alive; a new one is started in its place. */
  takeSpare(): Proc | undefined {
    const proc = this.spare
    this.spare = undefined
    if (proc === undefined || proc.child.exitCode !== null || proc.child.signalCode !== null) return undefined
    this.warmSpare()
    return proc
  }

  /** An idle file's lane: its own by hash, or while that one is stalled the least loaded other. */
  private pick(file: string): Lane {
    const own = this.lanes[hashOf(file) % this.lanes.length]!
    if (!own.stalled) return own
    let best: Lane | undefined
    for (const lane of this.lanes) if (!lane.stalled && (best === undefined || lane.load < best.load)) best = lane
    return best ?? own
  }

  /** Queues a request on its file's lane; false when that lane is full (overload). */
  submit(pending: Pending): boolean {
    const file = pending.request.file
    const entry = this.files.get(file)
    const lane = entry?.lane ?? this.pick(file)
    if (!lane.submit(pending)) return false
    if (entry === undefined) this.files.set(file, { lane, unanswered: 1 })
    else entry.unanswered++
    return true
  }

  /** Settles a request once; `undefined` drops a cancelled one without an answer. */
  finish(pending: Pending, outcome: Outcome | undefined): void {
    if (pending.settled) return
    pending.settled = true
    const file = pending.request.file
    const entry = this.files.get(file)
    if (entry !== undefined && --entry.unanswered <= 0) this.files.delete(file)
    if (outcome !== undefined && !pending.cancelled) pending.done(outcome)
  }

  /**
   * A lane's head runs long: every other file on it whose unanswered requests are all reads that
   * can run twice moves to the least loaded lane that is not stalled, its requests in order.
   */
  rescue(stalled: Lane, head: Pending): void {
    this.warmSpare()
    let target: Lane | undefined
    for (const lane of this.lanes) if (lane !== stalled && !lane.stalled && (target === undefined || lane.load < target.load)) target = lane
    if (target === undefined) return
    const byFile = new Map<string, Array<Pending>>()
    const blocked = new Set<string>([head.request.file])
    for (const p of stalled.inflight) {
      if (p === head || p.owner !== stalled || p.settled) continue
      if (!p.rerunnable) blocked.add(p.request.file)
      const list = byFile.get(p.request.file) ?? []
      list.push(p)
      byFile.set(p.request.file, list)
    }
    for (const p of stalled.waiting) {
      if (p.owner !== stalled || p.settled) continue
      const list = byFile.get(p.request.file) ?? []
      list.push(p)
      byFile.set(p.request.file, list)
    }
    for (const [file, list] of byFile) {
      if (blocked.has(file)) continue
      const entry = this.files.get(file)
      if (entry !== undefined) entry.lane = target
      // the stalled lane's waiting list drops these as it meets them (owner changed)
      for (const p of list) target.submit(p, true)
    }
  }

  close(): Promise<void> {
    this.closed = true
    this.spare?.child.kill("SIGKILL")
    this.spare = undefined
    return Promise.all(this.lanes.map((l) => l.close())).then(() => undefined)
  }
}
