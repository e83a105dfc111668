/**
 * Functions' settings (docs/functions.md "Settings"), read from `PORTICO_FUNCTIONS_*`. Every limit
 * has a default; a value the gateway could not work with is refused at start.
 */
import { Config, Effect } from "effect"
import { between } from "./IntegerSetting.js"
import * as os from "node:os"

export interface FunctionSettings {
  /** Threads of the function runner: invocations running at once on this gateway (`PORTICO_FUNCTIONS_THREADS`, default the CPU count). */
  readonly threads: number
  /** Compiled modules the runner keeps (`PORTICO_FUNCTIONS_MODULE_CACHE`, default 100). */
  readonly moduleCache: number
  /** JavaScript heap of each runner thread, MiB (`PORTICO_FUNCTIONS_THREAD_HEAP_MB`, default 64); the guest's memory is its own limit. */
  readonly threadHeapMb: number
  /** A module's bytes at deploy (`PORTICO_FUNCTIONS_MAX_MODULE_BYTES`, default 32 MiB); 413 past it. */
  readonly maxModuleBytes: number
  /** An invocation's body (`PORTICO_FUNCTIONS_MAX_INPUT_BYTES`, default 1 MiB); 413 past it, never truncated. */
  readonly maxInputBytes: number
  /** What a function may write to stdout (`PORTICO_FUNCTIONS_MAX_OUTPUT_BYTES`, default 8 MiB); past it the call fails 502. */
  readonly maxOutputBytes: number
  /** Bytes a host call may hand a guest: a fetched body, a stored file, a query's rows (`PORTICO_FUNCTIONS_MAX_HOST_ANSWER_BYTES`, default 4 MiB). */
  readonly maxHostAnswerBytes: number
  /** Versions kept per function (`PORTICO_FUNCTIONS_VERSIONS_KEPT`, default 10). */
  readonly versionsKept: number
  /** Invocations of one namespace running or waiting on this gateway (`PORTICO_FUNCTIONS_NAMESPACE_CONCURRENCY`, default 8); 429 past it. */
  readonly namespaceConcurrency: number
  /** Log lines kept per function (`PORTICO_FUNCTIONS_LOG_LINES`, default 1000). */
  readonly logLinesKept: number
  /** Nested `function_invoke` calls, and topic triggers, deep (`PORTICO_FUNCTIONS_MAX_DEPTH`, default 5). */
  readonly maxDepth: number
  /** How often each gateway reads the schedules and topic triggers again (`PORTICO_FUNCTIONS_TRIGGER_REFRESH_MS`, default 5000). */
  readonly triggerRefreshMs: number
  /** Function sockets this gateway holds, each an instance on a thread of its own (`PORTICO_FUNCTIONS_SOCKETS`, default 64); 429 past it. */
  readonly sockets: number
  /** Function sockets of one namespace on this gateway (`PORTICO_FUNCTIONS_NAMESPACE_SOCKETS`, default 16); 429 past it. */
  readonly namespaceSockets: number
}

const KiB = 1024
const MiB = 1024 * KiB

export const defaultFunctionSettings: FunctionSettings = {
  threads: Math.max(1, os.availableParallelism()),
  moduleCache: 100,
  threadHeapMb: 64,
  maxModuleBytes: 32 * MiB,
  maxInputBytes: 1 * MiB,
  maxOutputBytes: 8 * MiB,
  maxHostAnswerBytes: 4 * MiB,
  versionsKept: 10,
  namespaceConcurrency: 8,
  logLinesKept: 1000,
  maxDepth: 5,
  triggerRefreshMs: 5_000,
  sockets: 64,
  namespaceSockets: 16
}

/** The settings from the environment, each defaulting to `defaultFunctionSettings`. */
export const functionConfig = Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const d = defaultFunctionSettings
  const settings: FunctionSettings = {
    threads: yield* env(between("FUNCTIONS_THREADS", d.threads, 1, 256)),
    moduleCache: yield* env(between("FUNCTIONS_MODULE_CACHE", d.moduleCache, 1, 10_000)),
    threadHeapMb: yield* env(between("FUNCTIONS_THREAD_HEAP_MB", d.threadHeapMb, 16, 4096)),
    maxModuleBytes: yield* env(between("FUNCTIONS_MAX_MODULE_BYTES", d.maxModuleBytes, 1 * KiB, 256 * MiB)),
    maxInputBytes: yield* env(between("FUNCTIONS_MAX_INPUT_BYTES", d.maxInputBytes, 1, 64 * MiB)),
    maxOutputBytes: yield* env(between("FUNCTIONS_MAX_OUTPUT_BYTES", d.maxOutputBytes, 1 * KiB, 256 * MiB)),
    maxHostAnswerBytes: yield* env(between("FUNCTIONS_MAX_HOST_ANSWER_BYTES", d.maxHostAnswerBytes, 1 * KiB, 256 * MiB)),
    versionsKept: yield* env(between("FUNCTIONS_VERSIONS_KEPT", d.versionsKept, 1, 1000)),
    namespaceConcurrency: yield* env(between("FUNCTIONS_NAMESPACE_CONCURRENCY", d.namespaceConcurrency, 1, 10_000)),
    logLinesKept: yield* env(between("FUNCTIONS_LOG_LINES", d.logLinesKept, 0, 1_000_000)),
    maxDepth: yield* env(between("FUNCTIONS_MAX_DEPTH", d.maxDepth, 0, 64)),
    triggerRefreshMs: yield* env(between("FUNCTIONS_TRIGGER_REFRESH_MS", d.triggerRefreshMs, 100, 600_000)),
    sockets: yield* env(between("FUNCTIONS_SOCKETS", d.sockets, 0, 100_000)),
    namespaceSockets: yield* env(between("FUNCTIONS_NAMESPACE_SOCKETS", d.namespaceSockets, 0, 100_000))
  }
  return settings
})
