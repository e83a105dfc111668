/**
 * Tenant SQL on SQLite files, off the gateway's event loop: a small pool of worker processes
 * (WorkerPool.ts), each file served by one of them at a time (so a file has one connection and
 * its statements run in order), requests pipelined to a worker in one frame per event-loop turn,
 * a bounded queue per worker, and a statement timeout enforced by killing the worker.
 * better-sqlite3 cannot interrupt a running statement, and a thread busy in native code cannot be
 * terminated, so the workers are processes, not threads.
 */
import { Context, Data, Effect, Either, Layer } from "effect"
import { InProcessWorker } from "./InProcessWorker.js"
import { timeoutMessage } from "./SqlRefused.js"
import type { WorkerFailure, WorkerOptions, WorkerRequest, WorkerValue } from "./SqliteProtocol.js"
import { type Outcome, type Pending, WorkerPool } from "./WorkerPool.js"

export class SqliteFailure extends Data.TaggedError("SqliteFailure")<{
  /** WorkerFailure kinds, plus timeout (the statement ran too long) and overloaded (queue full). */
  readonly kind: WorkerFailure["kind"] | "timeout" | "overloaded"
  readonly message: string
  readonly index?: number | undefined
}> {}

export interface SqliteWorkersSettings {
  readonly workers: number
  readonly timeoutMs: number
  /** Requests waiting or in flight per worker before new ones are refused. */
  readonly maxQueue: number
  /** Requests sent to a worker ahead of their turn (64). */
  readonly window?: number
  /** How long a statement runs before other files leave its worker (100 ms, at most the timeout). */
  readonly stallMs?: number
  readonly worker: WorkerOptions
}

export interface SqliteWorkersService {
  /**
   * Runs one request on the worker that owns its file, stopped past `timeoutMs` (default: the
   * statement timeout; whole-file work such as backups passes the transfer budget).
   */
  readonly run: (request: WorkerRequest, timeoutMs?: number, rerunnable?: boolean) => Effect.Effect<WorkerValue, SqliteFailure>
  /**
   * `run` for a caller outside the Effect runtime (the fast lane): `done` gets the outcome once.
   * `rerunnable`: the statement leaves the database and connection as they were, so it may move
   * off a worker stalled by another file's statement even if it was sent there already.
   */
  readonly runNow: (
    request: WorkerRequest,
    rerunnable: boolean,
    done: (result: Either.Either<WorkerValue, SqliteFailure>) => void
  ) => void
}

const overloaded = () => new SqliteFailure({ kind: "overloaded", message: "too many statements waiting for this database" })

const resultOf = (outcome: Outcome): Either.Either<WorkerValue, SqliteFailure> =>
  outcome.ok ? Either.right(outcome.value) : Either.left(new SqliteFailure(outcome.failure))

/** What takes requests: the worker pool, or the in-process worker for tests. */
interface RequestSink {
  /** Queues a request; false when its queue is full. */
  readonly submit: (pending: Pending) => boolean
  readonly close: () => Promise<void>
}

/** The service over a sink: the same `run` and `runNow` whichever runs the statements. */
const serve = (sink: RequestSink, defaultTimeoutMs: number): SqliteWorkersService => {
  const submit = (
    request: WorkerRequest,
    timeoutMs: number,
    rerunnable: boolean,
    done: (outcome: Outcome) => void
  ): Pending | undefined => {
    const pending: Pending = { request, timeoutMs, rerunnable, done, cancelled: false, settled: false, owner: undefined }
    return sink.submit(pending) ? pending : undefined
  }
  return {
    run: (request, timeoutMs = defaultTimeoutMs, rerunnable = false) =>
      Effect.async<WorkerValue, SqliteFailure>((resume) => {
        const pending = submit(request, timeoutMs, rerunnable, (outcome) =>
          resume(outcome.ok ? Effect.succeed(outcome.value) : Effect.fail(new SqliteFailure(outcome.failure)))
        )
        if (pending === undefined) return resume(Effect.fail(overloaded()))
        // an abandoned request that has not started is dropped; one already sent finishes
        return Effect.sync(() => {
          pending.cancelled = true
        })
      }),
    runNow: (request, rerunnable, done) => {
      if (submit(request, defaultTimeoutMs, rerunnable, (outcome) => done(resultOf(outcome))) === undefined) done(Either.left(overloaded()))
    }
  }
}

/** `tag` is SqliteWorkers, passed in: its static members are made while the class is. */
const layerOver = (tag: typeof SqliteWorkers, makeSink: () => RequestSink, defaultTimeoutMs: number) =>
  Layer.scoped(
    tag,
    Effect.map(
      Effect.acquireRelease(Effect.sync(makeSink), (sink) => Effect.promise(() => sink.close())),
      (sink) => serve(sink, defaultTimeoutMs)
    )
  )

export class SqliteWorkers extends Context.Tag("portico/SqliteWorkers")<SqliteWorkers, SqliteWorkersService>() {
  /** The worker processes (production). */
  static readonly layer = (settings: SqliteWorkersSettings) =>
    layerOver(
      SqliteWorkers,
      () =>
        new WorkerPool(
          {
            workers: settings.workers,
            timeoutMs: settings.timeoutMs,
            maxQueue: settings.maxQueue,
            window: settings.window ?? 64,
            stallMs: Math.min(settings.stallMs ?? 100, settings.timeoutMs),
            worker: settings.worker
          },
          timeoutMessage
        ),
      settings.timeoutMs
    )

  /**
   * The worker's code run in this process (InProcessWorker.ts), for tests under vitest that
   * should start no process: same requests, frames and answers, but no statement timeout.
   */
  static readonly inProcess = (settings: SqliteWorkersSettings) =>
    layerOver(SqliteWorkers, () => new InProcessWorker({ maxQueue: settings.maxQueue, worker: settings.worker }), settings.timeoutMs)

  /** `inProcess` with the gateway's defaults. */
  static readonly Test = SqliteWorkers.inProcess({
    workers: 1,
    timeoutMs: 10_000,
    maxQueue: 1024,
    worker: { maxResultBytes: 64 * 1024 * 1024, busyTimeoutMs: 5000, maxOpen: 256 }
  })
}
