/**
 * The gates in front of the routes, as middleware tags the endpoints name. Client-safe: the live
 * layers are the server's (src/api/gate/GatesLive.ts). Every route has exactly one:
 *
 * - `Authentication`: a valid credential of a namespace, whichever kind (`bearer`), then the route's policy;
 *   the handler reads the caller as `CurrentPrincipal`.
 * - `SessionAuthentication`: a signed-in user's session token only (`session`); the handler
 *   reads `CurrentSession`.
 * - `PeerGate`: another node of the cluster (spec §4.10), by its coordination MAC.
 * - `OpenGate`: no credential; the client network's rate limit only.
 * - `OptionalAuthentication`: no credential, or one checked as `Authentication` does; the handler
 *   reads `OptionalPrincipal`.
 */
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Wire } from "../domain/Errors.js"
import { CurrentPrincipal, CurrentSession, OptionalPrincipal } from "../domain/Principal.js"

/** What a credential gate answers (Gate.ts `GateRefusal`): every policy's refusals, as the route's policy is not known here. */
const refusals = Schema.Union(
  Wire.Unauthorized,
  Wire.InvalidApiKey,
  Wire.InvalidToken,
  Wire.SessionRequired,
  Wire.WorkloadTokenRequired,
  Wire.GrantRequired,
  Wire.ControlPlaneRequired,
  Wire.OwnerRequired,
  Wire.NotAnOperator,
  Wire.NamespaceRequired,
  Wire.RateLimited,
  Wire.Unavailable,
  Wire.Internal
)

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("portico/Authentication", {
  failure: refusals,
  provides: CurrentPrincipal,
  security: {
    bearer: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "an API key (portico_key_…) or an access token (a JWT from /v1/auth/token or wallet sign-in)"
      )
    )
  }
}) {}

export class SessionAuthentication extends HttpApiMiddleware.Tag<SessionAuthentication>()("portico/SessionAuthentication", {
  failure: refusals,
  provides: CurrentSession,
  security: {
    session: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(OpenApi.Format, "JWT"),
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "a signed-in session's access token (from /v1/auth/verify, /v1/auth/device/token or /v1/auth/refresh); API keys and tokens exchanged from them are refused"
      )
    )
  }
}) {}

export class PeerGate extends HttpApiMiddleware.Tag<PeerGate>()("portico/PeerGate", {
  failure: Schema.Union(Wire.CoordinationRefused, Wire.Internal),
  security: {
    coordinationMac: HttpApiSecurity.apiKey({ in: "header", key: "X-Portico-Coordination-Mac" }).pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "node to node only: a MAC keyed by the cluster's shared secret, with X-Portico-Coordination-Time"
      )
    )
  }
}) {}

/**
 * A route open to anonymous callers that treats a credential, when one is sent, as
 * `Authentication` does. The document marks its bearer scheme optional (`security: [{}, {bearer: []}]`).
 */
export class OptionalAuthentication extends HttpApiMiddleware.Tag<OptionalAuthentication>()("portico/OptionalAuthentication", {
  failure: refusals,
  provides: OptionalPrincipal
}) {}

export class OpenGate extends HttpApiMiddleware.Tag<OpenGate>()("portico/OpenGate", {
  failure: Schema.Union(Wire.RateLimited, Wire.Internal)
}) {}
