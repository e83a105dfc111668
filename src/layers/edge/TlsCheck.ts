/**
 * The edge's on-demand "ask" (`GET /v1/internal/tls/check?domain=`, docs/edge.md): before Caddy
 * obtains a certificate for a name a TLS handshake asked for, it asks the gateway whether the name
 * is one Portico serves. Yes for the base domain and `api.<base>`, the namespace gateway host
 * `ns-<namespace>.<base>` of a namespace that exists, a deployment's own host, and a custom
 * domain whose verification succeeded; no for anything else, so a stranger pointing names at the
 * edge cannot make it order certificates (and spend the CA's rate limits) for them.
 *
 * Read from the registry at each ask, not from a table refreshed every few seconds: an ask comes
 * once per name until the certificate is stored, and a domain verified a moment ago on another
 * gateway must not be refused for lack of a refresh.
 */
import { Context, Effect, Layer } from "effect"
import type { EdgeCode } from "../../domain/Errors.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { canonicalName } from "./Names.js"
import { isLoopbackSource } from "../nodes/NodeEnrolment.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export type TlsVerdict =
  | { readonly allowed: true; readonly kind: "platform" | "namespace" | "deployment" | "custom-domain" }
  | { readonly allowed: false }

export interface TlsCheckService {
  /** Whether the edge may obtain a certificate for `domain` (a host name, lowercase, no port). */
  readonly check: (domain: string) => Effect.Effect<TlsVerdict, StoreError>
  /**
   * The edge's ask from `remote`: the name as checked and its kind, or FORBIDDEN from another
   * machine and NOT_FOUND for a name the platform does not serve.
   */
  readonly ask: (
    domain: string,
    remote: string | undefined
  ) => Effect.Effect<{ readonly domain: string; readonly kind: Extract<TlsVerdict, { allowed: true }>["kind"] }, Refused<EdgeCode> | StoreError>
}

const NO: TlsVerdict = { allowed: false }

export const makeTlsCheck = Effect.gen(function* () {
  const store = yield* RegistryStore
  const base = (yield* PorticoConfig).baseDomain.toLowerCase()
  const exists = (sql: string, value: string) => Effect.map(store.query({ sql, params: [value] }), (rows) => rows.length > 0)

  const check: TlsCheckService["check"] = (asked) =>
    Effect.gen(function* () {
      const domain = canonicalName(asked)
      if (domain === base || domain === `api.${base}`) return { allowed: true, kind: "platform" } as const
      if (domain.endsWith(`.${base}`)) {
        const label = domain.slice(0, -(base.length + 1))
        if (label.startsWith("ns-") && !label.includes(".")) {
          const known = yield* exists("SELECT 1 FROM namespaces WHERE name = ?", label.slice(3))
          return known ? ({ allowed: true, kind: "namespace" } as const) : NO
        }
      }
      if (yield* exists("SELECT 1 FROM deployments WHERE domain = ?", domain)) return { allowed: true, kind: "deployment" } as const
      if (yield* exists("SELECT 1 FROM deployment_domains WHERE domain = ? AND verified_at IS NOT NULL", domain)) {
        return { allowed: true, kind: "custom-domain" } as const
      }
      return NO
    })
  return {
    check,
    ask: (domain, remote) =>
      isLoopbackSource(remote)
        ? Effect.flatMap(check(domain), (verdict) =>
            verdict.allowed
              ? Effect.succeed({ domain: canonicalName(domain), kind: verdict.kind })
              : Effect.fail(refuse("NOT_FOUND", `${domain} is not a host this platform serves`))
          )
        : Effect.fail(refuse("FORBIDDEN", "the TLS check is served to this node's own machine only"))
  } satisfies TlsCheckService
})

export class TlsCheck extends Context.Tag("portico/TlsCheck")<TlsCheck, TlsCheckService>() {
  static readonly Live = Layer.effect(TlsCheck, makeTlsCheck)
  static readonly Test = Layer.suspend(() => TlsCheck.Live.pipe(Layer.provide(Layer.mergeAll(PorticoConfig.Test, SqliteRegistryStore.Test))))
}
