import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import { fromRefusal, internal } from "../../domain/Errors.js"
import { RelayCallReceiver } from "../../layers/push/RelayCallReceiver.js"
import { PorticoApi } from "../Api.js"

export const PushRelayHandlers = HttpApiBuilder.group(PorticoApi, "pushRelay", (handlers) =>
  Effect.gen(function* () {
    const receiver = yield* RelayCallReceiver
    return handlers.handle("relay", ({ path, headers }) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        // read whole within the route's cap (PeerGate has read it already)
        const body = yield* Effect.mapError(request.text, () => internal())
        return yield* Effect.mapError(receiver.receive({ topic: path.topic, body, relayed: headers }), fromRefusal)
      })
    )
  })
)
