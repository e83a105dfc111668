/**
 * Invoking a function (docs/functions.md, "Invoking"): find the version, hold a place in the
 * namespace's share of the runner, run it with its host calls, and turn its ending into an answer
 * or a refusal with its own code: 504 FUNCTION_TIMEOUT, 502 FUNCTION_FAILED (a trap, a non-zero
 * exit, output over its cap), 503 FUNCTION_UNAVAILABLE (the module could not be read or the runner
 * is down), 429 RATE_LIMITED (the namespace's share is taken), 400 BAD_REQUEST (the module lacks
 * the entry: `_start` to invoke). A socket's instance (`openSocket`) is found and prepared the
 * same way, then kept for the socket's life (FunctionSockets.ts).
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
import { FunctionRunner, moduleKey, type RunEnding, type RunRequest } from "./FunctionRunner.js"
import type { SessionEntry } from "./runner/Protocol.js"
import { SocketClose } from "../../domain/FunctionSockets.js"
import { SocketDirectory } from "./SocketDirectory.js"
import { Functions } from "./Functions.js"
import { FunctionStore } from "./FunctionStore.js"
import { makeHostCalls } from "./HostCalls.js"
import { Rooms } from "../webrtc/Rooms.js"
import { WebRtc } from "../webrtc/WebRtc.js"

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

/** A client's socket to a function (docs/functions.md, "Sockets"). */
export interface SocketRequest {
  readonly namespace: string
  readonly name: string
  readonly caller: Principal
  /** The socket's id (SocketDirectory.ts). */
  readonly socket: string
}

/** How a socket's instance ended: the close frame's code and reason. */
export interface SocketEnd {
  readonly code: number
  readonly reason: string
}

/** A socket's persistent instance, opened. */
export interface OpenedSocket {
  /** What `ws_open` wrote: the socket's first frame when not empty. */
  readonly first: Uint8Array
  /** Runs a client's frame or its close: what the entry wrote, or how the instance ended. */
  readonly entry: (entry: SessionEntry) => Promise<{ readonly output: Uint8Array } | { readonly ended: SocketEnd }>
  /** Drops the instance. */
  readonly end: () => void
}

export interface InvocationsService {
  readonly invoke: (request: InvokeRequest) => Effect.Effect<Invoked, InvokeRefused>
  /**
   * Opens `request.socket`'s persistent instance (`_initialize`, `ws_open`) before the handshake is
   * answered, so a function that cannot take the socket is an HTTP refusal; `gone` hears an
   * instance that ended between entries.
   */
  readonly openSocket: (request: SocketRequest, gone: (end: SocketEnd) => void) => Effect.Effect<OpenedSocket, InvokeRefused>
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
          SocketDirectory.Test,
          MemoryCacheStore.Test,
          ClusterSql.Test,
          PubSub.Test,
          PushSender.Test,
          GuardedFetch.Test,
          Storage.Test,
          Sealer.Test,
          WebRtc.Test,
          Rooms.Test,
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
      sockets: yield* SocketDirectory,
      webrtc: yield* WebRtc,
      rooms: yield* Rooms,
      maxAnswerBytes: settings.maxHostAnswerBytes,
      maxFrameBytes: settings.maxInputBytes
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
        case "no-entry":
          return refuse("BAD_REQUEST", `${name} cannot be used this way: ${end.message}`, "docs/functions.md, \"Modules\" and \"Sockets\"")
        case "returned":
          return undefined
      }
    }

    /**
     * A run's failure names its request id, the id its log lines carry (a refusal's answer has no
     * `X-Request-Id`: it is the API's error envelope, as every refusal is).
     */
    const ranAs = (refusal: InvokeRefused, requestId: string): InvokeRefused =>
      refusal.code === "FUNCTION_FAILED" || refusal.code === "FUNCTION_TIMEOUT"
        ? refuse(refusal.code, `${refusal.reason} (request ${requestId})`, refusal.hint, refusal.retryAfterSeconds)
        : refusal

    const notFound = (name: string) => refuse("NOT_FOUND", `no function named ${name}`, "GET /v1/functions lists this namespace's functions")
    const registryDown = () => unavailable("the registry did not answer")

    /** The function's row, the module to run and its environment, once the caller may run it. */
    const prepare = (request: Pick<InvokeRequest, "namespace" | "name" | "version" | "caller" | "trigger">) =>
      Effect.gen(function* () {
        if (request.caller !== undefined && request.caller.namespace !== request.namespace) {
          return yield* Effect.fail(
            refuse(
              "FORBIDDEN",
              "a credential invokes its own namespace's functions only",
              "call without a credential for another namespace's public function"
            )
          )
        }
        const row = yield* Effect.mapError(store.get(request.namespace, request.name), registryDown)
        // an anonymous caller learns nothing of a function that is not public
        if (row === undefined || (request.caller === undefined && request.trigger === undefined && row.public !== 1)) return yield* Effect.fail(notFound(request.name))
        let cid = row.cid
        if (request.version !== undefined && request.version !== row.version) {
          const version = yield* Effect.mapError(store.version(request.namespace, request.name, request.version), registryDown)
          if (version === undefined) return yield* Effect.fail(refuse("NOT_FOUND", `${request.name} has no version ${request.version}`))
          cid = version.cid
        }
        const env = yield* Effect.mapError(functions.envOf(row), () => unavailable("the function's environment could not be opened"))
        return { row, cid, env }
      })

    type Prepared = Effect.Effect.Success<ReturnType<typeof prepare>>

    /** What the runner takes for one run or session of a prepared function, its host calls bound. */
    const runRequest = (
      request: InvokeRequest,
      prepared: Prepared,
      step: { readonly requestId: string; readonly started: () => number; readonly socket?: string | undefined },
      nesting: number
    ): RunRequest => {
      const { row, cid, env } = prepared
      const depth = request.depth ?? 0
      const pages = row.memory_mb * ((1024 * 1024) / WASM_PAGE_BYTES)
      const log = (level: "info" | "error", message: string) =>
        enqueue({ namespace: request.namespace, name: request.name, at: Date.now(), requestId: step.requestId, level, message })
      const host = hostCalls({
        namespace: request.namespace,
        functionName: request.name,
        principal: functionPrincipal(request.namespace, request.name),
        log,
        depth,
        socket: step.socket,
        remainingMs: () => row.timeout_ms - (performance.now() - step.started()),
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
      return {
        key: moduleKey(cid, row.memory_mb),
        wasm: async () => {
          const bytes = await Effect.runPromise(Effect.either(functions.readModule({ namespace: request.namespace, cid })))
          if (bytes._tag === "Left") throw new Error(bytes.left.reason)
          return capMemory(bytes.right, pages)
        },
        job: {
          name: request.name,
          input: request.input,
          requestId: step.requestId,
          caller: callerIdentity(request.caller, request.namespace),
          env,
          maxStdout: settings.maxOutputBytes,
          maxLogLines: 1000,
          maxLogBytes: 256 * 1024,
          socket: step.socket
        },
        timeoutMs: row.timeout_ms,
        host,
        log
      }
    }

    /** `nesting`: how many `function_invoke` calls deep. */
    const invoke = (request: InvokeRequest, nesting: number): Effect.Effect<Invoked, InvokeRefused> =>
      Effect.gen(function* () {
        const depth = request.depth ?? 0
        if (depth > settings.maxDepth) {
          return yield* Effect.fail(
            refuse("FORBIDDEN", `a chain of ${depth} topic triggers is deeper than ${settings.maxDepth}`, "PORTICO_FUNCTIONS_MAX_DEPTH bounds how deep functions may trigger each other")
          )
        }
        if (request.input.length > settings.maxInputBytes) {
          return yield* Effect.fail(refuse("PAYLOAD_TOO_LARGE", `the body is over ${settings.maxInputBytes} bytes`, "PORTICO_FUNCTIONS_MAX_INPUT_BYTES sets the cap"))
        }
        const prepared = yield* prepare(request)
        const held = running.get(request.namespace) ?? 0
        if (held >= settings.namespaceConcurrency) {
          return yield* Effect.fail(refuse("RATE_LIMITED", `the namespace has ${held} invocations running on this gateway, its most`, "retry shortly", 1))
        }
        const requestId = randomUUID()
        const started = performance.now()
        // The slot is the run's, not the caller's: a caller that goes away (its fiber interrupted)
        // leaves the run in the runner until it ends, at its deadline at the latest, so the slot is
        // given back when the run ends. Freed on interruption instead, aborted calls would let a
        // namespace queue any number of runs past the cap. Taken and tied to the run in one step,
        // which no interruption splits.
        const ran = yield* Effect.sync(() => {
          const job = runRequest(request, prepared, { requestId, started: () => started }, nesting)
          running.set(request.namespace, held + 1)
          const release = () => {
            const left = (running.get(request.namespace) ?? 1) - 1
            if (left > 0) running.set(request.namespace, left)
            else running.delete(request.namespace)
          }
          const run = runner.run(job)
          run.then(release, release)
          return run
        })
        const end = yield* Effect.promise(() => ran)
        const refusal = ending(request.name, end, prepared.row.timeout_ms)
        if (refusal !== undefined) return yield* Effect.fail(ranAs(refusal, requestId))
        return { requestId, ms: performance.now() - started, output: end.kind === "exit" ? end.stdout : new Uint8Array() }
      })

    /** How a socket's instance ended, as its close frame says it. */
    const socketEnd = (name: string, end: RunEnding, timeoutMs: number): SocketEnd => {
      if (end.kind === "exit" && end.code === 0) return { code: SocketClose.normal, reason: `${name} ended the socket` }
      if (end.kind === "unavailable") return { code: SocketClose.unavailable, reason: `FUNCTION_UNAVAILABLE: ${end.message}` }
      const refusal = ending(name, end, timeoutMs)
      return { code: SocketClose.failed, reason: refusal === undefined ? "FUNCTION_FAILED" : `${refusal.code}: ${refusal.reason}` }
    }

    const openSocket = (request: SocketRequest, gone: (end: SocketEnd) => void): Effect.Effect<OpenedSocket, InvokeRefused> =>
      Effect.gen(function* () {
        const invocation: InvokeRequest = { namespace: request.namespace, name: request.name, caller: request.caller, input: new Uint8Array() }
        const prepared = yield* prepare(invocation)
        const timeoutMs = prepared.row.timeout_ms
        let started = performance.now()
        // a socket's log lines carry its id as their request id
        const step = { requestId: request.socket, started: () => started, socket: request.socket }
        const opened = yield* Effect.promise(() =>
          runner.open({
            ...runRequest(invocation, prepared, step, 0),
            gone: (message) => gone({ code: SocketClose.unavailable, reason: `FUNCTION_UNAVAILABLE: ${message}` })
          })
        )
        if (opened.session === undefined) {
          const refusal = opened.ending.kind === "exit" ? failed(`${request.name} exited while opening the socket`) : ending(request.name, opened.ending, timeoutMs)
          return yield* Effect.fail(refusal ?? failed(`${request.name} could not open the socket`))
        }
        const session = opened.session
        return {
          first: opened.ending.kind === "returned" ? opened.ending.stdout : new Uint8Array(),
          entry: async (next) => {
            started = performance.now()
            const end = await session.entry(next)
            return end.kind === "returned" ? { output: end.stdout } : { ended: socketEnd(request.name, end, timeoutMs) }
          },
          end: session.end
        }
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
      openSocket,
      droppedLogLines: () => dropped
    }
    return service
  })
