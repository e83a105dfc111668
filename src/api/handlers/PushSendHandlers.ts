import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { messageOf, type SendEnvelope } from "../../domain/PushSend.js"
import { PushSender } from "../../layers/push/PushSender.js"
import { PorticoApi } from "../Api.js"
import { rawJson } from "./RawJson.js"
import { refusedOrDown } from "./Refusals.js"

const envelopeAnswer = (envelope: SendEnvelope) => rawJson(JSON.stringify(envelope))

export const PushSendHandlers = HttpApiBuilder.group(PorticoApi, "pushSend", (handlers) =>
  Effect.gen(function* () {
    const sender = yield* PushSender
    return handlers
      // the envelope is built to its schema (envelopeOf); one result per device, so it goes as text
      .handle("send", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.mapError(Effect.map(sender.sendToUser(p.namespace, payload.user_id, messageOf(payload)), envelopeAnswer), refusedOrDown)
        )
      )
      .handle("sendTopic", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) => Effect.mapError(sender.sendToTopic(p.namespace, payload.topic_id, messageOf(payload)), refusedOrDown))
      )
  })
)
