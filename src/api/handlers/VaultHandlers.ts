import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option } from "effect"
import { fromRefusal } from "../../domain/Errors.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { type PullDone, type PullInput, type PushDone, type PushInput, Vault } from "../../layers/vault/Vault.js"
import { PorticoApi } from "../Api.js"
import type { Pulled, Pushed } from "../groups/VaultWire.js"

/** A push that stood, as the route answers it (here and in the fast lane, lane/VaultLane.ts). */
export const pushedWire = (payload: PushInput, done: PushDone): typeof Pushed.Type => ({
  status: "ok",
  identity: payload.identity,
  version: payload.version,
  mode: done.mode,
  ack_count: done.acks,
  total: done.total,
  quorum: done.quorum,
  threshold: done.threshold
})

/** A pull's envelope, as the route answers it (here and in the fast lane). */
export const pulledWire = (payload: PullInput, done: PullDone): typeof Pulled.Type => ({
  identity: payload.identity,
  version: done.version,
  envelope: Buffer.from(done.envelope.buffer, done.envelope.byteOffset, done.envelope.byteLength).toString("base64"),
  collected: done.collected,
  threshold: done.threshold
})

/** The caller's namespace and address: the vault charges the address's network before the signature. */
const caller = Effect.zip(CurrentPrincipal, HttpServerRequest.HttpServerRequest, { concurrent: false })

export const VaultHandlers = HttpApiBuilder.group(PorticoApi, "vault", (handlers) =>
  Effect.gen(function* () {
    const vault = yield* Vault
    return handlers
      .handle("push", ({ payload }) =>
        Effect.flatMap(caller, ([principal, request]) =>
          Effect.mapBoth(vault.push(principal.namespace, Option.getOrUndefined(request.remoteAddress), payload), {
            onFailure: fromRefusal,
            onSuccess: (done) => pushedWire(payload, done)
          })
        )
      )
      .handle("pull", ({ payload }) =>
        Effect.flatMap(caller, ([principal, request]) =>
          Effect.mapBoth(vault.pull(principal.namespace, Option.getOrUndefined(request.remoteAddress), payload), {
            onFailure: fromRefusal,
            onSuccess: (done) => pulledWire(payload, done)
          })
        )
      )
      .handle("health", () => Effect.mapError(vault.health, fromRefusal))
      .handle("status", () => Effect.flatMap(CurrentPrincipal, (principal) => Effect.mapError(vault.status(principal.namespace), fromRefusal)))
  })
)
