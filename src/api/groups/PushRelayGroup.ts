/**
 * The platform relay's node-to-node route (spec §4.6, §4.10): `POST /v1/internal/push/ntfy/{topic}`
 * in ntfy's publish form, the message as a text body of at most 4096 bytes (ntfy's default
 * message limit; 413 past it, at the listener) and only `Title`, `Priority` and `Tags` relayed.
 * Behind PeerGate: a private overlay source and a coordination MAC over the path, the message and
 * those three headers (src/layers/push/RelayCall.ts); any other header is neither signed nor
 * relayed.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Wire } from "../../domain/Errors.js"
import { PeerGate } from "../Gates.js"
import { internalOnly } from "../OpenApiFacts.js"
import { internal } from "../Policy.js"
import { BodyCap, RoutePolicy } from "../RouteFacts.js"

/**
 * A relay topic (spec §4.10): `relayTopicPattern` of src/domain/PushRegistrations.ts, written out
 * here because that module hashes with node:crypto and the API's definition stays client-safe.
 */
const RelayTopic = Schema.String.pipe(
  Schema.pattern(/^[-_A-Za-z0-9]{1,64}$/, { message: () => "a relay topic is one segment of [-_A-Za-z0-9], at most 64 characters" })
).annotations({ identifier: "RelayTopic" })

/** Header values as the sending node's ntfy client writes them: printable ASCII, non-ASCII as RFC 2047 encoded words. */
const HeaderText = (description: string) =>
  Schema.String.pipe(Schema.pattern(/^[\x20-\x7e]*$/, { message: () => "printable ASCII (RFC 2047 encoded words for anything else)" })).annotations({
    description
  })

export const RelayedHeaders = Schema.Struct({
  title: Schema.optional(HeaderText("ntfy's Title")),
  priority: Schema.optional(Schema.Literal("high", "default").annotations({ description: "ntfy's Priority, as the gateway sends it" })),
  tags: Schema.optional(HeaderText("ntfy's Tags, a comma list"))
})

export const RelayAccepted = Schema.Struct({
  id: Schema.optional(Schema.String.annotations({ description: "the relay's message id (absent when its answer carried none)" }))
}).annotations({ identifier: "RelayAccepted" })

export class PushRelayGroup extends HttpApiGroup.make("pushRelay")
  .add(
    HttpApiEndpoint.post("relay")`/v1/internal/push/ntfy/${HttpApiSchema.param("topic", RelayTopic)}`
      // the body is text, not JSON: the handler reads it (the MAC covers it), so HttpApi has no payload to derive it from
      .setHeaders(RelayedHeaders)
      .addSuccess(RelayAccepted)
      .annotate(BodyCap, "relayMessage")
      .annotate(OpenApi.Override, {
        ...internalOnly,
        requestBody: {
          required: false,
          description: "the message, at most 4096 bytes of UTF-8 (ntfy's publish body)",
          content: { "text/plain": { schema: { type: "string", maxLength: 4096 } } }
        }
      })
  )
  .addError(Wire.PushNotConfigured)
  .addError(Wire.PushProviderRefused)
  // node to node (spec §4.10): no credential; the source and the coordination MAC
  .middleware(PeerGate)
  .annotate(RoutePolicy, internal) {}
