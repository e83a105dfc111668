/**
 * Serves an Effect HttpApp on node:http: admission and body caps at the headers, JSON bodies
 * read whole before the app runs, the fast lane's requests batched per event-loop turn, one
 * fiber per request that usually finishes synchronously, and the access log's call.
 */
import type * as HttpApp from "@effect/platform/HttpApp"
import * as ServerError from "@effect/platform/HttpServerError"
import * as ServerRequest from "@effect/platform/HttpServerRequest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import type * as http from "node:http"
import type { Admission } from "../BodyGuard.js"
import type { FastLane, LaneAnswered } from "../FastLane.js"
import { answerDirect, internalBody, refuseOversize, tooLargeBody } from "./DirectAnswers.js"
import { requestRuntime } from "./EffectInternals.js"
import { hasBody, JsonBodyRead } from "./JsonBodyRead.js"
import { bodyText, Exchange, LeanServerRequest } from "./LeanServerRequest.js"
import { RequestScope } from "./RequestScope.js"
import { failureResponse, withPreResponseHandlers, writeResponse } from "./ResponseWriter.js"

export interface RouteBody {
  readonly cap: number
  readonly streamed: boolean
}

export interface AdapterOptions {
  /** Default body cap in bytes: a larger Content-Length gets 413 before any read. */
  readonly maxBodyBytes: number
  /**
   * The body facts of the route a request reaches, if it has some (its endpoint's annotations,
   * RouteFacts.ts): a cap of its own, and whether the route reads the body as a stream (a file)
   * rather than whole as JSON.
   */
  readonly routeBody?: ((method: string, path: string) => RouteBody | undefined) | undefined
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
  const routeBody = options.routeBody
  const admission = options.admission
  const tooLargeOf = new Map<number, string>()

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

  const runtimeFor = requestRuntime(runtime)

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
    const fiber = Runtime.runFork(runtimeFor(request, scope), handled)
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
  const laneOrApp = (w: Waiting): void => {
    // a lane route that waits for a store reports its status to the request's record when it has answered
    const status = fastLane === undefined ? undefined : fastLane(w.req, w.res, w.body, onAnswered === undefined ? undefined : w)
    if (status === undefined) serve(w.req, w.res, w.cap, w.capBody, w.body, w.startedAt)
    else if (status !== "later") answeredHere(w.req, status, w.startedAt)
  }

  // The lane's requests of one event-loop turn, answered together once the poll phase has read
  // every socket that was ready (FastLane.ts, `turn`); the others go to the app as they come.
  let waiting: Array<Waiting> = []
  const answerWaiting = (): void => {
    const turn = waiting
    waiting = []
    for (const w of turn) {
      if (w.announced === 0) {
        laneOrApp(w)
        continue
      }
      // A body the poll phase has read whole is in the request's buffer by now: taken from there
      // at once, without putting the stream into flowing mode (a resume, a data and an end event,
      // each a tick of their own). A body still on its way is read as every other one is.
      const req = w.req
      if (req.complete && req.readableLength === w.announced) {
        w.body = req.read() as Buffer
        laneOrApp(w)
      } else if (req.socket.destroyed) answeredHere(req, 499, w.startedAt)
      else new JsonBodyRead(req, w.res, w.cap, w.capBody, w.startedAt, dispatch, answeredHere)
    }
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
    waiting.push(new Waiting(req, res, cap, capBody, body, startedAt, 0, answeredHere))
  }

  return (req, res) => {
    const startedAt = onAnswered === undefined ? 0 : performance.now()
    let cap = maxBodyBytes
    let capBody = tooLarge
    let streamed = false
    if (routeBody !== undefined) {
      const url = req.url ?? "/"
      const q = url.indexOf("?")
      const facts = routeBody(req.method ?? "GET", q < 0 ? url : url.slice(0, q))
      if (facts !== undefined) {
        cap = facts.cap
        capBody = tooLargeOf.get(cap) ?? tooLargeBody(cap)
        tooLargeOf.set(cap, capBody)
        streamed = facts.streamed
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
    // a JSON body within the cap: read it whole first (see `serve`); the lane's, of a stated
    // length, at the end of the turn it came in (`answerWaiting`)
    if (announced !== undefined && fastLane !== undefined && fastLane.takes(req)) {
      if (waiting.length === 0) setImmediate(endOfTurn)
      waiting.push(new Waiting(req, res, cap, capBody, undefined, startedAt, Number(announced), answeredHere))
      return
    }
    new JsonBodyRead(req, res, cap, capBody, startedAt, dispatch, answeredHere)
  }
}

/**
 * A request of the fast lane's routes waiting for the end of the turn: read whole (`body`, or no
 * body), or with `announced` bytes of body (its Content-Length) not read yet; told the status of a
 * lane answer written later (so nothing is allocated for it per request).
 */
class Waiting implements LaneAnswered {
  constructor(
    readonly req: http.IncomingMessage,
    readonly res: http.ServerResponse,
    readonly cap: number,
    readonly capBody: string,
    /** Set at the end of the turn for a body read then. */
    public body: Buffer | undefined,
    readonly startedAt: number,
    readonly announced: number,
    private readonly answeredHere: (req: http.IncomingMessage, status: number, startedAt: number) => void
  ) {}

  laneAnswered(status: number): void {
    this.answeredHere(this.req, status, this.startedAt)
  }
}
