import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { CurrentPrincipal, CurrentSession } from "../../domain/Principal.js"
import { redactToken } from "../../domain/PushRegistrations.js"
import type { DeviceRecord } from "../../layers/push/PushStore.js"
import { PushRegistrations } from "../../layers/push/Registrations.js"
import { PorticoApi } from "../Api.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { refusedOrDown } from "./Refusals.js"

/** A registration as answered: the token redacted, always. */
const view = (d: DeviceRecord) => ({
  device_id: d.deviceId,
  bound: d.bound,
  provider: d.provider,
  token: redactToken(d.token),
  platform: d.platform ?? null,
  app_version: d.appVersion ?? null,
  created_at: d.createdAt,
  updated_at: d.updatedAt
})

export const PushRegistrationHandlers = HttpApiBuilder.group(PorticoApi, "pushRegistrations", (handlers) =>
  Effect.gen(function* () {
    const registrations = yield* PushRegistrations
    return handlers
      .handle("registerDevice", ({ payload }) =>
        Effect.flatMap(CurrentSession, (s) => Effect.map(Effect.mapError(registrations.registerDevice(s, payload), refusedOrDown), view))
      )
      .handle("devices", ({ urlParams }) =>
        Effect.flatMap(CurrentSession, (s) =>
          Effect.map(Effect.mapError(registrations.devices(s, pageRequest(urlParams)), refusedOrDown), (page) => ({
            devices: page.items.map(view),
            next_cursor: nextCursorOf(page)
          }))
        )
      )
      .handle("removeDevice", ({ path }) =>
        Effect.flatMap(CurrentSession, (s) =>
          Effect.map(Effect.mapError(registrations.removeDevice(s, path.device_id), refusedOrDown), (removed) => ({
            device_id: path.device_id,
            removed
          }))
        )
      )
      .handle("registerTopic", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.mapError(registrations.registerTopic(p, payload), refusedOrDown), (t) => ({
            status: "ok" as const,
            topic_id: t.topicId,
            expires_at: t.expiresAt
          }))
        )
      )
      .handle("removeTopic", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(Effect.mapError(registrations.removeTopic(p, payload.topic_secret), refusedOrDown), (topicId) => ({
            status: "removed" as const,
            topic_id: topicId
          }))
        )
      )
  })
)
