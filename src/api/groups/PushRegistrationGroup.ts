/**
 * Push registrations (spec §2.6, §3.3, §4.6): a signed-in user's devices, and a namespace's
 * anonymous topics. Devices are the session's own (a wallet session, plain or device-bound; API
 * keys are refused with 403 SESSION_REQUIRED); topics need `push:write` (the runtime role and
 * profile hold it). The schemas bound each field's size and shape; the service then applies each
 * provider's token rule and names the field it refuses (docs/push.md, "Registration routes").
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { PushRegistrationRefusals, wiresOf } from "../../domain/Errors.js"
import { deviceProviders, topicProviders } from "../../domain/PushProviders.js"
import { Authentication, SessionAuthentication } from "../Gates.js"
import { NextCursor, TimeKeyedPage } from "../Paging.js"
import { grant, session } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"

const Text = (max: number, description: string) => Schema.String.pipe(Schema.maxLength(max)).annotations({ description })

const DeviceProvider = Schema.Literal(...deviceProviders).annotations({ identifier: "PushDeviceProvider" })
const TopicProvider = Schema.Literal(...topicProviders).annotations({ identifier: "PushTopicProvider" })
const Platform = Schema.Literal("ios", "android", "web")

const token = Text(
  512,
  "at most 512 bytes: ios_push 8-200 hex characters; relay_push a topic of [-_A-Za-z0-9] (at most 64) or an http(s) endpoint URL ending in one; legacy_push printable ASCII"
)

export const DeviceRegistrationBody = strict(
  Schema.Struct({
    device_id: Text(128, "the app's own label for the device, 1-128 printable characters without spaces; a device-bound session's registration is recorded under its verified device id instead"),
    provider: DeviceProvider,
    token,
    platform: Schema.optional(Schema.NullOr(Platform)),
    app_version: Schema.optional(Schema.NullOr(Text(64, "at most 64 printable characters")))
  })
).annotations({ identifier: "PushDeviceRegistration" })

export const PushDevice = Schema.Struct({
  device_id: Schema.String,
  bound: Schema.Boolean.annotations({ description: "the id is a device-bound session's verified device id: revoking that device ends the registration" }),
  provider: DeviceProvider,
  token: Schema.String.annotations({ description: "redacted: the token's last 6 characters behind …, or … alone for a short token" }),
  platform: Schema.NullOr(Platform),
  app_version: Schema.NullOr(Schema.String),
  created_at: UnixSeconds,
  updated_at: UnixSeconds
}).annotations({ identifier: "PushDevice" })

export const PushDeviceList = Schema.Struct({
  devices: Schema.Array(PushDevice).annotations({
    description: "one page of the caller's registrations, oldest first; a revoked device's are left out (and deleted), so a page may hold fewer than limit"
  }),
  next_cursor: NextCursor
}).annotations({ identifier: "PushDeviceList" })

export const PushDeviceRemoved = Schema.Struct({
  device_id: Schema.String,
  removed: Schema.Boolean.annotations({ description: "whether the caller had that registration; the answer is 200 either way" })
}).annotations({ identifier: "PushDeviceRemoved" })

const deviceParam = HttpApiSchema.param(
  "device_id",
  Schema.String.pipe(Schema.pattern(/^[\x21-\x7e]{1,128}$/, { message: () => "a device id is 1-128 printable characters without spaces" }))
)

const topicSecret = Schema.String.pipe(
  Schema.pattern(/^(?:[0-9a-fA-F]{2}){16,64}$/, { message: () => "topic_secret: hex, 32 to 128 characters (16 to 64 bytes)" })
).annotations({ description: "hex, 32-128 characters (16-64 bytes); the topic id is the lowercase hex SHA-256 of its bytes" })

export const TopicRegistrationBody = strict(
  Schema.Struct({ topic_secret: topicSecret, provider: TopicProvider, token })
).annotations({ identifier: "PushTopicRegistration" })

export const TopicRegistered = Schema.Struct({
  status: Schema.Literal("ok"),
  topic_id: Schema.String.annotations({ description: "64 lowercase hex characters" }),
  expires_at: UnixSeconds
}).annotations({ identifier: "PushTopicRegistered" })

export const TopicRemovalBody = strict(Schema.Struct({ topic_secret: topicSecret })).annotations({ identifier: "PushTopicRemoval" })

export const TopicRemoved = Schema.Struct({
  status: Schema.Literal("removed"),
  topic_id: Schema.String
}).annotations({ identifier: "PushTopicRemoved", description: "404 NOT_FOUND when no live topic has that secret" })

export class PushRegistrationGroup extends HttpApiGroup.make("pushRegistrations")
  .add(HttpApiEndpoint.post("registerTopic", "/v1/push/topics").setPayload(TopicRegistrationBody).addSuccess(TopicRegistered))
  .add(HttpApiEndpoint.del("removeTopic", "/v1/push/topics").setPayload(TopicRemovalBody).addSuccess(TopicRemoved))
  .middlewareEndpoints(Authentication)
  .annotateEndpoints(RoutePolicy, grant("push:write"))
  // the signed-in user's own devices
  .add(
    HttpApiEndpoint.post("registerDevice", "/v1/push/devices")
      .setPayload(DeviceRegistrationBody)
      .addSuccess(PushDevice)
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session())
  )
  .add(
    HttpApiEndpoint.get("devices", "/v1/push/devices")
      .setUrlParams(TimeKeyedPage)
      .addSuccess(PushDeviceList)
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session())
  )
  .add(
    HttpApiEndpoint.del("removeDevice")`/v1/push/devices/${deviceParam}`
      .addSuccess(PushDeviceRemoved)
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session())
  )
  .addError(wiresOf(PushRegistrationRefusals)) {}
