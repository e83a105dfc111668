/**
 * The one gate: for a route's policy and a request's headers it decides, in this order, the
 * client network's rate limit, the credential, the namespace's rate limit and the policy. `now`
 * decides on the spot whatever needs no store read and says "later" otherwise; `run` finishes the
 * same decision with the stores. The HttpApi middleware (GatesLive.ts) and the fast lane
 * (FastLane.ts) both call it, so a request gets the same answer on either path.
 */
import { Clock, Context, Effect, Either, Layer } from "effect"
import {
  ControlPlaneRequired,
  GrantRequired,
  type Internal,
  InvalidApiKey,
  InvalidToken,
  NamespaceRequired,
  NotAnOperator,
  OwnerRequired,
  RateLimited,
  SessionRequired,
  Unauthorized,
  type Unavailable,
  unavailable,
  WorkloadTokenRequired
} from "../../domain/Errors.js"
import { isPlatformRealm } from "../../domain/PlatformRealm.js"
import { asSession, hasGrant, isControlPlane, isNamespaceAdmin, isWorkload, type Principal } from "../../domain/Principal.js"
import { Authenticator, type CredentialRejected } from "../../layers/auth/Authenticator.js"
import { Operators } from "../../layers/operators/Operators.js"
import { RateLimiter } from "../../layers/ratelimit/RateLimiter.js"
import type { StoreError } from "../../layers/registry/RegistryStore.js"
import type { Policy } from "../Policy.js"

/** `Authorization: Bearer <credential>`, the credential's characters and length bounded. */
export const bearerPattern = /^Bearer[ \t]+([A-Za-z0-9._~+/=-]{1,4096})[ \t]*$/i

/** What the gate reads of a request. */
export interface GateRequest {
  readonly authorization: string | undefined
  readonly remoteAddress: string | undefined
  /** The listener charged the client network at the headers (src/api/BodyGuard.ts). */
  readonly clientCharged: boolean
  /** Told the caller's namespace as soon as the credential is resolved (for the access log). */
  readonly noteNamespace?: ((namespace: string) => void) | undefined
}

/** What a route's policy refuses a resolved caller with. */
export type PolicyRefusal =
  | SessionRequired
  | WorkloadTokenRequired
  | GrantRequired
  | ControlPlaneRequired
  | OwnerRequired
  | NotAnOperator
  | NamespaceRequired

/** What the gate answers with: its declared failures (Gates.ts). */
export type GateRefusal = Unauthorized | InvalidApiKey | InvalidToken | PolicyRefusal | RateLimited | Unavailable | Internal

export type Decision =
  /** The caller (undefined on an open route) may go on; every limit is charged. */
  | { readonly _tag: "Admitted"; readonly principal: Principal | undefined }
  /** The answer is this refusal; `namespace` is the caller's when the credential was resolved. */
  | { readonly _tag: "Refused"; readonly error: GateRefusal; readonly namespace?: string | undefined }
  /** A store must be read first: nothing past the client network has been charged. */
  | { readonly _tag: "Later"; readonly bearer: string; readonly principal: Principal | undefined }

export const rateLimited = (retryAfterSeconds: number, what: string) =>
  new RateLimited({
    error: `too many requests from this ${what}`,
    hint: `retry after ${retryAfterSeconds} s`,
    retryAfterSeconds
  })

const grantRequired = (grant: string) => new GrantRequired({ error: `this route needs the ${grant} grant` })
const adminsOnly = () => new ControlPlaneRequired({ error: "this route is for owners and admins", hint: "use an admin key or an admin wallet" })

const notAnOperator = () =>
  new NotAnOperator({
    error: "this route is for platform operators, signed in with their wallet",
    hint: "sign in with an operator's wallet (POST /v1/auth/challenge without a namespace); an API key never acts as an operator"
  })

/**
 * A platform realm session (src/domain/PlatformRealm.ts) reaches only the `wallet` and `operator`
 * routes, and logout (a `session` policy with `anyRealm`: it ends the session itself). Elsewhere
 * it is 403 NAMESPACE_REQUIRED, not 401: the token is valid and unexpired, it is
 * the wrong kind for a namespace's route (spec §7 answers a credential whose namespace cannot be
 * resolved 403, as it answers a namespace credential on an operator route 403 NOT_AN_OPERATOR).
 * Signing in again with the same token kind cannot help; signing in to a namespace does.
 */
const realmRefusal = (policy: Policy, principal: Principal): NamespaceRequired | undefined =>
  isPlatformRealm(principal.namespace) && policy.kind !== "wallet" && policy.kind !== "operator" && !(policy.kind === "session" && policy.anyRealm === true)
    ? new NamespaceRequired({
        error: "a platform sign-in token (no namespace) reaches only /v1/namespaces, /v1/namespace/list, /v1/namespace/status, the operator routes (/v1/operator/*, /v1/network/*, /v1/node/*) and /v1/auth/logout",
        hint: "sign in to the namespace itself (POST /v1/auth/challenge with its namespace; portico login --namespace NAME)"
      })
    : undefined

/**
 * Why a route policy refuses a resolved caller, or undefined when it admits them. `operator` is
 * decided here only as far as the credential goes: the gate then reads the operator list.
 */
export const policyRefusal = (policy: Policy, principal: Principal): PolicyRefusal | undefined => {
  const realm = realmRefusal(policy, principal)
  if (realm !== undefined) return realm
  switch (policy.kind) {
    case "open":
    case "internal":
    case "authenticated":
      return undefined
    case "session":
      if (asSession(principal) === undefined) {
        return new SessionRequired({
          error: "this route needs a signed-in user's token; an API key is refused",
          hint: "sign in with a wallet (POST /v1/auth/challenge, /v1/auth/verify) and send its access token"
        })
      }
      return policy.grant === undefined || hasGrant(principal, policy.grant) ? undefined : grantRequired(policy.grant)
    case "session-or-workload":
      if (asSession(principal) === undefined && !isWorkload(principal)) {
        return new SessionRequired({
          error: "this route needs a signed-in user's token or a deployed app's workload token; an API key is refused",
          hint: "sign in with a wallet (POST /v1/auth/challenge, /v1/auth/verify) and send its access token"
        })
      }
      return hasGrant(principal, policy.grant) ? undefined : grantRequired(policy.grant)
    case "workload":
      return isWorkload(principal)
        ? undefined
        : new WorkloadTokenRequired({
            error: "this route needs a deployed app's workload token",
            hint: "a deployment renews the token it finds in the file PORTICO_TOKEN_FILE names"
          })
    case "grant":
    case "grant-if-credential":
      return hasGrant(principal, policy.grant) ? undefined : grantRequired(policy.grant)
    case "control-plane":
      if (!isControlPlane(principal)) {
        return new ControlPlaneRequired({
          error: "this route needs an admin key or a wallet with role developer or above",
          hint: "app-runtime keys cannot reach the control plane"
        })
      }
      return policy.grant === undefined || hasGrant(principal, policy.grant) ? undefined : grantRequired(policy.grant)
    // Namespace and members write are the owner's and admins' (keys or wallets of those roles): a
    // custom key minted with one of these grants, or a developer, is refused as not the owner's.
    case "namespace-write":
      return !isNamespaceAdmin(principal)
        ? adminsOnly()
        : hasGrant(principal, "namespace-write")
          ? undefined
          : new GrantRequired({ error: "this route needs namespace write (owner or admin)" })
    case "members-write":
      return !isNamespaceAdmin(principal)
        ? adminsOnly()
        : hasGrant(principal, "members-write")
          ? undefined
          : new GrantRequired({ error: "this route needs members write (owner or admin)" })
    case "owner":
      if (principal.role !== "owner") return new OwnerRequired({ error: "only the namespace owner may do this" })
      return policy.grant === undefined || hasGrant(principal, policy.grant) ? undefined : grantRequired(policy.grant)
    case "operator":
      return asSession(principal) === undefined ? notAnOperator() : undefined
    case "wallet":
      return asSession(principal) === undefined
        ? new SessionRequired({
            error: "this route needs a wallet's session token; an API key is refused",
            hint: "sign in with a wallet (POST /v1/auth/challenge, without a namespace for the platform realm, then /v1/auth/verify)"
          })
        : undefined
  }
}

const credentialRefusal = (e: CredentialRejected | StoreError): InvalidApiKey | InvalidToken | Unavailable =>
  e._tag === "CredentialRejected"
    ? e.kind === "api_key"
      ? new InvalidApiKey({ error: e.reason })
      : new InvalidToken({ error: e.reason })
    : unavailable("credential store unavailable")

const missingCredential = (header: string | undefined) =>
  new Unauthorized({
    error: header === undefined ? "credentials required" : "malformed Authorization header",
    hint: "send Authorization: Bearer <api key or access token>"
  })

export interface GateService {
  /** The decision as far as it can be made without waiting for a store. */
  readonly now: (policy: Policy, request: GateRequest, now: number) => Decision
  /** The whole decision: `now`, then the store reads it left for later. */
  readonly run: (policy: Policy, request: GateRequest) => Effect.Effect<Principal | undefined, GateRefusal>
}

export class Gate extends Context.Tag("portico/Gate")<Gate, GateService>() {}

export const GateLive = Layer.effect(
  Gate,
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const limiter = yield* RateLimiter
    const operators = yield* Operators

    const refused = (error: GateRefusal, namespace?: string): Decision => ({ _tag: "Refused", error, namespace })
    const admitted = (principal: Principal | undefined): Decision => ({ _tag: "Admitted", principal })

    /** The namespace's limit, then the policy, for a resolved caller. */
    const afterCredential = (policy: Policy, principal: Principal, bearer: string, now: number): Decision => {
      // the operator list is read from the registry, so an operator route is always decided later
      if (policy.kind === "operator") return { _tag: "Later", bearer, principal }
      const space = limiter.admitNow(principal.namespace, now)
      if (space === undefined) return { _tag: "Later", bearer, principal }
      if (!space.allowed) return refused(rateLimited(space.retryAfterSeconds, space.refusedBy ?? "namespace"), principal.namespace)
      const refusal = policyRefusal(policy, principal)
      return refusal === undefined ? admitted(principal) : refused(refusal, principal.namespace)
    }

    const now = (policy: Policy, request: GateRequest, at: number): Decision => {
      if (!request.clientCharged) {
        const client = limiter.checkClientNow(request.remoteAddress, at)
        if (!client.allowed) return refused(rateLimited(client.retryAfterSeconds, "network"))
      }
      if (policy.kind === "open") return admitted(undefined)
      const header = request.authorization
      if (header === undefined && policy.kind === "grant-if-credential") return admitted(undefined)
      const bearer = header === undefined ? undefined : bearerPattern.exec(header)?.[1]
      if (bearer === undefined) return refused(missingCredential(header))
      const resolved = authenticator.authenticateNow(bearer, at)
      if (resolved === undefined) return { _tag: "Later", bearer, principal: undefined }
      if (Either.isLeft(resolved)) return refused(credentialRefusal(resolved.left))
      request.noteNamespace?.(resolved.right.namespace)
      return afterCredential(policy, resolved.right, bearer, at)
    }

    const finish = (policy: Policy, request: GateRequest, later: { readonly bearer: string; readonly principal: Principal | undefined }) =>
      Effect.gen(function* () {
        let principal = later.principal
        if (principal === undefined) {
          principal = yield* Effect.mapError(authenticator.authenticate(later.bearer), credentialRefusal)
          request.noteNamespace?.(principal.namespace)
        }
        const space = yield* limiter.checkNamespace(principal.namespace)
        if (!space.allowed) return yield* Effect.fail(rateLimited(space.retryAfterSeconds, "namespace"))
        const refusal = policyRefusal(policy, principal)
        if (refusal !== undefined) return yield* Effect.fail(refusal)
        if (policy.kind === "operator") {
          const listed = yield* Effect.mapError(operators.isOperator(principal.subject), () => unavailable("operator list unavailable"))
          if (!listed) return yield* Effect.fail(notAnOperator())
        }
        return principal
      })

    const run = (policy: Policy, request: GateRequest): Effect.Effect<Principal | undefined, GateRefusal> =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const decision = now(policy, request, at)
        switch (decision._tag) {
          case "Admitted":
            return Effect.succeed(decision.principal)
          case "Refused":
            return Effect.fail(decision.error)
          case "Later":
            return finish(policy, request, decision)
        }
      })

    return { now, run }
  })
)
