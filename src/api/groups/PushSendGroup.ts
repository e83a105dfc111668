/**
 * Sending push (spec §2.6, §4.6): to every registered device of a user in the caller's namespace,
 * or to an anonymous topic, answered with the per-device envelope. `push:write` (the runtime role
 * and profile hold it, so an app's runtime key sends). Bodies are src/domain/PushSend.ts's
 * schemas: strict, at most 16 KiB as JSON. docs/push.md, "Sending", records the decisions.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { PushSendRefusals, wiresOf } from "../../domain/Errors.js"
import { SendEnvelope, TopicSendBody, UserSendBody } from "../../domain/PushSend.js"
import { Authentication } from "../Gates.js"
import { grant } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"

export class PushSendGroup extends HttpApiGroup.make("pushSend")
  .add(
    HttpApiEndpoint.post("send", "/v1/push/send")
      .setPayload(UserSendBody)
      .addSuccess(SendEnvelope.annotations({ description: "one result per device; a provider's timeout or 5xx is that device's failure, never this route's" }))
  )
  .add(
    HttpApiEndpoint.post("sendTopic", "/v1/push/topics/send")
      .setPayload(TopicSendBody)
      .addSuccess(
        SendEnvelope.annotations({
          description: "400 malformed topic id or a payload over APNs' 4096 bytes, 404 unknown or expired topic, 502 the provider refused, 503 push not configured"
        })
      )
  )
  .addError(wiresOf(PushSendRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, grant("push:write")) {}
