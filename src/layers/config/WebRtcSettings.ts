/**
 * Real-time media's settings (docs/webrtc.md, "Settings"), read from `PORTICO_TURN_*`: where the
 * TURN servers listen, the secret they share with the gateways, and how long a credential lasts.
 * Without URIs and a secret, TURN credentials are 503 naming these settings.
 */
import { Config, ConfigError, Effect, Option, Redacted } from "effect"
import { between } from "./IntegerSetting.js"

export interface WebRtcSettings {
  /** The TURN servers' URIs handed to clients (`PORTICO_TURN_URIS`, comma-separated `turn:`/`turns:` URIs). */
  readonly turnUris: ReadonlyArray<string>
  /**
   * The secret shared with the TURN servers (`PORTICO_TURN_SECRET`, coturn's `static-auth-secret`):
   * a credential's password is HMAC-SHA1 of its username under it.
   */
  readonly turnSecret: Redacted.Redacted | undefined
  /** A `turns:` URI on port 443 behind a TLS front, advertised to stealth namespaces (`PORTICO_TURN_STEALTH_URI`). */
  readonly stealthUri: string | undefined
  /** How long a credential from `POST /v1/webrtc/turn/credentials` lasts (`PORTICO_TURN_CREDENTIAL_TTL_SECONDS`, default 86400). */
  readonly credentialTtlSeconds: number
}

export const defaultWebRtcSettings: WebRtcSettings = {
  turnUris: [],
  turnSecret: undefined,
  stealthUri: undefined,
  credentialTtlSeconds: 86_400
}

const TURN_URI = /^turns?:[A-Za-z0-9.\-[\]:]+(\?transport=(udp|tcp))?$/

const uriList = (variable: string, text: string) =>
  Effect.gen(function* () {
    const uris = text.split(",").map((u) => u.trim()).filter((u) => u !== "")
    for (const uri of uris) {
      if (!TURN_URI.test(uri)) {
        return yield* Effect.fail(ConfigError.InvalidData(["PORTICO", variable], `expected turn: or turns: URIs (turn:host:port?transport=udp), got "${uri}"`))
      }
    }
    return uris
  })

/** The settings from the environment, each defaulting to `defaultWebRtcSettings`. */
export const webRtcConfig = Effect.gen(function* () {
  const env = Config.nested("PORTICO")
  const d = defaultWebRtcSettings
  const uris = yield* env(Config.option(Config.string("TURN_URIS")))
  const secret = yield* env(Config.option(Config.redacted("TURN_SECRET")))
  const stealth = yield* env(Config.option(Config.string("TURN_STEALTH_URI")))
  const settings: WebRtcSettings = {
    turnUris: Option.isSome(uris) ? yield* uriList("TURN_URIS", uris.value) : [],
    turnSecret: Option.getOrUndefined(secret),
    stealthUri: Option.isSome(stealth) ? (yield* uriList("TURN_STEALTH_URI", stealth.value))[0] : undefined,
    credentialTtlSeconds: yield* env(between("TURN_CREDENTIAL_TTL_SECONDS", d.credentialTtlSeconds, 60, 7 * 86_400))
  }
  return settings
})
