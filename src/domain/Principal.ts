/** Who is calling: resolved once per request from the credential, read by policies and services. */
import { Context } from "effect"
import type { Grant, KeyRole, Role } from "./Grants.js"

export interface Principal {
  readonly namespace: string
  /** The wallet for a signed-in user; `key:<id>` for an API key or a token exchanged from one. */
  readonly subject: string
  readonly method: "jwt" | "api_key"
  /** A wallet's role, or what a key was minted as. */
  readonly role: Role | KeyRole
  readonly grants: ReadonlyArray<Grant>
  /** The API key behind the credential, when there is one (checked for revocation per request). */
  readonly keyId: string | undefined
  readonly sessionId: string | undefined
  readonly deviceId: string | undefined
}

/** The caller of the current request; open routes see `undefined`. */
export class CurrentPrincipal extends Context.Tag("portico/CurrentPrincipal")<CurrentPrincipal, Principal | undefined>() {}

/** Grant strings as shown on the wire. */
export const grantStrings = (principal: Principal): ReadonlyArray<string> =>
  principal.grants.map((g) => (g.keyPattern === undefined ? g.name : `${g.name}:key=${g.keyPattern}`))

export const hasGrant = (principal: Principal, name: Grant["name"]): boolean =>
  principal.grants.some((g) => g.name === name)

/** Admin keys, and wallets with role developer or above (spec §5.5); runtime keys never. */
export const isControlPlane = (principal: Principal): boolean =>
  principal.method === "api_key" || principal.keyId !== undefined
    ? principal.role === "owner" || principal.role === "admin"
    : principal.role === "owner" || principal.role === "admin" || principal.role === "developer"

/** Owner and admin hold namespace write and members write. */
export const isNamespaceAdmin = (principal: Principal): boolean =>
  principal.role === "owner" || principal.role === "admin"
