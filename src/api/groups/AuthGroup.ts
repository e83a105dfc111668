/** Credential routes of the foundation: who am I, and API key → access token. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Wire } from "../../domain/Errors.js"

export const Whoami = Schema.Struct({
  namespace: Schema.String,
  subject: Schema.String.annotations({ description: "The wallet, or key:<id> for an API key" }),
  method: Schema.Literal("jwt", "api_key"),
  role: Schema.String,
  grants: Schema.Array(Schema.String)
}).annotations({ identifier: "Whoami" })

export const AccessToken = Schema.Struct({
  access_token: Schema.String,
  token_type: Schema.Literal("Bearer"),
  expires_in: Schema.Int
}).annotations({ identifier: "AccessToken" })

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(HttpApiEndpoint.get("whoami", "/v1/auth/whoami").addSuccess(Whoami))
  .add(HttpApiEndpoint.post("token", "/v1/auth/token").addSuccess(AccessToken).addError(Wire.BadRequest)) {}
