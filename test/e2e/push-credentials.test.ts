/**
 * Push credentials over HTTP (spec §2.6, §4.6): stored sealed, never returned; the PUT answers the
 * redacted record, GET the has_<field> view, DELETE 200 whether or not one was stored; every field
 * checked before anything is stored; a relay host that resolves to a reserved address refused;
 * control plane holding secrets:write only. The legacy /v1/push/config likewise.
 */
import Database from "better-sqlite3"
import { generateKeyPairSync } from "node:crypto"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, expectRefusal, notCalled, refusal } from "../support/client.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
  expect(typeof reply.body.error).toBe("string")
}

const p8 = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }).toString()
const apns = { team_id: "TEAM123456", key_id: "ABCDE12345", bundle_id: "com.example.app", p8_key: p8, environment: "sandbox" }

describe("push credentials over HTTP", () => {
  let gw: Gateway
  let owner: string
  let other: string
  const keys: Record<string, string> = {}

  beforeAll(async () => {
    gw = await startGateway()
    owner = (await gw.cli(["namespace", "create", "pushns"])).api_key
    other = (await gw.cli(["namespace", "create", "otherns"])).api_key
    const mint = async (body: unknown) => (await gw.request("POST", "/v1/namespace/keys", { token: owner, json: body })).body.api_key as string
    keys["runtime"] = await mint({ profile: "runtime", label: "app" })
    keys["custom"] = await mint({ scopes: ["push:write", "cache"], label: "sender" })
  }, 90_000)
  afterAll(async () => {
    await gw?.stop()
  })

  const put = (provider: string, json: unknown, token = owner) => gw.request("PUT", `/v1/namespace/push-credentials/${provider}`, { token, json })
  const get = (provider: string, token = owner) => gw.request("GET", `/v1/namespace/push-credentials/${provider}`, { token })

  it("stores an APNs credential and answers only its redacted record; GET says which fields it has", async () => {
    const stored = await put("ios_push", apns)
    expect(stored.status, stored.text).toBe(200)
    expect(stored.body).toMatchObject({
      namespace: "pushns",
      provider: "ios_push",
      configured: true,
      redacted: { team_id: "TEAM123456", key_id: "ABCDE12345", bundle_id: "com.example.app", environment: "sandbox", has_p8_key: true }
    })
    expect(typeof stored.body.updated_at).toBe("number")
    expect(stored.body.updated_by).toMatch(/^key:/)
    expect(stored.text).not.toContain("PRIVATE KEY")

    const view = await get("ios_push")
    expect(view.status).toBe(200)
    expect(view.body).toMatchObject({ namespace: "pushns", provider: "ios_push", configured: true, updated_by: stored.body.updated_by })
    expect(view.body.fields).toEqual({ has_team_id: true, has_key_id: true, has_bundle_id: true, has_p8_key: true, has_environment: true })
    expect(view.text).not.toContain("PRIVATE KEY")
    expect(view.text).not.toContain("TEAM123456")

    const summary = await gw.request("GET", "/v1/namespace/push-credentials", { token: owner })
    expect(summary.body).toEqual({ namespace: "pushns", configured: ["ios_push"], supported: ["ios_push", "ios_voip_push", "relay_push", "legacy_push"] })
  })

  it("keeps the key sealed at rest, bound to its namespace", async () => {
    const db = new Database(path.join(gw.dataDir, "registry.db"), { readonly: true })
    try {
      const rows = db.prepare("SELECT * FROM push_credentials").all() as Array<Record<string, unknown>>
      expect(rows.length).toBeGreaterThan(0)
      for (const row of rows) expect(JSON.stringify(row, (_, v) => (Buffer.isBuffer(v) ? v.toString("latin1") : v))).not.toMatch(/PRIVATE KEY|TEAM123456/)
    } finally {
      db.close()
    }
    // another namespace sees none of it
    expect((await get("ios_push", other)).body.configured).toBe(false)
  })

  it("refuses every malformed field with 400 and stores nothing", async () => {
    const cases: ReadonlyArray<readonly [string, string, unknown]> = [
      ["a key id that is not 10 letters and digits", "ios_push", { ...apns, key_id: "SHORT" }],
      ["a p8 key that is not a P-256 private key", "ios_push", { ...apns, p8_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----" }],
      ["an RSA key", "ios_push", { ...apns, p8_key: generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString() }],
      ["an environment outside its two values", "ios_push", { ...apns, environment: "development" }],
      ["a missing field", "ios_push", { team_id: "TEAM123456", key_id: "ABCDE12345", bundle_id: "com.example.app", environment: "sandbox" }],
      ["a field of another provider", "ios_push", { ...apns, base_url: "https://relay.example" }],
      ["a field nobody has", "legacy_push", { access_token: "t", nonsense: 1 }],
      ["a relay that is not https", "relay_push", { base_url: "http://relay.example" }],
      ["a relay on loopback", "relay_push", { base_url: "https://127.0.0.1:8443" }],
      ["a relay named localhost", "relay_push", { base_url: "https://localhost" }],
      ["a relay in a private range", "relay_push", { base_url: "https://10.1.2.3" }],
      ["a relay spelt as a decimal loopback", "relay_push", { base_url: "https://2130706433" }],
      ["a relay that does not resolve", "relay_push", { base_url: "https://no-such-host.invalid" }],
      ["a topic mode that is none", "relay_push", { base_url: "https://relay.example", topic_mode: "other" }]
    ]
    for (const [what, provider, body] of cases) {
      const reply = await put(provider, body)
      expect(reply.status, `${what}: ${reply.text}`).toBe(400)
      expect(reply.body.code, what).toBe("VALIDATION_FAILED")
      expect((await get(provider)).body, what).toMatchObject(provider === "ios_push" ? { configured: true } : { configured: false })
    }
    // the stored credential is the one from before
    expect((await get("ios_push")).body.fields.has_p8_key).toBe(true)
    expectError(await put("apns", apns), 400, "VALIDATION_FAILED")
  })

  it("deletes with 200 whether or not one was stored", async () => {
    expect((await put("legacy_push", { access_token: "expo-token" })).status).toBe(200)
    const removed = await gw.request("DELETE", "/v1/namespace/push-credentials/legacy_push", { token: owner })
    expect(removed.status, removed.text).toBe(200)
    expect(removed.body).toEqual({ namespace: "pushns", provider: "legacy_push", configured: false, removed: true })
    const again = await gw.request("DELETE", "/v1/namespace/push-credentials/legacy_push", { token: owner })
    expect(again.body).toEqual({ namespace: "pushns", provider: "legacy_push", configured: false, removed: false })
    expect((await get("legacy_push")).body).toMatchObject({ configured: false, updated_at: null, updated_by: null, fields: {} })
  })

  it("is the control plane's, holding secrets:write: app-runtime and custom keys are refused", async () => {
    expectError(await put("legacy_push", { access_token: "t" }, keys["runtime"]!), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await get("ios_push", keys["custom"]!), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("GET", "/v1/namespace/push-credentials", { token: keys["runtime"]! }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("GET", "/v1/namespace/push-credentials"), 401, "UNAUTHORIZED")
  })

  it("is driven the same through the typed client, every answer decoded strictly with its declared schema", async () => {
    const stored = await call(gw, owner, (c) => c.push.putCredential({ path: { provider: "ios_voip_push" }, payload: { ...apns, environment: "production" } }))
    expect(stored.redacted).toMatchObject({ key_id: "ABCDE12345", environment: "production", has_p8_key: true })
    expect((await call(gw, owner, (c) => c.push.credential({ path: { provider: "ios_voip_push" } }))).configured).toBe(true)
    expect((await call(gw, owner, (c) => c.push.credentials())).configured).toContain("ios_voip_push")
    expect((await call(gw, owner, (c) => c.push.removeCredential({ path: { provider: "ios_voip_push" } }))).removed).toBe(true)
    expectRefusal(await refusal(gw, owner, (c) => c.push.putCredential({ path: { provider: "relay_push" }, payload: { base_url: "https://[::1]" } })), 400, "VALIDATION_FAILED")
    expectRefusal(await refusal(gw, keys["runtime"]!, (c) => c.push.credentials()), 403, "CONTROL_PLANE_REQUIRED")
    expect((await call(gw, owner, (c) => c.push.putConfig({ payload: { relay_auth_token: "r" } }))).redacted).toMatchObject({ has_relay_auth_token: true })
    expect((await call(gw, owner, (c) => c.push.config())).fields).toMatchObject({ has_relay_auth_token: true })
    expect((await call(gw, owner, (c) => c.push.removeConfig())).removed).toBe(true)
    expect(notCalled(["push"])).toEqual([])
  })

  it("keeps the legacy /v1/push/config the same way", async () => {
    const stored = await gw.request("PUT", "/v1/push/config", { token: owner, json: { legacy_access_token: "legacy" } })
    expect(stored.status, stored.text).toBe(200)
    expect(stored.body).toMatchObject({ provider: "push_config", configured: true, redacted: { has_legacy_access_token: true, has_relay_auth_token: false } })
    expect(stored.text).not.toContain("\"legacy\"")
    expect((await gw.request("GET", "/v1/push/config", { token: owner })).body.fields).toEqual({
      has_legacy_access_token: true,
      has_relay_base_url: false,
      has_relay_auth_token: false
    })
    expectError(await gw.request("PUT", "/v1/push/config", { token: owner, json: { relay_base_url: "https://192.168.1.1" } }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("PUT", "/v1/push/config", { token: owner, json: {} }), 400, "VALIDATION_FAILED")
    expect((await gw.request("GET", "/v1/push/config", { token: owner })).body.fields.has_legacy_access_token).toBe(true)
    expect((await gw.request("DELETE", "/v1/push/config", { token: owner })).body.removed).toBe(true)
  })
})
