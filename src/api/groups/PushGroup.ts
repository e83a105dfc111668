/**
 * Push credentials (spec §2.6, §4.6): a namespace's credentials per provider, stored sealed and
 * never returned, and the legacy `/v1/push/config`. Control plane holding `secrets:write`
 * (owner, admin, developer; runtime, reader and app-runtime keys refused, spec §5.5).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { Wire } from "../../domain/Errors.js"
import { pushProviders, TOPIC_SECRET_MIN } from "../../domain/PushProviders.js"
import { Authentication } from "../Gates.js"
import { secretsControl } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds } from "../Wire.js"

const Provider = Schema.Literal(...pushProviders).annotations({ identifier: "PushProvider" })
const providerParam = HttpApiSchema.param("provider", Provider)

const Text = (max: number, description: string) => Schema.String.pipe(Schema.maxLength(max)).annotations({ description })

/**
 * Every field a credential may carry; which belong to which provider, and each field's own rule
 * (a 10-character key id, a p8 key that is a P-256 private key, an https relay that resolves to
 * a public address), is checked by the service: a field of another provider is 400.
 */
export const CredentialBody = strict(
  Schema.Struct({
    team_id: Schema.optional(Text(64, "ios_push, ios_voip_push: the Apple team id")),
    key_id: Schema.optional(Text(64, "ios_push, ios_voip_push: the key id, 10 letters and digits")),
    bundle_id: Schema.optional(Text(255, "ios_push, ios_voip_push: the app's bundle id (the APNs topic)")),
    p8_key: Schema.optional(Text(8192, "ios_push, ios_voip_push: the .p8 private key text (PEM)")),
    environment: Schema.optional(Schema.Literal("sandbox", "production")),
    base_url: Schema.optional(Text(2048, "relay_push: the https URL of the relay (ntfy) server; resolved when stored")),
    auth_token: Schema.optional(Text(1024, "relay_push: the relay's bearer token")),
    topic_mode: Schema.optional(Schema.Literal("opaque", "path", "user")),
    topic_secret: Schema.optional(
      Text(1024, `relay_push: the secret of the opaque topic convention, a random secret of about 32 bytes (at least ${TOPIC_SECRET_MIN} characters)`).pipe(
        Schema.minLength(TOPIC_SECRET_MIN, { message: () => `at least ${TOPIC_SECRET_MIN} characters: a random secret of about 32 bytes, base64 or hex` })
      )
    ),
    access_token: Schema.optional(Text(1024, "legacy_push: the push service's access token"))
  })
).annotations({ identifier: "PushCredential" })

export const PushConfigBody = strict(
  Schema.Struct({
    legacy_access_token: Schema.optional(Text(1024, "the legacy push service's access token")),
    relay_base_url: Schema.optional(Text(2048, "the https URL of the legacy relay; resolved when stored")),
    relay_auth_token: Schema.optional(Text(1024, "the legacy relay's bearer token"))
  })
).annotations({ identifier: "PushConfig", description: "at least one field" })

const Redacted = Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Boolean) }).annotations({
  description: "identifying fields in clear (APNs: team_id, key_id, bundle_id, environment), secrets only as has_<field>"
})
const Presence = Schema.Record({ key: Schema.String, value: Schema.Boolean }).annotations({ description: "has_<field> for every field of the credential" })

export const CredentialStored = Schema.Struct({
  namespace: Schema.String,
  provider: Schema.String,
  configured: Schema.Literal(true),
  updated_at: UnixSeconds,
  updated_by: Schema.String,
  redacted: Redacted
}).annotations({ identifier: "PushCredentialStored" })

export const CredentialView = Schema.Struct({
  namespace: Schema.String,
  provider: Schema.String,
  configured: Schema.Boolean,
  updated_at: Schema.NullOr(UnixSeconds),
  updated_by: Schema.NullOr(Schema.String),
  fields: Presence
}).annotations({ identifier: "PushCredentialView" })

export const CredentialRemoved = Schema.Struct({
  namespace: Schema.String,
  provider: Schema.String,
  configured: Schema.Literal(false),
  removed: Schema.Boolean.annotations({ description: "whether one was stored; the answer is 200 either way" })
}).annotations({ identifier: "PushCredentialRemoved" })

export const CredentialSummary = Schema.Struct({
  namespace: Schema.String,
  configured: Schema.Array(Provider),
  supported: Schema.Array(Provider)
}).annotations({ identifier: "PushCredentials" })

export class PushGroup extends HttpApiGroup.make("push")
  .add(HttpApiEndpoint.get("credentials", "/v1/namespace/push-credentials").addSuccess(CredentialSummary))
  .add(HttpApiEndpoint.put("putCredential")`/v1/namespace/push-credentials/${providerParam}`.setPayload(CredentialBody).addSuccess(CredentialStored))
  .add(HttpApiEndpoint.get("credential")`/v1/namespace/push-credentials/${providerParam}`.addSuccess(CredentialView))
  .add(HttpApiEndpoint.del("removeCredential")`/v1/namespace/push-credentials/${providerParam}`.addSuccess(CredentialRemoved))
  // the legacy path (spec §4.6, §9): the legacy service's token and the legacy relay
  .add(HttpApiEndpoint.put("putConfig", "/v1/push/config").setPayload(PushConfigBody).addSuccess(CredentialStored))
  .add(HttpApiEndpoint.get("config", "/v1/push/config").addSuccess(CredentialView))
  .add(HttpApiEndpoint.del("removeConfig", "/v1/push/config").addSuccess(CredentialRemoved))
  .addError(Wire.ValidationFailed)
  .middleware(Authentication)
  .annotate(RoutePolicy, secretsControl) {}
