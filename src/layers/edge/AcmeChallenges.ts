/**
 * DNS-01 challenge records (`/v1/internal/acme/present` and `cleanup`, docs/edge.md): the edge's
 * ACME client proves control of the base domain, for the wildcard certificate `*.<base>` that
 * covers every namespace and deployment host, by a TXT record at `_acme-challenge.<base>`. The
 * edge hands each record to the gateway (engines/caddy, `dns.providers.portico`); the gateway
 * keeps it in the registry, where every node's DNS answer for the name reads it (AcmeDns.ts).
 *
 * Only names under the base domain are taken: the edge proves control of Portico's own zone,
 * never of a tenant's. A record lives until its cleanup, or an hour (a crashed edge's).
 */
import { Context, Effect, Layer } from "effect"
import type { EdgeCode } from "../../domain/Errors.js"
import { REGISTRY_NOW } from "../cluster/Membership.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { canonicalName } from "./Names.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** A record no cleanup removed is dropped after this long: an ACME order lives minutes. */
export const CHALLENGE_LIFE_MS = 60 * 60 * 1000

/** Records held for one name at once: an order for the base name and its wildcard needs two. */
export const CHALLENGES_PER_NAME = 16

export interface AcmeChallengesService {
  readonly present: (fqdn: string, value: string) => Effect.Effect<void, Refused<EdgeCode> | StoreError>
  readonly cleanup: (fqdn: string, value: string) => Effect.Effect<void, Refused<EdgeCode> | StoreError>
  /** The TXT values held for `fqdn` (lowercase, no trailing dot); empty when none. */
  readonly records: (fqdn: string) => Effect.Effect<ReadonlyArray<string>, StoreError>
  /** Whether `fqdn` is a name this node answers TXT questions for (`_acme-challenge.` under the base domain). */
  readonly isChallengeName: (fqdn: string) => boolean
}

export const makeAcmeChallenges = Effect.gen(function* () {
  const store = yield* RegistryStore
  const base = (yield* PorticoConfig).baseDomain.toLowerCase()
  const isChallengeName = (fqdn: string) => {
    const name = canonicalName(fqdn)
    return name.startsWith("_acme-challenge.") && (name === `_acme-challenge.${base}` || name.endsWith(`.${base}`))
  }
  const checked = (fqdn: string) =>
    isChallengeName(fqdn)
      ? Effect.succeed(canonicalName(fqdn))
      : Effect.fail(refuse("FORBIDDEN", `${fqdn} is not a challenge name of this platform's domain`, `present records at _acme-challenge.${base} or below it`))

  const service: AcmeChallengesService = {
    isChallengeName,
    present: (fqdn, value) =>
      Effect.gen(function* () {
        const name = yield* checked(fqdn)
        yield* store.exec({ sql: `DELETE FROM acme_challenges WHERE created_at < ${REGISTRY_NOW} - ?`, params: [CHALLENGE_LIFE_MS] })
        const [held] = yield* store.query({ sql: "SELECT COUNT(*) AS n FROM acme_challenges WHERE fqdn = ?", params: [name] })
        if (Number(held?.n ?? 0) >= CHALLENGES_PER_NAME) {
          return yield* Effect.fail(refuse("CONFLICT", `${name} already holds ${CHALLENGES_PER_NAME} challenge records`, "clean up finished challenges first"))
        }
        yield* store.exec({
          sql: `INSERT INTO acme_challenges (fqdn, value, created_at) VALUES (?, ?, ${REGISTRY_NOW})
                ON CONFLICT (fqdn, value) DO UPDATE SET created_at = excluded.created_at`,
          params: [name, value]
        })
      }),
    cleanup: (fqdn, value) =>
      Effect.flatMap(checked(fqdn), (name) => Effect.asVoid(store.exec({ sql: "DELETE FROM acme_challenges WHERE fqdn = ? AND value = ?", params: [name, value] }))),
    records: (fqdn) =>
      Effect.map(
        store.query({
          sql: `SELECT value FROM acme_challenges WHERE fqdn = ? AND created_at >= ${REGISTRY_NOW} - ? ORDER BY created_at`,
          params: [canonicalName(fqdn), CHALLENGE_LIFE_MS]
        }),
        (rows) => rows.map((row) => String(row.value))
      )
  }
  return service
})

export class AcmeChallenges extends Context.Tag("portico/AcmeChallenges")<AcmeChallenges, AcmeChallengesService>() {
  static readonly Live = Layer.effect(AcmeChallenges, makeAcmeChallenges)
  static readonly Test = Layer.suspend(() => AcmeChallenges.Live.pipe(Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test))))
}
