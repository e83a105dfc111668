/**
 * Who may call a route. Each endpoint carries its policy as an annotation (`RouteFacts.ts`); the
 * gate reads it from the index built from the API at start-up (src/api/gate/RouteIndex.ts), which
 * refuses to start when an endpoint has none.
 */
import type { GrantName } from "../domain/Grants.js"

export type Policy =
  /** No credential needed (a credential, if sent, is ignored). */
  | { readonly kind: "open" }
  /** Any valid credential of the namespace. */
  | { readonly kind: "authenticated" }
  /** A credential holding the grant. */
  | { readonly kind: "grant"; readonly grant: GrantName }
  /**
   * No credential: admitted, the service deciding what an anonymous caller may do (a public
   * function). A credential: checked like any, charged to its namespace, and holding the grant.
   */
  | { readonly kind: "grant-if-credential"; readonly grant: GrantName }
  /**
   * An admin key, or a wallet with role developer or above; runtime keys refused (spec §5.5).
   * With `grant`, the credential must hold that grant as well.
   */
  | { readonly kind: "control-plane"; readonly grant?: GrantName }
  /** Owner or admin: namespace settings. */
  | { readonly kind: "namespace-write" }
  /** Owner or admin: members, keys, devices of others. */
  | { readonly kind: "members-write" }
  /** The namespace owner only; with `grant`, holding it as well. */
  | { readonly kind: "owner"; readonly grant?: GrantName }
  /**
   * A wallet's session (of any namespace, or the platform realm) whose wallet is on the operator
   * list; an API key, or a token exchanged from one, is refused 403 NOT_AN_OPERATOR whatever
   * namespace owns it (docs/operators.md).
   */
  | { readonly kind: "operator" }
  /**
   * A wallet's session of any namespace or of the platform realm: the routes a wallet uses before
   * or beside its namespaces (create, list, status). An API key is refused with SESSION_REQUIRED.
   */
  | { readonly kind: "wallet" }
  /**
   * A signed-in user's session token, holding the grant when one is named; an API key, or a token
   * exchanged from one, is refused with 403 SESSION_REQUIRED (spec §5.6: storage; the routes that
   * act for the session itself: its keys, sessions and devices). A platform realm session
   * reaches it only with `anyRealm` (logout: a signed-in user's session is ended whatever its realm).
   */
  | { readonly kind: "session"; readonly grant?: GrantName; readonly anyRealm?: true }
  /**
   * A signed-in user's session token or a deployed app's workload token, holding the grant (spec
   * §5.6: storage). An API key, or a token exchanged from one, is refused with 403 SESSION_REQUIRED.
   * It goes through the `Authentication` gate, as a workload is not a session.
   */
  | { readonly kind: "session-or-workload"; readonly grant: GrantName }
  /**
   * A deployed app's workload token only (`POST /v1/auth/renew`); anything else is refused with
   * 403 WORKLOAD_TOKEN_REQUIRED.
   */
  | { readonly kind: "workload" }
  /**
   * Another node of the cluster (spec §4.10): no credential; PeerGate checks the source and the
   * coordination MAC, which covers the request body, once, before the handler runs.
   */
  | { readonly kind: "internal" }

export const open: Policy = { kind: "open" }
export const authenticated: Policy = { kind: "authenticated" }
export const grant = (name: GrantName): Policy => ({ kind: "grant", grant: name })
export const grantIfCredential = (name: GrantName): Policy => ({ kind: "grant-if-credential", grant: name })
export const controlPlane: Policy = { kind: "control-plane" }
export const namespaceWrite: Policy = { kind: "namespace-write" }
export const membersWrite: Policy = { kind: "members-write" }
export const owner: Policy = { kind: "owner" }
/** Control plane holding `db:write`: the cluster SQL store (spec §4.3). */
export const sqlControl: Policy = { kind: "control-plane", grant: "db:write" }
export const sqlOwner: Policy = { kind: "owner", grant: "db:write" }
/** Control plane holding `secrets:write`: push credentials (spec §5.5). */
export const secretsControl: Policy = { kind: "control-plane", grant: "secrets:write" }
export const operator: Policy = { kind: "operator" }
export const wallet: Policy = { kind: "wallet" }
export const session = (name?: GrantName): Policy => (name === undefined ? { kind: "session" } : { kind: "session", grant: name })
/** A signed-in user's session of a namespace or of the platform realm: the session acting on itself (logout). */
export const ownSession: Policy = { kind: "session", anyRealm: true }
export const internal: Policy = { kind: "internal" }
export const sessionOrWorkload = (name: GrantName): Policy => ({ kind: "session-or-workload", grant: name })
export const workload: Policy = { kind: "workload" }
