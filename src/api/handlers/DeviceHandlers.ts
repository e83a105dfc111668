import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Option } from "effect"
import { PolicySweepIncomplete } from "../../domain/Errors.js"
import { Devices, type DeviceView } from "../../layers/devices/Devices.js"
import { SessionPolicy } from "../../layers/sessions/SessionPolicy.js"
import { PorticoApi } from "../Api.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { toUnixSeconds } from "../Wire.js"
import { refusedOrDown } from "./Refusals.js"
import { CurrentSession } from "../../domain/Principal.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { writtenProof } from "./WrittenProof.js"

const view = (d: DeviceView) => ({
  id: d.id,
  label: d.label,
  status: d.status,
  created_at: toUnixSeconds(d.createdAt),
  revoked_at: d.revokedAt === undefined ? null : toUnixSeconds(d.revokedAt)
})

export const DeviceHandlers = HttpApiBuilder.group(PorticoApi, "devices", (handlers) =>
  Effect.gen(function* () {
    const devices = yield* Devices
    const policies = yield* SessionPolicy
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* CurrentSession
          const page = yield* Effect.mapError(devices.list(p.namespace, p.subject, pageRequest(urlParams)), refusedOrDown)
          return { devices: page.items.map(view), next_cursor: nextCursorOf(page) }
        })
      )
      .handle("revoke", ({ path, payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentSession
          yield* devices
            .revoke({
              namespace: p.namespace,
              account: p.subject,
              deviceId: path.id,
              callerDeviceId: p.deviceId,
              deviceProof: yield* writtenProof(payload.device_proof),
              actor: p.subject
            })
            .pipe(Effect.mapError(refusedOrDown))
          return { revoked: path.id }
        })
      )
      .handle("listFor", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const page = yield* Effect.mapError(devices.list(p.namespace, urlParams.subject, pageRequest(urlParams)), refusedOrDown)
          return { subject: urlParams.subject, devices: page.items.map(view), next_cursor: nextCursorOf(page) }
        })
      )
      .handle("revokeAny", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          yield* devices
            .revoke({
              namespace: p.namespace,
              account: undefined,
              deviceId: path.id,
              callerDeviceId: undefined,
              deviceProof: undefined,
              actor: p.subject
            })
            .pipe(Effect.mapError(refusedOrDown))
          return { revoked: path.id }
        })
      )
      .handle("getPolicy", () =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const policy = yield* Effect.mapError(policies.get(p.namespace), refusedOrDown)
          const value = Option.getOrElse(policy, () => ({ devicePolicy: "optional" as const, signIn: "members" as const }))
          return { namespace: p.namespace, device_policy: value.devicePolicy, sign_in: value.signIn }
        })
      )
      .handle("setPolicy", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          // The policy and the sweep of sign-in keys are one atomic write: on failure nothing
          // changed, and repeating the PUT is the remedy the spec names.
          const result = yield* policies
            .set(p.namespace, { devicePolicy: payload.device_policy, signIn: payload.sign_in }, p.subject)
            .pipe(
              Effect.mapError(
                () =>
                  new PolicySweepIncomplete({
                    error: "the policy change could not be written",
                    hint: "repeat the PUT",
                    retryAfterSeconds: 1
                  })
              )
            )
          return {
            namespace: p.namespace,
            device_policy: result.policy.devicePolicy,
            sign_in: result.policy.signIn,
            revoked_sign_in_keys: result.revokedSignInKeys
          }
        })
      )
  })
)
