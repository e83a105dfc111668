import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import { fromRefusal, ValidationFailed } from "../../domain/Errors.js"
import { memberSource } from "../../domain/StrictJson.js"
import { Cache } from "../../layers/cache/Cache.js"
import { PorticoApi } from "../Api.js"
import { changedText, valuesText, valueText } from "../groups/CacheGroup.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { rawJson } from "./RawJson.js"
import { BODY_MAX_DEPTH } from "../JsonBody.js"

/** An answer assembled around stored JSON text (CacheGroup.ts says why). */

/** The `value` member's source text from the (already strictly parsed) request body. */
const putValue = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
  Effect.flatMap(Effect.orDie(request.text), (text) => {
    // the body was read with the body's own limits, so its member is found with the same ones
    const source = memberSource(text, "value", { maxChars: text.length, maxDepth: BODY_MAX_DEPTH })
    return source === undefined
      ? Effect.fail(new ValidationFailed({ error: "value is required" }))
      : Effect.succeed(source)
  })
)

export const CacheHandlers = HttpApiBuilder.group(PorticoApi, "cache", (handlers) =>
  Effect.gen(function* () {
    const cache = yield* Cache
    return handlers
      .handle("put", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const json = yield* putValue
          yield* Effect.mapError(cache.put(caller, { dmap: payload.dmap, key: payload.key, json, ttl: payload.ttl }), fromRefusal)
          return rawJson(changedText(payload.key, payload.dmap))
        })
      )
      .handle("get", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const json = yield* Effect.mapError(cache.get(caller, payload.dmap, payload.key), fromRefusal)
          return rawJson(valueText(payload.key, json, payload.dmap))
        })
      )
      .handle("delete", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          yield* Effect.mapError(cache.delete(caller, payload.dmap, payload.key), fromRefusal)
          return rawJson(changedText(payload.key, payload.dmap))
        })
      )
      .handle("mget", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const values = yield* Effect.mapError(cache.mget(caller, payload.dmap, payload.keys), fromRefusal)
          return rawJson(valuesText(payload.dmap, payload.keys, values))
        })
      )
      .handle("scan", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const keys = yield* Effect.mapError(cache.scan(caller, payload.dmap, payload.match), fromRefusal)
          return { keys: [...keys], count: keys.length, dmap: payload.dmap }
        })
      )
      .handle("health", () =>
        Effect.as(Effect.mapError(cache.ping, fromRefusal), { status: "ok" as const, service: "cache" as const })
      )
  })
)
