/**
 * Writes the app's HttpServerResponse to node's response: every HttpBody kind, cookies, HEAD,
 * backpressure for streams; and turns a failed app into an answer.
 */
import * as Cookies from "@effect/platform/Cookies"
import * as HttpApp from "@effect/platform/HttpApp"
import * as ServerError from "@effect/platform/HttpServerError"
import type * as ServerRequest from "@effect/platform/HttpServerRequest"
import type * as ServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Stream from "effect/Stream"
import type * as http from "node:http"
import { Readable } from "node:stream"
import { internalBody } from "./DirectAnswers.js"

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
export const writeResponse = (
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
export const failureResponse = (
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

export const withPreResponseHandlers = (
  request: ServerRequest.HttpServerRequest,
  response: ServerResponse.HttpServerResponse
): Effect.Effect<ServerResponse.HttpServerResponse, ServerError.ResponseError> =>
  Effect.flatMap(FiberRef.get(HttpApp.currentPreResponseHandlers), (handler) =>
    handler._tag === "None" ? Effect.succeed(response) : handler.value(request, response))
