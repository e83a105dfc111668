/** The push providers (spec §2.6), named neutrally: direct iOS, iOS VoIP, a self-hosted relay (ntfy), the legacy relayed service (Expo). */

/** Every provider the gateway delivers to (the credential summary's `supported`). */
export const pushProviders = ["ios_push", "ios_voip_push", "relay_push", "legacy_push"] as const
export type PushProvider = (typeof pushProviders)[number]

/** Providers a device registers for (spec §2.6). Here, beside the others, so the API's schemas take them without node:crypto. */
export const deviceProviders = ["ios_push", "relay_push", "legacy_push"] as const satisfies ReadonlyArray<PushProvider>
export type DeviceProvider = (typeof deviceProviders)[number]

/** Providers a topic registers for (spec §2.6). */
export const topicProviders = ["relay_push", "legacy_push", "ios_push", "ios_voip_push"] as const satisfies ReadonlyArray<PushProvider>
export type TopicProvider = (typeof topicProviders)[number]

/**
 * Whether a namespace has push configured (spec §4.6: registrations and sends are 503 without):
 * it stored a credential in any slot (the legacy `/v1/push/config` included), or the gateway has
 * a platform relay (`PORTICO_PUSH_RELAY_URL`), which delivers `relay_push` for every namespace.
 */
export const pushConfigured = (configuredSlots: ReadonlyArray<string>, platformRelay: boolean): boolean =>
  configuredSlots.length > 0 || platformRelay

/** The shortest relay topic secret (a relay credential's `topic_secret`): 22 base64 characters hold 128 bits. */
export const TOPIC_SECRET_MIN = 22
