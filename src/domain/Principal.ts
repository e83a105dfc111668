/** Who is calling: resolved once per request from the credential, read by policies and services. */
import { Context, type Option, Schema } from "effect"
import { type Grant, GrantName, grantText, KeyRole, Role } from "./Grants.js"

export interface Principal {
  readonly namespace: string
  /**
   * The wallet for a signed-in user; `key:<id>` for an API key or a token exchanged from one;
   * `deployment:<id>` for a deployed app's workload token.
   */
  readonly subject: string
  /** `workload`: a deployed app's own token (spec §4.8), never a user's nor a key's. */
  readonly method: "jwt" | "api_key" | "workload"
  /** A wallet's role, or what a key was minted as. */
  readonly role: Role | KeyRole
  readonly grants: ReadonlyArray<Grant>
  /** The API key behind the credential, when there is one (checked for revocation per request). */
  readonly keyId: string | undefined
  readonly sessionId: string | undefined
  readonly deviceId: string | undefined
}

/** The caller of the current request: provided by the gate of every route that needs a credential. */
export class CurrentPrincipal extends Context.Tag("portico/CurrentPrincipal")<CurrentPrincipal, Principal>() {}

/** A signed-in user's session (wallet sign-in or device login): never an API key or a token exchanged from one. */
export interface Session extends Principal {
  readonly sessionId: string
}

/** The caller of a route that acts for a signed-in session: provided by the session gate. */
export class CurrentSession extends Context.Tag("portico/CurrentSession")<CurrentSession, Session>() {}

/** The caller of a route a credential is optional on: none for an anonymous request. */
export class OptionalPrincipal extends Context.Tag("portico/OptionalPrincipal")<OptionalPrincipal, Option.Option<Principal>>() {}

/** Whether the caller is a signed-in session (spec §5.6): a session token, not a key nor a token exchanged from one. */
export const asSession = (principal: Principal): Session | undefined =>
  principal.method === "jwt" && principal.keyId === undefined && principal.sessionId !== undefined
    ? (principal as Session)
    : undefined

/** Whether the caller is a deployed app by its workload token (spec §4.8, §5.6). */
export const isWorkload = (principal: Principal): boolean => principal.method === "workload"

/** A workload caller's subject: `deployment:<id>`. */
export const WORKLOAD_SUBJECT = "deployment:"

/** The deployment id of a workload caller, else undefined. */
export const workloadDeployment = (principal: Principal): string | undefined =>
  principal.method === "workload" && principal.subject.startsWith(WORKLOAD_SUBJECT) ? principal.subject.slice(WORKLOAD_SUBJECT.length) : undefined

/** Grant strings as shown on the wire. */
export const grantStrings = (principal: Principal): ReadonlyArray<string> =>
  principal.grants.map(grantText)

export const hasGrant = (principal: Principal, name: Grant["name"]): boolean =>
  principal.grants.some((g) => g.name === name)

/** Admin keys, and wallets with role developer or above (spec §5.5); runtime keys and deployed apps never. */
export const isControlPlane = (principal: Principal): boolean =>
  principal.method === "workload"
    ? false
    : principal.method === "api_key" || principal.keyId !== undefined
    ? principal.role === "owner" || principal.role === "admin"
    : principal.role === "owner" || principal.role === "admin" || principal.role === "developer"

/** Owner and admin hold namespace write and members write. */
export const isNamespaceAdmin = (principal: Principal): boolean =>
  principal.role === "owner" || principal.role === "admin"

/** A caller as one gateway tells another when it forwards a request (spec §4.10). */
export const ForwardedPrincipal = Schema.Struct({
  namespace: Schema.String,
  subject: Schema.String,
  method: Schema.Literal("jwt", "api_key", "workload"),
  role: Schema.Union(Role, KeyRole),
  grants: Schema.Array(Schema.Struct({ name: GrantName, pattern: Schema.optional(Schema.String) })),
  keyId: Schema.optional(Schema.String),
  sessionId: Schema.optional(Schema.String),
  deviceId: Schema.optional(Schema.String)
}).annotations({ identifier: "ForwardedPrincipal" })

/**
 * The caller as a forwarded call carries it: exactly the schema's members, whatever else the
 * credential's principal holds (a session's extra members would be refused by the strict payload).
 */
export const forwardedPrincipal = (p: Principal): typeof ForwardedPrincipal.Type => ({
  namespace: p.namespace,
  subject: p.subject,
  method: p.method,
  role: p.role,
  grants: p.grants.map((g) => (g.pattern === undefined ? { name: g.name } : { name: g.name, pattern: g.pattern })),
  ...(p.keyId === undefined ? {} : { keyId: p.keyId }),
  ...(p.sessionId === undefined ? {} : { sessionId: p.sessionId }),
  ...(p.deviceId === undefined ? {} : { deviceId: p.deviceId })
})

export const toPrincipal = (p: typeof ForwardedPrincipal.Type): Principal => ({
  namespace: p.namespace,
  subject: p.subject,
  method: p.method,
  role: p.role,
  grants: p.grants.map((g) => ({ name: g.name, pattern: g.pattern })),
  keyId: p.keyId,
  sessionId: p.sessionId,
  deviceId: p.deviceId
})
