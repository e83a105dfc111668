/**
 * The HttpServerRequest the adapter hands the app: node's request behind the full platform
 * surface (headers, url, method, remote address, text/json/urlencoded/multipart/stream bodies),
 * its body read once with a cap and as strict UTF-8.
 */
import { clientAddressOf } from "./ClientAddress.js"
import * as Cookies from "@effect/platform/Cookies"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Headers from "@effect/platform/Headers"
import * as IncomingMessage from "@effect/platform/HttpIncomingMessage"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import * as ServerError from "@effect/platform/HttpServerError"
import * as ServerRequest from "@effect/platform/HttpServerRequest"
import type * as Multipart from "@effect/platform/Multipart"
import type * as Path from "@effect/platform/Path"
import type * as Socket from "@effect/platform/Socket"
import * as UrlParams from "@effect/platform/UrlParams"
import * as NodeMultipart from "@effect/platform-node/NodeMultipart"
import * as NodeStream from "@effect/platform-node/NodeStream"
import type * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Inspectable from "effect/Inspectable"
import * as Option from "effect/Option"
import type { ReadonlyRecord } from "effect/Record"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as http from "node:http"
import { Readable, Transform, type TransformCallback } from "node:stream"
import { jsonValue, utf8Text } from "../JsonBody.js"
import { flowingChunks } from "../FlowingBody.js"
import { discardRest, DRAIN_BUDGET_BYTES } from "./DirectAnswers.js"

/** Per-request state shared by a request and its `modify`d copies. */
export class Exchange {
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
    // a request ended before its body was whole (a body cut with 408 ends it without an error):
    // the reader of the count hears it as a close before the end
    src.on("close", () => {
      if (!src.complete) counter.destroy()
    })
    src.pipe(counter)
    this.body = counter
    return counter
  }
}

/** Why a body was refused before it was parsed: its bytes are not UTF-8. */
export class BodyNotUtf8 extends Data.TaggedError("BodyNotUtf8")<{}> {}

/** The body's text (JsonBody.ts), decoded once; a body that is not UTF-8 fails the way an unreadable one does. */
export const bodyText = (request: ServerRequest.HttpServerRequest, bytes: Uint8Array): Effect.Effect<string, ServerError.RequestError> => {
  const text = utf8Text(bytes)
  return text !== undefined
    ? Effect.succeed(text)
    : Effect.fail(new ServerError.RequestError({ request, reason: "Decode", cause: new BodyNotUtf8(), description: "the body is not valid UTF-8" }))
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

/**
 * The whole body's bytes: those the listener read before the app ran (every route whose body is
 * not streamed), else read now and kept. The gate and the handler can both read them (a vault
 * share's MAC covers its bytes), where a second read of the stream would find it spent.
 */
export const wholeBody = (request: ServerRequest.HttpServerRequest): Effect.Effect<Uint8Array, ServerError.RequestError> => {
  if (!(request instanceof LeanServerRequest)) return Effect.map(request.arrayBuffer, (bytes) => new Uint8Array(bytes))
  const ex = request.exchange
  if (ex.prebuffered !== undefined) return Effect.succeed(ex.prebuffered)
  return Effect.map(request.arrayBuffer, (bytes) => (ex.prebuffered = Buffer.from(bytes)))
}

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
    return Option.fromNullable(this.remoteAddressOverride ?? clientAddressOf(this.exchange.source))
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
  /** The body as strict JSON (JsonBody.ts). */
  get json(): Effect.Effect<unknown, ServerError.RequestError> {
    const max = this.exchange.maxBodyBytes
    return Effect.flatMap(this.text, (s) => Effect.mapError(jsonValue(s, max), (e) => this.decodeError(e)))
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
