import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import {
  badRequest,
  BadRequest,

  Forbidden,
  NotFound,
  Unauthorized,
  unauthorized,
  unavailable
} from "../../domain/Errors.js"
import { grantStrings, type Principal } from "../../domain/Principal.js"
import { ACCESS_TOKEN_SECONDS, Authenticator } from "../../layers/auth/Authenticator.js"
import { ApiKeys } from "../../layers/keys/ApiKeys.js"
import type { StoreError } from "../../layers/registry/RegistryStore.js"
import { type IssuedSession, type SessionRefused, Sessions } from "../../layers/sessions/Sessions.js"
import { PorticoApi } from "../Api.js"
import { toUnixSeconds } from "../Wire.js"
import { requirePrincipal } from "./Principal.js"

/** Sign-in refusals carry their status and spec code; the store failing is a retryable 503. */
const asHttp = (e: SessionRefused | StoreError) => {
  if (e._tag === "StoreError") return unavailable("registry unavailable")
  const body = { error: e.reason, code: e.code }
  switch (e.status) {
    case 400:
      return new BadRequest(body)
    case 401:
      return new Unauthorized(body)
    case 403:
      return new Forbidden(body)
    case 404:
      return new NotFound(body)
  }
}

const sessionAnswer = (s: IssuedSession) => ({
  access_token: s.accessToken,
  token_type: "Bearer" as const,
  expires_in: ACCESS_TOKEN_SECONDS,
  refresh_token: s.refreshToken,
  subject: s.subject,
  namespace: s.namespace,
  session_id: s.sessionId,
  ...(s.deviceId === undefined ? {} : { device_id: s.deviceId })
})

/** Session routes need a signed-in wallet's token, not a key or a token exchanged from one. */
const requireSession = Effect.flatMap(requirePrincipal, (p: Principal) =>
  p.sessionId === undefined || p.keyId !== undefined
    ? Effect.fail(badRequest("this route needs a signed-in session's access token", "sign in with /v1/auth/challenge and /v1/auth/verify"))
    : Effect.succeed({ ...p, sessionId: p.sessionId })
)

export const AuthHandlers = HttpApiBuilder.group(PorticoApi, "auth", (handlers) =>
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const keys = yield* ApiKeys
    const sessions = yield* Sessions
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
            Effect.flatMap(
              Option.match({
                onNone: () => Effect.fail(unauthorized("the API key was revoked")),
                onSome: Effect.succeed
              })
            )
          )
          const token = yield* authenticator.exchange(key)
          return { access_token: token, token_type: "Bearer" as const, expires_in: ACCESS_TOKEN_SECONDS }
        })
      )
      .handle("challenge", ({ payload }) =>
        sessions
          .challenge({ wallet: payload.wallet, namespace: payload.namespace, deviceId: payload.device_id })
          .pipe(
            Effect.map((c) => ({ message: c.message, nonce: c.nonce, expires_at: toUnixSeconds(c.expiresAt) })),
            Effect.mapError(asHttp)
          )
      )
      .handle("verify", ({ payload }) =>
        sessions
          .verify({
            message: payload.message,
            signature: payload.signature,
            deviceKey: payload.device_key,
            deviceSignature: payload.device_signature,
            deviceLabel: payload.device_label
          })
          .pipe(Effect.map(sessionAnswer), Effect.mapError(asHttp))
      )
      .handle("refresh", ({ payload }) =>
        sessions
          .refresh({ refreshToken: payload.refresh_token, deviceProof: payload.device_proof })
          .pipe(Effect.map(sessionAnswer), Effect.mapError(asHttp))
      )
      .handle("logout", () =>
        Effect.gen(function* () {
          const p = yield* requireSession
          // Logging out is the session's own act with its own token: no device proof is asked.
          yield* sessions
            .end({
              namespace: p.namespace,
              wallet: p.subject,
              sessionId: p.sessionId,
              caller: { sessionId: p.sessionId, deviceId: undefined },
              deviceProof: undefined,
              reason: "logout"
            })
            .pipe(Effect.mapError(asHttp))
          return { ended: p.sessionId }
        })
      )
      .handle("sessions", () =>
        Effect.gen(function* () {
          const p = yield* requireSession
          const list = yield* Effect.mapError(sessions.list(p.namespace, p.subject), asHttp)
          return {
            sessions: list.map((s) => ({
              id: s.id,
              device_id: s.deviceId ?? null,
              created_at: toUnixSeconds(s.createdAt),
              refreshed_at: toUnixSeconds(s.refreshedAt),
              current: s.id === p.sessionId
            }))
          }
        })
      )
      .handle("endSession", ({ path, payload }) =>
        Effect.gen(function* () {
          const p = yield* requireSession
          yield* sessions
            .end({
              namespace: p.namespace,
              wallet: p.subject,
              sessionId: path.id,
              caller: { sessionId: p.sessionId, deviceId: p.deviceId },
              deviceProof: payload.device_proof,
              reason: "ended"
            })
            .pipe(Effect.mapError(asHttp))
          return { ended: path.id }
        })
      )
  })
)

