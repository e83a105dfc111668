/**
 * The one gate in front of every route: rate limit by client network (node-to-node routes
 * excepted), resolve the credential, rate limit by namespace, then apply the route's policy from
 * `RoutePolicy.ts`.
 */
import { HttpApiMiddleware, HttpRouter, HttpServerRequest } from "@effect/platform"
import { Clock, Effect, Layer, Option, Schema } from "effect"
import { Code, type Forbidden, forbidden, internal, RateLimited, unauthorized, unavailable, Wire } from "../domain/Errors.js"
import { CurrentPrincipal, hasGrant, isControlPlane, isNamespaceAdmin, type Principal } from "../domain/Principal.js"
import { Authenticator } from "../layers/auth/Authenticator.js"
import { Coordination, coordinationHeadersRefusal } from "../layers/coordination/Coordination.js"
import { PorticoConfig } from "../layers/config/PorticoConfig.js"
import { RateLimiter } from "../layers/ratelimit/RateLimiter.js"
import { RequestMeta } from "./RequestMeta.js"
import { type Policy, policyKey, routePolicies } from "./RoutePolicy.js"

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("portico/Authentication", {
  failure: Schema.Union(Wire.Unauthorized, Wire.Forbidden, Wire.RateLimited, Wire.Unavailable, Wire.Internal),
  provides: CurrentPrincipal
}) {}

/** `Authorization: Bearer <credential>`, the credential's characters and length bounded. */
export const bearerPattern = /^Bearer[ \t]+([A-Za-z0-9._~+/=-]{1,4096})[ \t]*$/i

export const rateLimited = (retryAfterSeconds: number, what: string) =>
  new RateLimited({
    error: `too many requests from this ${what}`,
    code: Code.RATE_LIMITED,
    hint: `retry after ${retryAfterSeconds} s`,
    retryAfterSeconds
  })

/** Why a route policy refuses a resolved caller, or undefined when it admits them. */
export const policyRefusal = (policy: Policy, principal: Principal, operators: ReadonlyArray<string>): Forbidden | undefined => {
  switch (policy.kind) {
    case "open":
    case "internal":
    case "authenticated":
      return undefined
    case "session":
      return principal.method !== "jwt" || principal.keyId !== undefined
        ? forbidden(
            "this route needs a signed-in user's token; an API key is refused",
            Code.SESSION_REQUIRED,
            "sign in with a wallet (POST /v1/auth/challenge, /v1/auth/verify) and send its access token"
          )
        : hasGrant(principal, policy.grant)
          ? undefined
          : forbidden(`this route needs the ${policy.grant} grant`, Code.GRANT_REQUIRED)
    case "grant":
      return hasGrant(principal, policy.grant)
        ? undefined
        : forbidden(`this route needs the ${policy.grant} grant`, Code.GRANT_REQUIRED)
    case "control-plane":
      return isControlPlane(principal)
        ? policy.grant === undefined || hasGrant(principal, policy.grant)
          ? undefined
          : forbidden(`this route needs the ${policy.grant} grant`, Code.GRANT_REQUIRED)
        : forbidden(
            "this route needs an admin key or a wallet with role developer or above",
            Code.CONTROL_PLANE_REQUIRED,
            "app-runtime keys cannot reach the control plane"
          )
    // Namespace and members write are the owner's and admins' (keys or wallets of those roles): a
    // custom key minted with one of these grants, or a developer, is refused as not the owner's.
    case "namespace-write":
      return !isNamespaceAdmin(principal)
        ? forbidden("this route is for owners and admins", Code.CONTROL_PLANE_REQUIRED, "use an admin key or an admin wallet")
        : hasGrant(principal, "namespace-write")
          ? undefined
          : forbidden("this route needs namespace write (owner or admin)", Code.GRANT_REQUIRED)
    case "members-write":
      return !isNamespaceAdmin(principal)
        ? forbidden("this route is for owners and admins", Code.CONTROL_PLANE_REQUIRED, "use an admin key or an admin wallet")
        : hasGrant(principal, "members-write")
          ? undefined
          : forbidden("this route needs members write (owner or admin)", Code.GRANT_REQUIRED)
    case "owner":
      return principal.role !== "owner"
        ? forbidden("only the namespace owner may do this", Code.OWNER_REQUIRED)
        : policy.grant === undefined || hasGrant(principal, policy.grant)
          ? undefined
          : forbidden(`this route needs the ${policy.grant} grant`, Code.GRANT_REQUIRED)
    case "operator":
      return hasGrant(principal, "operator") && operators.includes(principal.subject)
        ? undefined
        : forbidden("this route is for cluster operators", Code.NOT_AN_OPERATOR)
  }
}

/** Applies a route policy to a resolved caller. */
export const authorize = (policy: Policy, principal: Principal, operators: ReadonlyArray<string>) => {
  const refused = policyRefusal(policy, principal, operators)
  return refused === undefined ? Effect.void : Effect.fail(refused)
}

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function* () {
    const authenticator = yield* Authenticator
    const limiter = yield* RateLimiter
    const config = yield* PorticoConfig
    const coordination = yield* Coordination
    return Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const { route } = yield* HttpRouter.RouteContext
      const policy = routePolicies[policyKey(route.method, route.path)]
      if (policy === undefined) return yield* Effect.fail(internal())

      // A node-to-node call comes from a peer gateway's address on behalf of its clients, who were
      // charged at that front gateway: charging it here too would put every client reaching this
      // node through that peer in one bucket. The route's own source check and coordination MAC
      // guard it instead. A source off the private overlay is refused here, before its body is
      // even decoded: it learns nothing of the internal routes' shapes and costs almost nothing.
      // So are coordination headers that are missing, malformed or stale, and a MAC that does not
      // hold over the body as received (the listener has it whole: node-to-node bodies are JSON
      // within a cap): no forged call's body is ever decoded. The route verifies the MAC again over
      // the decoded payload and spends its nonce.
      if (policy.kind === "internal") {
        const refused =
          coordinationHeadersRefusal(request.headers, Option.getOrUndefined(request.remoteAddress), yield* Clock.currentTimeMillis) ??
          (yield* Effect.orElseSucceed(request.text, () => undefined).pipe(
            Effect.map((body) => (body !== undefined && coordination.macHolds(route.method, route.path, body, request.headers) ? undefined : "coordination MAC invalid"))
          ))
        if (refused === undefined) return undefined
        return yield* Effect.fail(forbidden(refused, Code.COORDINATION_REFUSED))
      }
      // the listener charged it when the headers arrived (src/api/BodyGuard.ts), before the body
      if (!RequestMeta.clientCharged(request)) {
        const client = yield* limiter.checkClient(Option.getOrUndefined(request.remoteAddress))
        if (!client.allowed) return yield* Effect.fail(rateLimited(client.retryAfterSeconds, "network"))
      }
      if (policy.kind === "open") return undefined

      const header = request.headers["authorization"]
      const bearer = header === undefined ? undefined : bearerPattern.exec(header)?.[1]
      if (bearer === undefined) {
        return yield* Effect.fail(
          unauthorized(
            header === undefined ? "credentials required" : "malformed Authorization header",
            Code.UNAUTHORIZED,
            "send Authorization: Bearer <api key or access token>"
          )
        )
      }
      const principal = yield* authenticator.authenticate(bearer).pipe(
        Effect.catchTags({
          CredentialRejected: (e) =>
            Effect.fail(unauthorized(e.reason, e.kind === "api_key" ? Code.INVALID_API_KEY : Code.INVALID_TOKEN)),
          StoreError: () => Effect.fail(unavailable("credential store unavailable"))
        })
      )
      RequestMeta.setNamespace(request, principal.namespace)

      const space = yield* limiter.checkNamespace(principal.namespace)
      if (!space.allowed) return yield* Effect.fail(rateLimited(space.retryAfterSeconds, "namespace"))
      yield* authorize(policy, principal, config.operators)
      return principal
    })
  })
)
