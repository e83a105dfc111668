/**
 * Invoking a function (docs/functions.md, "Invoking"): find the version, hold a place in the
 * namespace's share of the runner, run it with its host calls, and turn its ending into an answer
 * or a refusal with its own code: 504 FUNCTION_TIMEOUT, 502 FUNCTION_FAILED (a trap, a non-zero
 * exit, output over its cap), 503 FUNCTION_UNAVAILABLE (the module could not be read or the runner
 * is down), 429 RATE_LIMITED (the namespace's share is taken).
 *
 * Log lines are written to the registry in batches, off the invocation's path: a bounded queue,
 * dropped and counted when full, so a chatty function cannot slow the gateway.
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import type { InvokeCode } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { capMemory, WASM_PAGE_BYTES } from "../../domain/WasmBinary.js"
import { parseGrant } from "../../domain/Grants.js"
import { CacheStore } from "../cache/CacheStore.js"
import { MemoryCacheStore } from "../cache/MemoryCacheStore.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { GuardedFetch } from "../egress/GuardedFetch.js"
import { PubSub } from "../pubsub/PubSub.js"
import { PushSender } from "../push/PushSender.js"
import { type Refused, refuse } from "../Refused.js"
import { Sealer } from "../secrets/Sealer.js"
import { ClusterSql } from "../sql/ClusterSql.js"
import { Storage } from "../storage/Storage.js"
import { FunctionRunner, moduleKey, type RunEnding } from "./FunctionRunner.js"
import { Functions } from "./Functions.js"
import { FunctionStore } from "./FunctionStore.js"
import { makeHostCalls } from "./HostCalls.js"

export type InvokeRefused = Refused<InvokeCode>

export interface InvokeRequest {
  readonly namespace: string
  readonly name: string
  readonly version?: number | undefined
  /** The credential's principal; none for an anonymous call of a public function, or a trigger's. */
  readonly caller: Principal | undefined
  readonly input: Uint8Array
  /**
   * What started it when no caller did (`cron <expression>`): authorized when the trigger was set,
   * so a function need not be public to run on a schedule. A trigger's refusal goes to the logs.
   */
  readonly trigger?: string | undefined
  /** How many topic triggers deep (the message's `depth`; 0 otherwise): past PORTICO_FUNCTIONS_MAX_DEPTH it does not run. */
  readonly depth?: number | undefined
}

export interface Invoked {
  readonly requestId: string
  readonly ms: number
  readonly output: Uint8Array
}

export interface InvocationsService {
  readonly invoke: (request: InvokeRequest) => Effect.Effect<Invoked, InvokeRefused>
  /** Log lines dropped since start because the write queue was full. */
  readonly droppedLogLines: () => number
}

/**
 * A trigger's run (a schedule's slot, a topic's message): the function runs only on the gateway
 * whose `claim` made the registry row, so once across the cluster; a failed claim (the registry
 * away) runs nothing. Its refusals are in the function's log (`trigger`), so this never fails.
 */
export const runClaimed = (
  invocations: InvocationsService,
  claim: Effect.Effect<boolean, unknown>,
  request: InvokeRequest & { readonly trigger: string }
): Effect.Effect<void> =>
  Effect.flatMap(Effect.orElseSucceed(claim, () => false), (mine) => (mine ? Effect.ignore(invocations.invoke(request)) : Effect.void))

export class Invocations extends Context.Tag("portico/Invocations")<Invocations, InvocationsService>() {
  static readonly Live = Layer.suspend(() => Layer.scoped(Invocations, makeInvocations))
  /** Over the doubles of every service its host calls reach, and a runner of one thread. */
  static readonly Test = Layer.suspend(() =>
    Invocations.Live.pipe(
      Layer.provide(Functions.Test),
      Layer.provide(
        Layer.mergeAll(
          FunctionStore.Test,
          FunctionRunner.Test,
          MemoryCacheStore.Test,
          ClusterSql.Test,
          PubSub.Test,
          PushSender.Test,
          GuardedFetch.Test,
          Storage.Test,
          Sealer.Test,
          PorticoConfig.Test
        )
      )
    )
  )
}

const LOG_QUEUE_MAX = 4096
const RUNTIME_GRANTS = ["pubsub", "cache", "storage", "db:write"].map((g) => parseGrant(g)!)

/** The principal a function acts as in its host calls: its namespace, the runtime's grants. */
const functionPrincipal = (namespace: string, name: string): Principal => ({
  namespace,
  subject: `function:${name}`,
  method: "workload",
  role: "runtime",
  grants: RUNTIME_GRANTS,
  keyId: undefined,
  sessionId: undefined,
  deviceId: undefined
})

const callerIdentity = (caller: Principal | undefined, namespace: string) => {
  if (caller === undefined) return {}
  if (caller.method === "jwt" && caller.keyId === undefined) return { wallet: caller.subject, subject: caller.subject, device: caller.deviceId }
  // an API key (or a token exchanged from one) is its namespace, as in the original system
  if (caller.method === "api_key" || caller.keyId !== undefined) return { wallet: namespace, subject: caller.subject }
  return { subject: caller.subject }
}

const makeInvocations = Effect.gen(function* () {
    const settings = (yield* PorticoConfig).functions
    const store = yield* FunctionStore
    const functions = yield* Functions
    const runner = yield* FunctionRunner
    const hostCalls = makeHostCalls({
      sql: yield* ClusterSql,
      cache: yield* CacheStore,
      pubsub: yield* PubSub,
      push: yield* PushSender,
      fetch: yield* GuardedFetch,
      storage: yield* Storage,
      store,
      sealer: yield* Sealer,
      maxAnswerBytes: settings.maxHostAnswerBytes
    })
    const running = new Map<string, number>()
    let queue: Array<{ namespace: string; name: string; at: number; requestId: string; level: string; message: string }> = []
    let dropped = 0
    const enqueue = (line: (typeof queue)[number]) => {
      if (queue.length >= LOG_QUEUE_MAX) dropped++
      else queue.push(line)
    }
    const flush = Effect.suspend(() => {
      if (queue.length === 0) return Effect.void
      const lines = queue
      queue = []
      return Effect.ignore(store.appendLogs(lines, settings.logLinesKept))
    })
    yield* Effect.forkScoped(Effect.repeat(flush, Schedule.spaced("500 millis")))
    yield* Effect.addFinalizer(() => flush)

    const unavailable = (reason: string) => refuse("FUNCTION_UNAVAILABLE", reason, "retry shortly", 5)
    const failed = (reason: string, hint?: string) => refuse("FUNCTION_FAILED", reason, hint)

    const ending = (name: string, end: RunEnding, timeoutMs: number): InvokeRefused | undefined => {
      switch (end.kind) {
        case "exit":
          return end.code === 0 ? undefined : failed(`${name} exited with code ${end.code}`, "GET /v1/functions/<name>/logs has what it wrote to stderr")
        case "timeout":
          return refuse("FUNCTION_TIMEOUT", `${name} ran past its ${timeoutMs / 1000} s timeout and was stopped`, "raise timeout_seconds, or make the function do less per call")
        case "trap":
        case "link-failed":
        case "compile-failed":
          return failed(`${name} failed: ${end.message}`)
        case "output-overflow":
          return failed(`${name} wrote more than ${settings.maxOutputBytes} bytes of output`, "PORTICO_FUNCTIONS_MAX_OUTPUT_BYTES sets the cap")
        case "unavailable":
          return unavailable(`${name} could not run: ${end.message}`)
      }
    }

    /** `nesting`: how many `function_invoke` calls deep. */
    const invoke = (request: InvokeRequest, nesting: number): Effect.Effect<Invoked, InvokeRefused> =>
      Effect.gen(function* () {
        const notFound = refuse("NOT_FOUND", `no function named ${request.name}`, "GET /v1/functions lists this namespace's functions")
        if (request.caller !== undefined && request.caller.namespace !== request.namespace) {
          return yield* Effect.fail(
            refuse(
              "FORBIDDEN",
              "a credential invokes its own namespace's functions only",
              "call without a credential for another namespace's public function"
            )
          )
        }
        const depth = request.depth ?? 0
        if (depth > settings.maxDepth) {
          return yield* Effect.fail(
            refuse("FORBIDDEN", `a chain of ${depth} topic triggers is deeper than ${settings.maxDepth}`, "PORTICO_FUNCTIONS_MAX_DEPTH bounds how deep functions may trigger each other")
          )
        }
        if (request.input.length > settings.maxInputBytes) {
          return yield* Effect.fail(refuse("PAYLOAD_TOO_LARGE", `the body is over ${settings.maxInputBytes} bytes`, "PORTICO_FUNCTIONS_MAX_INPUT_BYTES sets the cap"))
        }
        const row = yield* Effect.mapError(store.get(request.namespace, request.name), () => unavailable("the registry did not answer"))
        // an anonymous caller learns nothing of a function that is not public
        if (row === undefined || (request.caller === undefined && request.trigger === undefined && row.public !== 1)) return yield* Effect.fail(notFound)
        let cid = row.cid
        if (request.version !== undefined && request.version !== row.version) {
          const version = yield* Effect.mapError(store.version(request.namespace, request.name, request.version), () => unavailable("the registry did not answer"))
          if (version === undefined) return yield* Effect.fail(refuse("NOT_FOUND", `${request.name} has no version ${request.version}`))
          cid = version.cid
        }
        const env = yield* Effect.mapError(functions.envOf(row), () => unavailable("the function's environment could not be opened"))
        const held = running.get(request.namespace) ?? 0
        if (held >= settings.namespaceConcurrency) {
          return yield* Effect.fail(refuse("RATE_LIMITED", `the namespace has ${held} invocations running on this gateway, its most`, "retry shortly", 1))
        }
        running.set(request.namespace, held + 1)
        const requestId = randomUUID()
        const started = performance.now()
        const pages = row.memory_mb * ((1024 * 1024) / WASM_PAGE_BYTES)
        const log = (level: "info" | "error", message: string) =>
          enqueue({ namespace: request.namespace, name: request.name, at: Date.now(), requestId, level, message })
        const host = hostCalls({
          namespace: request.namespace,
          functionName: request.name,
          principal: functionPrincipal(request.namespace, request.name),
          log,
          depth,
          remainingMs: () => row.timeout_ms - (performance.now() - started),
          invoke: async (name, input) => {
            if (nesting >= settings.maxDepth) {
              log("error", `function_invoke: deeper than ${settings.maxDepth} nested calls`)
              return undefined
            }
            const nested = await Effect.runPromise(
              Effect.either(invoke({ namespace: request.namespace, name, caller: request.caller, input, trigger: request.trigger, depth }, nesting + 1))
            )
            if (nested._tag === "Left") {
              log("error", `function_invoke ${name}: ${nested.left.reason}`)
              return undefined
            }
            return nested.right.output
          }
        })
        const end = yield* Effect.promise(() =>
          runner.run({
            key: moduleKey(cid, row.memory_mb),
            wasm: async () => {
              const bytes = await Effect.runPromise(Effect.either(functions.readModule({ namespace: request.namespace, cid })))
              if (bytes._tag === "Left") throw new Error(bytes.left.reason)
              return capMemory(bytes.right, pages)
            },
            job: {
              name: request.name,
              input: request.input,
              requestId,
              caller: callerIdentity(request.caller, request.namespace),
              env,
              maxStdout: settings.maxOutputBytes,
              maxLogLines: 1000,
              maxLogBytes: 256 * 1024
            },
            timeoutMs: row.timeout_ms,
            host,
            log
          })
        ).pipe(Effect.ensuring(Effect.sync(() => {
          const left = (running.get(request.namespace) ?? 1) - 1
          if (left > 0) running.set(request.namespace, left)
          else running.delete(request.namespace)
        })))
        const refusal = ending(request.name, end, row.timeout_ms)
        if (refusal !== undefined) return yield* Effect.fail(refusal)
        return { requestId, ms: performance.now() - started, output: end.kind === "exit" ? end.stdout : new Uint8Array() }
      })

    /** Nobody waits on a trigger's answer: its refusal is a line of the function's log. */
    const logRefusal = (request: InvokeRequest) => (refusal: InvokeRefused) =>
      Effect.sync(() => {
        if (request.trigger !== undefined) {
          enqueue({ namespace: request.namespace, name: request.name, at: Date.now(), requestId: "", level: "error", message: `${request.trigger}: ${refusal.reason}` })
        }
      })
    const service: InvocationsService = {
      invoke: (request) => Effect.tapError(invoke(request, 0), logRefusal(request)),
      droppedLogLines: () => dropped
    }
    return service
  })
