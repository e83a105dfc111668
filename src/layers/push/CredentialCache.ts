/**
 * What a namespace's sends deliver with, read from its stored credentials and kept for 30 seconds
 * (spec §5.14, §8: a replaced push key takes effect within 30 s on every gateway, and a send to
 * 10,000 devices opens the sealed records once, not per device).
 *
 * Which record wins (spec §9: the per-provider record takes precedence over the legacy one):
 * - `ios_push`: its credential; `ios_voip_push`: its own credential, else the `ios_push` one (the
 *   same p8 key signs for `<bundle_id>.voip`);
 * - `legacy_push`: the `legacy_push` credential's `access_token`, else `/v1/push/config`'s
 *   `legacy_access_token`;
 * - `relay_push`: the `relay_push` credential as a whole (its `base_url`, or the platform relay
 *   when it names none), else `/v1/push/config`'s `relay_base_url` and `relay_auth_token`, else
 *   the platform relay when this gateway has one.
 * A provider with none of these is not configured: its devices are skipped (a no-op, reason
 * `NotConfigured`), as spec §4.6 says of sends after a credential DELETE.
 */
import { Cache, Duration, Effect, Exit, Option } from "effect"
import type { CredentialSlot, StoredPushSecret } from "../../domain/PushCredentials.js"
import { pushConfigured } from "../../domain/PushProviders.js"
import type { StoreError } from "../registry/RegistryStore.js"
import type { ApnsCredential } from "./ApnsClient.js"
import type { PushStoreService } from "./PushStore.js"
import type { TenantRelay } from "./RelayPublisher.js"

/** A namespace's delivery credentials, resolved. */
export interface SendCredentials {
  /** Whether push is configured at all (spec §4.6: sends are 503 without). */
  readonly configured: boolean
  readonly apns: ApnsCredential | undefined
  readonly voip: ApnsCredential | undefined
  /** Expo's access token; undefined: `legacy_push` is not configured. */
  readonly expoToken: string | undefined
  /** Whether `relay_push` can be delivered: a tenant relay record or the platform relay. */
  readonly relayConfigured: boolean
  /** The tenant's relay; undefined: the platform relay. */
  readonly relay: TenantRelay | undefined
}

/** Spec §8: the credential cache lasts 30 seconds. */
export const CREDENTIAL_CACHE_TTL = Duration.seconds(30)

const apnsOf = (secret: StoredPushSecret | undefined): ApnsCredential | undefined =>
  secret?.provider === "ios_push" || secret?.provider === "ios_voip_push"
    ? { teamId: secret.team_id, keyId: secret.key_id, p8Key: secret.p8_key, bundleId: secret.bundle_id, environment: secret.environment }
    : undefined

/** The delivery view of a namespace's stored records (`platformRelay`: this gateway reaches a platform relay, its own or its peers', platformRelayReachable). */
export const sendCredentialsOf = (records: ReadonlyMap<CredentialSlot, StoredPushSecret>, platformRelay: boolean): SendCredentials => {
  const apns = apnsOf(records.get("ios_push"))
  const legacy = records.get("legacy_push")
  const config = records.get("push_config")
  const legacyConfig = config?.provider === "push_config" ? config : undefined
  const relayRecord = records.get("relay_push")
  const relay: TenantRelay | undefined =
    relayRecord?.provider === "relay_push"
      ? { baseUrl: relayRecord.base_url, authToken: relayRecord.auth_token }
      : legacyConfig?.relay_base_url !== undefined
        ? { baseUrl: legacyConfig.relay_base_url, authToken: legacyConfig.relay_auth_token }
        : undefined
  return {
    configured: pushConfigured([...records.keys()], platformRelay),
    apns,
    voip: apnsOf(records.get("ios_voip_push")) ?? apns,
    expoToken: legacy?.provider === "legacy_push" ? legacy.access_token : legacyConfig?.legacy_access_token,
    relayConfigured: relay !== undefined || relayRecord !== undefined || platformRelay,
    relay
  }
}

export interface CredentialCacheService {
  /** The namespace's credentials, read at most once per 30 s (a failed read is not kept). */
  readonly get: (namespace: string) => Effect.Effect<SendCredentials, StoreError>
}

export interface CredentialCacheOptions {
  /** Whether a platform relay is reachable now (RelayPublisherLive.ts `platformRelayReachable`). */
  readonly platformRelay: Effect.Effect<boolean>
  readonly timeToLive?: Duration.DurationInput
  readonly capacity?: number
}

/** Reads every stored slot of the namespace (one query for the list, then each record at once). */
const load = (store: PushStoreService, platformRelay: Effect.Effect<boolean>) => (namespace: string) =>
  Effect.gen(function* () {
    const slots = yield* store.configuredSlots(namespace)
    const found = yield* Effect.forEach(slots, (slot) => Effect.map(store.credential(namespace, slot), (r) => [slot, r] as const), {
      concurrency: "unbounded"
    })
    const records = new Map<CredentialSlot, StoredPushSecret>()
    for (const [slot, record] of found) if (Option.isSome(record)) records.set(slot, record.value.secret)
    return sendCredentialsOf(records, yield* platformRelay)
  })

export const makeCredentialCache = (store: PushStoreService, options: CredentialCacheOptions): Effect.Effect<CredentialCacheService> =>
  Effect.map(
    Cache.makeWith({
      capacity: options.capacity ?? 10_000,
      lookup: load(store, options.platformRelay),
      // a registry that did not answer is asked again on the next send
      timeToLive: (exit) => (Exit.isSuccess(exit) ? options.timeToLive ?? CREDENTIAL_CACHE_TTL : Duration.zero)
    }),
    (cache) => ({ get: (namespace) => cache.get(namespace) })
  )
