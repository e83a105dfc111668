/**
 * Real-time media's settings (docs/webrtc.md, "Settings"), read from `PORTICO_TURN_*`: where the
 * TURN servers listen, the secret they share with the gateways, and how long a credential lasts.
 * Without URIs and a secret, TURN credentials are 503 naming these settings. The media server
 * (`PORTICO_SFU_*`) and the rooms' limits (`PORTICO_WEBRTC_*`) are here too.
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
  /**
   * The media server this gateway runs for its node (`PORTICO_SFU_BINARY`, engines/sfu built by
   * scripts/engines.sh); without one, signalling on this node is 503 and rooms go to other nodes.
   */
  readonly sfuBinary: string | undefined
  /** The loopback port it listens on (`PORTICO_SFU_PORT`; 0, the default, is a free port). */
  readonly sfuPort: number
  /** Participants in one room at most (`PORTICO_WEBRTC_ROOM_PEERS`, default 100). */
  readonly roomPeers: number
  /** Rooms one node's media server holds at most (`PORTICO_WEBRTC_ROOMS`, default 1000). */
  readonly rooms: number
  /** Joins one user may make in a minute, with a burst of a third of it (`PORTICO_WEBRTC_JOINS_PER_MINUTE`, default 60). */
  readonly joinsPerMinute: number
}

export const defaultWebRtcSettings: WebRtcSettings = {
  turnUris: [],
  turnSecret: undefined,
  stealthUri: undefined,
  credentialTtlSeconds: 86_400,
  sfuBinary: undefined,
  sfuPort: 0,
  roomPeers: 100,
  rooms: 1000,
  joinsPerMinute: 60
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
  const binary = yield* env(Config.option(Config.string("SFU_BINARY")))
  const settings: WebRtcSettings = {
    turnUris: Option.isSome(uris) ? yield* uriList("TURN_URIS", uris.value) : [],
    turnSecret: Option.getOrUndefined(secret),
    stealthUri: Option.isSome(stealth) ? (yield* uriList("TURN_STEALTH_URI", stealth.value))[0] : undefined,
    credentialTtlSeconds: yield* env(between("TURN_CREDENTIAL_TTL_SECONDS", d.credentialTtlSeconds, 60, 7 * 86_400)),
    sfuBinary: Option.getOrUndefined(Option.filter(binary, (b) => b.trim() !== "")),
    sfuPort: yield* env(between("SFU_PORT", d.sfuPort, 0, 65_535)),
    roomPeers: yield* env(between("WEBRTC_ROOM_PEERS", d.roomPeers, 2, 1000)),
    rooms: yield* env(between("WEBRTC_ROOMS", d.rooms, 1, 100_000)),
    joinsPerMinute: yield* env(between("WEBRTC_JOINS_PER_MINUTE", d.joinsPerMinute, 3, 100_000))
  }
  return settings
})
