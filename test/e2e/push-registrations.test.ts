/**
 * Push device and topic registrations over HTTP (spec §2.6, §3.3, §4.6) on a real gateway, on
 * both registry engines: devices of plain and device-bound wallet sessions (bound => the verified
 * device id, whatever the body says), listings in keyset pages that redact tokens, removal, the
 * per-user cap, 503 without push configured, API keys refused; the topic life cycle (register,
 * register again moves the expiry, a token moves to the newer topic, remove 200 then 404, another
 * namespace's topic 404, expiry, malformed input 400, other methods 405, a refused write 500); and
 * a revoked device's registration gone. A second gateway on the same registry runs with a cap of
 * 2 and a 2-second topic lifetime.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { Wallet } from "ethers"
import { createHash } from "node:crypto"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, expectRefusal, notCalled, refusal } from "../support/client.js"
import { type Gateway, mintKey, type Reply, startGateway } from "../support/gateway.js"
import { type Device, newDevice } from "../support/device.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"


const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
  expect(typeof reply.body.error).toBe("string")
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
}



const expoToken = (n: number) => `ExponentPushToken[${String(n).padStart(22, "x")}]`
const apnsToken = (n: number) => n.toString(16).padStart(2, "0").repeat(32)
const secret = (n: number) => n.toString(16).padStart(2, "0").repeat(16)
const topicIdOf = (hex: string) => createHash("sha256").update(Buffer.from(hex, "hex")).digest("hex")
const day = 86_400

describe.each(["sqlite", "rqlite"] as const)("push registrations over HTTP, registry on %s", (engine) => {
  let gw: Gateway
  let tight: Gateway
  let engineServer: RqlitedServer | undefined
  const engineEnv = (): Record<string, string> => (engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url })
  let owner: string
  let runtime: string
  let cacheOnly: string
  let otherRuntime: string
  let bareRuntime: string
  const alice = Wallet.createRandom()
  const bob = Wallet.createRandom()
  const carol = Wallet.createRandom()

  type Signer = { readonly address: string; readonly signMessage: (m: string) => Promise<string> }

  const signIn = async (via: Gateway, namespace: string, signer: Signer, device?: Device): Promise<{ access_token: string }> => {
    const c = await via.request("POST", "/v1/auth/challenge", {
      json: { wallet: signer.address, namespace, ...(device === undefined ? {} : { device_id: device.id }) }
    })
    expect(c.status, c.text).toBe(200)
    const message: string = c.body.message
    const verified = await via.request("POST", "/v1/auth/verify", {
      json: {
        message,
        signature: await signer.signMessage(message),
        ...(device === undefined ? {} : { device_key: device.jwk, device_signature: await device.sign(message) })
      }
    })
    expect(verified.status, verified.text).toBe(200)
    return verified.body
  }

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway({ env: engineEnv() })
    // the same registry and root secret, with a cap of 2 and a topic lifetime of 2 seconds
    tight = await startGateway({
      dataDir: gw.dataDir,
      env: { ...engineEnv(), PORTICO_PUSH_MAX_DEVICES_PER_USER: "2", PORTICO_PUSH_TOPIC_LIFETIME_SECONDS: "2" }
    })
    owner = (await gw.cli(["namespace", "create", "shop"])).api_key
    const otherOwner = (await gw.cli(["namespace", "create", "other"])).api_key
    const bareOwner = (await gw.cli(["namespace", "create", "bare"])).api_key
    const mint = (token: string, body: unknown) => mintKey(gw, token, body)
    runtime = await mint(owner, { profile: "runtime", label: "app" })
    cacheOnly = await mint(owner, { scopes: ["cache"], label: "cache" })
    otherRuntime = await mint(otherOwner, { profile: "runtime", label: "app" })
    bareRuntime = await mint(bareOwner, { profile: "runtime", label: "app" })
    for (const [token, namespace] of [[owner, "shop"], [otherOwner, "other"], [bareOwner, "bare"]] as const) {
      for (const w of [alice, bob, carol]) {
        const added = await gw.request("POST", "/v1/namespace/members", { token, json: { wallet: w.address, role: "runtime" } })
        expect(added.status, `${namespace}: ${added.text}`).toBe(200)
      }
      // push configured in shop and other, not in bare
      if (namespace !== "bare") {
        const stored = await gw.request("PUT", "/v1/namespace/push-credentials/legacy_push", { token, json: { access_token: "expo-access" } })
        expect(stored.status, stored.text).toBe(200)
      }
    }
  }, 120_000)
  afterAll(async () => {
    await tight?.stop()
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  const devices = (token: string, via = gw) => via.request("GET", "/v1/push/devices", { token })
  const register = (token: string, json: unknown, via = gw) => via.request("POST", "/v1/push/devices", { token, json })
  const topic = (token: string, json: unknown, via = gw) => via.request("POST", "/v1/push/topics", { token, json })
  const untopic = (token: string, topicSecret: string, via = gw) => via.request("DELETE", "/v1/push/topics", { token, json: { topic_secret: topicSecret } })

  it("records a plain session's device under its label, and lists it with the token redacted", async () => {
    const session = (await signIn(gw, "shop", alice)).access_token
    const stored = await register(session, { device_id: "tablet", provider: "legacy_push", token: expoToken(1), platform: "android", app_version: "1.4.2" })
    expect(stored.status, stored.text).toBe(200)
    expect(stored.body).toMatchObject({ device_id: "tablet", bound: false, provider: "legacy_push", platform: "android", app_version: "1.4.2" })
    expect(stored.body.token).toBe("…" + expoToken(1).slice(-6))
    expect(stored.body.created_at).toBe(stored.body.updated_at)
    expect(stored.text).not.toContain(expoToken(1))

    // the same id again replaces the registration; an APNs token is kept lowercase
    const again = await register(session, { device_id: "tablet", provider: "ios_push", token: apnsToken(0xcd).toUpperCase() })
    expect(again.body).toMatchObject({ device_id: "tablet", provider: "ios_push", token: "…" + apnsToken(0xcd).slice(-6), platform: null, app_version: null })
    expect(again.body.created_at).toBe(stored.body.created_at)

    const listed = await devices(session)
    expect(listed.status, listed.text).toBe(200)
    expect(listed.body.devices).toEqual([again.body])
    expect(listed.text).not.toContain(apnsToken(0xcd))
    // another user, and the same user in another namespace, see none of it
    expect((await devices((await signIn(gw, "shop", bob)).access_token)).body.devices).toEqual([])
    expect((await devices((await signIn(gw, "other", alice)).access_token)).body.devices).toEqual([])
  })

  it("records a device-bound session's registration under its verified device id, whatever device_id says", async () => {
    const phone = await newDevice()
    const bound = (await signIn(gw, "shop", bob, phone)).access_token
    const stored = await register(bound, { device_id: "my-label", provider: "relay_push", token: "bob-phone-topic", platform: "ios" })
    expect(stored.status, stored.text).toBe(200)
    expect(stored.body).toMatchObject({ device_id: phone.id, bound: true, provider: "relay_push", platform: "ios" })
    // a plain session of the same wallet sees it, and may remove it
    const plain = (await signIn(gw, "shop", bob)).access_token
    expect((await devices(plain)).body.devices.map((d: { device_id: string }) => d.device_id)).toEqual([phone.id])
    const removed = await gw.request("DELETE", `/v1/push/devices/${phone.id}`, { token: plain })
    expect(removed.status, removed.text).toBe(200)
    expect(removed.body).toEqual({ device_id: phone.id, removed: true })
    const again = await gw.request("DELETE", `/v1/push/devices/${phone.id}`, { token: plain })
    expect(again.body).toEqual({ device_id: phone.id, removed: false })
    expect((await devices(bound)).body.devices).toEqual([])
  })

  it("ends a revoked device's registration", async () => {
    const phone = await newDevice()
    const bound = (await signIn(gw, "shop", carol, phone)).access_token
    expect((await register(bound, { device_id: "x", provider: "legacy_push", token: expoToken(7) })).status).toBe(200)
    const plain = (await signIn(gw, "shop", carol)).access_token
    expect((await register(plain, { device_id: "carol-laptop", provider: "legacy_push", token: expoToken(8) })).status).toBe(200)
    expect((await devices(plain)).body.devices.map((d: { device_id: string }) => d.device_id).sort()).toEqual([phone.id, "carol-laptop"].sort())
    const revoked = await gw.request("DELETE", `/v1/auth/devices/${phone.id}`, { token: plain, json: {} })
    expect(revoked.body).toEqual({ revoked: phone.id })
    expect((await devices(plain)).body.devices.map((d: { device_id: string }) => d.device_id)).toEqual(["carol-laptop"])
    expect((await devices(plain, tight)).body.devices.map((d: { device_id: string }) => d.device_id)).toEqual(["carol-laptop"])
  })

  it("refuses a malformed registration with 400 naming the field, and writes nothing", async () => {
    const session = (await signIn(gw, "other", bob)).access_token
    const cases: ReadonlyArray<readonly [string, unknown]> = [
      ["an unknown provider", { device_id: "d", provider: "fcm", token: "t" }],
      ["a VoIP provider (topics only)", { device_id: "d", provider: "ios_voip_push", token: apnsToken(1) }],
      ["an APNs token that is not hex", { device_id: "d", provider: "ios_push", token: "not-a-hex-token" }],
      ["a token over 512 bytes", { device_id: "d", provider: "legacy_push", token: "x".repeat(513) }],
      ["a token over 512 bytes in 171 characters", { device_id: "d", provider: "legacy_push", token: "€".repeat(171) }],
      ["a relay topic with a slash", { device_id: "d", provider: "relay_push", token: "a/b" }],
      ["a relay URL with a query", { device_id: "d", provider: "relay_push", token: "https://relay.example/t?x=1" }],
      ["a platform outside its three", { device_id: "d", provider: "legacy_push", token: "t", platform: "windows" }],
      ["a device id with a space", { device_id: "my phone", provider: "legacy_push", token: "t" }],
      ["an empty device id", { device_id: "", provider: "legacy_push", token: "t" }],
      ["a field nobody has", { device_id: "d", provider: "legacy_push", token: "t", color: "red" }],
      ["no token", { device_id: "d", provider: "legacy_push" }]
    ]
    for (const [what, body] of cases) expectError(await register(session, body), 400, "VALIDATION_FAILED")
    expectError(await gw.request("POST", "/v1/push/devices", { token: session, body: "{", headers: { "content-type": "application/json" } }), 400, "MALFORMED_JSON")
    expect((await devices(session)).body.devices).toEqual([])
    expectError(await gw.request("DELETE", `/v1/push/devices/${"x".repeat(129)}`, { token: session }), 400, "VALIDATION_FAILED")
  })

  it("holds a user to the cap; a held device id is still renewed", async () => {
    const session = (await signIn(tight, "bare", carol)).access_token
    // nothing configured in bare: 503, and the listing still answers
    expectError(await register(session, { device_id: "one", provider: "legacy_push", token: expoToken(1) }, tight), 503, "PUSH_NOT_CONFIGURED")
    expect((await devices(session, tight)).body.devices).toEqual([])

    const configured = (await signIn(tight, "other", carol)).access_token
    expect((await register(configured, { device_id: "one", provider: "legacy_push", token: expoToken(1) }, tight)).status).toBe(200)
    expect((await register(configured, { device_id: "two", provider: "legacy_push", token: expoToken(2) }, tight)).status).toBe(200)
    const refused = await register(configured, { device_id: "three", provider: "legacy_push", token: expoToken(3) }, tight)
    expectError(refused, 400, "VALIDATION_FAILED")
    expect(refused.body.error).toContain("2 push registrations")
    expect((await register(configured, { device_id: "two", provider: "legacy_push", token: expoToken(4) }, tight)).status).toBe(200)
    expect((await gw.request("DELETE", "/v1/push/devices/one", { token: configured })).body.removed).toBe(true)
    expect((await register(configured, { device_id: "three", provider: "legacy_push", token: expoToken(3) }, tight)).status).toBe(200)
    const all = (await devices(configured)).body
    expect(all.devices.map((d: { device_id: string }) => d.device_id).sort()).toEqual(["three", "two"])
    expect(all.next_cursor).toBeNull()
    // in keyset pages, as every list that can grow
    const first = await gw.request("GET", "/v1/push/devices?limit=1", { token: configured })
    expect(first.body.devices).toEqual([all.devices[0]])
    expect(typeof first.body.next_cursor).toBe("string")
    const second = await gw.request("GET", `/v1/push/devices?limit=1&cursor=${first.body.next_cursor}`, { token: configured })
    expect(second.body).toEqual({ devices: [all.devices[1]], next_cursor: null })
    expectError(await gw.request("GET", "/v1/push/devices?cursor=not-a-cursor", { token: configured }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("GET", "/v1/push/devices?limit=0", { token: configured }), 400, "VALIDATION_FAILED")
  })

  it("is a signed-in user's own: API keys are refused, and a caller without credentials", async () => {
    for (const token of [owner, runtime]) {
      expectError(await devices(token), 403, "SESSION_REQUIRED")
      expectError(await register(token, { device_id: "d", provider: "legacy_push", token: "t" }), 403, "SESSION_REQUIRED")
      expectError(await gw.request("DELETE", "/v1/push/devices/d", { token }), 403, "SESSION_REQUIRED")
    }
    expectError(await gw.request("GET", "/v1/push/devices"), 401, "UNAUTHORIZED")
  })

  it("registers a topic: the id is the SHA-256 of the secret's bytes, the expiry now + 7 days rounded up to a UTC day", async () => {
    const s = secret(0x11)
    const before = Math.floor(Date.now() / 1000)
    const registered = await topic(runtime, { topic_secret: s.toUpperCase(), provider: "ios_voip_push", token: apnsToken(0x22) })
    expect(registered.status, registered.text).toBe(200)
    expect(Object.keys(registered.body).sort()).toEqual(["expires_at", "status", "topic_id"])
    expect(registered.body).toMatchObject({ status: "ok", topic_id: topicIdOf(s) })
    expect(registered.body.expires_at % day).toBe(0)
    expect(registered.body.expires_at).toBeGreaterThanOrEqual(before + 7 * day)
    expect(registered.body.expires_at).toBeLessThanOrEqual(before + 8 * day + 5)
    // a runtime wallet session holds push:write too
    const session = (await signIn(gw, "shop", alice)).access_token
    expect((await topic(session, { topic_secret: secret(0x12), provider: "relay_push", token: "alice-topic" })).status).toBe(200)
    if (engine === "sqlite") {
      const db = new Database(path.join(gw.dataDir, "registry.db"), { readonly: true })
      try {
        const rows = db.prepare("SELECT * FROM push_topics").all() as Array<Record<string, unknown>>
        expect(Object.keys(rows[0] ?? {}).sort()).toEqual(["expires_at", "namespace", "sealed_token", "token_hash", "topic_id"])
        expect(JSON.stringify(rows)).not.toContain(apnsToken(0x22))
        expect(JSON.stringify(rows)).not.toContain(s)
      } finally {
        db.close()
      }
    }
    expect((await untopic(runtime, s)).status).toBe(200)
    expect((await untopic(session, secret(0x12))).status).toBe(200)
  })

  it("moves a topic's expiry forward when registered again, and lets it expire", async () => {
    const s = secret(0x21)
    const first = await topic(runtime, { topic_secret: s, provider: "relay_push", token: "moving" }, tight)
    expect(first.status, first.text).toBe(200)
    await new Promise((r) => setTimeout(r, 1100))
    const again = await topic(runtime, { topic_secret: s, provider: "relay_push", token: "moving-2" }, tight)
    expect(again.body.topic_id).toBe(first.body.topic_id)
    expect(again.body.expires_at).toBeGreaterThan(first.body.expires_at)
    await new Promise((r) => setTimeout(r, (again.body.expires_at + 1) * 1000 - Date.now()))
    expectError(await untopic(runtime, s), 404, "NOT_FOUND")
  })

  it("hands a provider token to the newer topic, removes once, and keeps namespaces apart", async () => {
    const [a, b] = [secret(0x31), secret(0x32)]
    expect((await topic(runtime, { topic_secret: a, provider: "legacy_push", token: expoToken(31) })).status).toBe(200)
    expect((await topic(runtime, { topic_secret: b, provider: "legacy_push", token: expoToken(31) })).status).toBe(200)
    // a was replaced by b in the same write
    expectError(await untopic(runtime, a), 404, "NOT_FOUND")
    // another namespace's topic is simply not found, and stays
    expectError(await untopic(otherRuntime, b), 404, "NOT_FOUND")
    const removed = await untopic(runtime, b)
    expect(removed.status, removed.text).toBe(200)
    expect(removed.body).toEqual({ status: "removed", topic_id: topicIdOf(b) })
    expectError(await untopic(runtime, b), 404, "NOT_FOUND")
    // the same token under the same provider in another namespace is another topic
    expect((await topic(runtime, { topic_secret: a, provider: "legacy_push", token: expoToken(31) })).status).toBe(200)
    expect((await topic(otherRuntime, { topic_secret: b, provider: "legacy_push", token: expoToken(31) })).status).toBe(200)
    expect((await untopic(runtime, a)).status).toBe(200)
    expect((await untopic(otherRuntime, b)).status).toBe(200)
  })

  it("refuses a malformed topic with 400 and writes nothing; other methods are 405; push:write and push configured are needed", async () => {
    const s = secret(0x41)
    const cases: ReadonlyArray<readonly [string, unknown]> = [
      ["a secret that is not hex", { topic_secret: "zz".repeat(16), provider: "relay_push", token: "t" }],
      ["a secret under 16 bytes", { topic_secret: "ab".repeat(15), provider: "relay_push", token: "t" }],
      ["a secret over 64 bytes", { topic_secret: "ab".repeat(65), provider: "relay_push", token: "t" }],
      ["a secret of an odd length", { topic_secret: "a".repeat(33), provider: "relay_push", token: "t" }],
      ["an unknown provider", { topic_secret: s, provider: "fcm", token: "t" }],
      ["no token", { topic_secret: s, provider: "relay_push" }],
      ["a token over 512 bytes", { topic_secret: s, provider: "legacy_push", token: "x".repeat(513) }],
      ["a relay topic with a slash", { topic_secret: s, provider: "relay_push", token: "a/b" }],
      ["an extra field", { topic_secret: s, provider: "relay_push", token: "t", subject: "0xabc" }]
    ]
    for (const [what, body] of cases) {
      const reply = await topic(runtime, body)
      expect(reply.status, `${what}: ${reply.text}`).toBe(400)
      expect(reply.body.code, what).toBe("VALIDATION_FAILED")
    }
    expectError(await untopic(runtime, s), 404, "NOT_FOUND")
    expectError(await untopic(runtime, "not-hex"), 400, "VALIDATION_FAILED")
    expectError(await gw.request("DELETE", "/v1/push/topics", { token: runtime, json: {} }), 400, "VALIDATION_FAILED")
    for (const method of ["GET", "PUT", "PATCH"]) {
      expectError(await gw.request(method, "/v1/push/topics", { token: runtime, ...(method === "GET" ? {} : { json: {} }) }), 405, "METHOD_NOT_ALLOWED")
    }
    expectError(await topic(cacheOnly, { topic_secret: s, provider: "relay_push", token: "t" }), 403, "GRANT_REQUIRED")
    expectError(await topic(bareRuntime, { topic_secret: s, provider: "relay_push", token: "t" }), 503, "PUSH_NOT_CONFIGURED")
    expectError(await gw.request("POST", "/v1/push/topics", { json: { topic_secret: s, provider: "relay_push", token: "t" } }), 401, "UNAUTHORIZED")
  })

  it("is driven the same through the typed client, every answer decoded strictly with its declared schema", async () => {
    const session = (await signIn(gw, "other", alice)).access_token
    const stored = await call(gw, session, (c) =>
      c.pushRegistrations.registerDevice({ payload: { device_id: "typed", provider: "legacy_push", token: expoToken(9), platform: "web" } })
    )
    expect(stored).toMatchObject({ device_id: "typed", bound: false, platform: "web" })
    expect((await call(gw, session, (c) => c.pushRegistrations.devices({ urlParams: {} }))).devices.map((d) => d.device_id)).toContain("typed")
    expect(await call(gw, session, (c) => c.pushRegistrations.removeDevice({ path: { device_id: "typed" } }))).toEqual({ device_id: "typed", removed: true })
    const registered = await call(gw, runtime, (c) =>
      c.pushRegistrations.registerTopic({ payload: { topic_secret: secret(0x51), provider: "relay_push", token: "typed-topic" } })
    )
    expect(registered.topic_id).toBe(topicIdOf(secret(0x51)))
    expect(await call(gw, runtime, (c) => c.pushRegistrations.removeTopic({ payload: { topic_secret: secret(0x51) } }))).toEqual({
      status: "removed",
      topic_id: topicIdOf(secret(0x51))
    })
    expectRefusal(await refusal(gw, runtime, (c) => c.pushRegistrations.removeTopic({ payload: { topic_secret: secret(0x51) } })), 404, "NOT_FOUND")
    expectRefusal(await refusal(gw, runtime, (c) => c.pushRegistrations.devices({ urlParams: {} })), 403, "SESSION_REQUIRED")
    expectRefusal(
      await refusal(gw, bareRuntime, (c) => c.pushRegistrations.registerTopic({ payload: { topic_secret: secret(0x51), provider: "relay_push", token: "t" } })),
      503,
      "PUSH_NOT_CONFIGURED"
    )
    expect(notCalled(["pushRegistrations"])).toEqual([])
  })

  it("answers 500 when the registry refuses a topic write, and nothing is written", async () => {
    const trigger = "CREATE TRIGGER refuse_topics BEFORE INSERT ON push_topics BEGIN SELECT RAISE(ABORT, 'refused'); END"
    const execute = async (sql: string) => {
      if (engineServer !== undefined) {
        const answer = await fetch(`${engineServer.url}/db/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify([sql]) })
        expect(answer.status).toBe(200)
        expect(JSON.stringify(await answer.json())).not.toContain("error")
        return
      }
      const db = new Database(path.join(gw.dataDir, "registry.db"))
      try {
        db.exec(sql)
      } finally {
        db.close()
      }
    }
    await execute(trigger)
    try {
      const s = secret(0x61)
      expectError(await topic(runtime, { topic_secret: s, provider: "relay_push", token: "refused" }), 500, "INTERNAL")
      expectError(await untopic(runtime, s), 404, "NOT_FOUND")
    } finally {
      await execute("DROP TRIGGER refuse_topics")
    }
    expect((await topic(runtime, { topic_secret: secret(0x61), provider: "relay_push", token: "refused" })).status).toBe(200)
  })
})
