/**
 * The SQLite worker run in the calling process, for tests (SqliteWorkers.inProcess): the
 * worker's own code (SqliteRunner.ts) is sent the same frames the pool writes to a worker's stdin,
 * and its answers are read back from the same answer frames, so the protocol (v8-serialised
 * requests with bigint binds, tagged answers, request order) is the one production uses. What the
 * processes are for is absent: a statement runs in the caller's thread, so nothing stops a
 * runaway (no statement timeout, no stall, no moved reads), and one runner serves every file.
 * Tests of those rules use the real pool (test/layers/sql/SqliteWorkers.test.ts).
 */
import type { WorkerOptions } from "./SqliteProtocol.js"
import { makeSqliteRunner, type SqliteRunner } from "./SqliteRunner.js"
import { answerFrame, FrameReader, readAnswer, readRequests, requestFrame } from "./WorkerFrames.js"
import type { Pending } from "./WorkerPool.js"

export interface InProcessSettings {
  /** Requests waiting or unanswered before new ones are refused (overloaded). */
  readonly maxQueue: number
  readonly worker: WorkerOptions
}

export class InProcessWorker {
  private readonly waiting: Array<Pending> = []
  private readonly inflight: Array<Pending> = []
  private readonly requests = new FrameReader()
  private readonly answers = new FrameReader()
  private readonly runner: SqliteRunner
  private flushing = false
  private closed = false

  constructor(private readonly settings: InProcessSettings) {
    this.runner = makeSqliteRunner(settings.worker, {
      send: (answer) => {
        for (const frame of this.answers.push(answerFrame(answer))) this.answered(readAnswer(frame))
      },
      busy: () => {},
      idle: () => {}
    })
  }

  private answered(outcome: ReturnType<typeof readAnswer>): void {
    const pending = this.inflight.shift()
    if (pending === undefined || pending.settled) return
    pending.settled = true
    if (!pending.cancelled) pending.done(outcome)
  }

  /** Queues a request; false when the queue is full (overload). Run in a later turn, as the pool does. */
  submit(pending: Pending): boolean {
    if (this.closed || this.waiting.length + this.inflight.length >= this.settings.maxQueue) return false
    this.waiting.push(pending)
    if (!this.flushing) {
      this.flushing = true
      setImmediate(() => this.flush())
    }
    return true
  }

  /** A turn's requests in one frame, through the worker's frame reader, then run in order. */
  private flush(): void {
    this.flushing = false
    if (this.closed) return
    const batch = this.waiting.splice(0).filter((p) => !p.cancelled)
    if (batch.length === 0) return
    this.inflight.push(...batch)
    for (const frame of this.requests.push(requestFrame(batch.map((p) => p.request)))) {
      for (const request of readRequests(frame)) this.runner.enqueue(request)
    }
    this.runner.drain()
  }

  close(): Promise<void> {
    this.closed = true
    for (const p of [...this.inflight, ...this.waiting]) {
      if (p.settled) continue
      p.settled = true
      if (!p.cancelled) p.done({ ok: false, failure: { kind: "io", message: "shutting down" } })
    }
    this.inflight.length = 0
    this.waiting.length = 0
    this.runner.close()
    return Promise.resolve()
  }
}
