/**
 * A deployment's custom domains (the `domains/add|verify|list|remove` routes): each domain serves
 * one deployment across the registry and is never another deployment's own domain; it carries a
 * verification token the tenant publishes in DNS, and serves only once verified (the DNS check is
 * the caller's; this only records its outcome).
 */
import { Effect } from "effect"
import type { RegistryStoreService, StoreError } from "../registry/RegistryStore.js"
import { refuse } from "../Refused.js"
import { type CustomDomainRecord, newVerificationToken } from "./DeploymentRecord.js"
import type { DeploymentEventsService } from "./DeploymentEvents.js"
import { nowSeconds } from "./DeploymentEvents.js"
import { decodeDomains, toDomain } from "./DeploymentRows.js"
import type { DeploymentRefused } from "./DeploymentRefused.js"

export interface CustomDomainsService {
  /** A custom domain with a fresh verification token; CONFLICT when any deployment holds it, NOT_FOUND without the deployment. */
  readonly addDomain: (namespace: string, id: string, domain: string) => Effect.Effect<CustomDomainRecord, StoreError | DeploymentRefused>
  /** Records the domain verified (first time kept); false when it is not this deployment's. */
  readonly markDomainVerified: (namespace: string, id: string, domain: string) => Effect.Effect<boolean, StoreError>
  readonly domains: (namespace: string, id: string) => Effect.Effect<ReadonlyArray<CustomDomainRecord>, StoreError>
  readonly removeDomain: (namespace: string, id: string, domain: string) => Effect.Effect<boolean, StoreError>
}

/** The domain row of the deployment `(namespace, id)`: a pair that does not match reaches no row. */
const ownDomain = "domain = ? AND deployment_id = (SELECT id FROM deployments WHERE namespace = ? AND id = ?)"

export const makeCustomDomains = (store: RegistryStoreService, events: DeploymentEventsService): CustomDomainsService => {
  const isVerified = (namespace: string, id: string, domain: string) =>
    Effect.map(
      store.query({ sql: `SELECT 1 FROM deployment_domains WHERE verified_at IS NOT NULL AND ${ownDomain}`, params: [domain, namespace, id] }),
      (rows) => rows.length > 0
    )

  const addDomain: CustomDomainsService["addDomain"] = (namespace, id, domain) =>
    Effect.gen(function* () {
      const exists = yield* store.query({ sql: "SELECT 1 FROM deployments WHERE namespace = ? AND id = ?", params: [namespace, id] })
      if (exists.length === 0) return yield* refuse("NOT_FOUND", `no deployment ${id} in namespace ${namespace}`)
      const now = yield* nowSeconds
      const token = newVerificationToken()
      const written = yield* store
        .exec({
          sql: `INSERT INTO deployment_domains (domain, deployment_id, token, created_at, verified_at)
                SELECT ?, ?, ?, ?, NULL WHERE NOT EXISTS (SELECT 1 FROM deployments WHERE domain = ?)
                  AND NOT EXISTS (SELECT 1 FROM deployment_domains WHERE domain = ?)`,
          params: [domain, id, token, now, domain, domain]
        })
        .pipe(Effect.catchIf((e) => e.reason === "constraint", () => Effect.succeed({ rowsAffected: 0, lastInsertId: 0 })))
      if (written.rowsAffected === 0) return yield* refuse("CONFLICT", `domain ${domain} is taken`, "a domain serves one deployment")
      yield* events.addEvent(id, "domain_added", { domain })
      return { domain, token, createdAt: now, verifiedAt: undefined }
    })

  const markDomainVerified: CustomDomainsService["markDomainVerified"] = (namespace, id, domain) =>
    Effect.gen(function* () {
      const now = yield* nowSeconds
      const written = yield* store.exec({
        sql: `UPDATE deployment_domains SET verified_at = ? WHERE verified_at IS NULL AND ${ownDomain}`,
        params: [now, domain, namespace, id]
      })
      if (written.rowsAffected > 0) yield* events.addEvent(id, "domain_verified", { domain })
      return written.rowsAffected > 0 || (yield* isVerified(namespace, id, domain))
    })

  const domains: CustomDomainsService["domains"] = (namespace, id) =>
    Effect.map(
      Effect.flatMap(
        store.query({
          sql: `SELECT domain, token, created_at, verified_at FROM deployment_domains
                WHERE deployment_id = (SELECT id FROM deployments WHERE namespace = ? AND id = ?) ORDER BY domain`,
          params: [namespace, id]
        }),
        decodeDomains
      ),
      (rows) => rows.map(toDomain)
    )

  const removeDomain: CustomDomainsService["removeDomain"] = (namespace, id, domain) =>
    Effect.gen(function* () {
      const written = yield* store.exec({ sql: `DELETE FROM deployment_domains WHERE ${ownDomain}`, params: [domain, namespace, id] })
      if (written.rowsAffected > 0) yield* events.addEvent(id, "domain_removed", { domain })
      return written.rowsAffected > 0
    })

  return { addDomain, markDomainVerified, domains, removeDomain }
}
