/**
 * Publish/subscribe (spec §4.9, §6.3; docs/pubsub.md): grant `pubsub`, narrowable to topics
 * (`pubsub:topic=<glob>`). Keys of the runtime profile, signed-in sessions and deployed apps'
 * workload tokens hold it.
 *
 * `GET /v1/pubsub/ws` is a WebSocket route (WebSocketRoute): the `upgrade` listener answers its
 * handshake through this endpoint's gate and query schema (src/api/Upgrades.ts), then
 * src/layers/pubsub/PubSubSockets.ts subscribes and takes the socket; the same path without an
 * upgrade is 400 BAD_REQUEST.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { PubSubRefusals, Wire, wiresOf } from "../../domain/Errors.js"
import { TOPIC_MAX, TOPIC_RULE } from "../../domain/PubSubRules.js"
import { Authentication } from "../Gates.js"
import { NextCursor, pageQueryFields, TextKey } from "../Paging.js"
import { grant } from "../Policy.js"
import { BodyCap, RoutePolicy, WebSocketRoute } from "../RouteFacts.js"
import { strict } from "../Wire.js"

const Topic = Schema.String.pipe(Schema.maxLength(TOPIC_MAX * 4)).annotations({
  description: `the topic: ${TOPIC_RULE}; topics under _portico/ are the platform's (subscribe only)`,
  jsonSchema: { type: "string", pattern: "^[A-Za-z0-9._~:/@+=-]{1,256}$" }
})
const Data = Schema.String.annotations({
  description: "the message's bytes in canonical base64 (standard alphabet, = padding); at most 256 KiB decoded by default (413 past it)"
})

export const PublishRequest = strict(Schema.Struct({ topic: Topic, data_base64: Data })).annotations({ identifier: "PubSubPublish" })

const Position = {
  topic: Schema.String,
  epoch: Schema.String.annotations({ description: "the topic's sequence: offsets count from 1 within one epoch" }),
  offset: Schema.Int.annotations({ description: "the message's place on the topic" })
}
export const Published = Schema.Struct({ status: Schema.Literal("ok"), ...Position }).annotations({
  identifier: "PubSubPublished",
  description: "the engine holds the message: every subscriber of the topic, on every gateway, receives it in offset order"
})

export const PublishBatchRequest = strict(
  Schema.Struct({
    messages: Schema.Array(PublishRequest).pipe(Schema.minItems(1)).annotations({
      description: "at most 100 messages by default; every one is checked before any is published, then they are published in order"
    })
  })
).annotations({ identifier: "PubSubPublishBatch" })
export const BatchPublished = Schema.Struct({
  status: Schema.Literal("ok"),
  count: Schema.Int,
  published: Schema.Array(Schema.Struct(Position))
}).annotations({ identifier: "PubSubBatchPublished" })

export const TopicsQuery = strict(Schema.Struct(pageQueryFields(TextKey)))
export const TopicsAnswer = Schema.Struct({
  namespace: Schema.String,
  topics: Schema.Array(Schema.String).annotations({ description: "topics with a subscriber on any gateway that your grant reaches, sorted" }),
  next_cursor: NextCursor
}).annotations({ identifier: "PubSubTopics" })

export const PresenceQuery = strict(Schema.Struct({ topic: Topic }))
export const Member = Schema.Struct({
  member_id: Schema.String.annotations({ description: "what the member called itself (member_id when it joined), else its subject" }),
  subject: Schema.String.annotations({ description: "who its credential says it is: a wallet, key:<id> or deployment:<id>" }),
  joined_at: Schema.Int.annotations({ description: "Unix milliseconds of its first connection's join" }),
  meta: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({ description: "member_meta of its first connection" }),
  connections: Schema.Int.annotations({ description: "its open sockets on the topic, over every gateway" })
}).annotations({ identifier: "PubSubMember" })
export const PresenceAnswer = Schema.Struct({ topic: Schema.String, members: Schema.Array(Member), count: Schema.Int }).annotations({
  identifier: "PubSubPresence"
})

const Repeatable = (description: string) =>
  Schema.Union(Schema.String, Schema.Array(Schema.String)).annotations({ description })

export const SocketQuery = strict(
  Schema.Struct({
    topic: Schema.optional(Repeatable(`required: a topic to subscribe to (${TOPIC_RULE}); repeat for more, at most 64 by default`)),
    since: Schema.optional(
      Repeatable("resume a topic: <topic>,<epoch>,<offset> of the last frame seen; what history holds after it comes first, else a gap frame")
    ),
    presence: Schema.optional(Schema.Literal("true", "false").annotations({ description: "true: enter the topics' presence while open" })),
    member_id: Schema.optional(Schema.String.annotations({ description: "with presence: the name to be listed by (1-128 characters); default the credential's subject" })),
    member_meta: Schema.optional(Schema.String.annotations({ description: "with presence: a JSON object of at most 1024 bytes, listed and sent with the join event" })),
    jwt: Schema.optional(Schema.String.annotations({ description: "the access token, for clients that cannot set Authorization on a handshake (browsers); never logged" }))
  })
)

const Upgraded = Schema.Void.annotations({
  description: "101 Switching Protocols: text frames, JSON (docs/pubsub.md \"Frames\"): subscribed, message, presence, event, gap, ack, error"
})

export class PubSubGroup extends HttpApiGroup.make("pubsub")
  .add(
    HttpApiEndpoint.post("publish", "/v1/pubsub/publish").setPayload(PublishRequest).addSuccess(Published).annotate(BodyCap, "pubsubPublish")
  )
  .add(
    HttpApiEndpoint.post("publishBatch", "/v1/pubsub/publish-batch")
      .setPayload(PublishBatchRequest)
      .addSuccess(BatchPublished)
      .annotate(BodyCap, "pubsubBatch")
  )
  .add(HttpApiEndpoint.get("topics", "/v1/pubsub/topics").setUrlParams(TopicsQuery).addSuccess(TopicsAnswer))
  .add(HttpApiEndpoint.get("presence", "/v1/pubsub/presence").setUrlParams(PresenceQuery).addSuccess(PresenceAnswer))
  .add(
    HttpApiEndpoint.get("ws", "/v1/pubsub/ws")
      .setUrlParams(SocketQuery)
      .addSuccess(Upgraded, { status: 101 })
      .addError(Wire.BadRequest)
      .annotate(WebSocketRoute, true)
  )
  .addError(wiresOf(PubSubRefusals))
  .middleware(Authentication)
  // the grant may be narrowed to topics (pubsub:topic=<glob>): the pub/sub service checks the topic
  .annotate(RoutePolicy, grant("pubsub")) {}
