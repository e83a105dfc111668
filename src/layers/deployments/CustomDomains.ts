/**
 * A deployment's custom domain claims (the `domains/add|verify|list|remove` routes;
 * docs/deployments.md, "Custom domains"): one row per (domain, deployment), each with a token of
 * its own for the tenant to publish in DNS. The DNS check is the caller's; this records its
 * outcome.
 *
 * An unverified claim blocks no one: any number of deployments, in any namespaces, may hold one on
 * the same domain. The first claim marked verified owns the domain and is the only one served;
 * from then on no other claim on it verifies and no new one is added. Each rule is the predicate
 * of the one statement that writes, and the registry's unique index over verified domains stands
 * behind the verifying UPDATE, so of two gateways verifying one domain at once one wins.
 *
 * A claim not verified within PENDING_CLAIM_SECONDS of its add has lapsed: every read and write
 * here leaves it out, and each add deletes the lapsed claims of the whole registry in its batch.
 * A namespace holds at most `pendingPerNamespace` unverified claims, counted in the add's INSERT.
 */
import { Effect, Schema } from "effect"
import { DEFAULT_PENDING_DOMAINS_PER_NAMESPACE, PENDING_CLAIM_SECONDS } from "../../domain/CustomDomainRules.js"
import { type RegistryStoreService, StoreError } from "../registry/RegistryStore.js"
import { refuse } from "../Refused.js"
import { type CustomDomainRecord, newVerificationToken } from "./DeploymentRecord.js"
import type { DeploymentEventsService } from "./DeploymentEvents.js"
import { nowSeconds } from "./DeploymentEvents.js"
import { decodeDomains, toDomain } from "./DeploymentRows.js"
import type { DeploymentRefused } from "./DeploymentRefused.js"

/** What marking a claim verified found. */
export type VerifyOutcome =
  /** the deployment's claim is verified: by this call, or before it */
  | "verified"
  /** the deployment holds no live claim on the domain (never added, removed, or lapsed) */
  | "absent"
  /** another deployment serves the domain (its claim verified first, or it is its own domain) */
  | "taken"

export interface CustomDomainsService {
  /**
   * A pending claim with a fresh verification token. CONFLICT when the deployment holds the domain
   * already or another deployment serves it; VALIDATION_FAILED when the namespace holds
   * `pendingPerNamespace` unverified claims; NOT_FOUND without the deployment.
   */
  readonly addDomain: (
    namespace: string,
    id: string,
    domain: string,
    pendingPerNamespace?: number
  ) => Effect.Effect<CustomDomainRecord, StoreError | DeploymentRefused>
  /** Marks the deployment's claim verified unless another deployment serves the domain (first time kept). */
  readonly markDomainVerified: (namespace: string, id: string, domain: string) => Effect.Effect<VerifyOutcome, StoreError>
  /** Whether a deployment other than `id` serves `domain`: a verified claim, or its own domain. */
  readonly domainServedByOther: (id: string, domain: string) => Effect.Effect<boolean, StoreError>
  /** The deployment's live claims (verified, or pending and not lapsed), in domain order. */
  readonly domains: (namespace: string, id: string) => Effect.Effect<ReadonlyArray<CustomDomainRecord>, StoreError>
  /** Removes the deployment's live claim; false when it holds none. */
  readonly removeDomain: (namespace: string, id: string, domain: string) => Effect.Effect<boolean, StoreError>
}

/** The refusal's words when another deployment serves a domain: it names no namespace or deployment. */
export const domainInUse = (domain: string) => ({
  reason: `domain ${domain} is in use by another deployment`,
  hint: "a domain serves the one deployment that verified it first; it can be claimed again once that deployment removes it"
})

/** The claim of the deployment `(namespace, id)`: a pair that does not match reaches no row. */
const ownDomain = "domain = ? AND deployment_id = (SELECT id FROM deployments WHERE namespace = ? AND id = ?)"

/** A claim not lapsed; its parameter is the cutoff (`now - PENDING_CLAIM_SECONDS`). */
const live = "(verified_at IS NOT NULL OR created_at >= ?)"

const AddState = Schema.Struct({ deployment: Schema.Number, held: Schema.Number, served: Schema.Number })
const decodeAddState = Schema.decodeUnknown(Schema.Array(AddState))

const noRow = { rowsAffected: 0, lastInsertId: 0 }

export const makeCustomDomains = (store: RegistryStoreService, events: DeploymentEventsService): CustomDomainsService => {
  const cutoff = Effect.map(nowSeconds, (now) => now - PENDING_CLAIM_SECONDS)

  /** Why an add wrote nothing: the first of its predicates found broken, read after it. */
  const addRefusal = (namespace: string, id: string, domain: string, pendingPerNamespace: number, since: number) =>
    Effect.gen(function* () {
      const rows = yield* store.query({
        sql: `SELECT (SELECT COUNT(*) FROM deployments WHERE namespace = ? AND id = ?) AS deployment,
                (SELECT COUNT(*) FROM deployment_domains WHERE domain = ? AND deployment_id = ? AND ${live}) AS held,
                (SELECT COUNT(*) FROM deployments WHERE domain = ?)
                  + (SELECT COUNT(*) FROM deployment_domains WHERE domain = ? AND verified_at IS NOT NULL) AS served`,
        params: [namespace, id, domain, id, since, domain, domain]
      })
      const state = (yield* decodeAddState(rows).pipe(
        Effect.mapError((e) => new StoreError({ reason: "statement", detail: `a domain claim count is not of its shape: ${e.message}` }))
      ))[0]
      if (state === undefined || state.deployment === 0) return refuse("NOT_FOUND", `no deployment ${id} in namespace ${namespace}`)
      if (state.held > 0) return refuse("CONFLICT", `domain ${domain} is already a custom domain of this deployment`, "verify it, or remove it first")
      if (state.served > 0) {
        const { hint, reason } = domainInUse(domain)
        return refuse("CONFLICT", reason, hint)
      }
      return refuse(
        "VALIDATION_FAILED",
        `domain: a namespace holds at most ${pendingPerNamespace} unverified custom domains`,
        `verify or remove one first; an unverified domain lapses ${PENDING_CLAIM_SECONDS / 86_400} days after its add`
      )
    })

  const addDomain: CustomDomainsService["addDomain"] = (namespace, id, domain, pendingPerNamespace = DEFAULT_PENDING_DOMAINS_PER_NAMESPACE) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const since = now - PENDING_CLAIM_SECONDS
      const token = newVerificationToken()
      const written = yield* store
        .batch([
          // the lapsed claims first, so neither the count nor the key below meets one
          { sql: "DELETE FROM deployment_domains WHERE verified_at IS NULL AND created_at < ?", params: [since] },
          {
            sql: `INSERT INTO deployment_domains (domain, deployment_id, token, created_at, verified_at)
                  SELECT ?, d.id, ?, ?, NULL FROM deployments d WHERE d.namespace = ? AND d.id = ?
                    AND NOT EXISTS (SELECT 1 FROM deployments o WHERE o.domain = ?)
                    AND NOT EXISTS (SELECT 1 FROM deployment_domains c WHERE c.domain = ? AND (c.verified_at IS NOT NULL OR c.deployment_id = d.id))
                    AND (SELECT COUNT(*) FROM deployment_domains c JOIN deployments n ON n.id = c.deployment_id
                         WHERE n.namespace = d.namespace AND c.verified_at IS NULL) < ?`,
            params: [domain, token, now, namespace, id, domain, domain, pendingPerNamespace]
          }
        ])
        .pipe(Effect.catchIf((e) => e.reason === "constraint", () => Effect.succeed([noRow, noRow])))
      if ((written[1] ?? noRow).rowsAffected === 0) return yield* yield* addRefusal(namespace, id, domain, pendingPerNamespace, since)
      yield* events.addEvent(id, "domain_added", { domain })
      return { domain, token, createdAt: now, verifiedAt: undefined }
    })

  const markDomainVerified: CustomDomainsService["markDomainVerified"] = (namespace, id, domain) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const since = now - PENDING_CLAIM_SECONDS
      const written = yield* store
        .exec({
          sql: `UPDATE deployment_domains SET verified_at = ? WHERE verified_at IS NULL AND created_at >= ? AND ${ownDomain}
                  AND NOT EXISTS (SELECT 1 FROM deployment_domains o WHERE o.domain = ? AND o.verified_at IS NOT NULL)
                  AND NOT EXISTS (SELECT 1 FROM deployments o WHERE o.domain = ?)`,
          params: [now, since, domain, namespace, id, domain, domain]
        })
        // the unique index over verified domains: another claim's verify committed first
        .pipe(Effect.catchIf((e) => e.reason === "constraint", () => Effect.succeed(noRow)))
      if (written.rowsAffected > 0) {
        yield* events.addEvent(id, "domain_verified", { domain })
        return "verified"
      }
      const rows = yield* Effect.flatMap(
        store.query({ sql: `SELECT domain, token, created_at, verified_at FROM deployment_domains WHERE ${ownDomain} AND ${live}`, params: [domain, namespace, id, since] }),
        decodeDomains
      )
      const claim = rows[0]
      return claim === undefined ? "absent" : claim.verified_at !== null ? "verified" : "taken"
    })

  const domainServedByOther: CustomDomainsService["domainServedByOther"] = (id, domain) =>
    Effect.map(
      store.query({
        sql: `SELECT 1 FROM deployment_domains WHERE domain = ? AND verified_at IS NOT NULL AND deployment_id <> ?
              UNION ALL SELECT 1 FROM deployments WHERE domain = ? AND id <> ?`,
        params: [domain, id, domain, id]
      }),
      (rows) => rows.length > 0
    )

  const domains: CustomDomainsService["domains"] = (namespace, id) =>
    Effect.gen(function* () {
      const rows = yield* store.query({
        sql: `SELECT domain, token, created_at, verified_at FROM deployment_domains
              WHERE deployment_id = (SELECT id FROM deployments WHERE namespace = ? AND id = ?) AND ${live} ORDER BY domain`,
        params: [namespace, id, yield* cutoff]
      })
      return (yield* decodeDomains(rows)).map(toDomain)
    })

  const removeDomain: CustomDomainsService["removeDomain"] = (namespace, id, domain) =>
    Effect.gen(function* () {
      const written = yield* store.exec({ sql: `DELETE FROM deployment_domains WHERE ${ownDomain} AND ${live}`, params: [domain, namespace, id, yield* cutoff] })
      if (written.rowsAffected > 0) yield* events.addEvent(id, "domain_removed", { domain })
      return written.rowsAffected > 0
    })

  return { addDomain, markDomainVerified, domainServedByOther, domains, removeDomain }
}
