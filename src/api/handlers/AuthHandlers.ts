import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { badRequest, unauthorized, unavailable } from "../../domain/Errors.js"
import { grantStrings } from "../../domain/Principal.js"
import { ACCESS_TOKEN_SECONDS, Authenticator } from "../../layers/auth/Authenticator.js"
import { ApiKeys } from "../../layers/keys/ApiKeys.js"
import { PorticoApi } from "../Api.js"
import { requirePrincipal } from "./Principal.js"

export const AuthHandlers = HttpApiBuilder.group(PorticoApi, "auth", (handlers) =>
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const keys = yield* ApiKeys
    return handlers
      .handle("whoami", () =>
        Effect.map(requirePrincipal, (p) => ({
          namespace: p.namespace,
          subject: p.subject,
          method: p.method,
          role: p.role,
          grants: [...grantStrings(p)]
        }))
      )
      .handle("token", () =>
        Effect.gen(function* () {
          const principal = yield* requirePrincipal
          if (principal.method !== "api_key" || principal.keyId === undefined) {
            return yield* badRequest("send an API key to exchange", "the bearer credential here must be an API key")
          }
          const key = yield* keys.active(principal.keyId).pipe(
            Effect.mapError(() => unavailable("credential store unavailable")),
            Effect.flatMap(Option.match({
              onNone: () => Effect.fail(unauthorized("the API key was revoked")),
              onSome: Effect.succeed
            }))
          )
          const token = yield* authenticator.exchange(key)
          return { access_token: token, token_type: "Bearer" as const, expires_in: ACCESS_TOKEN_SECONDS }
        })
      )
  })
)
