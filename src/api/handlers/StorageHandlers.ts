import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Stream } from "effect"
import { resolveRange } from "../../domain/ByteRange.js"
import { BadRequest, Code, FetchCapMissing, FetchCapNotAlone, fromRefusal } from "../../domain/Errors.js"
import { FetchCaps } from "../../layers/storage/FetchCaps.js"
import { Storage } from "../../layers/storage/Storage.js"
import { PorticoApi } from "../Api.js"
import { bodyOf } from "../NodeAdapter.js"
import { CurrentPrincipal } from "../../domain/Principal.js"


/**
 * Content-addressed bytes never change, but reaching them takes a credential or a capability:
 * `private` keeps a shared cache from serving them to anyone else, or past a revoked capability.
 */
const IMMUTABLE = "private, max-age=31536000, immutable"

export const StorageHandlers = HttpApiBuilder.group(PorticoApi, "storage", (handlers) =>
  Effect.gen(function* () {
    const storage = yield* Storage
    const caps = yield* FetchCaps

    /** Answers get and relayed fetch: whole, one range, or not modified. */
    const serve = (namespace: string, cidText: string) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const { cid, size } = yield* Effect.mapError(storage.open(namespace, cidText), fromRefusal)
        const etag = `"${cid}"`
        const headers = {
          etag,
          "cache-control": IMMUTABLE,
          "accept-ranges": "bytes",
          "x-content-type-options": "nosniff"
        }
        const ifNoneMatch = request.headers["if-none-match"]
        if (ifNoneMatch !== undefined && (ifNoneMatch.trim() === "*" || ifNoneMatch.split(",").some((t) => t.trim().replace(/^W\//, "") === etag))) {
          // the length a 200 would carry (RFC 9110 §8.6): a Content-Length on every answer
          return HttpServerResponse.empty({ status: 304, headers: { ...headers, "content-length": String(size) } })
        }
        // If-Range: a range only while the client's copy is this content (strong match), else whole
        const ifRange = request.headers["if-range"]
        const rangeHeader = ifRange === undefined || ifRange.trim() === etag ? request.headers["range"] : undefined
        const range = resolveRange(rangeHeader, size)
        if (range.kind === "unsatisfiable") {
          return HttpServerResponse.unsafeJson(
            { error: "the range is outside the content", code: Code.RANGE_NOT_SATISFIABLE, hint: `the content is ${size} bytes` },
            { status: 416, headers: { "content-range": `bytes */${size}` } }
          )
        }
        const [start, end] = range.kind === "partial" ? [range.start, range.end] : [0, size - 1]
        const length = end - start + 1
        return HttpServerResponse.stream(
          Stream.fromAsyncIterable(storage.read(cid, start, length), (e) => e),
          {
            status: range.kind === "partial" ? 206 : 200,
            contentType: "application/octet-stream",
            contentLength: length,
            // set here as well: the platform leaves out a length of 0
            headers: {
              ...headers,
              "content-length": String(length),
              ...(range.kind === "partial" ? { "content-range": `bytes ${start}-${end}/${size}` } : {})
            }
          }
        )
      })

    const statusWire = (s: Effect.Effect.Success<ReturnType<typeof storage.status>>) => ({
      Cid: s.cid,
      Name: s.name,
      Status: s.status,
      ReplicationMin: s.replicationMin,
      ReplicationMax: s.replicationMax,
      ReplicationFactor: s.replicationFactor,
      Peers: s.peers,
      Error: s.error
    })

    return handlers
      .handle("upload", () =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const request = yield* HttpServerRequest.HttpServerRequest
          const contentType = request.headers["content-type"] ?? ""
          if (!/^multipart\/form-data\s*;/i.test(contentType)) {
            return yield* Effect.fail(
              new BadRequest({ error: "the upload must be multipart/form-data", hint: "send the bytes in a field named file (curl -F file=@path)" })
            )
          }
          const stored = yield* Effect.mapError(storage.upload(caller, contentType, bodyOf(request)), fromRefusal)
          return { Cid: stored.cid, Size: stored.size, Name: stored.name }
        })
      )
      .handle("get", ({ path }) => Effect.flatMap(CurrentPrincipal, (caller) => serve(caller.namespace, path.cid)))
      .handle("pin", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          yield* Effect.mapError(storage.pin(caller, payload.cid, payload.name), fromRefusal)
          return statusWire(yield* Effect.mapError(storage.status(caller, payload.cid), fromRefusal))
        })
      )
      .handle("status", ({ path }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          return statusWire(yield* Effect.mapError(storage.status(caller, path.cid), fromRefusal))
        })
      )
      .handle("unpin", ({ path, urlParams }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const answer = yield* Effect.mapError(storage.unpin(caller, path.cid, urlParams.immediate === "true"), fromRefusal)
          return { Cid: answer.cid, evicted: answer.evicted }
        })
      )
      .handle("mintFetchCaps", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          return yield* Effect.mapError(caps.mint(caller, payload.cid, payload.count, payload.ttl_seconds), fromRefusal)
        })
      )
      .handle("revokeFetchCap", ({ path, headers }) => {
        // hex is hex in either case; ids are minted and answered in lower case
        const id = path.id.toLowerCase()
        return Effect.as(Effect.mapError(caps.revoke(id, headers["x-portico-revoke-key"]), fromRefusal), { revoked: id })
      })
      .handle("relayed", ({ path, headers }) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const token = headers["x-portico-fetch-cap"]
          if (token === undefined || token.length === 0) {
            return yield* Effect.fail(new FetchCapMissing({ error: "a fetch capability is required", hint: "send X-Portico-Fetch-Cap: <token>" }))
          }
          // a capability stands alone: a credential beside it would tie the fetch to an account
          if (request.headers["authorization"] !== undefined || request.headers["cookie"] !== undefined) {
            return yield* Effect.fail(
              new FetchCapNotAlone({ error: "send the fetch capability without any other credential", hint: "drop the Authorization header" })
            )
          }
          const namespace = yield* Effect.mapError(caps.redeem(token, path.cid), fromRefusal)
          return yield* serve(namespace, path.cid)
        })
      )
  })
)
