import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Option } from "effect"
import { BadRequest, DeviceRequired, Forbidden, RateLimited, Unauthorized, unavailable } from "../../domain/Errors.js"
import { dataPlane, isControlPlaneRole, type Role } from "../../domain/Grants.js"
import { CurrentPrincipal, CurrentSession, grantStrings, type Principal } from "../../domain/Principal.js"
import { SessionPolicy } from "../../layers/sessions/SessionPolicy.js"
import { RateLimiter } from "../../layers/ratelimit/RateLimiter.js"
import { ACCESS_TOKEN_SECONDS, Authenticator } from "../../layers/auth/Authenticator.js"
import { ApiKeys } from "../../layers/keys/ApiKeys.js"
import { type IssuedSession, Sessions } from "../../layers/sessions/Sessions.js"
import { WorkloadTokens } from "../../layers/workload/WorkloadTokens.js"
import { PorticoApi } from "../Api.js"
import { whoamiOf } from "../groups/AuthGroup.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { toUnixSeconds } from "../Wire.js"
import { refusedOrDown } from "./Refusals.js"
import { writtenProof } from "./WrittenProof.js"
import { PLATFORM_REALM } from "../../domain/PlatformRealm.js"

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

/** The address line of an EIP-4361 message (its second line), for the per-wallet limit only. */
const messageWallet = (message: string): string => message.split("\n", 2)[1] ?? ""

const dataPlaneGrants: ReadonlySet<string> = new Set(dataPlane)

export const AuthHandlers = HttpApiBuilder.group(PorticoApi, "auth", (handlers) =>
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const keys = yield* ApiKeys
    const sessions = yield* Sessions
    const policies = yield* SessionPolicy
    const limiter = yield* RateLimiter
    const workloads = yield* WorkloadTokens
    const walletLimit = (wallet: string) =>
      Effect.flatMap(limiter.checkWallet(wallet), (d) =>
        d.allowed
          ? Effect.void
          : Effect.fail(
              new RateLimited({
                error: "too many sign-in attempts for this wallet",
                hint: `retry after ${d.retryAfterSeconds} s`,
                retryAfterSeconds: d.retryAfterSeconds
              })
            )
      )
    const endSession = (
      p: Principal,
      sessionId: string,
      callerDeviceId: string | undefined,
      deviceProof: unknown,
      reason: string
    ) =>
      Effect.flatMap(writtenProof(deviceProof), (proof) =>
        sessions
          .end({ namespace: p.namespace, wallet: p.subject, sessionId, callerDeviceId, deviceProof: proof, reason })
          .pipe(Effect.mapError(refusedOrDown), Effect.as({ ended: sessionId }))
      )
    return handlers
      .handle("whoami", () => Effect.map(CurrentPrincipal, whoamiOf))
      .handle("renew", () =>
        Effect.flatMap(CurrentPrincipal, (caller) =>
          Effect.map(Effect.mapError(workloads.renew(caller), refusedOrDown), (t) => ({ access_token: t.token, expires_in: t.expiresIn }))
        )
      )
      .handle("token", () =>
        Effect.gen(function* () {
          const principal = yield* CurrentPrincipal
          if (principal.method !== "api_key" || principal.keyId === undefined) {
            return yield* new BadRequest({ error: "send an API key to exchange", hint: "the bearer credential here must be an API key" })
          }
          const key = yield* keys.active(principal.keyId).pipe(
            Effect.mapError(() => unavailable("credential store unavailable")),
            Effect.flatMap(
              Option.match({
                onNone: () => Effect.fail(new Unauthorized({ error: "the API key was revoked" })),
                onSome: Effect.succeed
              })
            )
          )
          const token = yield* authenticator.exchange(key)
          return { access_token: token, token_type: "Bearer" as const, expires_in: ACCESS_TOKEN_SECONDS }
        })
      )
      .handle("challenge", ({ payload }) =>
        walletLimit(payload.wallet).pipe(Effect.zipRight(sessions
          .challenge({ wallet: payload.wallet, namespace: payload.namespace ?? PLATFORM_REALM, deviceId: payload.device_id })
          .pipe(
            Effect.map((c) => ({ message: c.message, nonce: c.nonce, expires_at: toUnixSeconds(c.expiresAt) })),
            Effect.mapError(refusedOrDown)
          )))
      )
      .handle("verify", ({ payload }) =>
        walletLimit(messageWallet(payload.message)).pipe(Effect.zipRight(sessions
          .verify({
            message: payload.message,
            signature: payload.signature,
            deviceKey: payload.device_key,
            deviceSignature: payload.device_signature,
            deviceLabel: payload.device_label
          })
          .pipe(
            Effect.map((result) =>
              result._tag === "Pending"
                ? { status: "pending_approval" as const, user_code: result.userCode, device_code: result.deviceCode }
                : sessionAnswer(result)
            ),
            Effect.mapError(refusedOrDown)
          )))
      )
      .handle("startDevice", ({ payload }) =>
        sessions
          .startDeviceRequest({ namespace: payload.namespace, deviceKey: payload.device_key, deviceLabel: payload.device_label })
          .pipe(
            Effect.map((c) => ({ device_code: c.deviceCode, user_code: c.userCode, expires_in: c.expiresIn, interval: c.interval })),
            Effect.mapError(refusedOrDown)
          )
      )
      .handle("deviceToken", ({ payload }) =>
        Effect.flatMap(writtenProof(payload.device_proof), (deviceProof) =>
          sessions.collect({ deviceCode: payload.device_code, deviceProof }).pipe(Effect.map(sessionAnswer), Effect.mapError(refusedOrDown))
        )
      )
      .handle("approveDevice", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentSession
          yield* sessions
            .approveFromDevice({
              namespace: p.namespace,
              wallet: p.subject,
              approverDeviceId: p.deviceId,
              userCode: payload.user_code,
              deviceProof: yield* writtenProof(payload.device_proof)
            })
            .pipe(Effect.mapError(refusedOrDown))
          return { approved: payload.user_code }
        })
      )
      .handle("answerLogin", ({ payload }) =>
        sessions
          .answerLogin({ userCode: payload.user_code, message: payload.message, signature: payload.signature, deny: payload.deny === true })
          .pipe(
            Effect.map(() => ({ user_code: payload.user_code, status: payload.deny === true ? ("denied" as const) : ("approved" as const) })),
            Effect.mapError(refusedOrDown)
          )
      )
      .handle("refresh", ({ payload }) =>
        Effect.flatMap(writtenProof(payload.device_proof), (deviceProof) =>
          sessions.refresh({ refreshToken: payload.refresh_token, deviceProof }).pipe(Effect.map(sessionAnswer), Effect.mapError(refusedOrDown))
        )
      )
      .handle("logout", ({ payload }) =>
        // Spec §5.9: ending a session from a device-bound session carries a proof, logout too; a
        // leaked access token alone then cannot end the session.
        Effect.flatMap(CurrentSession, (p) => endSession(p, p.sessionId, p.deviceId, payload.device_proof, "logout"))
      )
      .handle("sessions", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* CurrentSession
          const page = yield* Effect.mapError(sessions.list(p.namespace, p.subject, pageRequest(urlParams)), refusedOrDown)
          return {
            next_cursor: nextCursorOf(page),
            sessions: page.items.map((s) => ({
              id: s.id,
              device_id: s.deviceId ?? null,
              created_at: toUnixSeconds(s.createdAt),
              refreshed_at: toUnixSeconds(s.refreshedAt),
              current: s.id === p.sessionId
            }))
          }
        })
      )
      .handle("apiKey", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentSession
          if (p.deviceId !== undefined) {
            return yield* new Forbidden({ error: "device-bound sessions are not handed API keys", hint: "use the session's tokens" })
          }
          const policy = yield* Effect.mapError(policies.get(p.namespace), () => unavailable("registry unavailable"))
          const devicePolicy = Option.match(policy, { onNone: () => "optional", onSome: (x) => x.devicePolicy })
          if (devicePolicy !== "optional" && !isControlPlaneRole(p.role as Role)) {
            return yield* new DeviceRequired({ error: "this namespace needs device-bound sessions" })
          }
          // A key from a sign-in carries the session's data-plane grants only: control-plane keys
          // are minted through /v1/namespace/keys, where they are audited as such.
          const scopes = grantStrings(p).filter((g) => dataPlaneGrants.has(g.split(":key=")[0] ?? g))
          const label = payload.label ?? ""
          const order = { namespace: p.namespace, role: "custom", scopes, label, expiresInDays: payload.expires_in_days, origin: "sign-in" } as const
          // the scopes are the caller's own, so the no-escalation rule in mint never refuses here
          const minted = yield* keys
            .mint({ _tag: "Principal", principal: p }, order)
            .pipe(Effect.mapError(refusedOrDown))
          const expiresAt = minted.record.expiresAt
          return {
            id: minted.record.id,
            api_key: minted.apiKey,
            namespace: p.namespace,
            label,
            scopes: [...scopes],
            expires_at: expiresAt === undefined ? null : toUnixSeconds(expiresAt)
          }
        })
      )
      .handle("endSession", ({ path, payload }) =>
        Effect.flatMap(CurrentSession, (p) => endSession(p, path.id, p.deviceId, payload.device_proof, "ended"))
      )
  })
)

