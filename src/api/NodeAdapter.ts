/**
 * Lean node:http adapter for an Effect HttpApp (e.g. the one HttpApiBuilder
 * builds), plus the runtime settings that make Effect cheap per request.
 *
 * Why not `NodeHttpServer.layer`: per request it wraps the app in the tracer
 * middleware (URL parse, header redaction, a span), a Scope plus
 * uninterruptible/catchAllCause layers, and it keeps the fiber alive until
 * node's `end()` callback fires, which costs one more async hop and scheduler
 * turn for every response. See docs/performance.md for the measurements.
 *
 * What this keeps: the full HttpServerRequest surface (headers, url, method,
 * search params via the router, remote address, text/json/urlencoded/
 * multipart/stream bodies), every HttpBody kind on the way out, cookies,
 * pre-response handlers, client-abort interruption and a body cap.
 */
import * as Cookies from "@effect/platform/Cookies"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApp from "@effect/platform/HttpApp"
import * as Headers from "@effect/platform/Headers"
import * as IncomingMessage from "@effect/platform/HttpIncomingMessage"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as ServerError from "@effect/platform/HttpServerError"
import * as ServerRequest from "@effect/platform/HttpServerRequest"
import type * as ServerResponse from "@effect/platform/HttpServerResponse"
import type * as Multipart from "@effect/platform/Multipart"
import type * as Path from "@effect/platform/Path"
import type * as Socket from "@effect/platform/Socket"
import * as UrlParams from "@effect/platform/UrlParams"
import * as NodeMultipart from "@effect/platform-node/NodeMultipart"
import { parseStrictJson } from "../domain/StrictJson.js"
import { flowingChunks } from "./FlowingBody.js"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as FiberRef from "effect/FiberRef"
import { constTrue } from "effect/Function"
import * as Inspectable from "effect/Inspectable"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { pipeArguments } from "effect/Pipeable"
import type { ReadonlyRecord } from "effect/Record"
import * as Runtime from "effect/Runtime"
import * as Scheduler from "effect/Scheduler"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as http from "node:http"
import { PassThrough, Readable, Transform, type TransformCallback } from "node:stream"
import type { Admission } from "./BodyGuard.js"
import type { FastLane } from "./FastLane.js"

export interface AdapterOptions {
  /** Default body cap in bytes: a larger Content-Length gets 413 before any read. */
  readonly maxBodyBytes: number
  /** Caps of routes that take more (file uploads), by `METHOD /path`. Their bodies are streamed to the route. */
  readonly routeBodyCaps?: ReadonlyMap<string, number> | undefined
  /**
   * Routes of `routeBodyCaps` whose body is JSON all the same (node-to-node calls carrying a
   * client's body): read whole before the route runs, as every route without a cap of its own.
   */
  readonly jsonRoutes?: ReadonlySet<string> | undefined
  /**
   * Asked at every request's headers, before its body is read: the client network's rate limit,
   * the in-flight body caps and the slow-body watch (src/api/BodyGuard.ts). It answers a refusal
   * itself and says with which status.
   */
  readonly admission?: Admission | undefined
  /**
   * Called once per request when its answer is written, the adapter's own refusals (413) included:
   * the access log. `status` is what the client was sent, 499 when it left before any answer;
   * `ms` runs from the request's arrival to the end of the answer.
   */
  readonly onAnswered?: ((req: http.IncomingMessage, status: number, ms: number) => void) | undefined
  /**
   * Tried first for every request of its routes whose body (if any) is JSON and read: answers
   * and says with which status, or declines with undefined having written nothing, and the app
   * then serves the request (src/api/FastLane.ts). Its requests are answered together at the end
   * of the event loop's poll phase, in its `turn`.
   */
  readonly fastLane?: FastLane | undefined
}

// ---------------------------------------------------------------------------
// Runtime settings
// ---------------------------------------------------------------------------

/**
 * Where a drain is queued: a `then` on a settled promise. Node's `queueMicrotask` wraps every
 * callback in an AsyncResource (an async id, init hooks, a bound function), which is most of
 * the cost of a drain that runs one continuation.
 */
const settled = Promise.resolve()

/**
 * One run queue for all fibers, drained in a single microtask per batch.
 *
 * The default MixedScheduler keeps a runner per fiber (a WeakMap lookup and a
 * Promise per resumption) and, after 2048 back-to-back microtask drains, falls
 * back to `setTimeout(0)`, which costs at least 1 ms of idle time under load.
 * Here the fallback is `setImmediate`, which lets node's I/O poll run and then
 * continues without a timer floor.
 */
export class BatchScheduler implements Scheduler.Scheduler {
  private tasks = new Scheduler.PriorityBuckets()
  private running = false
  private depth = 0
  constructor(readonly maxMicrotaskDrains: number) {}

  shouldYield(fiber: Parameters<Scheduler.Scheduler["shouldYield"]>[0]): number | false {
    return fiber.currentOpCount > fiber.getFiberRef(FiberRef.currentMaxOpsBeforeYield)
      ? fiber.getFiberRef(FiberRef.currentSchedulingPriority)
      : false
  }

  scheduleTask(task: Scheduler.Task, priority: number): void {
    this.tasks.scheduleTask(task, priority)
    if (!this.running) {
      this.running = true
      void settled.then(this.drain)
    }
  }

  private readonly drain = (): void => {
    const buckets = this.tasks.buckets
    this.tasks.buckets = []
    for (const [, toRun] of buckets) {
      for (let i = 0; i < toRun.length; i++) toRun[i]?.()
    }
    if (this.tasks.buckets.length === 0) {
      this.running = false
      this.depth = 0
    } else if (++this.depth >= this.maxMicrotaskDrains) {
      this.depth = 0
      setImmediate(this.drain)
    } else {
      void settled.then(this.drain)
    }
  }
}

export const batchScheduler: Scheduler.Scheduler = new BatchScheduler(2048)

/**
 * Runtime settings for serving HTTP. Provide it below (i.e. build it before)
 * every layer that captures a runtime for serving, e.g.
 * `Main.pipe(Layer.provide(fastRuntimeLayer))`, so the captured FiberRefs carry it.
 *
 * - tracer off: no span objects or attributes per request;
 * - HttpMiddleware tracer predicate always true: the official server's tracer
 *   middleware skips URL parsing and header redaction too;
 * - the batching scheduler above.
 */
export const fastRuntimeLayer: Layer.Layer<never> = Layer.mergeAll(
  Layer.setTracerEnabled(false),
  Layer.setScheduler(batchScheduler),
  Layer.locallyScoped(HttpMiddleware.currentTracerDisabledWhen, constTrue)
)

// ---------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------

/** Per-request state shared by a request and its `modify`d copies. */
class Exchange {
  body: Readable | undefined = undefined
  /** The whole body, when the listener read it before starting the app. */
  prebuffered: Buffer | undefined = undefined
  bodyText: Effect.Effect<string, ServerError.RequestError> | undefined = undefined
  multipart: Effect.Effect<Multipart.Persisted, Multipart.MultipartError, Scope.Scope | FileSystem.FileSystem | Path.Path> | undefined =
    undefined
  /** Set when the adapter has answered on its own (413); the app's answer is then dropped. */
  answered = false
  /** The app's failure, so the request scope closes with it as the official server does. */
  failure: Cause.Cause<unknown> | undefined = undefined
  constructor(
    readonly source: http.IncomingMessage,
    readonly response: http.ServerResponse,
    readonly maxBodyBytes: number,
    readonly onTooLarge: () => void,
    /** `performance.now()` when the request arrived; 0 when nobody asked (no `onAnswered`). */
    readonly startedAt: number
  ) {}

  /**
   * The body as the app gets to read it. Node enforces a Content-Length, and
   * the listener already refused one over the cap, so only a body without
   * one (chunked) needs counting.
   */
  readable(): Readable {
    if (this.body !== undefined) return this.body
    if (this.prebuffered !== undefined) {
      this.body = Readable.from([this.prebuffered])
      return this.body
    }
    const src = this.source
    if (src.headers["content-length"] !== undefined || src.headers["transfer-encoding"] === undefined) {
      this.body = src
      return src
    }
    const max = this.maxBodyBytes
    const onTooLarge = this.onTooLarge
    let seen = 0
    const counter = new Transform({
      transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
        seen += chunk.length
        if (seen > max) {
          onTooLarge()
          cb(new PayloadTooLarge(max))
          return
        }
        cb(null, chunk)
      }
    })
    src.on("error", (e) => counter.destroy(e))
    src.pipe(counter)
    this.body = counter
    return counter
  }
}

/** Why a body was refused before it was parsed: its bytes are not UTF-8. */
export class BodyNotUtf8 extends Data.TaggedError("BodyNotUtf8")<{}> {}

/**
 * Bodies are read as strict UTF-8: a lenient decode turns every bad byte into U+FFFD, so distinct
 * bodies (`"a\xff"`, `"a\xfe"`) would read as the same text. `ignoreBOM` keeps a BOM in the text,
 * as `Buffer#toString` did, so the JSON reader still refuses it rather than skipping it.
 */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** The body's text, decoded once; a body that is not UTF-8 fails the way an unreadable one does. */
const bodyText = (request: ServerRequest.HttpServerRequest, bytes: Uint8Array): Effect.Effect<string, ServerError.RequestError> => {
  try {
    return Effect.succeed(utf8.decode(bytes))
  } catch {
    return Effect.fail(
      new ServerError.RequestError({ request, reason: "Decode", cause: new BodyNotUtf8(), description: "the body is not valid UTF-8" })
    )
  }
}

class PayloadTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`request body larger than ${limit} bytes`)
  }
}

/**
 * The request body as a plain async iterable. For our own requests this reads the Node stream
 * itself (with its body cap), not a Stream converted back: a 256 MiB upload spent ~8% of its
 * CPU in that round trip.
 */
export const bodyOf = (request: ServerRequest.HttpServerRequest): AsyncIterable<Uint8Array> =>
  request instanceof LeanServerRequest ? request.body() : Stream.toAsyncIterable(request.stream)

export class LeanServerRequest extends Inspectable.Class implements ServerRequest.HttpServerRequest {
  readonly [ServerRequest.TypeId]: ServerRequest.TypeId = ServerRequest.TypeId
  readonly [IncomingMessage.TypeId]: IncomingMessage.TypeId = IncomingMessage.TypeId
  private cachedHeaders: Headers.Headers | undefined
  private cachedCookies: ReadonlyRecord<string, string> | undefined

  constructor(
    readonly exchange: Exchange,
    readonly url: string,
    private readonly headersOverride: Headers.Headers | undefined,
    private readonly remoteAddressOverride: string | undefined
  ) {
    super()
  }

  get source(): http.IncomingMessage {
    return this.exchange.source
  }
  get originalUrl(): string {
    return this.exchange.source.url ?? "/"
  }
  get method(): HttpMethod {
    // node's parser only yields upper-case known methods
    return (this.exchange.source.method ?? "GET") as HttpMethod
  }
  get headers(): Headers.Headers {
    if (this.headersOverride !== undefined) return this.headersOverride
    // node already lower-cases names and joins repeats (set-cookie aside), as the official adapter relies on
    return this.cachedHeaders ??= Headers.unsafeFromRecord(this.exchange.source.headers as Record<string, string>)
  }
  get cookies(): ReadonlyRecord<string, string> {
    return this.cachedCookies ??= Cookies.parseHeader(this.headers.cookie ?? "")
  }
  get remoteAddress(): Option.Option<string> {
    return Option.fromNullable(this.remoteAddressOverride ?? this.exchange.source.socket.remoteAddress)
  }

  private readonly decodeError = (cause: unknown) =>
    new ServerError.RequestError({ request: this, reason: "Decode", cause })

  get text(): Effect.Effect<string, ServerError.RequestError> {
    const ex = this.exchange
    if (ex.bodyText !== undefined) return ex.bodyText
    ex.bodyText = Effect.runSync(Effect.cached(
      Effect.flatMap(
        NodeStream.toUint8Array(() => ex.readable(), { onFailure: this.decodeError, maxBytes: ex.maxBodyBytes }),
        (bytes) => bodyText(this, bytes)
      )
    ))
    return ex.bodyText
  }
  /**
   * Request bodies are read strictly: a member repeated in an object (also when spelled with
   * escapes) is refused instead of silently keeping the last one, so no credential, proof or
   * field can be smuggled past what a front proxy or a log saw.
   */
  get json(): Effect.Effect<unknown, ServerError.RequestError> {
    const limits = { maxChars: this.exchange.maxBodyBytes, maxDepth: 128 }
    return Effect.flatMap(this.text, (s) =>
      // no body is an empty object: a route whose members are all optional needs none, and a
      // route with required members names the missing one
      s === "" ? Effect.succeed({}) : Effect.mapError(parseStrictJson(s, limits), (e) => this.decodeError(e)))
  }
  get urlParamsBody(): Effect.Effect<UrlParams.UrlParams, ServerError.RequestError> {
    return Effect.flatMap(this.text, (s) =>
      Effect.try({ try: () => UrlParams.fromInput(new URLSearchParams(s)), catch: this.decodeError }))
  }
  get arrayBuffer(): Effect.Effect<ArrayBuffer, ServerError.RequestError> {
    const ex = this.exchange
    return Effect.map(
      NodeStream.toUint8Array(() => ex.readable(), { onFailure: this.decodeError, maxBytes: ex.maxBodyBytes }),
      (u8) => u8.buffer.slice(u8.byteOffset, u8.byteOffset + u8.byteLength) as ArrayBuffer
    )
  }
  /**
   * The body's chunks as they arrive, with backpressure (FlowingBody.ts). A route that stops
   * reading early (a refused form) leaves the rest to be read and dropped within a budget, as a
   * refused oversize body is, so the client gets the answer instead of a reset connection.
   */
  body(): AsyncIterable<Uint8Array> {
    const source = this.exchange.source
    return flowingChunks(this.exchange.readable(), undefined, (readable) => {
      if (readable !== source) readable.destroy()
      discardRest(source, DRAIN_BUDGET_BYTES)
    })
  }
  get stream(): Stream.Stream<Uint8Array, ServerError.RequestError> {
    const ex = this.exchange
    return NodeStream.fromReadable<ServerError.RequestError, Uint8Array>(() => ex.readable(), this.decodeError)
  }
  get multipart(): Effect.Effect<Multipart.Persisted, Multipart.MultipartError, Scope.Scope | FileSystem.FileSystem | Path.Path> {
    const ex = this.exchange
    if (ex.multipart !== undefined) return ex.multipart
    ex.multipart = Effect.runSync(Effect.cached(NodeMultipart.persisted(ex.readable(), ex.source.headers)))
    return ex.multipart
  }
  get multipartStream(): Stream.Stream<Multipart.Part, Multipart.MultipartError> {
    const ex = this.exchange
    return NodeMultipart.stream(ex.readable(), ex.source.headers)
  }
  get upgrade(): Effect.Effect<Socket.Socket, ServerError.RequestError> {
    return Effect.fail(
      new ServerError.RequestError({ request: this, reason: "Decode", description: "not an upgradeable ServerRequest" })
    )
  }

  modify(options: {
    readonly url?: string
    readonly headers?: Headers.Headers
    readonly remoteAddress?: string
  }): ServerRequest.HttpServerRequest {
    return new LeanServerRequest(
      this.exchange,
      options.url ?? this.url,
      options.headers ?? this.headersOverride,
      options.remoteAddress ?? this.remoteAddressOverride
    )
  }

  override toString(): string {
    return `ServerRequest(${this.method} ${this.url})`
  }
  toJSON(): unknown {
    return IncomingMessage.inspect(this, {
      _id: "@effect/platform/HttpServerRequest",
      method: this.method,
      url: this.originalUrl
    })
  }
}

// ---------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------

const tooLargeBody = (limit: number) =>
  JSON.stringify({ error: "request body too large", code: "PAYLOAD_TOO_LARGE", hint: `the limit is ${limit} bytes` })
/** What a request that failed unexpectedly is told; the cause goes to the log only. */
export const internalBody = JSON.stringify({ error: "internal error", code: "INTERNAL" })

/** Answers outside the app; `connection: close` so an unread body is not drained. */
const answerDirect = (res: http.ServerResponse, status: number, body: string): void => {
  if (res.headersSent || res.writableEnded) return
  res.shouldKeepAlive = false
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    connection: "close"
  })
  res.end(body)
}

/** How much of a refused upload we read and discard so the client gets to see our 413. */
const DRAIN_BUDGET_BYTES = 16 * 1024 * 1024
const DRAIN_BUDGET_MS = 15_000

/**
 * Answers 413 at once for an announced oversize body, then discards what the client is still
 * sending, up to a budget: a client that is mid-upload when the socket closes reports a broken
 * pipe instead of our answer. Past the budget the connection is cut.
 */
const refuseOversize = (req: http.IncomingMessage, res: http.ServerResponse, body: string, cap: number): void => {
  // No `Connection: close` here: closing right after the answer resets a client still writing.
  // Node reuses the connection once the discarded body has been read; past the budget it is cut.
  res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  res.end(body)
  // a client streaming a large upload may push a good part of it before it reads our answer
  discardRest(req, Math.max(DRAIN_BUDGET_BYTES, cap / 4))
}

/**
 * Reads and drops what a refused client is still sending, up to a budget, so it gets to read our
 * answer: closing on unread data would reset the connection and take the answer with it.
 */
const discardRest = (req: http.IncomingMessage, budgetBytes: number): void => {
  req.unpipe()
  let drained = 0
  const cut = () => req.socket.destroy()
  const timer = setTimeout(cut, DRAIN_BUDGET_MS)
  timer.unref()
  req.on("data", (chunk: Buffer) => {
    drained += chunk.length
    if (drained > budgetBytes) {
      clearTimeout(timer)
      cut()
    }
  })
  req.once("end", () => clearTimeout(timer))
  req.once("error", () => clearTimeout(timer))
  req.resume()
}

const responseHeaders = (response: ServerResponse.HttpServerResponse): Record<string, string | Array<string>> => {
  if (Cookies.isEmpty(response.cookies)) return response.headers
  const headers: Record<string, string | Array<string>> = { ...response.headers }
  const toSet = Cookies.toSetCookieHeaders(response.cookies)
  const existing = response.headers["set-cookie"]
  if (existing !== undefined) toSet.push(existing)
  headers["set-cookie"] = toSet
  return headers
}

const isNodeReadable = (u: unknown): u is NodeJS.ReadableStream =>
  typeof u === "object" && u !== null && "pipe" in u && typeof u.pipe === "function"

/** Writes the response. Fixed bodies end without waiting for node's flush callback. */
const writeResponse = (
  method: string,
  res: http.ServerResponse,
  response: ServerResponse.HttpServerResponse
): Effect.Effect<void> => {
  if (res.headersSent || res.writableEnded) return Effect.void
  const headers = responseHeaders(response)
  const body = response.body
  if (method === "HEAD") {
    res.writeHead(response.status, headers)
    res.end()
    return Effect.void
  }
  switch (body._tag) {
    case "Empty": {
      res.writeHead(response.status, headers)
      res.end()
      return Effect.void
    }
    case "Uint8Array": {
      res.writeHead(response.status, headers)
      res.end(body.body)
      return Effect.void
    }
    case "Raw": {
      res.writeHead(response.status, headers)
      const raw = body.body
      if (isNodeReadable(raw)) return pipeTo(raw instanceof Readable ? raw : Readable.from(raw), res)
      if (typeof raw === "string" || raw instanceof Uint8Array) res.end(raw)
      else if (raw instanceof ReadableStream) return pipeTo(Readable.fromWeb(raw), res)
      else res.end(raw === undefined || raw === null ? undefined : String(raw))
      return Effect.void
    }
    case "FormData": {
      const web = new Response(body.formData)
      res.writeHead(response.status, { ...headers, ...Object.fromEntries(web.headers) })
      return web.body === null ? Effect.sync(() => res.end()) : pipeTo(Readable.fromWeb(web.body), res)
    }
    case "Stream": {
      res.writeHead(response.status, headers)
      return writeStream(body.stream, res)
    }
  }
}

const pipeTo = (source: Readable, res: http.ServerResponse): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const done = () => resume(Effect.void)
    source.once("error", (e) => {
      // headers are gone already: all we can do is cut the connection
      res.destroy(e)
      done()
    })
    res.once("finish", done)
    res.once("close", done)
    source.pipe(res)
    return Effect.sync(() => source.destroy())
  })

const writeStream = (
  stream: Stream.Stream<Uint8Array, unknown>,
  res: http.ServerResponse
): Effect.Effect<void> => {
  const drained = Effect.unsafeMakeLatch(true)
  const onDrain = () => drained.unsafeOpen()
  res.on("drain", onDrain)
  return stream.pipe(
    Stream.runForEachChunk((chunk) => {
      let full = false
      for (const part of Chunk.toReadonlyArray(chunk)) {
        if (!res.write(part)) full = true
      }
      if (!full) return Effect.void
      drained.unsafeClose()
      return drained.await
    }),
    Effect.matchCauseEffect({
      onSuccess: () => Effect.sync(() => res.end()),
      onFailure: (cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.sync(() => res.destroy())
          : Effect.zipRight(
            Effect.logError("response stream failed", cause),
            Effect.sync(() => res.destroy())
          )
    }),
    Effect.ensuring(Effect.sync(() => res.off("drain", onDrain)))
  )
}

/**
 * Turns a failed app into a response. Errors that carry a response (route not
 * found, HttpApi-encoded errors, RequestError → 400) keep it; anything that
 * would be a bare 500 becomes the generic JSON body and the cause is logged.
 */
const failureResponse = (
  method: string,
  res: http.ServerResponse,
  cause: Cause.Cause<unknown>
): Effect.Effect<void> =>
  Effect.flatMap(ServerError.causeResponse(cause), ([response, stripped]) => {
    if (response.status >= 500 && response.status !== 503 && response.body._tag === "Empty") {
      return Effect.zipRight(
        Effect.logError("request failed", stripped),
        Effect.sync(() => {
          if (res.headersSent || res.writableEnded) return
          res.writeHead(500, { "content-type": "application/json", "content-length": Buffer.byteLength(internalBody) })
          res.end(method === "HEAD" ? undefined : internalBody)
        })
      )
    }
    return writeResponse(method, res, response)
  })

// ---------------------------------------------------------------------------
// Request scope
// ---------------------------------------------------------------------------

/**
 * The Scope every request gets. `Effect.scoped` around the app measured about
 * 10 µs per request (scope, context merge, onExit), most of it for scopes
 * nobody uses; this one is a plain object put in the context when the fiber
 * is forked, and closing it costs nothing unless a finalizer was added.
 */
class RequestScope implements Scope.CloseableScope {
  readonly [Scope.ScopeTypeId]: Scope.ScopeTypeId = Scope.ScopeTypeId
  readonly [Scope.CloseableScopeTypeId]: Scope.CloseableScopeTypeId = Scope.CloseableScopeTypeId
  readonly strategy: ExecutionStrategy.ExecutionStrategy = ExecutionStrategy.sequential
  private finalizers: Map<object, Scope.Scope.Finalizer> | undefined = undefined
  private closedWith: Exit.Exit<unknown, unknown> | undefined = undefined

  get hasFinalizers(): boolean {
    return this.finalizers !== undefined && this.finalizers.size > 0
  }

  fork(strategy: ExecutionStrategy.ExecutionStrategy): Effect.Effect<Scope.CloseableScope> {
    return Effect.flatMap(Scope.make(strategy), (child) => {
      const closed = this.closedWith
      if (closed !== undefined) return Effect.as(Scope.close(child, closed), child)
      const key = {}
      this.add(key, (exit) => Scope.close(child, exit))
      return Effect.as(Scope.addFinalizer(child, Effect.sync(() => this.finalizers?.delete(key))), child)
    })
  }

  addFinalizer(finalizer: Scope.Scope.Finalizer): Effect.Effect<void> {
    return Effect.suspend(() => {
      const closed = this.closedWith
      if (closed !== undefined) return finalizer(closed)
      this.add({}, finalizer)
      return Effect.void
    })
  }

  close(exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.closedWith !== undefined) return Effect.void
      this.closedWith = exit
      const finalizers = this.finalizers === undefined ? [] : [...this.finalizers.values()].reverse()
      this.finalizers = undefined
      if (finalizers.length === 0) return Effect.void
      return Effect.flatMap(Effect.forEach(finalizers, (fin) => Effect.exit(fin(exit))), (exits) => {
        const failures = exits.flatMap((e) => Exit.isFailure(e) ? [e.cause] : [])
        const first = failures[0]
        return first === undefined ? Effect.void : Effect.failCause(failures.slice(1).reduce(Cause.sequential, first))
      })
    })
  }

  pipe() {
    return pipeArguments(this, arguments)
  }

  private add(key: object, finalizer: Scope.Scope.Finalizer): void {
    ;(this.finalizers ??= new Map()).set(key, finalizer)
  }
}

// ---------------------------------------------------------------------------
// Listener
// ---------------------------------------------------------------------------

const withPreResponseHandlers = (
  request: ServerRequest.HttpServerRequest,
  response: ServerResponse.HttpServerResponse
): Effect.Effect<ServerResponse.HttpServerResponse, ServerError.ResponseError> =>
  Effect.flatMap(FiberRef.get(HttpApp.currentPreResponseHandlers), (handler) =>
    handler._tag === "None" ? Effect.succeed(response) : handler.value(request, response))

/** Serves an HttpApp on a node:http server using the given runtime. */
export const makeRequestListener = <E, R>(
  app: HttpApp.Default<E, R | ServerRequest.HttpServerRequest | Scope.Scope>,
  runtime: Runtime.Runtime<R>,
  options: AdapterOptions
): (req: http.IncomingMessage, res: http.ServerResponse) => void => {
  const maxBodyBytes = options.maxBodyBytes
  const onAnswered = options.onAnswered
  const fastLane = options.fastLane
  const tooLarge = tooLargeBody(maxBodyBytes)
  const routeCaps = options.routeBodyCaps ?? new Map<string, number>()
  const jsonRoutes = options.jsonRoutes ?? new Set<string>()
  const admission = options.admission
  const routeTooLarge = new Map([...routeCaps].map(([route, cap]) => [route, tooLargeBody(cap)]))

  // Built once: reads the per-request values from the fiber's context.
  const handled = Effect.withFiberRuntime<void, never, R | ServerRequest.HttpServerRequest | Scope.Scope>((fiber) => {
    const request = Context.unsafeGet(fiber.currentContext, ServerRequest.HttpServerRequest)
    if (!(request instanceof LeanServerRequest)) return Effect.void
    const ex = request.exchange
    const method = request.method
    return Effect.matchCauseEffect(
      Effect.flatMap(app, (response) => withPreResponseHandlers(request, response)),
      {
        onSuccess: (response) => ex.answered ? Effect.void : writeResponse(method, ex.response, response),
        onFailure: (cause) => {
          ex.failure = cause
          return ex.answered ? Effect.void : failureResponse(method, ex.response, cause)
        }
      }
    )
  })

  const baseMap = runtime.context.unsafeMap
  const runtimeFlags = runtime.runtimeFlags
  const fiberRefs = runtime.fiberRefs

  const finish = (ex: Exchange, scope: RequestScope, exit: Exit.Exit<void>): void => {
    const res = ex.response
    if (onAnswered !== undefined) {
      // what the client was told; an interruption with nothing sent is a client that went away
      const status = res.headersSent ? res.statusCode : Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) ? 499 : 500
      onAnswered(ex.source, status, performance.now() - ex.startedAt)
    }
    if (Exit.isFailure(exit) && !res.headersSent) answerDirect(res, 500, internalBody)
    if (scope.hasFinalizers) {
      const closeWith = ex.failure !== undefined ? Exit.failCause(ex.failure) : exit
      Runtime.runFork(runtime, scope.close(closeWith))
    }
  }

  /**
   * Serves one request. `body`, when given, is the whole body already read by the listener: the
   * app then reads it without waiting, and a handler with no I/O of its own finishes in the same
   * turn instead of one event-loop hop per read.
   */
  const serve = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    cap: number,
    capBody: string,
    body: Buffer | undefined,
    startedAt: number
  ): void => {
    let interrupt: (() => void) | undefined
    const ex = new Exchange(req, res, cap, () => {
      ex.answered = true
      // not answerDirect: its Connection: close would reset a client that is still sending
      if (!res.headersSent) refuseOversize(req, res, capBody, cap)
      interrupt?.()
    }, startedAt)
    const request = new LeanServerRequest(ex, req.url ?? "/", undefined, undefined)
    if (body !== undefined) {
      ex.prebuffered = body
      ex.bodyText = bodyText(request, body)
    }
    const scope = new RequestScope()
    const map = new Map(baseMap)
    map.set(ServerRequest.HttpServerRequest.key, request)
    map.set(Scope.Scope.key, scope)
    const fiber = Runtime.runFork(
      Runtime.make({ context: Context.unsafeMake<R | ServerRequest.HttpServerRequest | Scope.Scope>(map), runtimeFlags, fiberRefs }),
      handled
    )
    // Most requests finish synchronously: no listeners, no observers.
    const exit = fiber.unsafePoll()
    if (exit !== null) {
      finish(ex, scope, exit)
      return
    }
    interrupt = () => fiber.unsafeInterruptAsFork(ServerError.clientAbortFiberId)
    res.once("close", () => {
      if (!res.writableEnded) interrupt?.()
    })
    fiber.addObserver((exit) => finish(ex, scope, exit))
  }

  /** Answered without the app (the adapter's own 413 or 499, or the fast lane): the access log still gets its line. */
  const answeredHere = (req: http.IncomingMessage, status: number, startedAt: number): void => {
    if (onAnswered !== undefined) onAnswered(req, status, performance.now() - startedAt)
  }

  /** The fast lane, then the app for whatever it declines. */
  const laneOrApp = (req: http.IncomingMessage, res: http.ServerResponse, cap: number, capBody: string, body: Buffer | undefined, startedAt: number): void => {
    // a lane route that waits for a store reports its status when it has answered
    const later = onAnswered === undefined ? undefined : (status: number) => answeredHere(req, status, startedAt)
    const status = fastLane === undefined ? undefined : fastLane(req, res, body, later)
    if (status === undefined) serve(req, res, cap, capBody, body, startedAt)
    else if (status !== "later") answeredHere(req, status, startedAt)
  }

  // The lane's requests of one event-loop turn, answered together once the poll phase has read
  // every socket that was ready (FastLane.ts, `turn`); the others go to the app as they come.
  let waiting: Array<Waiting> = []
  const answerWaiting = (): void => {
    const turn = waiting
    waiting = []
    for (const w of turn) laneOrApp(w.req, w.res, w.cap, w.capBody, w.body, w.startedAt)
  }
  const endOfTurn = (): void => {
    fastLane?.turn(answerWaiting)
  }
  const dispatch = (req: http.IncomingMessage, res: http.ServerResponse, cap: number, capBody: string, body: Buffer | undefined, startedAt: number): void => {
    if (fastLane === undefined || !fastLane.takes(req)) {
      serve(req, res, cap, capBody, body, startedAt)
      return
    }
    if (waiting.length === 0) setImmediate(endOfTurn)
    waiting.push(new Waiting(req, res, cap, capBody, body, startedAt))
  }

  return (req, res) => {
    const startedAt = onAnswered === undefined ? 0 : performance.now()
    let cap = maxBodyBytes
    let capBody = tooLarge
    let streamed = false
    if (routeCaps.size > 0) {
      const url = req.url ?? "/"
      const q = url.indexOf("?")
      const route = `${req.method ?? "GET"} ${q < 0 ? url : url.slice(0, q)}`
      const routeCap = routeCaps.get(route)
      if (routeCap !== undefined) {
        cap = routeCap
        capBody = routeTooLarge.get(route) ?? tooLarge
        streamed = !jsonRoutes.has(route)
      }
    }
    const withBody = hasBody(req)
    if (admission !== undefined) {
      const refused = admission(req, res, withBody ? (streamed ? "stream" : "json") : "none", cap)
      if (refused !== undefined) {
        answeredHere(req, refused, startedAt)
        return
      }
    }
    const announced = req.headers["content-length"]
    if (announced !== undefined && Number(announced) > cap) {
      refuseOversize(req, res, capBody, cap)
      answeredHere(req, 413, startedAt)
      return
    }
    if (streamed) {
      serve(req, res, cap, capBody, undefined, startedAt)
      return
    }
    // Every other route takes JSON, so its body is read as JSON whatever type it states: a form
    // or multipart body is then 400 MALFORMED_JSON instead of being decoded as form fields,
    // `curl -d '{…}'` (which says form-urlencoded) works, and so does an empty body sent as
    // text/plain (what fetch sends for `body: ""`).
    if (req.headers["content-type"] !== undefined && !req.headers["content-type"].startsWith("application/json")) {
      req.headers["content-type"] = "application/json"
    }
    if (!withBody) {
      dispatch(req, res, cap, capBody, undefined, startedAt)
      return
    }
    // a JSON body within the cap: read it whole first (see `serve`)
    new JsonBodyRead(req, res, cap, capBody, startedAt, dispatch, answeredHere)
  }
}

/** A request of the fast lane's routes, read whole, waiting for the end of the turn. */
class Waiting {
  constructor(
    readonly req: http.IncomingMessage,
    readonly res: http.ServerResponse,
    readonly cap: number,
    readonly capBody: string,
    readonly body: Buffer | undefined,
    readonly startedAt: number
  ) {}
}

/**
 * Reads a JSON body whole within its cap and hands it on, or refuses it (413) once it passes the
 * cap. A class with bound methods rather than closures per request: tsx, which `npm start`
 * runs, names every closure it compiles with a property definition, a cost paid per request.
 */
class JsonBodyRead {
  private chunks: Array<Buffer> = []
  private size = 0
  /** Set once the body is served or refused: an error after that is no longer this reader's. */
  private settled = false
  private readonly onData = this.data.bind(this)
  private readonly onEnd = this.end.bind(this)

  constructor(
    private readonly req: http.IncomingMessage,
    private readonly res: http.ServerResponse,
    private readonly cap: number,
    private readonly capBody: string,
    private readonly startedAt: number,
    private readonly serve: (req: http.IncomingMessage, res: http.ServerResponse, cap: number, capBody: string, body: Buffer | undefined, startedAt: number) => void,
    private readonly answeredHere: (req: http.IncomingMessage, status: number, startedAt: number) => void
  ) {
    // `on`, not `once`: each fires once at most anyway, and `once` wraps every listener again
    req.on("data", this.onData)
    req.on("end", this.onEnd)
    // a client gone before the end of its body gets no answer (logged as 499, as nginx does); the
    // error must not go unhandled
    const gone = this.gone.bind(this)
    req.on("error", gone)
    // the connection closed, or the body was cut (src/api/BodyGuard.ts) and answered there
    res.on("close", gone)
  }

  private data(chunk: Buffer): void {
    this.size += chunk.length
    if (this.size <= this.cap) {
      this.chunks.push(chunk)
      return
    }
    this.settled = true
    this.chunks = []
    this.req.off("data", this.onData)
    this.req.off("end", this.onEnd)
    refuseOversize(this.req, this.res, this.capBody, this.cap)
    this.answeredHere(this.req, 413, this.startedAt)
  }

  private end(): void {
    this.settled = true
    const body = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size)
    this.chunks = []
    this.serve(this.req, this.res, this.cap, this.capBody, body, this.startedAt)
  }

  /** The body will not be served: what was read of it is dropped now, not when the request is collected. */
  private gone(): void {
    this.req.off("end", this.onEnd)
    this.req.off("data", this.onData)
    this.chunks = []
    if (this.settled) return
    this.settled = true
    // an answer already out was logged by whoever gave it
    if (!this.res.headersSent) this.answeredHere(this.req, 499, this.startedAt)
  }
}

/** A request that carries a body. */
const hasBody = (req: http.IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  return !((length === undefined || length === "0") && req.headers["transfer-encoding"] === undefined)
}
