/**
 * Real-time media's control plane (spec §4.9; docs/webrtc.md): the namespace's settings (owners
 * and admins change them; anyone of the namespace reads them) and TURN credentials for a signed-in
 * user or a deployed app (grant `webrtc`; an API key alone is refused, as on every data-plane
 * route a browser or device uses directly).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Wire, WebRtcEventRefusals, WebRtcRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication, OpenGate } from "../Gates.js"
import { internalOnly } from "../OpenApiFacts.js"
import { authenticated, grant, namespaceWrite, open, sessionOrWorkload } from "../Policy.js"
import { BodyCap, FastLaneRoute, RoutePolicy, WebSocketRoute } from "../RouteFacts.js"
import { NoMembers, strict } from "../Wire.js"
import { EventAccepted, ParticipantEvent, RoomsAnswer, SignalQuery } from "./WebRtcWire.js"


export const WebRtcStatus = Schema.Struct({
  namespace: Schema.String,
  enabled: Schema.Boolean,
  stealth: Schema.Boolean.annotations({ description: "clients are given the stealth TURN URI (a turns: URI on port 443) where the operator set one" }),
  require_admission: Schema.Boolean,
  turn_uris: Schema.Array(Schema.String).annotations({ description: "the TURN URIs this namespace's clients are given; the relay secret is never shown" })
}).annotations({ identifier: "WebRtcStatus" })

export const WebRtcConfig = Schema.Struct({ require_admission: Schema.Boolean }).annotations({ identifier: "WebRtcConfig" })

export const TurnCredentials = Schema.Struct({
  username: Schema.String.annotations({ description: "<expiry>:<namespace>, the TURN REST scheme coturn checks with use-auth-secret" }),
  password: Schema.String.annotations({ description: "base64 HMAC-SHA1 of the username under the TURN servers' shared secret" }),
  ttl: Schema.Int.annotations({ description: "seconds the credential lasts" }),
  expires_at: Schema.Int.annotations({ description: "Unix seconds" }),
  uris: Schema.Array(Schema.String)
}).annotations({ identifier: "TurnCredentials" })

/** TURN credentials as the route answers them, from the handler and the fast lane alike. */
export const turnCredentialsWire = (c: {
  readonly username: string
  readonly password: string
  readonly ttl: number
  readonly expiresAt: number
  readonly uris: ReadonlyArray<string>
}): typeof TurnCredentials.Type => ({ username: c.username, password: c.password, ttl: c.ttl, expires_at: c.expiresAt, uris: [...c.uris] })

const Signalling = Schema.Void.annotations({
  description:
    "101 Switching Protocols: text frames, JSON (docs/webrtc.md \"Signalling\"): welcome, offer, candidate, participant-joined, participant-left, muted, kicked, error from the server; answer, candidate, leave from the client"
})

export class WebRtcNamespaceGroup extends HttpApiGroup.make("webrtcNamespace")
  .add(HttpApiEndpoint.post("enable", "/v1/namespace/webrtc/enable").setPayload(NoMembers).addSuccess(WebRtcStatus))
  .add(HttpApiEndpoint.post("disable", "/v1/namespace/webrtc/disable").setPayload(NoMembers).addSuccess(WebRtcStatus))
  .add(HttpApiEndpoint.post("stealthEnable", "/v1/namespace/webrtc/stealth/enable").setPayload(NoMembers).addSuccess(WebRtcStatus))
  .add(HttpApiEndpoint.post("stealthDisable", "/v1/namespace/webrtc/stealth/disable").setPayload(NoMembers).addSuccess(WebRtcStatus))
  .add(HttpApiEndpoint.get("status", "/v1/namespace/webrtc/status").addSuccess(WebRtcStatus).annotate(RoutePolicy, authenticated))
  .addError(wiresOf(WebRtcRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, namespaceWrite) {}

export class WebRtcGroup extends HttpApiGroup.make("webrtc")
  .add(HttpApiEndpoint.get("config", "/v1/webrtc/config").addSuccess(WebRtcConfig).annotate(RoutePolicy, authenticated))
  .add(HttpApiEndpoint.put("setConfig", "/v1/webrtc/config").setPayload(strict(WebRtcConfig)).addSuccess(WebRtcConfig).annotate(RoutePolicy, namespaceWrite))
  .add(
    HttpApiEndpoint.post("turnCredentials", "/v1/webrtc/turn/credentials")
      .setPayload(NoMembers)
      .addSuccess(TurnCredentials)
      .annotate(RoutePolicy, sessionOrWorkload("webrtc"))
      .annotate(FastLaneRoute, "webrtc.turn")
      // the document names the session scheme, as for storage's session-or-workload routes
      .annotate(OpenApi.Override, { security: [{ session: [] }] })
  )
  .add(HttpApiEndpoint.get("rooms", "/v1/webrtc/rooms").addSuccess(RoomsAnswer).annotate(RoutePolicy, grant("webrtc")))
  .add(
    HttpApiEndpoint.get("signal", "/v1/webrtc/signal")
      .setUrlParams(SignalQuery)
      .addSuccess(Signalling, { status: 101 })
      .addError(Wire.BadRequest)
      .annotate(RoutePolicy, sessionOrWorkload("webrtc"))
      .annotate(WebSocketRoute, true)
      .annotate(OpenApi.Override, { security: [{ session: [] }] })
  )
  .addError(wiresOf(WebRtcRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, authenticated) {}

/**
 * A node's media server reporting a participant joining or leaving a room (spec §6.4): no
 * credential, a MAC under a key made from the namespace's relay secret (401 otherwise), seen once.
 */
export class WebRtcEventsGroup extends HttpApiGroup.make("webrtcEvents")
  .add(
    HttpApiEndpoint.post("event", "/v1/internal/webrtc/events")
      .setPayload(ParticipantEvent)
      .addSuccess(EventAccepted)
      .annotate(BodyCap, "webrtcEvent")
      .annotate(
        OpenApi.Description,
        "From a node's media server: a participant joined or left a room, published on _portico/webrtc/<room>. Header X-Portico-Webrtc-Mac: hex HMAC-SHA256 of the raw body under the namespace's event key (docs/webrtc.md, \"Events\"); 401 UNAUTHORIZED without it, with a wrong one, a stale `at` or a nonce seen before."
      )
  )
  .annotateEndpoints(OpenApi.Override, internalOnly)
  .addError(wiresOf(WebRtcEventRefusals))
  .middleware(OpenGate)
  .annotate(RoutePolicy, open) {}
