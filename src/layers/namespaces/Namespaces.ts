/**
 * Namespaces and their members. Every change is one atomic batch with its audit row, and
 * conditional changes are SQL predicates whose row counts decide the answer.
 */
import { Clock, Context, Data, Effect, Layer, Option } from "effect"
import type { NamespaceCode } from "../../domain/Errors.js"
import { type KeyRole, type Role, profileGrants } from "../../domain/Grants.js"
import { Audit } from "../audit/Audit.js"
import { ApiKeys, type MintedKey } from "../keys/ApiKeys.js"
import { KeptReads } from "../registry/KeptReads.js"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type Statement, StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export interface NamespaceRecord {
  readonly name: string
  readonly owner: string | undefined
  readonly createdAt: number
  readonly rateLimit: { readonly rps: number; readonly burst: number } | undefined
}

export interface Member {
  readonly wallet: string
  readonly role: Role
  readonly addedAt: number
  readonly addedBy: string
}

/** A namespace rule refused the change; the API maps each rule to its status. */
/** How each namespace rule is answered: its catalogue code, the message and the hint. */
const ruleAnswers = {
  NoSuchMember: { code: "NOT_FOUND", reason: "no such member" },
  NoSuchNamespace: { code: "NOT_FOUND", reason: "no such namespace" },
  OwnerImmutable: { code: "FORBIDDEN", reason: "the owner cannot be changed or removed here", hint: "use POST /v1/namespace/members/transfer" },
  RoleTooHigh: { code: "OWNER_REQUIRED", reason: "only the owner may give, change or remove the admin role" },
  NotOwnerNow: { code: "OWNER_REQUIRED", reason: "only the namespace's current owner may transfer it", hint: "ownership moved since this token was issued" },
  KeysCannotManageMembers: {
    code: "CONTROL_PLANE_REQUIRED",
    reason: "a custom key cannot manage members",
    hint: "use an admin key or a wallet with role admin or owner"
  },
  NotOwner: { code: "CONFLICT", reason: "the namespace owner changed meanwhile", hint: "read the members again and retry" },
  NamespaceExists: { code: "NAMESPACE_EXISTS", reason: "namespace exists" },
  ZeroAddress: { code: "VALIDATION_FAILED", reason: "the zero address cannot own a namespace: nobody holds its key" },
  RecipientCannotSignIn: {
    code: "CONFLICT",
    reason: "the recipient accepts from its own session, and this wallet cannot sign in to the namespace",
    hint: "add the wallet as a member first (POST /v1/namespace/members), then transfer"
  },
  NoOffer: {
    code: "NOT_FOUND",
    reason: "no pending ownership offer",
    hint: "the owner offers it with POST /v1/namespace/members/transfer; an offer lasts 24 hours"
  },
  OfferForAnother: { code: "FORBIDDEN", reason: "the pending ownership offer is for another wallet", hint: "sign in with the wallet the offer names" },
  OfferChanged: {
    code: "CONFLICT",
    reason: "the ownership offer was cancelled, replaced or taken meanwhile",
    hint: "read GET /v1/namespace/members/transfer and retry"
  }
} as const satisfies Record<string, { readonly code: NamespaceCode; readonly reason: string; readonly hint?: string }>

/** A namespace rule refused the request; it is answered with its rule's code, message and hint. */
export class NamespaceRuleError extends Data.TaggedError("NamespaceRuleError")<{
  readonly rule: keyof typeof ruleAnswers
}> {
  get code(): NamespaceCode {
    return ruleAnswers[this.rule].code
  }
  get reason(): string {
    return ruleAnswers[this.rule].reason
  }
  get hint(): string | undefined {
    const answer = ruleAnswers[this.rule]
    return "hint" in answer ? answer.hint : undefined
  }
}

/**
 * A pending ownership offer: the owner's transfer waits for the recipient to accept it from its
 * own session, the owner to cancel it, or `expiresAt` (epoch ms).
 */
export interface OwnershipOffer {
  readonly from: string | undefined
  readonly to: string
  readonly offeredBy: string
  readonly createdAt: number
  readonly expiresAt: number
}

/** How long an ownership offer waits for its recipient. */
export const OFFER_SECONDS = 24 * 60 * 60

/** The address nobody holds a key for: ownership sent there could never come back. */
export const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"

export interface CreatedNamespace {
  readonly record: NamespaceRecord
  readonly ownerKey: MintedKey
}

export interface NamespacesService {
  /** Creates a namespace with an owner-level admin key (and the owner wallet as a member). */
  readonly create: (
    name: string,
    owner: string | undefined,
    actor: string
  ) => Effect.Effect<CreatedNamespace, NamespaceRuleError | StoreError>
  readonly get: (name: string) => Effect.Effect<Option.Option<NamespaceRecord>, StoreError>
  /** One page of the members, in the order they were added (key: added_at, wallet). */
  readonly members: (namespace: string, page: PageRequest) => Effect.Effect<Page<Member>, StoreError>
  /** Adds a member or changes its role; `actorRole` decides how high a role may be given. */
  readonly putMember: (
    namespace: string,
    wallet: string,
    role: Exclude<Role, "owner">,
    actor: string,
    actorRole: Role | KeyRole
  ) => Effect.Effect<{ readonly member: Member; readonly created: boolean }, NamespaceRuleError | StoreError>
  readonly removeMember: (
    namespace: string,
    wallet: string,
    actor: string,
    actorRole: Role | KeyRole
  ) => Effect.Effect<void, NamespaceRuleError | StoreError>
  /**
   * Offers the namespace to `wallet` (the first of two steps): nothing moves until `wallet`
   * accepts. A new offer replaces a pending one. To the owner it already has: nothing to offer,
   * the record as it is. `actorWallet` is the caller's wallet when a wallet (not a key) asks: it
   * must be the owner the registry names now. The recipient must be able to sign in to accept
   * (a member, or anyone where sign-in is open); the zero address is refused.
   */
  readonly transfer: (
    namespace: string,
    wallet: string,
    actor: string,
    actorWallet: string | undefined
  ) => Effect.Effect<OwnershipOffer | NamespaceRecord, NamespaceRuleError | StoreError>
  /** The pending, unexpired offer, if any. */
  readonly offer: (namespace: string) => Effect.Effect<Option.Option<OwnershipOffer>, StoreError>
  /**
   * The recipient, from its own session, takes the namespace: it becomes the owner, the previous
   * owner wallet stays as an admin, and owner keys become admin keys.
   */
  readonly acceptTransfer: (namespace: string, wallet: string) => Effect.Effect<NamespaceRecord, NamespaceRuleError | StoreError>
  /** The owner withdraws the pending offer; `actorWallet` as for `transfer`. */
  readonly cancelTransfer: (
    namespace: string,
    actor: string,
    actorWallet: string | undefined
  ) => Effect.Effect<OwnershipOffer, NamespaceRuleError | StoreError>
  readonly setRateLimit: (
    namespace: string,
    limit: { readonly rps: number; readonly burst: number } | undefined,
    actor: string
  ) => Effect.Effect<void, StoreError>
}

export const rank: Record<Role | KeyRole, number> = { owner: 4, admin: 3, developer: 2, runtime: 1, reader: 0, user: 0, custom: 0 }

export class Namespaces extends Context.Tag("portico/Namespaces")<Namespaces, NamespacesService>() {
  static readonly Live = Layer.effect(
    Namespaces,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const audit = yield* Audit
      const keys = yield* ApiKeys
      const kept = yield* KeptReads

      const get = (name: string) =>
        Effect.map(
          store.query({
            sql: "SELECT name, owner, created_at, rate_limit_rps, rate_limit_burst FROM namespaces WHERE name = ?",
            params: [name]
          }),
          (rows) =>
            Option.map(Option.fromNullable(rows[0]), (r) => ({
              name: String(r.name),
              owner: r.owner === null ? undefined : String(r.owner),
              createdAt: Number(r.created_at),
              rateLimit:
                r.rate_limit_rps === null || r.rate_limit_burst === null
                  ? undefined
                  : { rps: Number(r.rate_limit_rps), burst: Number(r.rate_limit_burst) }
            }))
        )

      const requireNamespace = (name: string) =>
        Effect.flatMap(get(name), (found) =>
          Option.match(found, {
            onNone: () => Effect.fail(new NamespaceRuleError({ rule: "NoSuchNamespace" })),
            onSome: Effect.succeed
          })
        )

      const memberRow = (namespace: string, wallet: string) =>
        Effect.map(
          store.query({
            sql: "SELECT wallet, role, added_at, added_by FROM members WHERE namespace = ? AND wallet = ?",
            params: [namespace, wallet]
          }),
          (rows) => Option.map(Option.fromNullable(rows[0]), toMember)
        )

      const isConstraint = (e: StoreError) => e.reason === "constraint"

      /** The namespace's offer row, expired or not. */
      const offerRow = (namespace: string) =>
        Effect.map(
          store.query({
            sql: "SELECT from_owner, to_wallet, offered_by, created_at, expires_at FROM ownership_offers WHERE namespace = ?",
            params: [namespace]
          }),
          (rows) =>
            Option.map(
              Option.fromNullable(rows[0]),
              (r): OwnershipOffer => ({
                from: r.from_owner === null ? undefined : String(r.from_owner),
                to: String(r.to_wallet),
                offeredBy: String(r.offered_by),
                createdAt: Number(r.created_at),
                expiresAt: Number(r.expires_at)
              })
            )
        )

      return {
        create: (name, owner, actor) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const ownerKey = yield* keys.prepare({
              namespace: name,
              role: "owner",
              scopes: [...profileGrants.admin],
              label: "owner",
              expiresAt: undefined,
              createdBy: actor
            })
            const statements: Array<Statement> = [
              { sql: "INSERT INTO namespaces (name, owner, created_at) VALUES (?, ?, ?)", params: [name, owner ?? null, now] },
              ownerKey.statement
            ]
            if (owner !== undefined) {
              statements.push({
                sql: "INSERT INTO members (namespace, wallet, role, added_at, added_by) VALUES (?, ?, 'owner', ?, ?)",
                params: [name, owner, now, actor]
              })
            }
            statements.push(yield* audit.entry(name, "namespace.create", actor, name, { owner: owner ?? null }))
            yield* store.batch(statements).pipe(
              Effect.catchIf(isConstraint, () => Effect.fail(new NamespaceRuleError({ rule: "NamespaceExists" })))
            )
            return { record: { name, owner, createdAt: now, rateLimit: undefined }, ownerKey }
          }),
        get,
        members: (namespace, page) =>
          readPage(
            store,
            { select: "SELECT wallet, role, added_at, added_by FROM members", where: ["namespace = ?"], params: [namespace], order: ["added_at", "wallet"], direction: "asc" },
            page,
            toMember
          ),
        putMember: (namespace, wallet, role, actor, actorRole) =>
          Effect.gen(function* () {
            if (actorRole === "custom") return yield* new NamespaceRuleError({ rule: "KeysCannotManageMembers" })
            // Admins manage members below them; only the owner makes or unmakes admins.
            if (rank[role] >= rank[actorRole] && actorRole !== "owner") {
              return yield* new NamespaceRuleError({ rule: "RoleTooHigh" })
            }
            const existing = yield* memberRow(namespace, wallet)
            if (Option.isSome(existing)) {
              if (existing.value.role === "owner") return yield* new NamespaceRuleError({ rule: "OwnerImmutable" })
              if (rank[existing.value.role] >= rank[actorRole] && actorRole !== "owner") {
                return yield* new NamespaceRuleError({ rule: "RoleTooHigh" })
              }
            }
            const now = yield* Clock.currentTimeMillis
            // The role change must not overwrite an owner row that appeared since we looked.
            const write: Statement = {
              sql: `INSERT INTO members (namespace, wallet, role, added_at, added_by) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (namespace, wallet) DO UPDATE SET role = excluded.role WHERE members.role <> 'owner'`,
              params: [namespace, wallet, role, now, actor]
            }
            const entry = yield* audit.entry(namespace, "member.put", actor, wallet, { role }, { onlyIfChanged: true })
            // a role change ends the keys the member minted from a session under the old role
            const changed = Option.isSome(existing) && existing.value.role !== role
            const [result] = yield* store.batch(changed ? [write, entry, revokeSignInKeys(namespace, wallet, now, role)] : [write, entry])
            // a role changed or given changes what kept keys and session standings say
            kept.forget()
            if (result === undefined || result.rowsAffected === 0) return yield* new NamespaceRuleError({ rule: "OwnerImmutable" })
            const member: Member = Option.match(existing, {
              onNone: () => ({ wallet, role, addedAt: now, addedBy: actor }),
              onSome: (m) => ({ ...m, role })
            })
            return { member, created: Option.isNone(existing) }
          }),
        removeMember: (namespace, wallet, actor, actorRole) =>
          Effect.gen(function* () {
            if (actorRole === "custom") return yield* new NamespaceRuleError({ rule: "KeysCannotManageMembers" })
            const existing = yield* memberRow(namespace, wallet)
            if (Option.isNone(existing)) return yield* new NamespaceRuleError({ rule: "NoSuchMember" })
            if (existing.value.role === "owner") return yield* new NamespaceRuleError({ rule: "OwnerImmutable" })
            if (rank[existing.value.role] >= rank[actorRole] && actorRole !== "owner") {
              return yield* new NamespaceRuleError({ rule: "RoleTooHigh" })
            }
            const entry = yield* audit.entry(namespace, "member.remove", actor, wallet, {}, { onlyIfChanged: true })
            const now = yield* Clock.currentTimeMillis
            const [result] = yield* store.batch([
              { sql: "DELETE FROM members WHERE namespace = ? AND wallet = ? AND role <> 'owner'", params: [namespace, wallet] },
              entry,
              // the keys they minted from a session go with them
              revokeSignInKeys(namespace, wallet, now, undefined),
              // and so do their sessions, for good: judged only by membership now, a session
              // would come back if the wallet were added again or sign-in opened to everyone
              {
                sql: `UPDATE sessions SET ended_at = ?, end_reason = 'member_removed' WHERE namespace = ? AND wallet = ?
                      AND ended_at IS NULL AND NOT EXISTS (SELECT 1 FROM members WHERE namespace = ? AND wallet = ?)`,
                params: [now, namespace, wallet, namespace, wallet]
              }
            ])
            kept.forget()
            if (result === undefined || result.rowsAffected === 0) return yield* new NamespaceRuleError({ rule: "NoSuchMember" })
          }),
        transfer: (namespace, wallet, actor, actorWallet) =>
          Effect.gen(function* () {
            if (wallet.toLowerCase() === ZERO_ADDRESS) return yield* new NamespaceRuleError({ rule: "ZeroAddress" })
            const record = yield* requireNamespace(namespace)
            const now = yield* Clock.currentTimeMillis
            const previous = record.owner
            // A wallet's token carries the role it had when issued (up to 15 minutes old): only the
            // wallet the registry names as owner now may hand the namespace on.
            if (actorWallet !== undefined && actorWallet !== previous) return yield* new NamespaceRuleError({ rule: "NotOwnerNow" })
            // To the owner it already has: nothing moves, so nothing changes (the owner keys would
            // otherwise become admin keys with no one to hand their powers to).
            if (previous === wallet) return record
            // The recipient accepts from its own session, so it must be able to open one.
            const [eligible] = yield* store.query({
              sql: `SELECT 1 AS ok FROM namespaces n WHERE n.name = ? AND (n.sign_in = 'open'
                      OR EXISTS (SELECT 1 FROM members m WHERE m.namespace = n.name AND m.wallet = ?))`,
              params: [namespace, wallet]
            })
            if (eligible === undefined) return yield* new NamespaceRuleError({ rule: "RecipientCannotSignIn" })
            const offer: OwnershipOffer = { from: previous, to: wallet, offeredBy: actor, createdAt: now, expiresAt: now + OFFER_SECONDS * 1000 }
            // Written only while the owner is still the one we read: a transfer that completed
            // meanwhile makes this offer lose, its audit row included.
            const [written] = yield* store.batch([
              {
                sql: `INSERT INTO ownership_offers (namespace, from_owner, to_wallet, offered_by, created_at, expires_at)
                      SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM namespaces WHERE name = ? AND owner IS ?)
                      ON CONFLICT (namespace) DO UPDATE SET from_owner = excluded.from_owner, to_wallet = excluded.to_wallet,
                        offered_by = excluded.offered_by, created_at = excluded.created_at, expires_at = excluded.expires_at`,
                params: [namespace, previous ?? null, wallet, actor, now, offer.expiresAt, namespace, previous ?? null]
              },
              yield* audit.entry(
                namespace,
                "namespace.transfer_offer",
                actor,
                wallet,
                { previous: previous ?? null, expires_at: Math.floor(offer.expiresAt / 1000) },
                { onlyIfChanged: true }
              )
            ])
            if (written === undefined || written.rowsAffected === 0) return yield* new NamespaceRuleError({ rule: "NotOwner" })
            return offer
          }),
        offer: (namespace) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.map(offerRow(namespace), Option.filter((o) => o.expiresAt > now))
          ),
        acceptTransfer: (namespace, wallet) =>
          Effect.gen(function* () {
            const record = yield* requireNamespace(namespace)
            const now = yield* Clock.currentTimeMillis
            const found = yield* offerRow(namespace)
            if (Option.isNone(found) || found.value.expiresAt <= now) return yield* new NamespaceRuleError({ rule: "NoOffer" })
            const offer = found.value
            if (offer.to !== wallet) return yield* new NamespaceRuleError({ rule: "OfferForAnother" })
            const previous = offer.from
            // The owner column is the compare-and-swap, taken only while this very offer stands
            // (same recipient, same making, unexpired) and the owner is still the one who made
            // it: a cancel, a newer offer or another transfer meanwhile makes this lose, and then
            // it writes nothing, its audit row included. Each later statement holds only once the
            // namespace names the new owner.
            const nowOwner = "EXISTS (SELECT 1 FROM namespaces WHERE name = ? AND owner IS ?)"
            const statements: Array<Statement> = [
              {
                sql: `UPDATE namespaces SET owner = ? WHERE name = ? AND owner IS ? AND EXISTS (SELECT 1 FROM ownership_offers
                        WHERE namespace = ? AND to_wallet = ? AND created_at = ? AND expires_at > ?)`,
                params: [wallet, namespace, previous ?? null, namespace, wallet, offer.createdAt, now]
              },
              yield* audit.entry(
                namespace,
                "namespace.transfer",
                wallet,
                wallet,
                { previous: previous ?? null, offered_by: offer.offeredBy },
                { onlyIfChanged: true }
              ),
              {
                sql: `INSERT INTO members (namespace, wallet, role, added_at, added_by) SELECT ?, ?, 'owner', ?, ? WHERE ${nowOwner}
                      ON CONFLICT (namespace, wallet) DO UPDATE SET role = 'owner'`,
                params: [namespace, wallet, now, offer.offeredBy, namespace, wallet]
              }
            ]
            if (previous !== undefined) {
              statements.push({
                sql: `UPDATE members SET role = 'admin' WHERE namespace = ? AND wallet = ? AND role = 'owner' AND ${nowOwner}`,
                params: [namespace, previous, namespace, wallet]
              })
            }
            // Owner keys (the one `namespace create` printed) belong to the ownership, not to a
            // person: they become admin keys, so the owner's powers move with the transfer.
            statements.push(
              {
                sql: `UPDATE api_keys SET role = 'admin' WHERE namespace = ? AND role = 'owner' AND ${nowOwner}`,
                params: [namespace, namespace, wallet]
              },
              { sql: `DELETE FROM ownership_offers WHERE namespace = ? AND ${nowOwner}`, params: [namespace, namespace, wallet] }
            )
            const [swap] = yield* store.batch(statements)
            kept.forget()
            if (swap === undefined || swap.rowsAffected === 0) return yield* new NamespaceRuleError({ rule: "OfferChanged" })
            return { ...record, owner: wallet }
          }),
        cancelTransfer: (namespace, actor, actorWallet) =>
          Effect.gen(function* () {
            const record = yield* requireNamespace(namespace)
            if (actorWallet !== undefined && actorWallet !== record.owner) return yield* new NamespaceRuleError({ rule: "NotOwnerNow" })
            const found = yield* offerRow(namespace)
            if (Option.isNone(found)) return yield* new NamespaceRuleError({ rule: "NoOffer" })
            // Only the offer we read: one made since stands until it is cancelled in turn.
            const [removed] = yield* store.batch([
              {
                sql: "DELETE FROM ownership_offers WHERE namespace = ? AND to_wallet = ? AND created_at = ?",
                params: [namespace, found.value.to, found.value.createdAt]
              },
              yield* audit.entry(namespace, "namespace.transfer_cancel", actor, found.value.to, {}, { onlyIfChanged: true })
            ])
            if (removed === undefined || removed.rowsAffected === 0) return yield* new NamespaceRuleError({ rule: "NoOffer" })
            return found.value
          }),
        setRateLimit: (namespace, limit, actor) =>
          Effect.gen(function* () {
            const entry = yield* audit.entry(namespace, "namespace.rate_limit", actor, namespace, {
              rps: limit?.rps ?? null,
              burst: limit?.burst ?? null
            })
            yield* store.batch([
              {
                sql: "UPDATE namespaces SET rate_limit_rps = ?, rate_limit_burst = ? WHERE name = ?",
                params: [limit?.rps ?? null, limit?.burst ?? null, namespace]
              },
              entry
            ])
          })
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() =>
    Namespaces.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Audit.Test,
          ApiKeys.Test,
          KeptReads.Test
        )
      )
    )
  )
}

/**
 * Ends the API keys a wallet minted from its sessions (`POST /v1/auth/api-key`), only if the
 * batch's member write took effect: the member now has `role`, or (undefined) is gone.
 */
const revokeSignInKeys = (namespace: string, wallet: string, at: number, role: Role | undefined): Statement => ({
  sql:
    "UPDATE api_keys SET revoked_at = ? WHERE namespace = ? AND origin = 'sign-in' AND lower(created_by) = lower(?) AND revoked_at IS NULL AND " +
    (role === undefined
      ? "NOT EXISTS (SELECT 1 FROM members WHERE namespace = ? AND wallet = ?)"
      : "EXISTS (SELECT 1 FROM members WHERE namespace = ? AND wallet = ? AND role = ?)"),
  params: role === undefined ? [at, namespace, wallet, namespace, wallet] : [at, namespace, wallet, namespace, wallet, role]
})

const toMember = (r: Readonly<Record<string, string | number | null>>): Member => ({
  wallet: String(r.wallet),
  role: String(r.role) as Role,
  addedAt: Number(r.added_at),
  addedBy: String(r.added_by)
})

export { StoreError }
