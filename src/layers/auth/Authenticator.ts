/**
 * Turns a presented bearer credential into a Principal: an API key by keyed-hash lookup, or an
 * access token by signature, with a token exchanged from a key still tied to that key's life, a
 * session's to its session's, and a deployed app's workload token to its deployment's.
 */
import { Context, Data, Effect, Either, Layer, Option } from "effect"
import { type Grant, type KeyRole, parseGrant, type Role, roleGrants } from "../../domain/Grants.js"
import { oncePerObject } from "../../domain/Memo.js"
import type { Principal } from "../../domain/Principal.js"
import { ApiKeys, type ApiKeyRecord } from "../keys/ApiKeys.js"
import type { StoreError } from "../registry/RegistryStore.js"
import { KeyRing, type VerifiedClaims } from "../tokens/KeyRing.js"

/**
 * Whether a session still stands, and with which role its wallet stands in the namespace now.
 * A Tag of its own so the authenticator does not depend on the whole sign-in service (which
 * itself signs tokens with the key ring).
 */
export class SessionLiveness extends Context.Tag("portico/SessionLiveness")<
  SessionLiveness,
  {
    readonly standing: (sessionId: string) => Effect.Effect<Option.Option<Role>, StoreError>
    /** `standing` answered on the spot, read on the spot or kept; undefined when it must be read. */
    readonly standingNow?: ((sessionId: string) => Either.Either<Option.Option<Role>, StoreError> | undefined) | undefined
  }
>() {}

/**
 * Whether a deployment still stands: a workload token dies with its deployment, at once. A Tag of
 * its own so the authenticator reads one row by id and needs nothing of the deployment services
 * (src/layers/workload/WorkloadTokens.ts provides it).
 */
export class WorkloadLiveness extends Context.Tag("portico/WorkloadLiveness")<
  WorkloadLiveness,
  {
    readonly stands: (namespace: string, deploymentId: string) => Effect.Effect<boolean, StoreError>
    /** `stands` answered on the spot, where the registry reads on the spot. */
    readonly standsNow?: ((namespace: string, deploymentId: string) => Either.Either<boolean, StoreError>) | undefined
  }
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
  /**
   * `authenticate` answered on the spot (`now` in Unix ms), or undefined when that needs a wait:
   * a token never verified here, or a registry that cannot read on the spot. Same rules, same
   * answers; the listener's fast lane uses it (src/api/FastLane.ts).
   */
  readonly authenticateNow: (bearer: string, now: number) => Either.Either<Principal, CredentialRejected | StoreError> | undefined
  /** A 15-minute access token carrying the key's namespace, role and grants. */
  readonly exchange: (key: ApiKeyRecord) => Effect.Effect<string>
}

const grantsOf = (scopes: ReadonlyArray<string>): ReadonlyArray<Grant> =>
  scopes.flatMap((s) => {
    const g = parseGrant(s)
    return g === undefined ? [] : [g]
  })

const principalOf = (key: ApiKeyRecord): Principal => ({
  namespace: key.namespace,
  subject: "key:" + key.id,
  method: "api_key",
  role: key.role,
  grants: key.grants,
  keyId: key.id,
  sessionId: undefined,
  deviceId: undefined
})

// the same record comes back for every request while its row is unchanged: one principal for it
const fromKey = oncePerObject(principalOf)

const unknownKey = new CredentialRejected({ kind: "api_key", reason: "unknown, expired or revoked API key" })
const keyRevoked = new CredentialRejected({ kind: "jwt", reason: "the key behind this token was revoked" })
const sessionEnded = new CredentialRejected({ kind: "jwt", reason: "the session of this token has ended" })

const byKey = (found: Option.Option<ApiKeyRecord>): Either.Either<Principal, CredentialRejected> =>
  Option.isSome(found) ? Either.right(fromKey(found.value)) : Either.left(unknownKey)

// A token exchanged from a key dies with the key: revocation is at once. It acts with the key's
// role and grants as they are now (an owner key becomes an admin key when the namespace changes
// hands), not as they were when the token was issued.
const byExchangedToken = (claims: VerifiedClaims, key: Option.Option<ApiKeyRecord>): Either.Either<Principal, CredentialRejected> =>
  Option.isNone(key) || key.value.namespace !== claims.ns ? Either.left(keyRevoked) : Either.right(fromKeyByToken(key.value))

const fromKeyByToken = oncePerObject((key: ApiKeyRecord): Principal => ({ ...fromKey(key), method: "jwt" }))

// A session's tokens die with it: logout, session end, device revocation and the wallet's removal
// are at once. They act with the role the wallet holds now, not the one written into the token up
// to 15 minutes ago: a demoted admin, or an owner who handed the namespace on, has only what the
// registry says at each request. `standing` is undefined for a token of no session.
const bySessionToken = (claims: VerifiedClaims, standing: Option.Option<Role> | undefined): Either.Either<Principal, CredentialRejected> => {
  if (standing !== undefined && Option.isNone(standing)) return Either.left(sessionEnded)
  const role = standing === undefined ? (claims.role as Role | KeyRole) : standing.value
  // a verified token's claims are one object until it expires (KeyRing.verify): while the role
  // stands, so does the principal made from them
  const made = sessionPrincipals.get(claims)
  if (made !== undefined && made.role === role) return Either.right(made)
  const principal: Principal = {
    namespace: claims.ns,
    subject: claims.sub,
    method: "jwt",
    role,
    grants: standing === undefined ? grantsOf(claims.grants) : grantsOf(roleGrants[standing.value]),
    keyId: claims.key,
    sessionId: claims.sid,
    deviceId: claims.did
  }
  sessionPrincipals.set(claims, principal)
  return Either.right(principal)
}

const sessionPrincipals = new WeakMap<VerifiedClaims, Principal>()

const deploymentGone = new CredentialRejected({ kind: "jwt", reason: "the deployment of this workload token was deleted" })

// A deployed app's token (spec §4.8) acts with the grants written into it at mint or renewal: a
// grant change reaches the app at its next renewal, as the spec says. The grant `storage` lets an
// app read what it stores as well (a deployment holds no `storage-read` of its own). Its deployment
// is read on every request: a deleted deployment's token is refused at once.
const byWorkloadToken = (claims: VerifiedClaims, stands: boolean): Either.Either<Principal, CredentialRejected> =>
  stands ? Either.right(workloadPrincipal(claims)) : Either.left(deploymentGone)

const workloadPrincipal = oncePerObject((claims: VerifiedClaims): Principal => {
  const grants = grantsOf(claims.grants)
  const reads = grants.some((g) => g.name === "storage") && !grants.some((g) => g.name === "storage-read")
  return {
    namespace: claims.ns,
    subject: claims.sub,
    method: "workload",
    role: "runtime",
    grants: reads ? [...grants, { name: "storage-read", pattern: undefined }] : grants,
    keyId: undefined,
    sessionId: undefined,
    deviceId: undefined
  }
})

export class Authenticator extends Context.Tag("portico/Authenticator")<Authenticator, AuthenticatorService>() {
  static readonly Live = Layer.effect(
    Authenticator,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const ring = yield* KeyRing
      const sessions = yield* SessionLiveness
      const workloads = yield* WorkloadLiveness
      const keysNow = keys.now
      const standingNow = sessions.standingNow
      const standsNow = workloads.standsNow
      return {
        authenticate: (bearer) => {
          if (looksLikeApiKey(bearer)) return Effect.flatMap(keys.authenticate(bearer), byKey)
          return Effect.gen(function* () {
            const claims = yield* Effect.mapError(
              ring.verify(bearer),
              (e) => new CredentialRejected({ kind: "jwt", reason: e.reason })
            )
            if (claims.key !== undefined) return yield* byExchangedToken(claims, yield* keys.active(claims.key))
            if (claims.dep !== undefined) return yield* byWorkloadToken(claims, yield* workloads.stands(claims.ns, claims.dep))
            return yield* bySessionToken(claims, claims.sid === undefined ? undefined : yield* sessions.standing(claims.sid))
          })
        },
        authenticateNow: (bearer, now) => {
          if (looksLikeApiKey(bearer)) {
            const found = keysNow.authenticate(bearer, now)
            return found === undefined ? undefined : Either.flatMap(found, byKey)
          }
          const claims = ring.verifiedBefore(bearer, now)
          if (claims === undefined) return undefined
          if (claims.key !== undefined) {
            const key = keysNow.active(claims.key, now)
            return key === undefined ? undefined : Either.flatMap(key, (found) => byExchangedToken(claims, found))
          }
          if (claims.dep !== undefined) {
            const dep = claims.dep
            return standsNow === undefined ? undefined : Either.flatMap(standsNow(claims.ns, dep), (stands) => byWorkloadToken(claims, stands))
          }
          if (claims.sid === undefined) return bySessionToken(claims, undefined)
          const standing = standingNow?.(claims.sid)
          return standing === undefined ? undefined : Either.flatMap(standing, (found) => bySessionToken(claims, found))
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
