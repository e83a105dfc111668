/**
 * Push registrations (spec §2.6, §3.3, §4.6): a user's devices and a namespace's anonymous topics.
 * Every field is checked by the domain's rules (src/domain/PushRegistrations.ts) before anything
 * is stored; storage is PushStore's. What the spec leaves open is in docs/push.md ("Registration
 * routes").
 *
 * - Devices are keyed on the caller's subject. A device-bound session's registration is recorded
 *   against its verified device id (`bound`), whatever `device_id` the body names, so revoking
 *   that device ends it (spec §3.1).
 * - A registration, device or topic, needs push configured in the namespace (`pushConfigured`);
 *   listing and removing do not, so a user can always clean up.
 * - A topic write the registry refused is 500 INTERNAL (spec §9); a registry that does not answer
 *   stays a StoreError (503 UNAVAILABLE, retry).
 */
import { Context, Effect, Layer, Option } from "effect"
import type { PushRegistrationCode } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { pushConfigured } from "../../domain/PushProviders.js"
import { parseDeviceRegistration, parseTopicRegistration, topicIdOf, topicSecretBytes } from "../../domain/PushRegistrations.js"
import { PorticoConfig, type PorticoSettings, testSettings } from "../config/PorticoConfig.js"
import type { Page, PageRequest } from "../registry/Keyset.js"
import type { StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { Sealer } from "../secrets/Sealer.js"
import { testDirectory } from "../TestLayer.js"
import { type Refused, refuse } from "../Refused.js"
import { type DeviceRecord, PushStore } from "./PushStore.js"
import { Membership } from "../cluster/Membership.js"
import { platformRelayReachable } from "./RelayPublisherLive.js"

export type PushRegistrationRefused = Refused<PushRegistrationCode>

export interface RegisteredTopic {
  readonly topicId: string
  readonly expiresAt: number
}

export interface PushRegistrationsService {
  /** Checks `body` (a §2.6 device registration) and records it for the caller. */
  readonly registerDevice: (caller: Principal, body: unknown) => Effect.Effect<DeviceRecord, PushRegistrationRefused | StoreError>
  /** One page of the caller's registrations, oldest first (a revoked device's are gone); tokens in full: the route redacts. */
  readonly devices: (caller: Principal, page: PageRequest) => Effect.Effect<Page<DeviceRecord>, StoreError>
  /** Removes one of the caller's registrations; whether there was one. */
  readonly removeDevice: (caller: Principal, deviceId: string) => Effect.Effect<boolean, StoreError>
  /** Checks `body` (`{topic_secret, provider, token}`) and registers the topic (spec §3.3). */
  readonly registerTopic: (caller: Principal, body: unknown) => Effect.Effect<RegisteredTopic, PushRegistrationRefused | StoreError>
  /** Removes the live topic of `secret`: NOT_FOUND when unknown, expired or another namespace's. */
  readonly removeTopic: (caller: Principal, secret: unknown) => Effect.Effect<string, PushRegistrationRefused | StoreError>
}

const invalid = (field: string, reason: string) =>
  refuse("VALIDATION_FAILED", `${field}: ${reason}`, field === "body" ? "see the registration's fields in /v1/openapi.json" : undefined)

export class PushRegistrations extends Context.Tag("portico/PushRegistrations")<PushRegistrations, PushRegistrationsService>() {
  static readonly Live = Layer.effect(
    PushRegistrations,
    Effect.gen(function* () {
      const store = yield* PushStore
      const settings = yield* PorticoConfig
      // the same rule as the sends': a node without a relay of its own still delivers through its peers'
      const platformRelay = platformRelayReachable(settings, yield* Membership)
      const maxDevices = settings.pushMaxDevicesPerUser

      const configured = (namespace: string) =>
        Effect.flatMap(Effect.zip(store.configuredSlots(namespace), platformRelay), ([slots, relay]) =>
          pushConfigured(slots, relay)
            ? Effect.void
            : Effect.fail(
                refuse("PUSH_NOT_CONFIGURED", `push is not configured in namespace ${namespace}`, "store a credential: PUT /v1/namespace/push-credentials/{provider}")
              )
        )

      /** A refused write (constraint, statement) is a 500 with its detail in the log; an unanswered one stays a StoreError. */
      const refusedWrite = (e: StoreError): Effect.Effect<never, PushRegistrationRefused | StoreError> =>
        e.reason === "unavailable"
          ? Effect.fail(e)
          : Effect.zipRight(
              Effect.logError("push topic write refused by the registry", { reason: e.reason, detail: e.detail }),
              Effect.fail(refuse("INTERNAL", "the registry refused the topic write"))
            )

      return {
        registerDevice: (caller, body) =>
          Effect.gen(function* () {
            const parsed = parseDeviceRegistration(body)
            if (!parsed.ok) return yield* invalid(parsed.error.field, parsed.error.reason)
            yield* configured(caller.namespace)
            // a device-bound session registers its verified device, never the label it sent
            const bound = caller.deviceId !== undefined
            const registration = bound ? { ...parsed.value, device_id: caller.deviceId } : parsed.value
            const kept = yield* store.registerDeviceWithin(caller.namespace, caller.subject, registration, bound, maxDevices)
            if (Option.isNone(kept)) {
              return yield* refuse(
                "VALIDATION_FAILED",
                `device_id: this user already holds ${maxDevices} push registrations, the most allowed`,
                "remove one with DELETE /v1/push/devices/{device_id}, or register again under a device id already held"
              )
            }
            return kept.value
          }),
        devices: (caller, page) => store.devicesPage(caller.namespace, caller.subject, page),
        removeDevice: (caller, deviceId) => store.deleteDevice(caller.namespace, caller.subject, deviceId),
        registerTopic: (caller, body) =>
          Effect.gen(function* () {
            const parsed = parseTopicRegistration(body)
            if (!parsed.ok) return yield* invalid(parsed.error.field, parsed.error.reason)
            yield* configured(caller.namespace)
            return yield* Effect.catchAll(
              store.registerTopic(caller.namespace, parsed.value.topicId, parsed.value.provider, parsed.value.token),
              refusedWrite
            )
          }),
        removeTopic: (caller, secret) =>
          Effect.gen(function* () {
            const bytes = topicSecretBytes(secret)
            if (!bytes.ok) return yield* invalid(bytes.error.field, bytes.error.reason)
            const topicId = topicIdOf(bytes.value)
            const removed = yield* Effect.catchAll(store.deleteTopic(caller.namespace, topicId), refusedWrite)
            if (!removed) return yield* refuse("NOT_FOUND", "no live topic for this secret in this namespace")
            return topicId
          })
      }
    })
  )

  /**
   * The service over the registry's and the sealer's doubles, with the test settings changed by
   * `patch` (a cap, a platform relay); PushStore and the registry are provided beside it so a test
   * can store a credential or read the rows.
   */
  static readonly testWith = (patch: Partial<PorticoSettings> = {}) =>
    PushRegistrations.Live.pipe(
      Layer.provideMerge(Layer.mergeAll(PushStore.Live, Membership.Live)),
      Layer.provideMerge(
        Layer.mergeAll(
          SqliteRegistryStore.Test,
          Sealer.Test,
          Layer.scoped(PorticoConfig, Effect.map(testDirectory("data"), (dir) => testSettings(dir, patch)))
        )
      )
    )

  /** `testWith` the test settings as they are (no platform relay, the default cap). */
  static readonly Test = Layer.suspend(() => PushRegistrations.testWith())
}
