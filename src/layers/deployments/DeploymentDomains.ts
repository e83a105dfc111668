/**
 * A deployment's custom domains (the `domains/add|verify|list|remove` routes; docs/deployments.md,
 * "Custom domains"). Adding one records a pending claim with a fresh token and tells the tenant
 * which TXT record to publish; other deployments' pending claims on the same domain do not stand
 * in its way. Verifying reads that record from DNS and, when it holds the token, marks the claim
 * verified so it serves: the first claim to verify owns the domain, and the others then answer
 * 409. Who owns a domain is the store's to decide (one statement with the registry's unique index
 * behind it, so two verifies cannot both win); the name rules are CustomDomainRules.ts's.
 *
 * Serving reads its host table from the registry: the routes refresh it after a verify or a
 * remove (AppHosts.refresh), so the change is served at once on this gateway and within its
 * refresh period on the others.
 */
import { Context, Effect, Either, Layer, Option } from "effect"
import { customDomain, MAX_CUSTOM_DOMAINS, verificationRecordName } from "../../domain/CustomDomainRules.js"
import type { DeploymentDomainCode } from "../../domain/Errors.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { StoreError } from "../registry/RegistryStore.js"
import { type Refused, refuse } from "../Refused.js"
import { domainInUse } from "./CustomDomains.js"
import type { CustomDomainRecord, DeploymentRecord } from "./DeploymentRecord.js"
import { DeploymentStore, type DeploymentStoreService } from "./DeploymentStore.js"
import { lookupTxt } from "./TxtLookup.js"

export type DomainRefused = Refused<DeploymentDomainCode>

/** The TXT record a domain is verified by. */
export interface VerificationRecord {
  readonly name: string
  readonly value: string
}

export interface DomainView {
  readonly domain: string
  readonly verifiedAt: number | undefined
  readonly txt: VerificationRecord
}

export interface VerifiedDomain extends DomainView {
  readonly verifiedAt: number
}

export interface DeploymentDomainsService {
  /** Records a pending claim on `domain` for the deployment `name`, with the TXT record to publish. */
  readonly add: (namespace: string, name: string, domain: string) => Effect.Effect<DomainView, DomainRefused | StoreError>
  /**
   * Checks DNS and marks the claim verified; one already verified is answered as it is, and one
   * whose domain another deployment serves is CONFLICT without asking DNS.
   */
  readonly verify: (namespace: string, name: string, domain: string) => Effect.Effect<VerifiedDomain, DomainRefused | StoreError>
  readonly list: (namespace: string, name: string) => Effect.Effect<ReadonlyArray<DomainView>, DomainRefused | StoreError>
  /** Removes the domain from the deployment; NOT_FOUND when it has no such domain. */
  readonly remove: (namespace: string, name: string, domain: string) => Effect.Effect<string, DomainRefused | StoreError>
}

export interface DeploymentDomainsOptions {
  readonly baseDomain: string
  /** DNS servers asked for the TXT record (`ip`, `ip:port`, `[ipv6]:port`); empty: the system's. */
  readonly dnsServers: ReadonlyArray<string>
  /** Unverified claims one namespace may hold (`PORTICO_DOMAINS_PENDING_PER_NAMESPACE`). */
  readonly pendingPerNamespace: number
}

const inUse = (domain: string): Effect.Effect<never, DomainRefused> => {
  const { hint, reason } = domainInUse(domain)
  return Effect.fail(refuse("CONFLICT", reason, hint))
}

const view = (record: CustomDomainRecord): DomainView => ({
  domain: record.domain,
  verifiedAt: record.verifiedAt,
  txt: { name: verificationRecordName(record.domain), value: record.token }
})

export const makeDeploymentDomains = (store: DeploymentStoreService, options: DeploymentDomainsOptions): DeploymentDomainsService => {
  const deployment = (namespace: string, name: string): Effect.Effect<DeploymentRecord, DomainRefused | StoreError> =>
    Effect.flatMap(store.get(namespace, name), (found) =>
      Option.match(found, {
        onNone: () => Effect.fail(refuse("NOT_FOUND", `no deployment ${name} in namespace ${namespace}`)),
        onSome: Effect.succeed
      })
    )

  const checked = (value: string): Effect.Effect<string, DomainRefused> =>
    Either.match(customDomain(value, options.baseDomain), {
      onLeft: (e) => Effect.fail(refuse("VALIDATION_FAILED", e.message)),
      onRight: Effect.succeed
    })

  /** The deployment's record of `domain`, or NOT_FOUND naming both. */
  const held = (record: DeploymentRecord, domain: string): Effect.Effect<CustomDomainRecord, DomainRefused | StoreError> =>
    Effect.flatMap(store.domains(record.namespace, record.id), (domains) => {
      const found = domains.find((d) => d.domain === domain)
      return found === undefined
        ? Effect.fail(refuse("NOT_FOUND", `deployment ${record.name} has no custom domain ${domain}`, "add it with domains/add first"))
        : Effect.succeed(found)
    })

  const add: DeploymentDomainsService["add"] = (namespace, name, value) =>
    Effect.gen(function* () {
      const domain = yield* checked(value)
      const record = yield* deployment(namespace, name)
      // the deployment's cap is read then written, not one statement: two adds racing past it by
      // one are harmless (it bounds rows per deployment, not a security rule); the namespace's cap
      // on pending claims is counted in the store's INSERT
      const existing = yield* store.domains(namespace, record.id)
      if (existing.some((d) => d.domain === domain)) {
        return yield* refuse("CONFLICT", `${domain} is already a custom domain of ${name}`, "verify it with domains/verify, or remove it first")
      }
      if (existing.length >= MAX_CUSTOM_DOMAINS) {
        return yield* refuse("VALIDATION_FAILED", `domain: a deployment holds at most ${MAX_CUSTOM_DOMAINS} custom domains`, "remove one first")
      }
      const added = yield* store.addDomain(namespace, record.id, domain, options.pendingPerNamespace).pipe(
        Effect.catchTag("Refused", (e) =>
          // the record's store answers in the wider record family; here only these can come back
          Effect.fail(
            e.code === "NOT_FOUND" || e.code === "CONFLICT" || e.code === "VALIDATION_FAILED"
              ? refuse(e.code, e.reason, e.hint)
              : refuse("UNAVAILABLE", e.reason)
          )
        )
      )
      return view(added)
    })

  const verify: DeploymentDomainsService["verify"] = (namespace, name, value) =>
    Effect.gen(function* () {
      const domain = yield* checked(value)
      const record = yield* deployment(namespace, name)
      const current = yield* held(record, domain)
      if (current.verifiedAt !== undefined) return { ...view(current), verifiedAt: current.verifiedAt }
      // another claim verified first: no DNS answer can change that (the mark below says it again
      // for a verify that wins meanwhile)
      if (yield* store.domainServedByOther(record.id, domain)) return yield* inUse(domain)
      const txt = verificationRecordName(domain)
      const values = yield* lookupTxt(options.dnsServers, txt).pipe(
        Effect.catchTag("DnsUnavailable", (e) =>
          Effect.zipRight(
            Effect.logWarning(`custom domain check: ${e.detail}`),
            Effect.fail(refuse("UNAVAILABLE", `DNS did not answer for ${txt}`, "retry shortly", 5))
          )
        )
      )
      if (!values.includes(current.token)) {
        const seen = values.length === 0 ? "no TXT record was found" : `its TXT records do not hold the token (${values.length} found)`
        return yield* refuse(
          "DOMAIN_NOT_VERIFIED",
          `${domain} is not verified: ${seen} at ${txt}`,
          `publish a TXT record ${txt} with the value ${current.token}, wait for it to be served, then verify again`
        )
      }
      const marked = yield* store.markDomainVerified(namespace, record.id, domain)
      // another claim's verify committed first, or this claim was removed or lapsed since the read
      if (marked === "taken") return yield* inUse(domain)
      if (marked === "absent") return yield* refuse("NOT_FOUND", `deployment ${name} has no custom domain ${domain}`)
      const after = yield* held(record, domain)
      if (after.verifiedAt === undefined) return yield* refuse("UNAVAILABLE", `the registry did not keep ${domain} verified`, "verify again")
      return { ...view(after), verifiedAt: after.verifiedAt }
    })

  const list: DeploymentDomainsService["list"] = (namespace, name) =>
    Effect.gen(function* () {
      const record = yield* deployment(namespace, name)
      return (yield* store.domains(namespace, record.id)).map(view)
    })

  const remove: DeploymentDomainsService["remove"] = (namespace, name, value) =>
    Effect.gen(function* () {
      // not the add's rules: a domain stored under older rules (another base domain) can still go
      const domain = value.trim().toLowerCase().replace(/\.$/, "")
      const record = yield* deployment(namespace, name)
      const removed = yield* store.removeDomain(namespace, record.id, domain)
      if (!removed) return yield* refuse("NOT_FOUND", `deployment ${name} has no custom domain ${domain}`)
      return domain
    })

  return { add, verify, list, remove }
}

export class DeploymentDomains extends Context.Tag("portico/DeploymentDomains")<DeploymentDomains, DeploymentDomainsService>() {
  static readonly Live = Layer.effect(
    DeploymentDomains,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      return makeDeploymentDomains(yield* DeploymentStore, {
        baseDomain: config.baseDomain,
        dnsServers: config.dnsServers,
        pendingPerNamespace: config.domainsPendingPerNamespace
      })
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => DeploymentDomains.Live.pipe(Layer.provide(Layer.mergeAll(DeploymentStore.Test, PorticoConfig.Test))))
}
