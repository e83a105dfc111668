/**
 * A namespace's push credentials (spec §2.6, §4.6): the fields each provider takes, checked before
 * anything is stored, and the redacted views the routes answer with. Pure: no storage, no network;
 * sealing is src/layers/push/PushStore.ts, the host check of a relay URL is the guarded egress
 * client's (src/layers/egress/GuardedFetch.ts `resolvesPublicly`), called by the service.
 *
 * Stored slots (docs/push.md): one credential per provider of `credentialProviders`, plus the
 * legacy `/v1/push/config` record (`push_config`), all sealed the same way.
 */
import { Data } from "effect"
import * as crypto from "node:crypto"
import { pushProviders, type PushProvider, TOPIC_SECRET_MIN } from "./PushProviders.js"

export { pushProviders, type PushProvider }

/**
 * Providers a credential can be stored for under `/v1/namespace/push-credentials/{provider}`.
 * `ios_voip_push` takes the APNs fields of `ios_push` (a VoIP credential of its own; without one,
 * VoIP sends use the `ios_push` key, the same p8 key signing for `<bundle_id>.voip`).
 */
export const credentialProviders = pushProviders
export type CredentialProvider = PushProvider

/** A stored slot: a provider's credential, or the legacy push config. */
export type CredentialSlot = CredentialProvider | "push_config"

/** A field of a push request is malformed: 400, nothing stored. `field` is the wire name. */
export class PushFieldInvalid extends Data.TaggedError("PushFieldInvalid")<{ readonly field: string; readonly reason: string }> {}

export interface ApnsCredential {
  readonly provider: "ios_push" | "ios_voip_push"
  readonly team_id: string
  readonly key_id: string
  readonly bundle_id: string
  readonly p8_key: string
  readonly environment: "sandbox" | "production"
}

export interface RelayCredential {
  readonly provider: "relay_push"
  /** Absent: the gateway's own configured relay. */
  readonly base_url?: string
  readonly auth_token?: string
  readonly topic_mode?: "opaque" | "path" | "user"
  readonly topic_secret?: string
}

export interface LegacyCredential {
  readonly provider: "legacy_push"
  readonly access_token: string
}

/** `/v1/push/config`: the legacy path's fields (at least one). */
export interface PushConfig {
  readonly provider: "push_config"
  readonly legacy_access_token?: string
  readonly relay_base_url?: string
  readonly relay_auth_token?: string
}

export type PushCredential = ApnsCredential | RelayCredential | LegacyCredential
export type StoredPushSecret = PushCredential | PushConfig

/** A checked field or body: its value, or the first field found malformed. */
export type PushResult<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: PushFieldInvalid }
export const pushOk = <A>(value: A): PushResult<A> => ({ ok: true, value })
export const pushInvalid = (field: string, reason: string): PushResult<never> => ({ ok: false, error: new PushFieldInvalid({ field, reason }) })
type Result<A> = PushResult<A>
const ok = pushOk
const bad = pushInvalid

export const isCredentialProvider = (text: string): text is CredentialProvider => (credentialProviders as ReadonlyArray<string>).includes(text)

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** A header-safe text: printable ASCII without spaces, 1..max characters (goes into HTTP headers and JWTs). */
const token = (field: string, value: unknown, max: number, pattern = /^[\x21-\x7e]+$/): Result<string> =>
  typeof value !== "string" || value.length === 0
    ? bad(field, "required, a non-empty string")
    : value.length > max
      ? bad(field, `at most ${max} characters`)
      : pattern.test(value)
        ? ok(value)
        : bad(field, "contains characters it may not")

const optional = <A>(value: unknown, check: () => Result<A>): Result<A | undefined> =>
  value === undefined || value === null ? ok(undefined) : check()

/**
 * An https URL a relay is reached at: no user or password, no query or fragment; kept without a
 * trailing slash. Whether its host resolves to a permitted address is checked by the service.
 */
export const httpsBaseUrl = (field: string, value: unknown): Result<string> => {
  if (typeof value !== "string" || value.length === 0) return bad(field, "required, an https URL")
  if (value.length > 2048) return bad(field, "at most 2048 characters")
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return bad(field, "not a URL")
  }
  if (url.protocol !== "https:") return bad(field, "must be an https URL")
  if (url.username !== "" || url.password !== "") return bad(field, "must not carry a user or password")
  if (url.search !== "" || url.hash !== "") return bad(field, "must not carry a query or fragment")
  return ok(url.toString().replace(/\/+$/, ""))
}

/** The hostname of a URL `httpsBaseUrl` accepted, without IPv6 brackets. */
export const hostOfUrl = (url: string): string => {
  const host = new URL(url).hostname
  return host.startsWith("[") ? host.slice(1, -1) : host
}

/** A p8 key: PEM text of an EC private key on P-256 (what APNs signs ES256 with). */
export const p8Key = (value: unknown): Result<string> => {
  if (typeof value !== "string" || value.trim() === "") return bad("p8_key", "required, the PEM text of the .p8 key")
  if (value.length > 8192) return bad("p8_key", "at most 8192 characters")
  try {
    const key = crypto.createPrivateKey({ key: value, format: "pem" })
    if (key.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
      return bad("p8_key", "not a P-256 private key")
    }
  } catch {
    return bad("p8_key", "does not parse as a PEM private key")
  }
  return ok(value.trim() + "\n")
}

const knownFields: Record<CredentialSlot, ReadonlyArray<string>> = {
  ios_push: ["team_id", "key_id", "bundle_id", "p8_key", "environment"],
  ios_voip_push: ["team_id", "key_id", "bundle_id", "p8_key", "environment"],
  relay_push: ["base_url", "auth_token", "topic_mode", "topic_secret"],
  legacy_push: ["access_token"],
  push_config: ["legacy_access_token", "relay_base_url", "relay_auth_token"]
}

const unknownField = (slot: CredentialSlot, body: Record<string, unknown>): Result<never> | undefined => {
  const extra = Object.keys(body).find((key) => !knownFields[slot].includes(key))
  return extra === undefined ? undefined : bad(extra, `not a field of a ${slot} credential`)
}

const apns = (provider: "ios_push" | "ios_voip_push", body: Record<string, unknown>): Result<ApnsCredential> => {
  const teamId = token("team_id", body["team_id"], 64, /^[A-Za-z0-9]+$/)
  if (!teamId.ok) return teamId
  const keyId = typeof body["key_id"] === "string" && /^[A-Za-z0-9]{10}$/.test(body["key_id"]) ? ok(body["key_id"]) : bad("key_id", "must be 10 letters or digits")
  if (!keyId.ok) return keyId
  const bundleId = token("bundle_id", body["bundle_id"], 255, /^[A-Za-z0-9][A-Za-z0-9.-]*$/)
  if (!bundleId.ok) return bundleId
  const key = p8Key(body["p8_key"])
  if (!key.ok) return key
  const environment = body["environment"]
  if (environment !== "sandbox" && environment !== "production") return bad("environment", "must be sandbox or production")
  return ok({ provider, team_id: teamId.value, key_id: keyId.value, bundle_id: bundleId.value, p8_key: key.value, environment })
}

const relay = (body: Record<string, unknown>): Result<RelayCredential> => {
  const baseUrl = optional(body["base_url"], () => httpsBaseUrl("base_url", body["base_url"]))
  if (!baseUrl.ok) return baseUrl
  const authToken = optional(body["auth_token"], () => token("auth_token", body["auth_token"], 1024))
  if (!authToken.ok) return authToken
  const mode = body["topic_mode"]
  if (mode !== undefined && mode !== null && mode !== "opaque" && mode !== "path" && mode !== "user") {
    return bad("topic_mode", "must be opaque, path or user")
  }
  const secret = optional(body["topic_secret"], () => token("topic_secret", body["topic_secret"], 512))
  if (!secret.ok) return secret
  // the opaque topic is SHA-256 of namespace, user and this secret: a short one makes it guessable
  if (secret.value !== undefined && secret.value.length < TOPIC_SECRET_MIN) {
    return bad("topic_secret", `at least ${TOPIC_SECRET_MIN} characters: a random secret of about 32 bytes, base64 or hex`)
  }
  if (mode === "opaque" && secret.value === undefined) return bad("topic_secret", "required with topic_mode opaque")
  return ok({
    provider: "relay_push",
    ...(baseUrl.value === undefined ? {} : { base_url: baseUrl.value }),
    ...(authToken.value === undefined ? {} : { auth_token: authToken.value }),
    ...(mode === undefined || mode === null ? {} : { topic_mode: mode }),
    ...(secret.value === undefined ? {} : { topic_secret: secret.value })
  })
}

/** A credential PUT's body for `provider`, every field checked; unknown fields are refused. */
export const parseCredential = (provider: string, body: unknown): Result<PushCredential> => {
  if (!isCredentialProvider(provider)) return bad("provider", `must be one of ${credentialProviders.join(", ")}`)
  if (!isRecord(body)) return bad("body", "must be a JSON object")
  const extra = unknownField(provider, body)
  if (extra !== undefined) return extra
  switch (provider) {
    case "ios_push":
    case "ios_voip_push":
      return apns(provider, body)
    case "relay_push":
      return relay(body)
    case "legacy_push": {
      const access = token("access_token", body["access_token"], 1024)
      return access.ok ? ok({ provider, access_token: access.value }) : access
    }
  }
}

/** A `/v1/push/config` PUT's body: at least one of its fields, each checked. */
export const parsePushConfig = (body: unknown): Result<PushConfig> => {
  if (!isRecord(body)) return bad("body", "must be a JSON object")
  const extra = unknownField("push_config", body)
  if (extra !== undefined) return extra
  const legacy = optional(body["legacy_access_token"], () => token("legacy_access_token", body["legacy_access_token"], 1024))
  if (!legacy.ok) return legacy
  const baseUrl = optional(body["relay_base_url"], () => httpsBaseUrl("relay_base_url", body["relay_base_url"]))
  if (!baseUrl.ok) return baseUrl
  const authToken = optional(body["relay_auth_token"], () => token("relay_auth_token", body["relay_auth_token"], 1024))
  if (!authToken.ok) return authToken
  if (legacy.value === undefined && baseUrl.value === undefined && authToken.value === undefined) {
    return bad("body", "needs legacy_access_token, relay_base_url or relay_auth_token")
  }
  return ok({
    provider: "push_config",
    ...(legacy.value === undefined ? {} : { legacy_access_token: legacy.value }),
    ...(baseUrl.value === undefined ? {} : { relay_base_url: baseUrl.value }),
    ...(authToken.value === undefined ? {} : { relay_auth_token: authToken.value })
  })
}

/** The relay host a stored secret names, if any: the service resolves it before storing. */
export const relayUrlOf = (secret: StoredPushSecret): string | undefined =>
  secret.provider === "relay_push" ? secret.base_url : secret.provider === "push_config" ? secret.relay_base_url : undefined

/**
 * The PUT answer's `redacted` (spec §2.6): for APNs the identifying fields in clear and
 * `has_p8_key`; secrets only ever as `has_<field>`.
 */
export const redactedOf = (secret: StoredPushSecret): Readonly<Record<string, string | boolean>> => {
  switch (secret.provider) {
    case "ios_push":
    case "ios_voip_push":
      return { team_id: secret.team_id, key_id: secret.key_id, bundle_id: secret.bundle_id, environment: secret.environment, has_p8_key: true }
    case "relay_push":
      return {
        ...(secret.base_url === undefined ? {} : { base_url: secret.base_url }),
        ...(secret.topic_mode === undefined ? {} : { topic_mode: secret.topic_mode }),
        has_auth_token: secret.auth_token !== undefined,
        has_topic_secret: secret.topic_secret !== undefined
      }
    case "legacy_push":
      return { has_access_token: true }
    case "push_config":
      return {
        ...(secret.relay_base_url === undefined ? {} : { relay_base_url: secret.relay_base_url }),
        has_legacy_access_token: secret.legacy_access_token !== undefined,
        has_relay_auth_token: secret.relay_auth_token !== undefined
      }
  }
}

/** The GET view's `redacted` (spec §2.6): `has_<field>` for every field of the slot, nothing else. */
export const presenceOf = (secret: StoredPushSecret): Readonly<Record<string, boolean>> => {
  const fields = knownFields[secret.provider]
  const present: Record<string, boolean> = {}
  for (const field of fields) present[`has_${field}`] = (secret as unknown as Record<string, unknown>)[field] !== undefined
  return present
}
