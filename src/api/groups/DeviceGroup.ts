/** Devices of an account, operator device management, and the namespace session policy (spec §4.5). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { SessionRefusals, Wire, wiresOf } from "../../domain/Errors.js"
import { Wallet } from "../../domain/Names.js"
import { DevicePolicy, SignInPolicy } from "../../domain/SessionPolicy.js"
import { NextCursor, pageQueryFields, TimeAndText, TimeKeyedPage } from "../Paging.js"
import { Authentication, SessionAuthentication } from "../Gates.js"
import { authenticated, membersWrite, namespaceWrite, session } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"

export const DeviceView = Schema.Struct({
  id: Schema.String,
  label: Schema.String,
  status: Schema.Literal("active", "pending", "revoked"),
  created_at: UnixSeconds,
  revoked_at: Schema.NullOr(UnixSeconds)
}).annotations({ identifier: "Device" })

const DevicePage = Schema.Array(DeviceView).annotations({ description: "one page, oldest first, revoked devices included" })
export const DeviceList = Schema.Struct({ devices: DevicePage, next_cursor: NextCursor }).annotations({ identifier: "DeviceList" })
export const SubjectDevices = Schema.Struct({ subject: Schema.String, devices: DevicePage, next_cursor: NextCursor }).annotations({
  identifier: "SubjectDeviceList"
})
export const Revoked = Schema.Struct({ revoked: Schema.String })
export const RevokeRequest = strict(
  Schema.Struct({
    device_proof: Schema.optional(
      Schema.Unknown.annotations({ description: "{iat, id, sig}: action revoke, binding the device id" })
    )
  })
)

export const PolicyView = Schema.Struct({
  namespace: Schema.String,
  device_policy: DevicePolicy,
  sign_in: SignInPolicy
}).annotations({ identifier: "SessionPolicy" })

export const PolicyAnswer = Schema.Struct({
  namespace: Schema.String,
  device_policy: DevicePolicy,
  sign_in: SignInPolicy,
  revoked_sign_in_keys: Schema.Int
}).annotations({ identifier: "SessionPolicyChange" })

export const SetPolicy = strict(
  Schema.Struct({ device_policy: Schema.optional(DevicePolicy), sign_in: Schema.optional(SignInPolicy) })
).annotations({ identifier: "SetSessionPolicy", description: "an omitted member keeps its value" })

const deviceParam = HttpApiSchema.param(
  "id",
  Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{43}$/, { message: () => "a device id is 43 base64url characters" }))
)

export class DeviceGroup extends HttpApiGroup.make("devices")
  // anyone's devices (owners and admins), and the namespace's policy
  .add(
    HttpApiEndpoint.get("listFor", "/v1/namespace/devices")
      .setUrlParams(strict(Schema.Struct({ subject: Wallet, ...pageQueryFields(TimeAndText) })))
      .addSuccess(SubjectDevices)
      .annotate(RoutePolicy, membersWrite)
  )
  .add(HttpApiEndpoint.del("revokeAny")`/v1/namespace/devices/${deviceParam}`.addSuccess(Revoked).annotate(RoutePolicy, membersWrite))
  .add(HttpApiEndpoint.get("getPolicy", "/v1/namespace/session-policy").addSuccess(PolicyView).annotate(RoutePolicy, authenticated))
  .add(
    HttpApiEndpoint.put("setPolicy", "/v1/namespace/session-policy")
      .setPayload(SetPolicy)
      .addSuccess(PolicyAnswer)
      .annotate(RoutePolicy, namespaceWrite)
  )
  .middlewareEndpoints(Authentication)
  // the signed-in session's own devices
  .add(HttpApiEndpoint.get("list", "/v1/auth/devices").setUrlParams(TimeKeyedPage).addSuccess(DeviceList).middleware(SessionAuthentication))
  .add(
    HttpApiEndpoint.del("revoke")`/v1/auth/devices/${deviceParam}`.setPayload(RevokeRequest).addSuccess(Revoked).middleware(SessionAuthentication)
  )
  .annotate(RoutePolicy, session())
  .addError(wiresOf(SessionRefusals))
  .addError(Wire.PolicySweepIncomplete) {}
