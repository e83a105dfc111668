import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option } from "effect"
import type { Refused } from "../../layers/Refused.js"
import { AcmeChallenges } from "../../layers/edge/AcmeChallenges.js"
import { EdgeAccess } from "../../layers/edge/EdgeAccess.js"
import { TlsCheck } from "../../layers/edge/TlsCheck.js"
import { TlsStore, type TlsStoreService } from "../../layers/edge/TlsStore.js"
import { PorticoApi } from "../Api.js"
import type { TlsStoreAnswer, TlsStoreCall } from "../groups/EdgeGroup.js"
import type { EdgeCode } from "../../domain/Errors.js"
import type { StoreError } from "../../layers/registry/RegistryStore.js"
import { refusedOrDown } from "./Refusals.js"

const fromEdge = (access: EdgeAccess["Type"]) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    access.admit(request.headers["authorization"], Option.getOrUndefined(request.remoteAddress))
  )

const storeCall = (
  store: TlsStoreService,
  call: typeof TlsStoreCall.Type
): Effect.Effect<typeof TlsStoreAnswer.Type, Refused<EdgeCode> | StoreError> => {
  switch (call.op) {
    case "store":
      return Effect.as(store.store(call.key, Buffer.from(call.value, "base64")), { op: call.op })
    case "load":
      return Effect.map(store.load(call.key), (value) => ({ op: call.op, value: Buffer.from(value).toString("base64") }))
    case "delete":
      return Effect.as(store.delete(call.key), { op: call.op })
    case "exists":
      return Effect.map(store.exists(call.key), (exists) => ({ op: call.op, exists }))
    case "list":
      return Effect.map(store.list(call.key, call.recursive === true), (keys) => ({ op: call.op, keys }))
    case "stat":
      return Effect.map(store.stat(call.key), (info) => ({ op: call.op, key: info.key, modified_ms: info.modifiedMs, size: info.size, terminal: info.terminal }))
    case "lock":
      return Effect.as(store.lock(call.key, call.owner), { op: call.op })
    case "unlock":
      return Effect.as(store.unlock(call.key, call.owner), { op: call.op })
  }
}

/** The TLS edge's calls on this node (docs/edge.md). */
export const EdgeHandlers = HttpApiBuilder.group(PorticoApi, "edge", (handlers) =>
  Effect.gen(function* () {
    const access = yield* EdgeAccess
    const store = yield* TlsStore
    const challenges = yield* AcmeChallenges
    const check = yield* TlsCheck
    return handlers
      .handle("tlsCheck", ({ urlParams }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => check.ask(urlParams.domain, Option.getOrUndefined(request.remoteAddress))).pipe(
          Effect.map((allowed) => ({ ...allowed, allowed: true as const })),
          Effect.mapError(refusedOrDown)
        )
      )
      .handle("tlsStore", ({ payload }) => Effect.zipRight(fromEdge(access), storeCall(store, payload)).pipe(Effect.mapError(refusedOrDown)))
      .handle("acmePresent", ({ payload }) =>
        Effect.zipRight(fromEdge(access), Effect.as(challenges.present(payload.fqdn, payload.value), { present: true as const })).pipe(Effect.mapError(refusedOrDown))
      )
      .handle("acmeCleanup", ({ payload }) =>
        Effect.zipRight(fromEdge(access), Effect.as(challenges.cleanup(payload.fqdn, payload.value), { cleaned: true as const })).pipe(Effect.mapError(refusedOrDown))
      )
  })
)
