/** The push providers (spec §2.6), named neutrally: direct iOS, iOS VoIP, a self-hosted relay (ntfy), the legacy relayed service (Expo). */

/** Every provider the gateway delivers to (the credential summary's `supported`). */
export const pushProviders = ["ios_push", "ios_voip_push", "relay_push", "legacy_push"] as const
export type PushProvider = (typeof pushProviders)[number]
