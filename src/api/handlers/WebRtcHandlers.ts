import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import { fromRefusal } from "../../domain/Errors.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import type { Refused } from "../../layers/Refused.js"
import { type WebRtcStatus, WebRtc } from "../../layers/webrtc/WebRtc.js"
import type { WebRtcCode } from "../../domain/Errors.js"
import { RoomEvents } from "../../layers/webrtc/RoomEvents.js"
import { Rooms } from "../../layers/webrtc/Rooms.js"
import { PorticoApi } from "../Api.js"
import { socketOnly } from "./Refusals.js"
import { turnCredentialsWire } from "../groups/WebRtcGroup.js"

const statusWire = (namespace: string, s: WebRtcStatus) => ({
  namespace,
  enabled: s.enabled,
  stealth: s.stealth,
  require_admission: s.requireAdmission,
  turn_uris: [...s.turnUris]
})

/** `change` for the caller's namespace, as its caller, answered with the namespace's status. */
const statusOf = (change: (namespace: string, actor: string) => Effect.Effect<WebRtcStatus, Refused<WebRtcCode>>) =>
  Effect.flatMap(CurrentPrincipal, (p) => Effect.mapBoth(change(p.namespace, p.subject), { onFailure: fromRefusal, onSuccess: (s) => statusWire(p.namespace, s) }))

export const WebRtcNamespaceHandlers = HttpApiBuilder.group(PorticoApi, "webrtcNamespace", (handlers) =>
  Effect.map(Effect.zip(WebRtc, Rooms), ([webrtc, rooms]) =>
    handlers
      .handle("enable", () => statusOf(webrtc.enable))
      // turning media off ends the namespace's calls on every node that answers
      .handle("disable", () =>
        statusOf((ns, actor) => Effect.tap(webrtc.disable(ns, actor), () => rooms.control({ ns, room: "", user: "", peer: "", action: "end" })))
      )
      .handle("stealthEnable", () => statusOf((ns, actor) => webrtc.setStealth(ns, true, actor)))
      .handle("stealthDisable", () => statusOf((ns, actor) => webrtc.setStealth(ns, false, actor)))
      .handle("status", () => statusOf((ns) => webrtc.status(ns)))
  )
)

export const WebRtcHandlers = HttpApiBuilder.group(PorticoApi, "webrtc", (handlers) =>
  Effect.map(Effect.zip(WebRtc, Rooms), ([webrtc, rooms]) =>
    handlers
      .handle("config", () =>
        Effect.flatMap(CurrentPrincipal, (p) => Effect.mapBoth(webrtc.status(p.namespace), { onFailure: fromRefusal, onSuccess: (s) => ({ require_admission: s.requireAdmission }) }))
      )
      .handle("setConfig", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.mapBoth(webrtc.setRequireAdmission(p.namespace, payload.require_admission, p.subject), {
            onFailure: fromRefusal,
            onSuccess: (s) => ({ require_admission: s.requireAdmission })
          })
        )
      )
      .handle("turnCredentials", () =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.mapBoth(webrtc.turnCredentials(p.namespace), { onFailure: fromRefusal, onSuccess: turnCredentialsWire })
        )
      )
      .handle("rooms", () =>
        Effect.flatMap(CurrentPrincipal, (p) =>
          Effect.map(rooms.list(p.namespace), (found) => ({ namespace: p.namespace, rooms: [...found.rooms], unreachable: [...found.unreachable] }))
        )
      )
      .handle("signal", () => socketOnly("/v1/webrtc/signal"))
  )
)

export const WebRtcEventsHandlers = HttpApiBuilder.group(PorticoApi, "webrtcEvents", (handlers) =>
  Effect.map(RoomEvents, (events) =>
    handlers.handle("event", ({ payload }) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.flatMap(Effect.orDie(request.text), (raw) =>
          Effect.mapBoth(events.report(payload, raw, request.headers["x-portico-webrtc-mac"]), { onFailure: fromRefusal, onSuccess: () => ({ published: true }) })
        )
      )
    )
  )
)
