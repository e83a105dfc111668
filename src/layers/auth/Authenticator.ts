/**
 * Turns a presented bearer credential into a Principal: an API key by keyed-hash lookup, or an
 * access token by signature, with a token exchanged from a key still tied to that key's life.
 */
import { Context, Data, Effect, Layer, Option } from "effect"
import { type Grant, type KeyRole, parseGrant, type Role, roleGrants } from "../../domain/Grants.js"
import type { Principal } from "../../domain/Principal.js"
import { ApiKeys, type ApiKeyRecord } from "../keys/ApiKeys.js"
import type { StoreError } from "../registry/RegistryStore.js"
import { KeyRing } from "../tokens/KeyRing.js"

/**
 * Whether a session still stands, and with which role its wallet stands in the namespace now.
 * A Tag of its own so the authenticator does not depend on the whole sign-in service (which
 * itself signs tokens with the key ring).
 */
export class SessionLiveness extends Context.Tag("portico/SessionLiveness")<
  SessionLiveness,
  { readonly standing: (sessionId: string) => Effect.Effect<Option.Option<Role>, StoreError> }
>() {}

export class CredentialRejected extends Data.TaggedError("CredentialRejected")<{
  readonly kind: "api_key" | "jwt"
  readonly reason: string
}> {}

/** Access tokens live 15 minutes (spec §5.2, §8). */
export const ACCESS_TOKEN_SECONDS = 15 * 60

export const looksLikeApiKey = (token: string): boolean => token.startsWith("portico_")

export interface AuthenticatorService {
  readonly authenticate: (bearer: string) => Effect.Effect<Principal, CredentialRejected | StoreError>
  /** A 15-minute access token carrying the key's namespace, role and grants. */
  readonly exchange: (key: ApiKeyRecord) => Effect.Effect<string>
}

const grantsOf = (scopes: ReadonlyArray<string>): ReadonlyArray<Grant> =>
  scopes.flatMap((s) => {
    const g = parseGrant(s)
    return g === undefined ? [] : [g]
  })

const fromKey = (key: ApiKeyRecord): Principal => ({
  namespace: key.namespace,
  subject: "key:" + key.id,
  method: "api_key",
  role: key.role,
  grants: key.grants,
  keyId: key.id,
  sessionId: undefined,
  deviceId: undefined
})

export class Authenticator extends Context.Tag("portico/Authenticator")<Authenticator, AuthenticatorService>() {
  static readonly Live = Layer.effect(
    Authenticator,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const ring = yield* KeyRing
      const sessions = yield* SessionLiveness
      return {
        authenticate: (bearer) => {
          if (looksLikeApiKey(bearer)) {
            return Effect.flatMap(keys.authenticate(bearer), (found) =>
              Option.match(found, {
                onNone: () => Effect.fail(new CredentialRejected({ kind: "api_key", reason: "unknown, expired or revoked API key" })),
                onSome: (key) => Effect.succeed(fromKey(key))
              })
            )
          }
          return Effect.gen(function* () {
            const claims = yield* Effect.mapError(
              ring.verify(bearer),
              (e) => new CredentialRejected({ kind: "jwt", reason: e.reason })
            )
            // A token exchanged from a key dies with the key: revocation is at once. It acts with
            // the key's role and grants as they are now (an owner key becomes an admin key when
            // the namespace changes hands), not as they were when the token was issued.
            if (claims.key !== undefined) {
              const key = yield* keys.active(claims.key)
              if (Option.isNone(key) || key.value.namespace !== claims.ns) {
                return yield* new CredentialRejected({ kind: "jwt", reason: "the key behind this token was revoked" })
              }
              return { ...fromKey(key.value), method: "jwt" as const }
            }
            // A session's tokens die with it: logout, session end, device revocation and the
            // wallet's removal are at once. They act with the role the wallet holds now, not the
            // one written into the token up to 15 minutes ago: a demoted admin, or an owner who
            // handed the namespace on, has only what the registry says at each request.
            let role = claims.role as Role | KeyRole
            let grants = grantsOf(claims.grants)
            if (claims.sid !== undefined) {
              const standing = yield* sessions.standing(claims.sid)
              if (Option.isNone(standing)) {
                return yield* new CredentialRejected({ kind: "jwt", reason: "the session of this token has ended" })
              }
              role = standing.value
              grants = grantsOf(roleGrants[standing.value])
            }
            return {
              namespace: claims.ns,
              subject: claims.sub,
              method: "jwt" as const,
              role,
              grants,
              keyId: claims.key,
              sessionId: claims.sid,
              deviceId: claims.did
            }
          })
        },
        exchange: (key) =>
          ring.sign(
            { sub: "key:" + key.id, ns: key.namespace, role: key.role, grants: key.scopes, key: key.id },
            ACCESS_TOKEN_SECONDS
          )
      }
    })
  )
}
