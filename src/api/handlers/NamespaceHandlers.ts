import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Clock, Effect, Option } from "effect"
import { NotFound, OwnerRequired, refusal, unavailable, ValidationFailed } from "../../domain/Errors.js"
import { NamespaceCreation } from "../../layers/namespaces/NamespaceCreation.js"
import { type KeyRole, profileGrants } from "../../domain/Grants.js"
import type { Principal } from "../../domain/Principal.js"
import { Audit } from "../../layers/audit/Audit.js"
import { ApiKeys, type ApiKeyRecord } from "../../layers/keys/ApiKeys.js"
import { KeptReads } from "../../layers/registry/KeptReads.js"
import { Namespaces, rank } from "../../layers/namespaces/Namespaces.js"
import { RateLimiter } from "../../layers/ratelimit/RateLimiter.js"
import { RegistryStore, type StoreError } from "../../layers/registry/RegistryStore.js"
import { PorticoApi } from "../Api.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { toUnixSeconds } from "../Wire.js"
import { refusedOrDown } from "./Refusals.js"
import { CurrentSession } from "../../domain/Principal.js"
import { CurrentPrincipal } from "../../domain/Principal.js"

const storeDown = (_: StoreError) => unavailable("registry unavailable")

/** The caller's wallet when a signed-in wallet (not a key, nor a token exchanged from one) asks. */
const walletOf = (p: Principal): string | undefined => (p.method === "jwt" && p.keyId === undefined ? p.subject : undefined)

const keyView = (k: ApiKeyRecord) => ({
  id: k.id,
  namespace: k.namespace,
  label: k.label,
  role: k.role,
  scopes: [...k.scopes],
  created_at: toUnixSeconds(k.createdAt),
  created_by: k.createdBy,
  expires_at: k.expiresAt === undefined ? null : toUnixSeconds(k.expiresAt),
  revoked_at: k.revokedAt === undefined ? null : toUnixSeconds(k.revokedAt)
})

export const NamespaceHandlers = HttpApiBuilder.group(PorticoApi, "namespace", (handlers) =>
  Effect.gen(function* () {
    const namespaces = yield* Namespaces
    const keys = yield* ApiKeys
    const kept = yield* KeptReads
    const audit = yield* Audit
    const store = yield* RegistryStore
    const limiter = yield* RateLimiter
    const creation = yield* NamespaceCreation

    /**
     * A wallet already owning as many namespaces as it may is refused the namespace, at the offer
     * and again at the acceptance (spec §4.9: a generic 403 TRANSFER_REFUSED; 503 when the cap
     * cannot be read). Its own namespace back to its owner moves nothing, so it is not counted.
     */
    const transferCap = (namespace: string, to: string) =>
      Effect.gen(function* () {
        const record = yield* namespaces.get(namespace)
        if (Option.isSome(record) && record.value.owner === to) return
        if (!(yield* creation.belowCap(to))) {
          return yield* Effect.fail(refusal("TRANSFER_REFUSED", "this transfer is refused"))
        }
      }).pipe(Effect.catchTag("StoreError", () => Effect.fail(unavailable("the namespace cap could not be read"))))

    const rateLimitView = (namespace: string) =>
      Effect.map(limiter.limitOf(namespace), ({ limit, source }) => ({
        namespace,
        requests_per_second: limit.rps,
        burst: limit.burst,
        source
      }))

    return handlers
      .handle("listMembers", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const record = yield* Effect.mapError(namespaces.get(p.namespace), storeDown)
          const page = yield* Effect.mapError(namespaces.members(p.namespace, pageRequest(urlParams)), storeDown)
          return {
            namespace: p.namespace,
            owner: Option.match(record, { onNone: () => null, onSome: (r) => r.owner ?? null }),
            members: page.items.map((m) => ({
              wallet: m.wallet,
              role: m.role,
              added_at: toUnixSeconds(m.addedAt),
              added_by: m.addedBy
            })),
            next_cursor: nextCursorOf(page)
          }
        })
      )
      .handle("addMember", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const { member, created } = yield* namespaces
            .putMember(p.namespace, payload.wallet, payload.role, p.subject, p.role)
            .pipe(Effect.mapError(refusedOrDown))
          return {
            namespace: p.namespace,
            created,
            member: { wallet: member.wallet, role: member.role, added_at: toUnixSeconds(member.addedAt), added_by: member.addedBy }
          }
        })
      )
      .handle("removeMember", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          yield* namespaces
            .removeMember(p.namespace, path.wallet, p.subject, p.role)
            .pipe(Effect.mapError(refusedOrDown))
          return { namespace: p.namespace, removed: path.wallet }
        })
      )
      .handle("transfer", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          yield* transferCap(p.namespace, payload.wallet)
          const outcome = yield* namespaces
            .transfer(p.namespace, payload.wallet, p.subject, walletOf(p))
            .pipe(Effect.mapError(refusedOrDown))
          // to the owner it already has: nothing to offer, the ownership as it stands
          if ("name" in outcome) return { namespace: p.namespace, owner: outcome.owner ?? payload.wallet }
          return {
            namespace: p.namespace,
            status: "pending" as const,
            from: outcome.from ?? null,
            to: outcome.to,
            expires_at: toUnixSeconds(outcome.expiresAt)
          }
        })
      )
      .handle("pendingTransfer", () =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const offer = yield* Effect.mapError(namespaces.offer(p.namespace), storeDown)
          return {
            namespace: p.namespace,
            offer: Option.match(offer, {
              onNone: () => null,
              onSome: (o) => ({ from: o.from ?? null, to: o.to, offered_at: toUnixSeconds(o.createdAt), expires_at: toUnixSeconds(o.expiresAt) })
            })
          }
        })
      )
      .handle("acceptTransfer", () =>
        Effect.gen(function* () {
          const p = yield* CurrentSession
          yield* transferCap(p.namespace, p.subject)
          const record = yield* namespaces
            .acceptTransfer(p.namespace, p.subject)
            .pipe(Effect.mapError(refusedOrDown))
          return { namespace: p.namespace, owner: record.owner ?? p.subject }
        })
      )
      .handle("cancelTransfer", () =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const offer = yield* namespaces
            .cancelTransfer(p.namespace, p.subject, walletOf(p))
            .pipe(Effect.mapError(refusedOrDown))
          return { namespace: p.namespace, cancelled: offer.to }
        })
      )
      .handle("listKeys", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const page = yield* Effect.mapError(keys.list(p.namespace, pageRequest(urlParams)), storeDown)
          return { namespace: p.namespace, keys: page.items.map(keyView), next_cursor: nextCursorOf(page) }
        })
      )
      .handle("mintKey", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          if ((payload.scopes === undefined) === (payload.profile === undefined)) {
            return yield* new ValidationFailed({ error: "send exactly one of scopes or profile", hint: "for example {\"profile\":\"runtime\"}" })
          }
          const role: KeyRole = payload.profile ?? "custom"
          const scopes: ReadonlyArray<string> =
            payload.scopes === undefined
              ? profileGrants[payload.profile ?? "runtime"]
              : Array.from(new Set(payload.scopes))
          const label = payload.label ?? ""
          const minted = yield* keys
            .mint({ _tag: "Principal", principal: p }, { namespace: p.namespace, role, scopes, label, expiresInDays: payload.expires_in_days })
            .pipe(Effect.mapError(refusedOrDown))
          const expiresAt = minted.record.expiresAt
          return {
            id: minted.record.id,
            api_key: minted.apiKey,
            namespace: p.namespace,
            label,
            role,
            scopes: [...scopes],
            expires_at: expiresAt === undefined ? null : toUnixSeconds(expiresAt)
          }
        })
      )
      .handle("revokeKey", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          const target = yield* Effect.mapError(keys.active(path.id), storeDown)
          if (Option.isNone(target) || target.value.namespace !== p.namespace) return yield* new NotFound({ error: "no such active key in this namespace" })
          // as with members: keys below the caller's rank, its own key, or anything for the owner
          if (p.role !== "owner" && target.value.id !== p.keyId && rank[target.value.role] >= rank[p.role]) {
            return yield* new OwnerRequired({ error: `a ${p.role} cannot revoke a ${target.value.role} key`, hint: "the owner revokes admin and owner keys" })
          }
          const now = yield* Clock.currentTimeMillis
          const entry = yield* audit.entry(p.namespace, "key.revoke", p.subject, path.id, {}, { onlyIfChanged: true })
          const [result] = yield* Effect.mapError(
            store.batch([keys.revokeStatement(p.namespace, path.id, now), entry]),
            storeDown
          )
          kept.forget()
          if (result === undefined || result.rowsAffected === 0) return yield* new NotFound({ error: "no such active key in this namespace" })
          return { id: path.id, revoked: true as const }
        })
      )
      .handle("getRateLimit", () => Effect.flatMap(CurrentPrincipal, (p) => rateLimitView(p.namespace)))
      .handle("setRateLimit", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* CurrentPrincipal
          if (payload.requests_per_second === null && payload.burst !== undefined) {
            return yield* new ValidationFailed({ error: "burst needs requests_per_second; null restores the default for both" })
          }
          // A tenant may lower its limit, not raise it: the operator's per-namespace default is
          // what this gateway was sized for, and one namespace lifting itself would take the
          // capacity its neighbours share.
          const ceiling = limiter.namespaceCeiling
          const aboveCeiling = (what: string, max: number) =>
            new ValidationFailed({
              error: `${what} may be at most ${max}`,
              hint: `the ceiling is this gateway's per-namespace default (${ceiling.rps} requests per second, burst ${ceiling.burst}); a namespace may lower its limit, only the operator raises the default`
            })
          const rps = payload.requests_per_second
          if (rps !== null && rps > ceiling.rps) return yield* aboveCeiling("requests_per_second", ceiling.rps)
          if (payload.burst !== undefined && payload.burst > ceiling.burst) return yield* aboveCeiling("burst", ceiling.burst)
          // the derived burst (twice the rate) is held to the ceiling rather than refused: the
          // caller did not ask for it
          const limit = rps === null ? undefined : { rps, burst: payload.burst ?? Math.min(rps * 2, ceiling.burst) }
          yield* Effect.mapError(namespaces.setRateLimit(p.namespace, limit, p.subject), storeDown)
          yield* limiter.invalidate(p.namespace)
          return yield* rateLimitView(p.namespace)
        })
      )
  })
)

