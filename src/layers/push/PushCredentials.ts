/**
 * A namespace's push credentials (spec §2.6, §4.6): stored sealed per provider (PushStore.ts),
 * never returned; the PUT answers the redacted record, GET the `has_<field>` view, DELETE is the
 * same answer whether or not one was stored. A relay host a tenant names is resolved when it is
 * stored, and a host that does not resolve, or resolves to a reserved range, is refused and not
 * stored (the egress guard, src/layers/egress/GuardedFetch.ts).
 */
import { Context, Effect, Layer, Option } from "effect"
import type { Principal } from "../../domain/Principal.js"
import {
  type CredentialSlot,
  hostOfUrl,
  parseCredential,
  parsePushConfig,
  presenceOf,
  pushProviders,
  type PushProvider,
  redactedOf,
  relayUrlOf,
  type StoredPushSecret
} from "../../domain/PushCredentials.js"
import { Audit } from "../audit/Audit.js"
import { GuardedFetch } from "../egress/GuardedFetch.js"
import type { StoreError } from "../registry/RegistryStore.js"
import { type Refused, refuse } from "../Refused.js"
import { PushStore } from "./PushStore.js"

/** The answer of a PUT (spec §2.6). */
export interface StoredCredential {
  readonly slot: CredentialSlot
  readonly updatedAt: number
  readonly updatedBy: string
  readonly redacted: Readonly<Record<string, string | boolean>>
}

/** The GET view: `has_<field>` only, and who stored it when. */
export interface CredentialView {
  readonly slot: CredentialSlot
  readonly stored: Option.Option<{ readonly updatedAt: number; readonly updatedBy: string; readonly present: Readonly<Record<string, boolean>> }>
}

export type PushCredentialRefused = Refused<"VALIDATION_FAILED">

export interface PushCredentialsService {
  /** Checks and stores `body` as the slot's credential (`push_config`: the legacy fields of /v1/push/config). */
  readonly put: (caller: Principal, slot: CredentialSlot, body: unknown) => Effect.Effect<StoredCredential, PushCredentialRefused | StoreError>
  readonly view: (caller: Principal, slot: CredentialSlot) => Effect.Effect<CredentialView, StoreError>
  /** Removes the slot's credential; whether one was stored. Later sends for it are no-ops. */
  readonly remove: (caller: Principal, slot: CredentialSlot) => Effect.Effect<boolean, StoreError>
  /** The providers with a stored credential, and those this gateway delivers to (every one). */
  readonly summary: (caller: Principal) => Effect.Effect<{ readonly configured: ReadonlyArray<PushProvider>; readonly supported: ReadonlyArray<PushProvider> }, StoreError>
}

const invalid = (field: string, reason: string) =>
  refuse("VALIDATION_FAILED", `${field}: ${reason}`, field === "body" ? "see the credential's fields in /v1/openapi.json" : undefined)

export class PushCredentials extends Context.Tag("portico/PushCredentials")<PushCredentials, PushCredentialsService>() {
  static readonly Live = Layer.effect(
    PushCredentials,
    Effect.gen(function* () {
      const store = yield* PushStore
      const egress = yield* GuardedFetch
      const audit = yield* Audit

      const checked = (slot: CredentialSlot, body: unknown): Effect.Effect<StoredPushSecret, PushCredentialRefused> => {
        const parsed = slot === "push_config" ? parsePushConfig(body) : parseCredential(slot, body)
        if (!parsed.ok) return Effect.fail(invalid(parsed.error.field, parsed.error.reason))
        const url = relayUrlOf(parsed.value)
        if (url === undefined) return Effect.succeed(parsed.value)
        // the host a later send would dial: refused now, while the tenant is there to hear it
        return Effect.as(
          Effect.mapError(egress.resolvesPublicly(hostOfUrl(url)), (e) =>
            invalid(slot === "push_config" ? "relay_base_url" : "base_url", e.reason === "unresolvable" ? "the host does not resolve" : "the host resolves to a private or reserved address")
          ),
          parsed.value
        )
      }

      return {
        put: (caller, slot, body) =>
          Effect.gen(function* () {
            const secret = yield* checked(slot, body)
            const record = yield* store.putCredential(caller.namespace, secret, caller.subject)
            yield* audit.record(caller.namespace, "push.credential.put", caller.subject, slot, {})
            return { slot, updatedAt: record.updatedAt, updatedBy: record.updatedBy, redacted: redactedOf(record.secret) }
          }),
        view: (caller, slot) =>
          Effect.map(store.credential(caller.namespace, slot), (found) => ({
            slot,
            stored: Option.map(found, (r) => ({ updatedAt: r.updatedAt, updatedBy: r.updatedBy, present: presenceOf(r.secret) }))
          })),
        remove: (caller, slot) =>
          Effect.tap(store.deleteCredential(caller.namespace, slot), (removed) =>
            removed ? audit.record(caller.namespace, "push.credential.delete", caller.subject, slot, {}) : Effect.void
          ),
        summary: (caller) =>
          Effect.map(store.configuredSlots(caller.namespace), (slots) => ({
            configured: pushProviders.filter((p) => slots.includes(p)),
            supported: pushProviders
          }))
      }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() => PushCredentials.Live.pipe(Layer.provide(Layer.mergeAll(Audit.Test, GuardedFetch.Test, PushStore.Test))))
}
