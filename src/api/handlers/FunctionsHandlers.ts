import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Option } from "effect"
import { BadRequest, fromRefusal } from "../../domain/Errors.js"
import { parseTarget } from "../../domain/FunctionRules.js"
import { CurrentPrincipal, OptionalPrincipal, type Principal } from "../../domain/Principal.js"
import { Functions } from "../../layers/functions/Functions.js"
import { type Invoked, Invocations } from "../../layers/functions/Invocations.js"
import { refuse } from "../../layers/Refused.js"
import { PorticoApi } from "../Api.js"
import { socketOnly } from "./Refusals.js"
import { bodyOf } from "../NodeAdapter.js"
import { encodeCursor, PAGE_LIMIT } from "../Paging.js"

const readBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.promise(async () => {
    const chunks: Array<Uint8Array> = []
    for await (const chunk of bodyOf(request)) chunks.push(chunk)
    return new Uint8Array(Buffer.concat(chunks))
  })

/** The function's output as it wrote it when it is JSON, else the envelope; the two headers always. */
const answer = (invoked: Invoked) => {
  const headers = { "x-request-id": invoked.requestId, "x-duration-ms": invoked.ms.toFixed(1) }
  const text = new TextDecoder().decode(invoked.output)
  let isJson = text.trim() !== ""
  if (isJson) {
    try {
      JSON.parse(text)
    } catch {
      isJson = false
    }
  }
  return isJson
    ? HttpServerResponse.uint8Array(invoked.output, { headers, contentType: "application/json" })
    : HttpServerResponse.unsafeJson({ request_id: invoked.requestId, output: text, status: "ok", duration_ms: Math.round(invoked.ms) }, { headers })
}

export const FunctionsHandlers = HttpApiBuilder.group(PorticoApi, "functions", (handlers) =>
  Effect.gen(function* () {
    const functions = yield* Functions
    const as = <A, E>(run: (caller: Principal) => Effect.Effect<A, E>) => Effect.flatMap(CurrentPrincipal, run)
    return handlers
      .handle("deploy", () =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const request = yield* HttpServerRequest.HttpServerRequest
          const contentType = request.headers["content-type"] ?? ""
          if (!/^multipart\/form-data\s*;/i.test(contentType)) {
            return yield* Effect.fail(new BadRequest({ error: "a deploy must be multipart/form-data", hint: "curl -F name=NAME -F wasm=@function.wasm" }))
          }
          return yield* Effect.mapError(functions.deploy(caller, contentType, bodyOf(request)), fromRefusal)
        })
      )
      .handle("list", ({ urlParams }) =>
        as((caller) => {
          const limit = urlParams.limit ?? PAGE_LIMIT.default
          return Effect.mapBoth(functions.list(caller, urlParams.cursor?.map(String)[0], limit + 1), {
            onFailure: fromRefusal,
            onSuccess: (rows) => ({
              functions: rows.slice(0, limit),
              next_cursor: rows.length > limit ? encodeCursor([rows[limit - 1]!.name]) : null
            })
          })
        })
      )
      .handle("get", ({ path }) => as((caller) => Effect.mapError(functions.get(caller, path.name), fromRefusal)))
      .handle("change", ({ path, payload }) => as((caller) => Effect.mapError(functions.change(caller, path.name, payload), fromRefusal)))
      .handle("remove", ({ path }) =>
        as((caller) => Effect.mapBoth(functions.remove(caller, path.name), { onFailure: fromRefusal, onSuccess: () => ({ status: "deleted" as const, name: path.name }) }))
      )
      .handle("versions", ({ path }) =>
        as((caller) =>
          Effect.mapError(
            Effect.gen(function* () {
              const live = yield* functions.get(caller, path.name)
              const versions = yield* functions.versions(caller, path.name)
              return { name: path.name, live: live.version, versions: versions.map((v) => ({ version: v.version, cid: v.cid, size: v.size, created_at: v.created_at })) }
            }),
            fromRefusal
          )
        )
      )
      .handle("rollback", ({ path, payload }) => as((caller) => Effect.mapError(functions.rollback(caller, path.name, payload.version), fromRefusal)))
      .handle("logs", ({ path, urlParams }) =>
        as((caller) => {
          const limit = urlParams.limit ?? 100
          // one line past the page tells whether another page follows: a full last page ends with
          // next_before null, as every list's last page does (docs/api.md, "Lists and paging")
          return Effect.mapBoth(functions.logs(caller, path.name, limit + 1, urlParams.before), {
            onFailure: fromRefusal,
            onSuccess: (read) => {
              const logs = read.slice(0, limit)
              return { name: path.name, logs, next_before: read.length > limit ? logs[logs.length - 1]!.seq : null }
            }
          })
        })
      )
      .handle("secrets", ({ path }) =>
        as((caller) => Effect.mapBoth(functions.secretNames(caller, path.name), { onFailure: fromRefusal, onSuccess: (secrets) => ({ name: path.name, secrets }) }))
      )
      .handle("putSecret", ({ path, payload }) =>
        as((caller) =>
          Effect.mapBoth(functions.putSecret(caller, path.name, path.key, payload.value), { onFailure: fromRefusal, onSuccess: () => ({ status: "ok" as const, key: path.key }) })
        )
      )
      .handle("deleteSecret", ({ path }) =>
        as((caller) =>
          Effect.mapBoth(functions.deleteSecret(caller, path.name, path.key), { onFailure: fromRefusal, onSuccess: () => ({ status: "ok" as const, key: path.key }) })
        )
      )
  })
)

export const InvokeHandlers = HttpApiBuilder.group(PorticoApi, "invoke", (handlers) =>
  Effect.gen(function* () {
    const invocations = yield* Invocations
    const run = (namespace: string, target: string, caller: Principal | undefined) =>
      Effect.gen(function* () {
        const parsed = parseTarget(target)
        if (parsed === undefined) return yield* Effect.fail(fromRefusal(refuse("NOT_FOUND", `no function named ${target.slice(0, 80)}`)))
        const request = yield* HttpServerRequest.HttpServerRequest
        const input = yield* readBody(request)
        const invoked = yield* Effect.mapError(invocations.invoke({ namespace, name: parsed.name, version: parsed.version, caller, input }), fromRefusal)
        return answer(invoked)
      })
    return handlers
      .handle("invoke", ({ path }) => Effect.flatMap(CurrentPrincipal, (caller) => run(caller.namespace, path.name, caller)))
      .handle("invokeIn", ({ path }) =>
        Effect.flatMap(OptionalPrincipal, (caller) => run(path.namespace, path.target, Option.getOrUndefined(caller)))
      )
      .handle("ws", ({ path }) => socketOnly(`/v1/functions/${path.name}/ws`))
  })
)
