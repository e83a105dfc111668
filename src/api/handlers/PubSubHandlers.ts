import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { fromRefusal } from "../../domain/Errors.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { PubSub } from "../../layers/pubsub/PubSub.js"
import { PorticoApi } from "../Api.js"
import { encodeCursor, PAGE_LIMIT } from "../Paging.js"
import { socketOnly } from "./Refusals.js"

export const PubSubHandlers = HttpApiBuilder.group(PorticoApi, "pubsub", (handlers) =>
  Effect.gen(function* () {
    const pubsub = yield* PubSub
    return handlers
      .handle("publish", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (caller) =>
          Effect.mapBoth(pubsub.publish(caller, payload), {
            onFailure: fromRefusal,
            onSuccess: (at) => ({ status: "ok" as const, topic: payload.topic, epoch: at.epoch, offset: at.offset })
          })
        )
      )
      .handle("publishBatch", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (caller) =>
          Effect.mapBoth(pubsub.publishBatch(caller, payload.messages), {
            onFailure: fromRefusal,
            onSuccess: (positions) => ({
              status: "ok" as const,
              count: positions.length,
              published: positions.map((at, i) => ({ topic: payload.messages[i]!.topic, epoch: at.epoch, offset: at.offset }))
            })
          })
        )
      )
      .handle("topics", ({ urlParams }) =>
        Effect.flatMap(CurrentPrincipal, (caller) =>
          Effect.mapBoth(pubsub.topics(caller, { limit: urlParams.limit ?? PAGE_LIMIT.default, after: urlParams.cursor?.map(String)[0] }), {
            onFailure: fromRefusal,
            onSuccess: (page) => ({ namespace: caller.namespace, topics: page.topics, next_cursor: page.next === undefined ? null : encodeCursor([page.next]) })
          })
        )
      )
      .handle("presence", ({ urlParams }) =>
        Effect.flatMap(CurrentPrincipal, (caller) =>
          Effect.mapBoth(pubsub.presence(caller, urlParams.topic), {
            onFailure: fromRefusal,
            onSuccess: (members) => ({
              topic: urlParams.topic,
              count: members.length,
              members: members.map((m) => ({
                member_id: m.memberId,
                subject: m.subject,
                joined_at: m.joinedAt,
                meta: m.meta === undefined ? null : (JSON.parse(m.meta) as Record<string, unknown>),
                connections: m.connections
              }))
            })
          })
        )
      )
      .handle("ws", () => socketOnly("/v1/pubsub/ws"))
  })
)
