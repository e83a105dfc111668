/**
 * Supervision of one deployed app (spec §2.7, §3.4): launch, wait for its health path, watch it
 * (its exit, a health check every interval), and restart it by the record's restart policy with
 * backoff. One fiber per running deployment runs `supervise`; interrupting it stops the process
 * (the launch is an acquireRelease), so a stop, a new start or the gateway's end leave nothing
 * running.
 *
 * Rules (docs/deployments.md, "The runtime"):
 * - a failure is an exit (any code under `always`; non-zero or a signal under `on-failure`),
 *   `failureThreshold` health checks failed in a row, or a relaunch not healthy in time;
 * - `never` restarts nothing; a clean exit under `on-failure` is not restarted either; the
 *   status becomes `failed` (a failure) or `stopped` (a clean exit);
 * - restart n waits backoff(n): 1 s doubling to 60 s; n counts failures since the app last ran
 *   healthy for 10 minutes; past `maxRestarts` in a row the supervisor gives up: status `failed`.
 * - the first launch is not retried: its failure is the start's 502, the caller's to record.
 */
import { Clock, Deferred, Duration, Effect, Schedule } from "effect"
import type { DeploymentRecord, RestartPolicy } from "../DeploymentRecord.js"
import type { DeploymentStoreService } from "../DeploymentStore.js"
import type { SandboxHandle, Exit } from "../sandbox/Sandbox.js"
import { capLog, noteInLog } from "./AppLogs.js"
import { type LaunchFailed } from "./AppLaunch.js"
import { awaitHealthy, probe } from "./HealthCheck.js"

export interface SupervisorTiming {
  /** Spec §2.7: a health check every 30 s. */
  readonly healthIntervalMs: number
  /** How long a (re)started app has to answer 200 on its health path (spec: 60 s). */
  readonly startTimeoutMs: number
  /** Failed checks in a row that count as a failure. */
  readonly failureThreshold: number
  readonly backoffFirstMs: number
  readonly backoffMaxMs: number
  /** Healthy this long, the failure count starts again. */
  readonly resetAfterMs: number
  /** Restarts in a row before the supervisor gives up. */
  readonly maxRestarts: number
  /** SIGTERM to SIGKILL. */
  readonly stopGraceMs: number
  /** How often the log's size is checked (AppLogs.capLog). */
  readonly logCheckMs: number
  readonly logMaxBytes: number
}

export const defaultTiming: SupervisorTiming = {
  healthIntervalMs: 30_000,
  startTimeoutMs: 60_000,
  failureThreshold: 3,
  backoffFirstMs: 1_000,
  backoffMaxMs: 60_000,
  resetAfterMs: 10 * 60_000,
  maxRestarts: 10,
  stopGraceMs: 5_000,
  logCheckMs: 2_000,
  logMaxBytes: 4 * 1024 * 1024
}

/** What ended one run of the process. */
export type Failure =
  | { readonly kind: "exited"; readonly exit: Exit }
  | { readonly kind: "unhealthy"; readonly checks: number }
  | { readonly kind: "start-failed"; readonly reason: string }

/** Whether the policy restarts after this. */
export const restarts = (policy: RestartPolicy, failure: Failure): boolean => {
  if (policy === "never") return false
  if (policy === "always") return true
  return !cleanExit(failure)
}

const cleanExit = (failure: Failure): boolean => failure.kind === "exited" && failure.exit.code === 0 && failure.exit.signal === null

/** The wait before restart `attempt` (1-based): first, doubling, at most max. */
export const backoffMs = (attempt: number, timing: Pick<SupervisorTiming, "backoffFirstMs" | "backoffMaxMs">): number =>
  Math.min(timing.backoffMaxMs, timing.backoffFirstMs * 2 ** Math.min(30, attempt - 1))

export const describe = (failure: Failure): string => {
  switch (failure.kind) {
    case "exited":
      return failure.exit.signal !== null ? `killed by ${failure.exit.signal}` : `exited with code ${failure.exit.code}`
    case "unhealthy":
      return `${failure.checks} health checks failed in a row`
    case "start-failed":
      return failure.reason
  }
}

/** The live state of one deployment's process, read by stats and written by its supervisor. */
export interface AppState {
  readonly record: DeploymentRecord
  readonly instanceDir: string
  readonly logFile: string
  handle: SandboxHandle | undefined
  /** Epoch ms the current process was launched. */
  launchedAt: number | undefined
  restarts: number
}

export interface SupervisorDeps {
  readonly launch: () => Effect.Effect<SandboxHandle, LaunchFailed>
  readonly store: Pick<DeploymentStoreService, "addEvent" | "setStatus">
  readonly timing: SupervisorTiming
}

const healthPathOf = (record: DeploymentRecord) => record.healthPath ?? "/health"

/** Logged and never failing: an event or status the registry could not take is not the app's failure. */
const quietly = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<void> =>
  Effect.catchAll(Effect.asVoid(effect), (error) => Effect.logWarning("deployment runtime: registry write failed", error))

type RunResult = { readonly failure: Failure; readonly healthyForMs: number }

/** One process from launch to its end; the scope's close stops it. */
const runOnce = (app: AppState, deps: SupervisorDeps, started: Deferred.Deferred<void, string> | undefined) =>
  Effect.gen(function* () {
    const { record } = app
    const { timing } = deps
    const launched = yield* Effect.either(
      Effect.acquireRelease(deps.launch(), (handle) =>
        Effect.promise(() => handle.stop(timing.stopGraceMs)).pipe(
          Effect.zipRight(
            Effect.sync(() => {
              app.handle = undefined
              app.launchedAt = undefined
            })
          )
        )
      )
    )
    if (launched._tag === "Left") {
      if (launched.left.detail !== undefined) yield* Effect.logWarning(`deployment ${record.id}: ${launched.left.reason}: ${launched.left.detail}`)
      return { failure: { kind: "start-failed", reason: launched.left.reason }, healthyForMs: 0 } satisfies RunResult
    }
    const handle = launched.right
    app.handle = handle
    app.launchedAt = yield* Clock.currentTimeMillis
    yield* Effect.forkScoped(Effect.repeat(capLog(app.logFile, timing.logMaxBytes), Schedule.spaced(Duration.millis(timing.logCheckMs))))
    // what a deploy, update, rollback or environment change now waits for, so a client reading
    // the events while its request is open can say so (`portico deploy` prints it)
    if (started !== undefined) {
      const waiting = { version: record.version, health_path: healthPathOf(record), timeout_seconds: Math.round(timing.startTimeoutMs / 1000) }
      yield* quietly(deps.store.addEvent(record.id, "starting", waiting))
    }
    const start = yield* awaitHealthy(record.port ?? 0, healthPathOf(record), timing.startTimeoutMs, handle.exited)
    // a restarted process that ends before its first 200 is judged by its exit like any other (a
    // clean exit is not restarted under on-failure); only the first launch must get healthy
    if (start.kind === "exited" && started === undefined) return { failure: { kind: "exited", exit: start.exit }, healthyForMs: 0 } satisfies RunResult
    if (start.kind !== "healthy") {
      const reason =
        start.kind === "exited"
          ? `the app ${describe({ kind: "exited", exit: start.exit })} before answering 200 on ${healthPathOf(record)}`
          : `the app did not answer 200 on ${healthPathOf(record)} within ${Math.round(timing.startTimeoutMs / 1000)} s`
      yield* quietly(deps.store.addEvent(record.id, "health_check_failed", { phase: "start", reason }))
      return { failure: { kind: "start-failed", reason }, healthyForMs: 0 } satisfies RunResult
    }
    if (started !== undefined) yield* Deferred.succeed(started, undefined)
    const healthySince = yield* Clock.currentTimeMillis
    const exited = Effect.map(Effect.promise(() => handle.exited), (exit): Failure => ({ kind: "exited", exit }))
    const watched = Effect.gen(function* () {
      let failed = 0
      for (;;) {
        yield* Effect.sleep(Duration.millis(timing.healthIntervalMs))
        if (yield* probe(record.port ?? 0, healthPathOf(record))) failed = 0
        else failed++
        if (failed >= timing.failureThreshold) {
          yield* quietly(deps.store.addEvent(record.id, "health_check_failed", { phase: "running", checks: failed }))
          return { kind: "unhealthy", checks: failed } satisfies Failure as Failure
        }
      }
    })
    const failure = yield* Effect.raceFirst(exited, watched)
    return { failure, healthyForMs: (yield* Clock.currentTimeMillis) - healthySince } satisfies RunResult
  })

/**
 * Runs the app until its policy says stop. `started` is completed once the first launch is healthy,
 * or failed with the reason when it is not (then nothing is left running and nothing retried).
 */
export const supervise = (app: AppState, deps: SupervisorDeps, started: Deferred.Deferred<void, string>): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { record } = app
    const { timing } = deps
    let attempt = 0
    let first = true
    for (;;) {
      const run = yield* Effect.scoped(runOnce(app, deps, first ? started : undefined))
      const what = describe(run.failure)
      yield* noteInLog(app.logFile, what)
      if (first && run.failure.kind === "start-failed") {
        yield* Deferred.fail(started, what)
        return
      }
      first = false
      if (run.healthyForMs >= timing.resetAfterMs) attempt = 0
      if (!restarts(record.limits.restartPolicy, run.failure)) {
        const status = cleanExit(run.failure) ? "stopped" : "failed"
        yield* noteInLog(app.logFile, `not restarted (restart policy ${record.limits.restartPolicy}); status ${status}`)
        yield* quietly(deps.store.setStatus(record.namespace, record.id, status, { reason: what }))
        return
      }
      attempt++
      if (attempt > timing.maxRestarts) {
        yield* noteInLog(app.logFile, `gave up after ${timing.maxRestarts} restarts in a row; status failed`)
        yield* quietly(deps.store.setStatus(record.namespace, record.id, "failed", { reason: `gave up after ${timing.maxRestarts} restarts: ${what}` }))
        return
      }
      const delay = backoffMs(attempt, timing)
      app.restarts++
      yield* quietly(deps.store.addEvent(record.id, "restarted", { reason: what, attempt, delay_ms: delay }))
      yield* noteInLog(app.logFile, `restarting in ${delay} ms (attempt ${attempt})`)
      yield* Effect.sleep(Duration.millis(delay))
    }
  }).pipe(
    // a stop or a new start while the first launch was still waiting: its caller gets an answer
    Effect.onInterrupt(() => Deferred.fail(started, "the app was stopped before it became healthy"))
  )
