import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { messageOf } from "../../domain/PushSend.js"
import { PushSender } from "../../layers/push/PushSender.js"
import { PorticoApi } from "../Api.js"
import { refusedOrDown } from "./Refusals.js"

export const PushSendHandlers = HttpApiBuilder.group(PorticoApi, "pushSend", (handlers) =>
  Effect.gen(function* () {
    const sender = yield* PushSender
    return handlers
      .handle("send", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) => Effect.mapError(sender.sendToUser(p.namespace, payload.user_id, messageOf(payload)), refusedOrDown))
      )
      .handle("sendTopic", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) => Effect.mapError(sender.sendToTopic(p.namespace, payload.topic_id, messageOf(payload)), refusedOrDown))
      )
  })
)
