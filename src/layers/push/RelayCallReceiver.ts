/**
 * The receiving end of the platform relay's fan-out (`POST /v1/internal/push/ntfy/<topic>`, spec
 * §4.6, §4.10): a peer's call, once its coordination MAC holds over the path and what RelayCall.ts
 * signs (the message and the three relayed headers) and its nonce is spent, is published to this
 * node's platform relay. Only `Title`, `Priority` and `Tags` reach the relay: the caller hands the
 * headers over as RelayCall.ts picks them.
 *
 * Answers: the relay's message id; `PUSH_NOT_CONFIGURED` (503) when this node has no platform
 * relay; `PUSH_PROVIDER_REFUSED` (502) with the relay's reason (ntfy's `error`, or ours: Timeout,
 * ConnectionFailed) when it did not take the message, so the sending node can report it.
 */
import { Context, Effect, Layer } from "effect"
import { type Refused, refuse } from "../Refused.js"
import { PlatformRelay } from "./PlatformRelay.js"
import { messageOfRelay, type RelayedHeaders } from "./RelayCall.js"

export type RelayCallCode = "PUSH_NOT_CONFIGURED" | "PUSH_PROVIDER_REFUSED"

export interface RelayCall {
  readonly topic: string
  readonly body: string
  readonly relayed: RelayedHeaders
}

export interface RelayCallReceiverService {
  /** Publishes a verified call here; the relay's message id when it gave one. */
  readonly receive: (call: RelayCall) => Effect.Effect<{ readonly id: string | undefined }, Refused<RelayCallCode>>
}

export class RelayCallReceiver extends Context.Tag("portico/RelayCallReceiver")<RelayCallReceiver, RelayCallReceiverService>() {
  static readonly Live = Layer.effect(
    RelayCallReceiver,
    Effect.gen(function* () {
      const platform = yield* PlatformRelay
      return {
        receive: (call) =>
          Effect.gen(function* () {
            if (platform.url === undefined) {
              return yield* Effect.fail(
                refuse("PUSH_NOT_CONFIGURED", "this node has no platform relay", "set PORTICO_PUSH_RELAY_URL on this node, or leave it out of PORTICO_PEERS")
              )
            }
            const outcome = yield* platform.publishTopic(call.topic, messageOfRelay(call.body, call.relayed))
            if (outcome.outcome === "ok") return { id: outcome.providerId }
            // the reason alone as the error: the sending node reports it as this node's reason
            return yield* Effect.fail(
              refuse(
                "PUSH_PROVIDER_REFUSED",
                outcome.reason ?? "HTTP" + outcome.status,
                outcome.status === 0 ? "this node's platform relay did not answer" : `this node's platform relay answered ${outcome.status}`
              )
            )
          })
      }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => RelayCallReceiver.Live.pipe(Layer.provide(PlatformRelay.Test)))
}
