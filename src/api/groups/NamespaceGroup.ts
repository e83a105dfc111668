/** Members, API keys and the namespace rate limit (spec §4.9). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { MintRefusals, NamespaceRefusals, Wire, wiresOf } from "../../domain/Errors.js"
import { GrantString, KeyLifetimeDays, KeyProfile, Role } from "../../domain/Grants.js"
import { KeyId, Label, Wallet } from "../../domain/Names.js"
import { NextCursor, TimeKeyedPage } from "../Paging.js"
import { Authentication, SessionAuthentication } from "../Gates.js"
import { authenticated, controlPlane, membersWrite, namespaceWrite, owner, session } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { NoMembers, strict, UnixSeconds } from "../Wire.js"

export const MemberView = Schema.Struct({
  wallet: Schema.String,
  role: Role,
  added_at: UnixSeconds,
  added_by: Schema.String
}).annotations({ identifier: "Member" })

export const MemberList = Schema.Struct({
  namespace: Schema.String,
  owner: Schema.NullOr(Schema.String),
  members: Schema.Array(MemberView).annotations({ description: "one page, in the order members were added" }),
  next_cursor: NextCursor
}).annotations({ identifier: "MemberList" })

export const AddMember = strict(
  Schema.Struct({
    wallet: Wallet,
    role: Schema.Literal("admin", "developer", "runtime", "reader").annotations({
      description: "owner is given only by transfer"
    })
  })
).annotations({ identifier: "AddMember" })

export const MemberAnswer = Schema.Struct({ namespace: Schema.String, member: MemberView, created: Schema.Boolean })

export const Transfer = strict(Schema.Struct({ wallet: Wallet })).annotations({
  identifier: "TransferOwnership",
  description: "Offers the namespace to a wallet that may sign in to it (a member, or anyone where sign-in is open); never the zero address"
})
export const TransferAnswer = Schema.Struct({ namespace: Schema.String, owner: Schema.String }).annotations({
  identifier: "Ownership",
  description: "Who owns the namespace now"
})
/** The owner's transfer is an offer: nothing moves until the recipient accepts it (docs/api.md). */
export const TransferOffered = Schema.Struct({
  namespace: Schema.String,
  status: Schema.Literal("pending"),
  from: Schema.NullOr(Schema.String),
  to: Schema.String,
  expires_at: UnixSeconds
}).annotations({
  identifier: "OwnershipOffer",
  description: "Pending until the recipient accepts it from its own signed-in session, the owner cancels it, or it expires (24 h)"
})
export const PendingTransfer = Schema.Struct({
  namespace: Schema.String,
  offer: Schema.NullOr(
    Schema.Struct({ from: Schema.NullOr(Schema.String), to: Schema.String, offered_at: UnixSeconds, expires_at: UnixSeconds })
  ).annotations({ description: "null when no unexpired offer is pending" })
}).annotations({ identifier: "PendingTransfer" })
export const TransferCancelled = Schema.Struct({ namespace: Schema.String, cancelled: Schema.String.annotations({ description: "the wallet the offer was for" }) })

export const KeyView = Schema.Struct({
  id: Schema.String,
  namespace: Schema.String,
  label: Schema.String,
  role: Schema.String,
  scopes: Schema.Array(Schema.String),
  created_at: UnixSeconds,
  created_by: Schema.String,
  expires_at: Schema.NullOr(UnixSeconds),
  revoked_at: Schema.NullOr(UnixSeconds)
}).annotations({ identifier: "ApiKey" })

export const KeyList = Schema.Struct({
  namespace: Schema.String,
  keys: Schema.Array(KeyView).annotations({ description: "one page, oldest first, revoked keys included" }),
  next_cursor: NextCursor
}).annotations({ identifier: "ApiKeyList" })

export const MintKey = strict(
  Schema.Struct({
    scopes: Schema.optional(Schema.Array(GrantString).pipe(Schema.minItems(1), Schema.maxItems(32))),
    profile: Schema.optional(KeyProfile),
    label: Schema.optional(Label),
    expires_in_days: Schema.optional(KeyLifetimeDays)
  })
).annotations({ identifier: "MintKey", description: "Exactly one of scopes or profile" })

export const MintedKey = Schema.Struct({
  id: Schema.String,
  api_key: Schema.String.annotations({ description: "Shown once; store it now" }),
  namespace: Schema.String,
  label: Schema.String,
  role: Schema.String,
  scopes: Schema.Array(Schema.String),
  expires_at: Schema.NullOr(UnixSeconds)
}).annotations({ identifier: "MintedKey" })

export const RevokedKey = Schema.Struct({ id: Schema.String, revoked: Schema.Literal(true) })

export const RateLimitView = Schema.Struct({
  namespace: Schema.String,
  requests_per_second: Schema.Int,
  burst: Schema.Int,
  source: Schema.Literal("namespace", "default")
}).annotations({ identifier: "RateLimit" })

export const SetRateLimit = strict(
  Schema.Struct({
    requests_per_second: Schema.NullOr(Schema.Int.pipe(Schema.between(1, 1_000_000))),
    burst: Schema.optional(Schema.Int.pipe(Schema.between(1, 10_000_000)))
  })
).annotations({ identifier: "SetRateLimit", description: "null restores the gateway default" })

const walletParam = HttpApiSchema.param("wallet", Wallet)
const keyParam = HttpApiSchema.param("id", KeyId)

// Every route takes any credential of the namespace (Authentication), readable by all of it
// unless its policy says otherwise; accepting a transfer is the recipient's own session's.
export class NamespaceGroup extends HttpApiGroup.make("namespace")
  // members: owners and admins change them
  .add(HttpApiEndpoint.get("listMembers", "/v1/namespace/members").setUrlParams(TimeKeyedPage).addSuccess(MemberList))
  .add(
    HttpApiEndpoint.post("addMember", "/v1/namespace/members")
      .setPayload(AddMember)
      .addSuccess(MemberAnswer)
      .addError(Wire.NotFound)
      .annotate(RoutePolicy, membersWrite)
  )
  .add(
    HttpApiEndpoint.del("removeMember")`/v1/namespace/members/${walletParam}`
      .addSuccess(Schema.Struct({ namespace: Schema.String, removed: Schema.String }))
      .addError(Wire.NotFound)
      .annotate(RoutePolicy, membersWrite)
  )
  // two-step ownership transfer (docs/api.md): the owner offers and cancels; anyone of the
  // namespace sees the pending offer
  .add(
    HttpApiEndpoint.post("transfer", "/v1/namespace/members/transfer")
      .setPayload(Transfer)
      .addSuccess(TransferOffered, { status: 202 })
      .addSuccess(TransferAnswer)
      .addError(Wire.Conflict)
      .addError(Wire.TransferRefused)
      .annotate(RoutePolicy, owner)
  )
  .add(HttpApiEndpoint.get("pendingTransfer", "/v1/namespace/members/transfer").addSuccess(PendingTransfer))
  .add(
    HttpApiEndpoint.post("cancelTransfer", "/v1/namespace/members/transfer/cancel")
      .setPayload(NoMembers)
      .addSuccess(TransferCancelled)
      .addError(Wire.NotFound)
      .annotate(RoutePolicy, owner)
  )
  // keys are control plane (spec §5.5: admin keys, wallets of role developer or above)
  .add(HttpApiEndpoint.get("listKeys", "/v1/namespace/keys").setUrlParams(TimeKeyedPage).addSuccess(KeyList).annotate(RoutePolicy, controlPlane))
  .add(HttpApiEndpoint.post("mintKey", "/v1/namespace/keys").setPayload(MintKey).addSuccess(MintedKey, { status: 201 }).annotate(RoutePolicy, controlPlane))
  .add(HttpApiEndpoint.del("revokeKey")`/v1/namespace/keys/${keyParam}`.addSuccess(RevokedKey).addError(Wire.NotFound).annotate(RoutePolicy, controlPlane))
  .add(HttpApiEndpoint.get("getRateLimit", "/v1/namespace/rate-limit").addSuccess(RateLimitView))
  .add(HttpApiEndpoint.put("setRateLimit", "/v1/namespace/rate-limit").setPayload(SetRateLimit).addSuccess(RateLimitView).annotate(RoutePolicy, namespaceWrite))
  // the gate of every endpoint added so far
  .middlewareEndpoints(Authentication)
  // the offer's recipient accepts it from its own session
  .add(
    HttpApiEndpoint.post("acceptTransfer", "/v1/namespace/members/transfer/accept")
      .setPayload(NoMembers)
      .addSuccess(TransferAnswer)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .addError(Wire.TransferRefused)
      .middleware(SessionAuthentication)
      .annotate(RoutePolicy, session())
  )
  .annotate(RoutePolicy, authenticated)
  .addError(wiresOf(NamespaceRefusals))
  .addError(wiresOf(MintRefusals)) {}
