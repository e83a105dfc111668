/**
 * Push credential fields (spec §2.6): every field checked before anything is stored, and the two
 * redacted views that are all a route ever answers.
 */
import { describe, expect, it } from "@effect/vitest"
import * as crypto from "node:crypto"
import { parseCredential, parsePushConfig, presenceOf, redactedOf } from "../../src/domain/PushCredentials.js"

const pem = (type: "ec" | "rsa" | "ed25519", curve?: string) =>
  (type === "ec"
    ? crypto.generateKeyPairSync("ec", { namedCurve: curve ?? "P-256" })
    : type === "rsa"
      ? crypto.generateKeyPairSync("rsa", { modulusLength: 1024 })
      : crypto.generateKeyPairSync("ed25519")
  ).privateKey.export({ type: "pkcs8", format: "pem" }) as string

const p8 = pem("ec")
const apns = { team_id: "ABCDE12345", key_id: "KEY1234567", bundle_id: "com.example.app", p8_key: p8, environment: "production" }

const fieldOf = (result: ReturnType<typeof parseCredential>) => (result.ok ? "ok" : result.error.field)

describe("PushCredentials", () => {
  it("accepts an APNs credential for ios_push and ios_voip_push; redacted shows its ids and has_p8_key only", () => {
    for (const provider of ["ios_push", "ios_voip_push"]) {
      const parsed = parseCredential(provider, apns)
      if (!parsed.ok) return expect.fail(parsed.error.reason)
      expect(parsed.value).toMatchObject({ provider, key_id: "KEY1234567", environment: "production" })
      expect(redactedOf(parsed.value)).toEqual({
        team_id: "ABCDE12345",
        key_id: "KEY1234567",
        bundle_id: "com.example.app",
        environment: "production",
        has_p8_key: true
      })
      expect(JSON.stringify(redactedOf(parsed.value))).not.toContain("PRIVATE KEY")
      expect(presenceOf(parsed.value)).toEqual({ has_team_id: true, has_key_id: true, has_bundle_id: true, has_p8_key: true, has_environment: true })
    }
    expect(parseCredential("ios_push", { ...apns, environment: "sandbox" }).ok).toBe(true)
  })

  it("refuses each malformed APNs field, naming it", () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...apns, key_id: "SHORT" }, "key_id"],
      [{ ...apns, key_id: "KEY123456789" }, "key_id"],
      [{ ...apns, key_id: "KEY-123456" }, "key_id"],
      [{ ...apns, key_id: undefined }, "key_id"],
      [{ ...apns, team_id: "" }, "team_id"],
      [{ ...apns, team_id: "AB CD" }, "team_id"],
      [{ ...apns, bundle_id: "com.example\r\nx: y" }, "bundle_id"],
      [{ ...apns, p8_key: "not a key" }, "p8_key"],
      [{ ...apns, p8_key: pem("ec", "P-384") }, "p8_key"],
      [{ ...apns, p8_key: pem("rsa") }, "p8_key"],
      [{ ...apns, p8_key: pem("ed25519") }, "p8_key"],
      [{ ...apns, p8_key: crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }) }, "p8_key"],
      [{ ...apns, environment: "development" }, "environment"],
      [{ ...apns, environment: undefined }, "environment"],
      [{ ...apns, extra: 1 }, "extra"]
    ]
    for (const [body, field] of cases) expect(fieldOf(parseCredential("ios_push", body)), field).toBe(field)
    expect(fieldOf(parseCredential("carrier_pigeon", apns))).toBe("provider")
    expect(fieldOf(parseCredential("ios_push", "text"))).toBe("body")
    expect(fieldOf(parseCredential("ios_push", [apns]))).toBe("body")
  })

  it("relay credential: base_url https only, optional; opaque mode needs its secret; redacted hides tokens", () => {
    const parsed = parseCredential("relay_push", { base_url: "https://ntfy.example.com/", auth_token: "tk_secret", topic_mode: "opaque", topic_secret: "c2VjcmV0c2VjcmV0c2VjcmV0" })
    if (!parsed.ok) return expect.fail(parsed.error.reason)
    expect(parsed.value).toEqual({ provider: "relay_push", base_url: "https://ntfy.example.com", auth_token: "tk_secret", topic_mode: "opaque", topic_secret: "c2VjcmV0c2VjcmV0c2VjcmV0" })
    expect(redactedOf(parsed.value)).toEqual({ base_url: "https://ntfy.example.com", topic_mode: "opaque", has_auth_token: true, has_topic_secret: true })
    expect(JSON.stringify(presenceOf(parsed.value))).not.toContain("tk_secret")
    expect(parseCredential("relay_push", {}).ok).toBe(true)
    for (const [body, field] of <Array<[Record<string, unknown>, string]>>[
      [{ base_url: "http://ntfy.example.com" }, "base_url"],
      [{ base_url: "ftp://ntfy.example.com" }, "base_url"],
      [{ base_url: "https://user:pw@ntfy.example.com" }, "base_url"],
      [{ base_url: "https://ntfy.example.com/?x=1" }, "base_url"],
      [{ base_url: "not a url" }, "base_url"],
      [{ topic_mode: "random" }, "topic_mode"],
      [{ topic_mode: "opaque" }, "topic_secret"],
      [{ topic_mode: "opaque", topic_secret: "x" }, "topic_secret"],
      [{ auth_token: "two words" }, "auth_token"]
    ]) {
      expect(fieldOf(parseCredential("relay_push", body)), JSON.stringify(body)).toBe(field)
    }
  })

  it("legacy credential and the push config: their fields, at least one for the config", () => {
    const legacy = parseCredential("legacy_push", { access_token: "expo-token" })
    if (!legacy.ok) return expect.fail(legacy.error.reason)
    expect(redactedOf(legacy.value)).toEqual({ has_access_token: true })
    expect(fieldOf(parseCredential("legacy_push", {}))).toBe("access_token")

    const config = parsePushConfig({ legacy_access_token: "expo", relay_base_url: "https://relay.example.org/base/" })
    if (!config.ok) return expect.fail(config.error.reason)
    expect(config.value).toEqual({ provider: "push_config", legacy_access_token: "expo", relay_base_url: "https://relay.example.org/base" })
    expect(redactedOf(config.value)).toEqual({ relay_base_url: "https://relay.example.org/base", has_legacy_access_token: true, has_relay_auth_token: false })
    expect(presenceOf(config.value)).toEqual({ has_legacy_access_token: true, has_relay_base_url: true, has_relay_auth_token: false })
    const empty = parsePushConfig({})
    expect(empty.ok ? "ok" : empty.error.field).toBe("body")
    const plain = parsePushConfig({ relay_base_url: "http://relay.example.org" })
    expect(plain.ok ? "ok" : plain.error.field).toBe("relay_base_url")
  })
})
