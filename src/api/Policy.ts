/**
 * Who may call each route, in one place. The authentication middleware looks the route up here
 * by method and path; a test checks that every route of the API has exactly one entry and every
 * entry names a route, so a route can never ship without a policy.
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
  /** The operator grant plus membership of the operator list. */
  | { readonly kind: "operator" }
  /**
   * A signed-in user's token holding the grant; an API key, or a token exchanged from one, is
   * refused (spec §5.6: storage).
   */
  | { readonly kind: "session"; readonly grant: GrantName }
  /**
   * Another node of the cluster (spec §4.10): no credential; the handler checks the source and
   * the coordination MAC, which covers the request body.
   */
  | { readonly kind: "internal" }

export const open: Policy = { kind: "open" }
export const authenticated: Policy = { kind: "authenticated" }
export const grant = (name: GrantName): Policy => ({ kind: "grant", grant: name })
export const controlPlane: Policy = { kind: "control-plane" }
export const namespaceWrite: Policy = { kind: "namespace-write" }
export const membersWrite: Policy = { kind: "members-write" }
export const owner: Policy = { kind: "owner" }
/** Control plane holding `db:write`: the cluster SQL store (spec §4.3). */
const sqlControl: Policy = { kind: "control-plane", grant: "db:write" }
const sqlOwner: Policy = { kind: "owner", grant: "db:write" }
export const operator: Policy = { kind: "operator" }
const session = (name: GrantName): Policy => ({ kind: "session", grant: name })
const internal: Policy = { kind: "internal" }

/** `METHOD /path/:param` → policy. Paths are written as the router sees them. */
export const routePolicies: Readonly<Record<string, Policy>> = {
  // health and status (spec §4.9): open except schema-status
  "GET /health": open,
  "GET /v1/health": open,
  "GET /status": open,
  "GET /v1/status": open,
  "GET /v1/version": open,
  "GET /v1/schema-status": authenticated,
  "GET /v1/auth/jwks": open,
  "GET /.well-known/jwks.json": open,

  // credentials
  "GET /v1/auth/whoami": authenticated,
  "POST /v1/auth/token": authenticated,
  // sign-in: the credential is in the body (a signature, a refresh token)
  "POST /v1/auth/challenge": open,
  "POST /v1/auth/verify": open,
  "POST /v1/auth/refresh": open,
  "POST /v1/auth/device": open,
  "POST /v1/auth/device/token": open,
  "POST /v1/auth/device/approve": open,
  "POST /v1/auth/devices/approve": authenticated,
  "POST /v1/auth/logout": authenticated,
  "GET /v1/auth/sessions": authenticated,
  "DELETE /v1/auth/sessions/:id": authenticated,
  "POST /v1/auth/api-key": authenticated,
  "GET /v1/auth/devices": authenticated,
  "DELETE /v1/auth/devices/:id": authenticated,
  "GET /v1/namespace/devices": membersWrite,
  "DELETE /v1/namespace/devices/:id": membersWrite,
  "GET /v1/namespace/session-policy": authenticated,
  "PUT /v1/namespace/session-policy": namespaceWrite,

  // members, keys, limits
  "GET /v1/namespace/members": authenticated,
  "POST /v1/namespace/members": membersWrite,
  "DELETE /v1/namespace/members/:wallet": membersWrite,
  "POST /v1/namespace/members/transfer": owner,
  // two-step transfer (docs/api.md): anyone of the namespace may see the pending offer; its
  // recipient accepts from its own session (checked by the handler); the owner cancels
  "GET /v1/namespace/members/transfer": authenticated,
  "POST /v1/namespace/members/transfer/accept": authenticated,
  "POST /v1/namespace/members/transfer/cancel": owner,
  // spec §5.5: keys are control plane (admin keys, wallets of role developer or above)
  "GET /v1/namespace/keys": controlPlane,
  "POST /v1/namespace/keys": controlPlane,
  "DELETE /v1/namespace/keys/:id": controlPlane,
  "GET /v1/namespace/rate-limit": authenticated,
  "PUT /v1/namespace/rate-limit": namespaceWrite,
  // browser origins admitted (docs/api.md, "Browsers and CORS"): a namespace setting
  "GET /v1/namespace/cors": authenticated,
  "PUT /v1/namespace/cors": namespaceWrite,

  // cache (spec §4.1): the grant may be narrowed to keys; the cache service checks the key
  "POST /v1/cache/put": grant("cache"),
  "POST /v1/cache/get": grant("cache"),
  "POST /v1/cache/delete": grant("cache"),
  "POST /v1/cache/mget": grant("cache"),
  "POST /v1/cache/scan": grant("cache"),
  "GET /v1/cache/health": grant("cache"),

  // node-local databases (spec §4.2)
  "POST /v1/db/sqlite/create": controlPlane,
  "POST /v1/db/sqlite/query": controlPlane,
  "GET /v1/db/sqlite/list": controlPlane,
  "POST /v1/db/sqlite/delete": controlPlane,

  // cluster SQL store (spec §4.3); export and import are the owner's
  "POST /v1/rqlite/query": sqlControl,
  "POST /v1/rqlite/exec": sqlControl,
  "POST /v1/rqlite/find": sqlControl,
  "POST /v1/rqlite/find-one": sqlControl,
  "POST /v1/rqlite/select": sqlControl,
  "POST /v1/rqlite/transaction": sqlControl,
  "GET /v1/rqlite/schema": sqlControl,
  "POST /v1/rqlite/create-table": sqlControl,
  "POST /v1/rqlite/drop-table": sqlControl,
  "GET /v1/rqlite/export": sqlOwner,
  "POST /v1/rqlite/import": sqlOwner,

  // database backups into content storage (spec §4.2)
  "POST /v1/db/sqlite/backup": controlPlane,
  "GET /v1/db/sqlite/backups": controlPlane,

  // content storage (spec §4.4, §5.6): a signed-in user's token, never an API key alone
  "POST /v1/storage/upload": session("storage"),
  "GET /v1/storage/get/:cid": session("storage-read"),
  "POST /v1/storage/pin": session("storage"),
  "GET /v1/storage/status/:cid": session("storage-read"),
  "DELETE /v1/storage/unpin/:cid": session("storage"),
  // any credential reaches the service, which answers FETCH_CAP_DEVICE_REQUIRED to anything but a
  // device-bound session (spec §4.4: "for an API key or workload token"), then checks storage-read
  "POST /v1/storage/fetch-caps": authenticated,
  // the revoke key and the capability token are the credentials (spec §5.13)
  "DELETE /v1/storage/fetch-caps/:id": open,
  "GET /v1/storage/relayed/:cid": open,

  // node to node (spec §4.10)
  "POST /v1/internal/storage/evict": internal,
  "POST /v1/internal/sqlite/query": internal,
  "POST /v1/internal/sqlite/delete": internal,
  "POST /v1/internal/sqlite/backup": internal,

  // audit
  "GET /v1/audit": controlPlane
}

export const policyKey = (method: string, path: string): string => `${method} ${path}`
