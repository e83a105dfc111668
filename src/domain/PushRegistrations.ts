/**
 * Push device and topic registrations (spec §2.6, §3.3, §8): the fields checked before anything is
 * stored, the topic id derived from its secret, the topic expiry, and how a token is shown in a
 * listing. Pure: storage is src/layers/push/PushStore.ts.
 */
import * as crypto from "node:crypto"
import { type PushProvider, type PushResult, pushInvalid, pushOk } from "./PushCredentials.js"
import { type DeviceProvider, deviceProviders, type TopicProvider, topicProviders } from "./PushProviders.js"

type Result<A> = PushResult<A>
const ok = pushOk
const bad = pushInvalid

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The providers a device or a topic registers for (spec §2.6), kept in PushProviders.ts, which the API's schemas import. */
export { type DeviceProvider, deviceProviders, type TopicProvider, topicProviders }

export const maxTokenBytes = 512
/** A relay topic: one path segment of `[-_A-Za-z0-9]`, at most 64 characters (spec §8). */
export const relayTopicPattern = /^[-_A-Za-z0-9]{1,64}$/

/**
 * A provider token, as each provider writes it: APNs 8-200 hex characters (kept lowercase), the
 * relay a bare topic or a full http(s) endpoint URL whose last path segment is a topic, Expo any
 * printable ASCII. At most 512 bytes for every provider.
 */
export const providerToken = (provider: PushProvider, value: unknown): Result<string> => {
  if (typeof value !== "string" || value.length === 0) return bad("token", "required, a non-empty string")
  if (Buffer.byteLength(value, "utf8") > maxTokenBytes) return bad("token", `at most ${maxTokenBytes} bytes`)
  switch (provider) {
    case "ios_push":
    case "ios_voip_push":
      // the APNs client's own bound (src/layers/push/ApnsClient.ts): what it would refuse is refused here first
      return /^[0-9a-fA-F]{8,200}$/.test(value) ? ok(value.toLowerCase()) : bad("token", "an APNs device token is 8 to 200 hex characters")
    case "relay_push": {
      if (relayTopicPattern.test(value)) return ok(value)
      if (!/^https?:\/\//i.test(value)) return bad("token", "a relay token is one topic segment of [-_A-Za-z0-9] (at most 64) or an http(s) endpoint URL")
      let url: URL
      try {
        url = new URL(value)
      } catch {
        return bad("token", "not a URL")
      }
      if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "") {
        return bad("token", "a relay endpoint URL carries no user, password, query or fragment")
      }
      const segment = url.pathname.split("/").pop() ?? ""
      return relayTopicPattern.test(segment) ? ok(value) : bad("token", "a relay endpoint URL ends in one topic segment of [-_A-Za-z0-9] (at most 64)")
    }
    case "legacy_push":
      return /^[\x20-\x7e]+$/.test(value) ? ok(value) : bad("token", "a legacy token is printable ASCII")
  }
}

export interface DeviceRegistration {
  /** The app's own label; for a device-bound session the service puts the verified device id here. */
  readonly device_id: string
  readonly provider: DeviceProvider
  readonly token: string
  readonly platform: "ios" | "android" | "web" | undefined
  readonly app_version: string | undefined
}

const deviceFields = ["device_id", "provider", "token", "platform", "app_version"]

/** A `POST /v1/push/devices` body (spec §2.6), every field checked; unknown fields are refused. */
export const parseDeviceRegistration = (body: unknown): Result<DeviceRegistration> => {
  if (!isRecord(body)) return bad("body", "must be a JSON object")
  const extra = Object.keys(body).find((key) => !deviceFields.includes(key))
  if (extra !== undefined) return bad(extra, "not a field of a device registration")
  const deviceId = body["device_id"]
  if (typeof deviceId !== "string" || !/^[\x21-\x7e]{1,128}$/.test(deviceId)) return bad("device_id", "1 to 128 printable characters without spaces")
  const provider = body["provider"]
  if (typeof provider !== "string" || !(deviceProviders as ReadonlyArray<string>).includes(provider)) {
    return bad("provider", `must be one of ${deviceProviders.join(", ")}`)
  }
  const token = providerToken(provider as DeviceProvider, body["token"])
  if (!token.ok) return token
  const platform = body["platform"]
  if (platform !== undefined && platform !== null && platform !== "ios" && platform !== "android" && platform !== "web") {
    return bad("platform", "must be ios, android or web")
  }
  const appVersion = body["app_version"]
  if (appVersion !== undefined && appVersion !== null && (typeof appVersion !== "string" || !/^[\x20-\x7e]{0,64}$/.test(appVersion))) {
    return bad("app_version", "at most 64 printable characters")
  }
  return ok({
    device_id: deviceId,
    provider: provider as DeviceProvider,
    token: token.value,
    platform: platform === null ? undefined : platform,
    app_version: appVersion === null || appVersion === undefined ? undefined : (appVersion as string)
  })
}

/**
 * A token as a listing shows it: its last 6 characters behind an ellipsis (enough for a user to
 * tell two devices apart), nothing at all for a token under 12 characters.
 */
export const redactToken = (token: string): string => (token.length < 12 ? "…" : "…" + token.slice(-6))

/** A topic secret: hex, 32 to 128 characters (16 to 64 bytes, so an even count). */
export const topicSecretBytes = (value: unknown): Result<Buffer> =>
  typeof value === "string" && /^[0-9a-fA-F]{32,128}$/.test(value) && value.length % 2 === 0
    ? ok(Buffer.from(value, "hex"))
    : bad("topic_secret", "hex, 32 to 128 characters (16 to 64 bytes)")

/** The topic id: lowercase hex SHA-256 of the decoded secret bytes (64 characters). */
export const topicIdOf = (secret: Uint8Array): string => crypto.createHash("sha256").update(secret).digest("hex")

/** A topic id as senders give it: exactly 64 lowercase hex characters. */
export const isTopicId = (value: unknown): value is string => typeof value === "string" && /^[0-9a-f]{64}$/.test(value)

export interface TopicRegistration {
  readonly topicId: string
  readonly provider: TopicProvider
  readonly token: string
}

const topicFields = ["topic_secret", "provider", "token"]

/** A `POST /v1/push/topics` body (spec §2.6, §3.3), every field checked. */
export const parseTopicRegistration = (body: unknown): Result<TopicRegistration> => {
  if (!isRecord(body)) return bad("body", "must be a JSON object")
  const extra = Object.keys(body).find((key) => !topicFields.includes(key))
  if (extra !== undefined) return bad(extra, "not a field of a topic registration")
  const secret = topicSecretBytes(body["topic_secret"])
  if (!secret.ok) return secret
  const provider = body["provider"]
  if (typeof provider !== "string" || !(topicProviders as ReadonlyArray<string>).includes(provider)) {
    return bad("provider", `must be one of ${topicProviders.join(", ")}`)
  }
  const token = providerToken(provider as TopicProvider, body["token"])
  if (!token.ok) return token
  return ok({ topicId: topicIdOf(secret.value), provider: provider as TopicProvider, token: token.value })
}

const day = 86_400
export const defaultTopicLifetimeSeconds = 7 * day

/**
 * When a topic registered (or registered again) at `now` expires, in Unix seconds: now plus the
 * lifetime, rounded up to a whole UTC day (spec §8: 7 to 8 days). A lifetime under a day exists
 * only for tests and is not rounded (docs/push.md).
 */
export const topicExpiry = (nowSeconds: number, lifetimeSeconds: number = defaultTopicLifetimeSeconds): number => {
  const end = Math.floor(nowSeconds) + lifetimeSeconds
  return lifetimeSeconds < day ? end : Math.ceil(end / day) * day
}
