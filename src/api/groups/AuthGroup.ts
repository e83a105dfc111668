/** Credential routes: who am I, key → token, wallet sign-in, refresh, logout and sessions (spec §4.5). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { MintRefusals, SessionRefusals, Wire, wiresOf, WorkloadRefusals } from "../../domain/Errors.js"
import { Label, NamespaceName } from "../../domain/Names.js"
import { grantStrings, type Principal } from "../../domain/Principal.js"
import { NextCursor, TimeKeyedPage } from "../Paging.js"
import { Authentication, OpenGate, SessionAuthentication } from "../Gates.js"
import { authenticated, open, ownSession, session, workload } from "../Policy.js"
import { FastLaneRoute, RoutePolicy } from "../RouteFacts.js"
import { NoMembers, strict, UnixSeconds } from "../Wire.js"

export const Whoami = Schema.Struct({
  namespace: Schema.String,
  subject: Schema.String.annotations({ description: "The wallet, key:<id> for an API key, or deployment:<id> for a deployed app" }),
  method: Schema.Literal("jwt", "api_key", "workload"),
  role: Schema.String,
  grants: Schema.Array(Schema.String)
}).annotations({ identifier: "Whoami" })

/** The whoami answer for a caller: never the credential itself. */
export const whoamiOf = (p: Principal): typeof Whoami.Type => ({
  namespace: p.namespace,
  subject: p.subject,
  method: p.method,
  role: p.role,
  grants: [...grantStrings(p)]
})

export const AccessToken = Schema.Struct({
  access_token: Schema.String,
  token_type: Schema.Literal("Bearer"),
  expires_in: Schema.Int
}).annotations({ identifier: "AccessToken" })

/** A deployed app's fresh workload token (spec §4.5: `{access_token, expires_in}`). */
export const WorkloadRenewed = Schema.Struct({
  access_token: Schema.String,
  expires_in: Schema.Int.annotations({ description: "seconds the new token lives (3600)" })
}).annotations({ identifier: "WorkloadRenewed" })

const WalletText = Schema.String.pipe(
  Schema.pattern(/^0x[0-9a-fA-F]{40}$/, { message: () => "a wallet is 0x followed by 40 hex characters" })
)
/**
 * An RFC 7638 SHA-256 thumbprint in base64url: 43 characters for 32 bytes, so the last character
 * carries 4 bits and 2 zero bits (one of A E I M Q U Y c g k o s w 0 4 8), as Siwe.ts checks.
 */
const DeviceId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/, {
    message: () => "a device id is an RFC 7638 SHA-256 thumbprint: 43 base64url characters"
  })
)
const DeviceProofWire = Schema.Unknown.annotations({
  identifier: "DeviceProof",
  description: "{iat: Unix seconds, id: 16-128 of [A-Za-z0-9_-], sig: base64url} signed by the session's device"
})

export const ChallengeRequest = strict(
  Schema.Struct({
    wallet: WalletText,
    namespace: Schema.optional(NamespaceName).annotations({
      description: "the namespace to sign in to; absent: the platform realm (docs/namespaces.md), for creating namespaces and the operator plane"
    }),
    device_id: Schema.optional(DeviceId)
  })
).annotations({ identifier: "ChallengeRequest" })

export const ChallengeAnswer = Schema.Struct({
  message: Schema.String.annotations({ description: "EIP-4361 message to sign with personal_sign" }),
  nonce: Schema.String,
  expires_at: UnixSeconds
}).annotations({ identifier: "Challenge" })

/**
 * A device's public JWK. Any JSON here reaches the key check, so whatever is not a P-256 or
 * Ed25519 public JWK (a string, an array, null) answers 400 DEVICE_KEY_INVALID (spec §7).
 */
const DeviceKeyWire = Schema.Unknown.annotations({ description: "a P-256 (EC) or Ed25519 (OKP) public JWK" })

export const VerifyRequest = strict(
  Schema.Struct({
    message: Schema.String.pipe(Schema.maxLength(4096)),
    signature: Schema.String.pipe(Schema.maxLength(200)),
    device_key: Schema.optional(DeviceKeyWire),
    device_signature: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
    device_label: Schema.optional(Label)
  })
).annotations({ identifier: "VerifyRequest" })

export const SessionAnswer = Schema.Struct({
  access_token: Schema.String,
  token_type: Schema.Literal("Bearer"),
  expires_in: Schema.Int,
  refresh_token: Schema.String.annotations({ description: "dv1_… for a device-bound session; rotates on every refresh" }),
  subject: Schema.String,
  namespace: Schema.String,
  session_id: Schema.String,
  device_id: Schema.optional(Schema.String)
}).annotations({ identifier: "Session" })

export const PendingAnswer = Schema.Struct({
  status: Schema.Literal("pending_approval"),
  user_code: Schema.String,
  device_code: Schema.String
}).annotations({ identifier: "PendingApproval" })

export const StartDeviceRequest = strict(
  Schema.Struct({
    namespace: NamespaceName,
    device_key: Schema.optional(DeviceKeyWire).annotations({
      description: "present: link this new device (an active device approves); absent: a plain login (a wallet approves)"
    }),
    device_label: Schema.optional(Label)
  })
).annotations({ identifier: "StartDeviceRequest" })

export const DeviceCodes = Schema.Struct({
  device_code: Schema.String,
  user_code: Schema.String,
  expires_in: Schema.Int,
  interval: Schema.Int
}).annotations({ identifier: "DeviceCodes" })

const UserCode = Schema.String.pipe(Schema.pattern(/^[A-Za-z]{4}-?[A-Za-z]{4}$/, { message: () => "a user code is 8 letters, as ABCD-EFGH" }))

export const DeviceTokenRequest = strict(
  Schema.Struct({ device_code: Schema.String.pipe(Schema.maxLength(128)), device_proof: Schema.optional(DeviceProofWire) })
).annotations({ identifier: "DeviceTokenRequest" })

export const ApproveRequest = strict(Schema.Struct({ user_code: UserCode, device_proof: DeviceProofWire })).annotations({
  identifier: "ApproveDevice"
})
export const Approved = Schema.Struct({ approved: Schema.String })

export const AnswerLoginRequest = strict(
  Schema.Struct({
    user_code: UserCode,
    message: Schema.String.pipe(Schema.maxLength(4096)),
    signature: Schema.String.pipe(Schema.maxLength(200)),
    deny: Schema.optional(Schema.Boolean)
  })
).annotations({ identifier: "AnswerLogin", description: "a wallet-signed sign-in message (from /v1/auth/challenge) approves or denies a plain login" })
export const LoginAnswered = Schema.Struct({ user_code: Schema.String, status: Schema.Literal("approved", "denied") })

export const RefreshRequest = strict(
  Schema.Struct({
    refresh_token: Schema.String.pipe(Schema.maxLength(256)),
    device_proof: Schema.optional(DeviceProofWire)
  })
).annotations({ identifier: "RefreshRequest" })

export const SessionList = Schema.Struct({
  sessions: Schema.Array(
    Schema.Struct({
      id: Schema.String,
      device_id: Schema.NullOr(Schema.String),
      created_at: UnixSeconds,
      refreshed_at: UnixSeconds,
      current: Schema.Boolean
    })
  ).annotations({ description: "one page of the open sessions, oldest first" }),
  next_cursor: NextCursor
}).annotations({ identifier: "SessionList" })

export const EndSessionRequest = strict(Schema.Struct({ device_proof: Schema.optional(DeviceProofWire) }))
export const Ended = Schema.Struct({ ended: Schema.String })

export const MintUserKey = strict(
  Schema.Struct({
    label: Schema.optional(Label),
    expires_in_days: Schema.optional(Schema.Int.pipe(Schema.between(1, 365)))
  })
).annotations({ identifier: "MintUserKey" })

export const UserKey = Schema.Struct({
  id: Schema.String,
  api_key: Schema.String.annotations({ description: "Shown once" }),
  namespace: Schema.String,
  label: Schema.String,
  scopes: Schema.Array(Schema.String),
  expires_at: Schema.NullOr(UnixSeconds)
}).annotations({ identifier: "UserKey" })

const sessionParam = HttpApiSchema.param(
  "id",
  Schema.String.pipe(Schema.pattern(/^ses_[0-9a-f]{32}$/, { message: () => "a session id is ses_ and 32 hex characters" }))
)

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(HttpApiEndpoint.get("whoami", "/v1/auth/whoami").addSuccess(Whoami).middleware(Authentication).annotate(RoutePolicy, authenticated).annotate(FastLaneRoute, "whoami"))
  .add(HttpApiEndpoint.post("token", "/v1/auth/token").setPayload(NoMembers).addSuccess(AccessToken).middleware(Authentication).annotate(RoutePolicy, authenticated))
  // a deployed app renews its own workload token (docs/deployments.md, "Workload tokens")
  .add(
    HttpApiEndpoint.post("renew", "/v1/auth/renew")
      .setPayload(NoMembers)
      .addSuccess(WorkloadRenewed)
      .addError(wiresOf(WorkloadRefusals))
      .addError(Wire.Unavailable)
      .middleware(Authentication)
      .annotate(RoutePolicy, workload)
  )
  .add(HttpApiEndpoint.post("challenge", "/v1/auth/challenge").setPayload(ChallengeRequest).addSuccess(ChallengeAnswer).middleware(OpenGate))
  .add(
    HttpApiEndpoint.post("verify", "/v1/auth/verify")
      .setPayload(VerifyRequest)
      .addSuccess(SessionAnswer)
      .addSuccess(PendingAnswer, { status: 202 })
      .middleware(OpenGate)
  )
  .add(HttpApiEndpoint.post("startDevice", "/v1/auth/device").setPayload(StartDeviceRequest).addSuccess(DeviceCodes).middleware(OpenGate))
  .add(HttpApiEndpoint.post("deviceToken", "/v1/auth/device/token").setPayload(DeviceTokenRequest).addSuccess(SessionAnswer).middleware(OpenGate))
  .add(HttpApiEndpoint.post("approveDevice", "/v1/auth/devices/approve").setPayload(ApproveRequest).addSuccess(Approved).middleware(SessionAuthentication).annotate(RoutePolicy, session()))
  .add(HttpApiEndpoint.post("answerLogin", "/v1/auth/device/approve").setPayload(AnswerLoginRequest).addSuccess(LoginAnswered).middleware(OpenGate))
  .add(HttpApiEndpoint.post("refresh", "/v1/auth/refresh").setPayload(RefreshRequest).addSuccess(SessionAnswer).middleware(OpenGate))
  .add(HttpApiEndpoint.post("logout", "/v1/auth/logout").setPayload(EndSessionRequest).addSuccess(Ended).middleware(SessionAuthentication).annotate(RoutePolicy, ownSession))
  .add(HttpApiEndpoint.get("sessions", "/v1/auth/sessions").setUrlParams(TimeKeyedPage).addSuccess(SessionList).middleware(SessionAuthentication).annotate(RoutePolicy, session()))
  .add(
    HttpApiEndpoint.del("endSession")`/v1/auth/sessions/${sessionParam}`
      .setPayload(EndSessionRequest)
      .addSuccess(Ended)
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session())
  )
  .add(
    HttpApiEndpoint.post("apiKey", "/v1/auth/api-key")
      .setPayload(MintUserKey)
      .addSuccess(UserKey, { status: 201 })
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session())
  )
  .addError(wiresOf(SessionRefusals))
  .addError(wiresOf(MintRefusals))
  .addError(Wire.BadRequest)
  .addError(Wire.Unauthorized)
  .addError(Wire.RateLimited)
  // sign-in routes are open: their credential is in the body (a signature, a refresh token)
  .annotate(RoutePolicy, open) {}
