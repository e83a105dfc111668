/**
 * The app runtime (spec §2.7, §3.4): runs this node's dynamic deployments in the sandbox, one
 * supervisor fiber each (Supervisor.ts), answers their logs and stats, resumes them when the
 * gateway starts and stops them all when it ends (the layer's scope).
 *
 * `start` replaces whatever of the deployment runs (an update, rollback or environment change is a
 * restart) and answers once the new process is healthy, or 502 APP_START_FAILED with nothing left
 * running; recording the status is the caller's. Changes of one deployment take turns here too
 * (a per-deployment semaphore), so a stop never races a start's swap.
 *
 * Settings (PorticoConfig's `deployments`, config/DeploymentSettings.ts; docs/deployments.md "The
 * runtime"): PORTICO_PUBLIC_URL (the gateway's address the apps get as PORTICO_GATEWAY_URL;
 * default http://127.0.0.1:<listening port>), PORTICO_APP_HEALTH_INTERVAL_MS (30000),
 * PORTICO_APP_START_TIMEOUT_MS (60000).
 */
import { Context, Deferred, Effect, Fiber, Layer, Scope } from "effect"
import { existsSync } from "node:fs"
import * as path from "node:path"
import { PorticoConfig } from "../../config/PorticoConfig.js"
import { refuse, type Refused } from "../../Refused.js"
import { WorkloadTokens, type WorkloadTokensService } from "../../workload/WorkloadTokens.js"
import type { AppRuntimeCode } from "../../../domain/Errors.js"
import { type DeploymentRecord, isDynamic } from "../DeploymentRecord.js"
import { DeploymentStore, type DeploymentStoreService } from "../DeploymentStore.js"
import { InstanceDirs, instanceName } from "../InstanceDirs.js"
import { detectLayout } from "../sandbox/Cgroups.js"
import { defaultSandboxOptions, type SandboxOptions } from "../sandbox/Sandbox.js"
import { launchApp } from "./AppLaunch.js"
import { logFileOf, tail } from "./AppLogs.js"
import { type AppState, defaultTiming, supervise, type SupervisorTiming } from "./Supervisor.js"

export type RuntimeRefused = Refused<AppRuntimeCode>

export interface StartInput {
  readonly record: DeploymentRecord
  readonly instanceDir: string
  /** The tenant's environment (the platform's names are added here). */
  readonly env: Readonly<Record<string, string>>
  /**
   * Where the supervisor writes what became of the process: the deployment's status by default;
   * a replica's own row on a replica node (replicas/ReplicaHost.ts).
   */
  readonly setStatus?: DeploymentStoreService["setStatus"] | undefined
}

export interface AppStats {
  readonly running: boolean
  readonly cpuSeconds: number
  readonly memoryBytes: number
  readonly memoryPeakBytes: number
  readonly pids: number
  /** Restarts by the supervisor since the last start (deploy, update, rollback, env change, gateway start). */
  readonly restarts: number
  /** Seconds since the current process was launched; 0 when none runs. */
  readonly uptimeSeconds: number
}

export interface AppRuntimeService {
  /** undefined: this gateway can run sandboxed apps; else why not (the 503's reason). */
  readonly available: Effect.Effect<string | undefined>
  readonly start: (input: StartInput) => Effect.Effect<void, RuntimeRefused>
  /** Stops the deployment's process and its supervision; no process is no work. */
  readonly stop: (id: string) => Effect.Effect<void>
  /**
   * The last `lines` lines of the app's log, oldest first. The instance directory is known for a
   * deployment started by this gateway; give it for one that is not (a failed one after a restart).
   */
  readonly logs: (id: string, lines: number, instanceDir?: string) => Effect.Effect<ReadonlyArray<string>>
  /** undefined when this gateway has not started the deployment. */
  readonly stats: (id: string) => Effect.Effect<AppStats | undefined>
  /** The deployments whose supervisor runs here now, each with when its process was first started (Unix ms). */
  readonly running: Effect.Effect<ReadonlyArray<{ readonly id: string; readonly since: number }>>
  /**
   * The gateway listens on `port`: the default PORTICO_GATEWAY_URL is known from now on, and the
   * first call resumes this node's active deployments in the background.
   */
  readonly listening: (port: number) => Effect.Effect<void>
  /** Done once the gateway listens (`listening`): apps started from then on know its URL. */
  readonly ready: Effect.Effect<void>
  /** Starts every active dynamic deployment of this node; one that fails is marked `failed`. */
  readonly resume: Effect.Effect<void>
  /**
   * Starts the deployment from its instance directory and stored environment unless this gateway
   * runs it already (`running`). Its status is the caller's to write.
   */
  readonly revive: (record: DeploymentRecord) => Effect.Effect<"running" | "started", RuntimeRefused>
}

export interface AppRuntimeOptions {
  readonly nodeId: string
  /** Where instance directories live, and whose a directory is (resume starts only its own). */
  readonly instances: { readonly root: string; readonly ownerOf: (instance: string) => string | undefined }
  readonly sandbox?: SandboxOptions
  readonly timing?: Partial<SupervisorTiming>
  /** PORTICO_PUBLIC_URL; else http://<listening host>:<port> once known. */
  readonly publicUrl?: string | undefined
  /** The host the gateway listens on (a wildcard means loopback for the apps). */
  readonly listenHost?: string
}

/** Why this machine cannot run sandboxed apps, or undefined. */
export const sandboxUnavailable = (sandbox: SandboxOptions): string | undefined => {
  if (process.getuid?.() !== 0) return "the gateway does not run as root, which the sandbox needs"
  for (const tool of [sandbox.bwrap, sandbox.bpfHelper, sandbox.execHelper, "/usr/bin/setpriv"]) if (!existsSync(tool)) return `${path.basename(tool)} is not installed`
  try {
    detectLayout()
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
  return undefined
}

const loopbackOf = (host: string | undefined): string =>
  host === undefined || host === "" || host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host

interface Entry {
  state: AppState | undefined
  fiber: Fiber.RuntimeFiber<void> | undefined
  instanceDir: string | undefined
  readonly turn: Effect.Semaphore
}

/** The runtime in `scope`: its supervisors are forked there and stopped when it closes. */
export const makeAppRuntime = (
  store: DeploymentStoreService,
  tokens: WorkloadTokensService,
  options: AppRuntimeOptions
): Effect.Effect<AppRuntimeService, never, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const sandbox = options.sandbox ?? defaultSandboxOptions()
    const timing: SupervisorTiming = { ...defaultTiming, ...options.timing }
    const entries = new Map<string, Entry>()
    /** When each deployment's process was first started here since its last stop (the orphan sweep's age). */
    const startedAt = new Map<string, number>()
    let gatewayUrl = options.publicUrl
    let resumed = false
    const listened = yield* Deferred.make<void>()
    let closing = false

    const entryOf = (id: string): Effect.Effect<Entry> =>
      Effect.suspend(() => {
        const found = entries.get(id)
        if (found !== undefined) return Effect.succeed(found)
        return Effect.map(Effect.makeSemaphore(1), (turn) => {
          // another fiber may have made it meanwhile: the first one stays
          const again = entries.get(id)
          if (again !== undefined) return again
          const made: Entry = { state: undefined, fiber: undefined, instanceDir: undefined, turn }
          entries.set(id, made)
          return made
        })
      })

    const halt = (entry: Entry) =>
      Effect.gen(function* () {
        const fiber = entry.fiber
        entry.fiber = undefined
        if (fiber !== undefined) yield* Fiber.interrupt(fiber)
      })

    const available = Effect.sync(() => sandboxUnavailable(sandbox))

    const start: AppRuntimeService["start"] = (input) =>
      Effect.gen(function* () {
        const { record } = input
        if (!isDynamic(record.type) || record.port === undefined) return yield* Effect.fail(refuse("APP_START_FAILED", "a static site runs no process"))
        const unavailable = yield* available
        if (unavailable !== undefined) {
          return yield* Effect.fail(
            refuse("UNAVAILABLE", `this gateway cannot run apps: ${unavailable}`, "on the gateway's machine, as root: `bash scripts/engines.sh sandbox`, then restart it")
          )
        }
        const entry = yield* entryOf(record.id)
        const started = yield* Deferred.make<void, string>()
        yield* entry.turn.withPermits(1)(
          Effect.gen(function* () {
            yield* halt(entry)
            const state: AppState = {
              record,
              instanceDir: input.instanceDir,
              logFile: logFileOf(input.instanceDir),
              handle: undefined,
              launchedAt: undefined,
              restarts: 0
            }
            entry.state = state
            entry.instanceDir = input.instanceDir
            if (!startedAt.has(record.id)) startedAt.set(record.id, Date.now())
            const launch = () => launchApp({ record, instanceDir: input.instanceDir, env: input.env, gatewayUrl, tokens, sandbox })
            // interruptible whatever the caller's region (a fork inherits it): a stop or the next
            // start must be able to end it, and its health race to drop the loser
            const statusTo = input.setStatus === undefined ? store : { addEvent: store.addEvent, setStatus: input.setStatus }
            entry.fiber = yield* Effect.forkIn(Effect.interruptible(supervise(state, { launch, store: statusTo, timing }, started)), scope)
          })
        )
        yield* Effect.mapError(Deferred.await(started), (reason) =>
          refuse("APP_START_FAILED", `the app did not start: ${reason}`, "read its output with the deployment's logs route (GET /v1/deployments/logs)")
        )
      })

    const stop: AppRuntimeService["stop"] = (id) =>
      Effect.suspend(() => {
        const entry = entries.get(id)
        startedAt.delete(id)
        return entry === undefined ? Effect.void : entry.turn.withPermits(1)(halt(entry))
      })

    const logs: AppRuntimeService["logs"] = (id, lines, instanceDir) =>
      Effect.suspend(() => {
        const dir = entries.get(id)?.instanceDir ?? instanceDir
        return dir === undefined ? Effect.succeed([]) : tail(logFileOf(dir), lines)
      })

    const stats: AppRuntimeService["stats"] = (id) =>
      Effect.sync(() => {
        const state = entries.get(id)?.state
        if (state === undefined) return undefined
        const handle = state.handle
        const usage = handle?.usage()
        return {
          running: handle !== undefined,
          cpuSeconds: usage?.cpuSeconds ?? 0,
          memoryBytes: usage?.memoryBytes ?? 0,
          memoryPeakBytes: usage?.memoryPeakBytes ?? 0,
          pids: usage?.pids ?? 0,
          restarts: state.restarts,
          uptimeSeconds: state.launchedAt === undefined ? 0 : Math.max(0, Math.floor((Date.now() - state.launchedAt) / 1000))
        }
      })

    const running: AppRuntimeService["running"] = Effect.sync(() =>
      [...entries].flatMap(([id, entry]) => (entry.fiber !== undefined && entry.fiber.unsafePoll() === null ? [{ id, since: startedAt.get(id) ?? Date.now() }] : []))
    )

    const revive: AppRuntimeService["revive"] = (record) =>
      Effect.gen(function* () {
        // a supervisor that gave up has ended: its app runs no more
        const fiber = entries.get(record.id)?.fiber
        if (fiber !== undefined && fiber.unsafePoll() === null) return "running" as const
        const instance = instanceName(record.namespace, record.name)
        if (options.instances.ownerOf(instance) !== record.id) {
          return yield* Effect.fail(refuse("APP_START_FAILED", `its instance directory ${instance} is missing or another deployment's`))
        }
        const env = yield* Effect.mapError(store.environment(record.namespace, record.id), () =>
          refuse("APP_START_FAILED", "its environment could not be read")
        )
        yield* start({ record, instanceDir: path.join(options.instances.root, instance), env: env.env })
        return "started" as const
      })

    const resumeOne = (record: DeploymentRecord) =>
      revive(record).pipe(
        // the gateway ending while an app resumes is no failure of the app
        Effect.catchAll((refused) =>
          closing ? Effect.void : Effect.zipRight(
            Effect.logWarning(`deployment ${record.id} not resumed: ${refused.reason}`),
            Effect.ignore(store.setStatus(record.namespace, record.id, "failed", { reason: `not resumed at gateway start: ${refused.reason}` }))
          )
        )
      )

    const resume: AppRuntimeService["resume"] = Effect.gen(function* () {
      const records = yield* Effect.catchAll(store.onNode(options.nodeId), (error) =>
        Effect.as(Effect.logWarning("deployment runtime: this node's deployments could not be read; none resumed", error), [])
      )
      const active = records.filter((r) => r.status === "active" && isDynamic(r.type))
      yield* Effect.forEach(active, resumeOne, { concurrency: 4, discard: true })
    })

    const listening: AppRuntimeService["listening"] = (port) =>
      Effect.suspend(() => {
        if (options.publicUrl === undefined) gatewayUrl = `http://${loopbackOf(options.listenHost)}:${port}`
        if (resumed) return Effect.void
        resumed = true
        return Effect.zipRight(Deferred.succeed(listened, undefined), Effect.asVoid(Effect.forkIn(resume, scope)))
      })

    // the gateway's end stops every app at once (each within its grace), before the stores close
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closing = true
        return Effect.forEach([...entries.values()], (entry) => halt(entry), { concurrency: "unbounded", discard: true })
      })
    )

    return { available, start, stop, logs, stats, running, listening, ready: Deferred.await(listened), resume, revive }
  })

export class AppRuntime extends Context.Tag("portico/AppRuntime")<AppRuntime, AppRuntimeService>() {
  static readonly Live = Layer.scoped(
    AppRuntime,
    Effect.gen(function* () {
      const settings = yield* PorticoConfig
      const instances = yield* InstanceDirs
      const own = settings.deployments
      return yield* makeAppRuntime(yield* DeploymentStore, yield* WorkloadTokens, {
        nodeId: settings.nodeId,
        instances: {
          root: instances.root,
          ownerOf: (instance) => instances.ownerOf(instance)
        },
        timing: { healthIntervalMs: own.healthIntervalMs, startTimeoutMs: own.startTimeoutMs },
        publicUrl: own.publicUrl,
        listenHost: settings.host
      })
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"): no app is started until the runtime is told the gateway listens. */
  static readonly Test = Layer.suspend(() =>
    AppRuntime.Live.pipe(Layer.provide(Layer.mergeAll(DeploymentStore.Test, InstanceDirs.Test, PorticoConfig.Test, WorkloadTokens.Test)))
  )
}

