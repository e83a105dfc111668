/**
 * Wallet sign-in over HTTP with independent client code: an ethers wallet signs the EIP-4361
 * message, a WebCrypto P-256 key is the device, jose computes its thumbprint and verifies tokens.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import * as jose from "jose"
import Database from "better-sqlite3"
import { webcrypto } from "node:crypto"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { type Device, newDevice } from "../support/device.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const subtle = webcrypto.subtle

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code).toBe(code)
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
}



const proof = async (device: Device, action: string, namespace: string, binding: string, iat = Math.floor(Date.now() / 1000)) => {
  const id = Buffer.from(webcrypto.getRandomValues(new Uint8Array(18))).toString("base64url")
  const text = ["portico-device-proof-v1", action, namespace, binding, String(iat), id].join("\n")
  return { iat, id, sig: await device.sign(text) }
}

describe.each(["sqlite", "rqlite"] as const)("wallet sign-in and sessions, registry on %s", (engine) => {
  let gw: Gateway
  let ownerKey: string
  let engineServer: RqlitedServer | undefined
  const member = Wallet.createRandom()
  const outsider = Wallet.createRandom()

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway(engineServer === undefined ? {} : { env: { PORTICO_RQLITE_URL: engineServer.url } })
    ownerKey = (await gw.cli(["namespace", "create", "shop"])).api_key
    const added = await gw.request("POST", "/v1/namespace/members", {
      token: ownerKey,
      json: { wallet: member.address, role: "runtime" }
    })
    expect(added.status).toBe(200)
  })
  afterAll(async () => {
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  const challenge = async (wallet: string, deviceId?: string) => {
    const reply = await gw.request("POST", "/v1/auth/challenge", {
      json: { wallet, namespace: "shop", ...(deviceId === undefined ? {} : { device_id: deviceId }) }
    })
    expect(reply.status, reply.text).toBe(200)
    return reply.body as { message: string; nonce: string; expires_at: number }
  }

  const signIn = async (signer: { readonly address: string; readonly signMessage: (m: string) => Promise<string> }) => {
    const { message } = await challenge(signer.address)
    return gw.request("POST", "/v1/auth/verify", { json: { message, signature: await signer.signMessage(message) } })
  }

  it("lets developer wallets manage keys below them, ends a removed member's sign-in keys, and moves ownership only from the owner now", async () => {
    const dev = Wallet.createRandom()
    expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: dev.address, role: "developer" } })).status).toBe(200)
    const devToken = (await signIn(dev)).body.access_token as string
    // keys are control plane: a developer lists and mints (never more than it holds), not admin keys
    expect((await gw.request("GET", "/v1/namespace/keys", { token: devToken })).status).toBe(200)
    // members, devices and policy are the owner's and admins': a developer is told so
    expectError(await gw.request("PUT", "/v1/namespace/session-policy", { token: devToken, json: { sign_in: "open" } }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(
      await gw.request("POST", "/v1/namespace/members", { token: devToken, json: { wallet: Wallet.createRandom().address, role: "reader" } }),
      403,
      "CONTROL_PLANE_REQUIRED"
    )
    const devKey = await gw.request("POST", "/v1/namespace/keys", { token: devToken, json: { scopes: ["cache"] } })
    expect(devKey.status, devKey.text).toBe(201)
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: devToken, json: { profile: "admin" } }), 403, "GRANT_REQUIRED")
    const ownerId = (await gw.request("GET", "/v1/auth/whoami", { token: ownerKey })).body.subject.replace("key:", "")
    expectError(await gw.request("DELETE", `/v1/namespace/keys/${ownerId}`, { token: devToken }), 403, "OWNER_REQUIRED")
    expect((await gw.request("DELETE", `/v1/namespace/keys/${devKey.body.id}`, { token: devToken })).status).toBe(200)
    // a sign-in key ends with its member's role, and with the member
    const laptop = await gw.request("POST", "/v1/auth/api-key", { token: devToken, json: { label: "laptop" } })
    expect(laptop.status, laptop.text).toBe(201)
    // labels are plain text here too: no lone surrogate, no control character
    for (const label of ['"\\ud800"', '"a\\u0000"', '"a\\u001fb"']) {
      const body = `{"label":${label}}`
      const refused = await gw.request("POST", "/v1/auth/api-key", { token: devToken, headers: { "content-type": "application/json" }, body })
      expectError(refused, 400, "VALIDATION_FAILED")
      const device = await gw.request("POST", "/v1/auth/device", { headers: { "content-type": "application/json" }, body: `{"namespace":"shop","device_label":${label}}` })
      expectError(device, 400, "VALIDATION_FAILED")
    }
    const phone = await gw.request("POST", "/v1/auth/api-key", { token: devToken, json: { label: "phone" } })
    expect((await gw.request("GET", "/v1/auth/whoami", { token: laptop.body.api_key })).status).toBe(200)
    // the same role again changes nothing
    expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: dev.address, role: "developer" } })).status).toBe(200)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: laptop.body.api_key })).status).toBe(200)
    expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: dev.address, role: "reader" } })).status).toBe(200)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: laptop.body.api_key }), 401, "INVALID_API_KEY")
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: phone.body.api_key }), 401, "INVALID_API_KEY")
    const later = await gw.request("POST", "/v1/auth/api-key", { token: (await signIn(dev)).body.access_token, json: { label: "later" } })
    expect((await gw.request("GET", "/v1/auth/whoami", { token: later.body.api_key })).status).toBe(200)
    expect((await gw.request("DELETE", `/v1/namespace/members/${dev.address}`, { token: ownerKey })).status).toBe(200)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: later.body.api_key }), 401, "INVALID_API_KEY")
    // ownership moves in two steps: the owner offers, the recipient accepts from its own session
    const first = Wallet.createRandom()
    const second = Wallet.createRandom()
    const transfer = (token: string, wallet: string) => gw.request("POST", "/v1/namespace/members/transfer", { token, json: { wallet } })
    const accept = (token: string) => gw.request("POST", "/v1/namespace/members/transfer/accept", { token })
    const whoami = async (token: string) => (await gw.request("GET", "/v1/auth/whoami", { token })).body.role
    // never to the zero address (nobody holds its key), nor to a wallet that cannot sign in to accept
    expectError(await transfer(ownerKey, "0x" + "0".repeat(40)), 400, "VALIDATION_FAILED")
    expectError(await transfer(ownerKey, first.address), 409, "CONFLICT")
    expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: first.address, role: "reader" } })).status).toBe(200)
    const offered = await transfer(ownerKey, first.address)
    expect(offered.status, offered.text).toBe(202)
    expect(offered.body).toMatchObject({ namespace: "shop", status: "pending", from: null, to: first.address.toLowerCase() })
    // nothing has moved: the owner key is still the owner's, the recipient still a reader
    expect(await whoami(ownerKey)).toBe("owner")
    const firstToken = (await signIn(first)).body.access_token as string
    expect(await whoami(firstToken)).toBe("reader")
    expect((await gw.request("GET", "/v1/namespace/members/transfer", { token: firstToken })).body.offer).toMatchObject({ to: first.address.toLowerCase() })
    // only the recipient's own session accepts: not an API key, not another member's session
    expectError(await accept(ownerKey), 403, "SESSION_REQUIRED")
    expectError(await accept((await signIn(member)).body.access_token), 403, "FORBIDDEN")
    // until it is accepted the owner may withdraw it; then there is nothing to accept
    expect((await gw.request("POST", "/v1/namespace/members/transfer/cancel", { token: ownerKey })).body).toEqual({ namespace: "shop", cancelled: first.address.toLowerCase() })
    expectError(await accept(firstToken), 404, "NOT_FOUND")
    expect(await whoami(firstToken)).toBe("reader")
    expect((await transfer(ownerKey, first.address)).status).toBe(202)
    const accepted = await accept(firstToken)
    expect(accepted.status, accepted.text).toBe(200)
    expect(accepted.body).toEqual({ namespace: "shop", owner: first.address.toLowerCase() })
    expect(await whoami(firstToken)).toBe("owner")
    expect((await gw.request("GET", "/v1/namespace/members/transfer", { token: firstToken })).body.offer).toBe(null)
    // an accepted offer is spent
    expectError(await accept(firstToken), 404, "NOT_FOUND")
    // the new owner hands it on the same way; its still-valid token cannot take it back
    expect((await gw.request("POST", "/v1/namespace/members", { token: firstToken, json: { wallet: second.address, role: "reader" } })).status).toBe(200)
    expect((await transfer(firstToken, second.address)).status).toBe(202)
    const secondToken = (await signIn(second)).body.access_token as string
    expect((await accept(secondToken)).body).toEqual({ namespace: "shop", owner: second.address.toLowerCase() })
    // firstToken still says "owner" for up to 15 minutes; the registry says otherwise, and every
    // request acts with the role the registry holds now
    expect(await whoami(firstToken)).toBe("admin")
    expectError(await transfer(firstToken, first.address), 403, "OWNER_REQUIRED")
    expectError(await gw.request("POST", "/v1/namespace/members/transfer/cancel", { token: firstToken }), 403, "OWNER_REQUIRED")
    expectError(await gw.request("GET", "/v1/rqlite/export", { token: firstToken }), 403, "OWNER_REQUIRED")
    const audited = (await gw.request("GET", "/v1/audit?limit=50", { token: secondToken })).body.entries as ReadonlyArray<{ action: string; principal: string; target: string }>
    expect(audited.filter((e) => e.action === "namespace.transfer").map((e) => e.target)).toEqual([second.address.toLowerCase(), first.address.toLowerCase()])
    expect(audited.filter((e) => e.action === "namespace.transfer_offer")).toHaveLength(3)
    expect(audited.filter((e) => e.action === "namespace.transfer_cancel")).toHaveLength(1)
    // a demoted admin's token is a reader's at once; a removed member's token stops
    expect((await gw.request("POST", "/v1/namespace/members", { token: secondToken, json: { wallet: first.address, role: "reader" } })).status).toBe(200)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: firstToken })).body.role).toBe("reader")
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: firstToken, json: { profile: "admin" } }), 403, "CONTROL_PLANE_REQUIRED")
    expect((await gw.request("DELETE", `/v1/namespace/members/${first.address}`, { token: secondToken })).status).toBe(200)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: firstToken }), 401, "INVALID_TOKEN")
    expectError(await gw.request("POST", "/v1/auth/api-key", { token: firstToken, json: {} }), 401, "INVALID_TOKEN")
    const members = await gw.request("GET", "/v1/namespace/members", { token: ownerKey })
    expect(members.body.owner).toBe(second.address.toLowerCase())
    // the CLI's owner key was demoted by the first transfer: it keeps admin powers for the rest
    expect((await gw.request("GET", "/v1/auth/whoami", { token: ownerKey })).body.role).toBe("admin")
  })

  it("ends a removed member's sessions for good: adding the wallet back or opening sign-in brings none back", async () => {
    const gone = Wallet.createRandom()
    expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: gone.address, role: "runtime" } })).status).toBe(200)
    const session = (await signIn(gone)).body
    expect((await gw.request("DELETE", `/v1/namespace/members/${gone.address}`, { token: ownerKey })).status).toBe(200)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: session.access_token }), 401, "INVALID_TOKEN")
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: session.refresh_token } }), 401, "INVALID_REFRESH_TOKEN")
    // before: the session was only suspended, and came back with the membership
    expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: gone.address, role: "reader" } })).status).toBe(200)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: session.access_token }), 401, "INVALID_TOKEN")
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: session.refresh_token } }), 401, "INVALID_REFRESH_TOKEN")
    // a new sign-in is a new session, with the new role
    const again = (await signIn(gone)).body
    expect((await gw.request("GET", "/v1/auth/whoami", { token: again.access_token })).body.role).toBe("reader")
  })

  it("refuses a member wallet whose mixed-case checksum is wrong, as sign-in does", async () => {
    const address = Wallet.createRandom().address
    // flip the case of one letter of the EIP-55 form: still hex, no longer its checksum
    const at = [...address.slice(2)].findIndex((c) => /[a-fA-F]/.test(c)) + 2
    const c = address.charAt(at)
    const wrong = address.slice(0, at) + (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase()) + address.slice(at + 1)
    expect(wrong.toLowerCase()).toBe(address.toLowerCase())
    expectError(await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: wrong, role: "reader" } }), 400, "VALIDATION_FAILED")
    expect((await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wrong, namespace: "shop" } })).status).toBe(400)
    // single case carries no checksum, and the right one is accepted
    for (const ok of [address, address.toLowerCase()]) {
      expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: ok, role: "reader" } })).status).toBe(200)
    }
  })

  it("transfers to the current owner as a no-op: owner keys stay owner keys, nothing is audited", async () => {
    const owner = Wallet.createRandom()
    const key = (await gw.cli(["namespace", "create", "selfowned", "--owner", owner.address])).api_key
    const moved = await gw.request("POST", "/v1/namespace/members/transfer", { token: key, json: { wallet: owner.address } })
    expect(moved.status, moved.text).toBe(200)
    expect(moved.body).toMatchObject({ namespace: "selfowned", owner: owner.address.toLowerCase() })
    expect((await gw.request("GET", "/v1/auth/whoami", { token: key })).body.role).toBe("owner")
    const audit = await gw.request("GET", "/v1/audit", { token: key })
    expect(audit.body.entries.map((e: { action: string }) => e.action)).not.toContain("namespace.transfer")
  })

  it("lets an ownership offer expire: after 24 h there is nothing to accept and the owner stays", async () => {
    const key = (await gw.cli(["namespace", "create", "offered"])).api_key
    const heir = Wallet.createRandom()
    expect((await gw.request("POST", "/v1/namespace/members", { token: key, json: { wallet: heir.address, role: "developer" } })).status).toBe(200)
    const offered = await gw.request("POST", "/v1/namespace/members/transfer", { token: key, json: { wallet: heir.address } })
    expect(offered.status, offered.text).toBe(202)
    expect(offered.body.expires_at - Math.floor(Date.now() / 1000)).toBeGreaterThan(24 * 3600 - 60)
    // the offer's time runs out (written into the registry, as 24 hours passing would)
    const expire = ["UPDATE ownership_offers SET expires_at = ? WHERE namespace = 'offered'", Date.now() - 1000] as const
    if (engineServer === undefined) {
      const db = new Database(path.join(gw.dataDir, "registry.db"))
      try {
        db.prepare(expire[0]).run(expire[1])
      } finally {
        db.close()
      }
    } else {
      const reply = await fetch(`${engineServer.url}/db/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify([[...expire]]) })
      expect(reply.status).toBe(200)
    }
    expect((await gw.request("GET", "/v1/namespace/members/transfer", { token: key })).body).toEqual({ namespace: "offered", offer: null })
    const { message } = (await gw.request("POST", "/v1/auth/challenge", { json: { wallet: heir.address, namespace: "offered" } })).body
    const session = await gw.request("POST", "/v1/auth/verify", { json: { message, signature: await heir.signMessage(message) } })
    expect(session.status, session.text).toBe(200)
    expectError(await gw.request("POST", "/v1/namespace/members/transfer/accept", { token: session.body.access_token }), 404, "NOT_FOUND")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: key })).body.role).toBe("owner")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: session.body.access_token })).body.role).toBe("developer")
  })

  it("drops expired challenges, proof nonces and device requests as new ones are made", async () => {
    const past = Date.now() - 2 * 3_600_000
    const exec = async (sql: string, params: ReadonlyArray<string | number>) => {
      if (engineServer === undefined) {
        const db = new Database(path.join(gw.dataDir, "registry.db"))
        try {
          db.prepare(sql).run(...params)
        } finally {
          db.close()
        }
        return
      }
      const reply = await fetch(`${engineServer.url}/db/execute`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify([[sql, ...params]]) })
      expect(reply.status).toBe(200)
    }
    const count = async (table: string, key: string, value: string) => {
      const sql = `SELECT count(*) AS n FROM ${table} WHERE ${key} = ?`
      if (engineServer === undefined) {
        const db = new Database(path.join(gw.dataDir, "registry.db"), { readonly: true })
        try {
          return (db.prepare(sql).get(value) as { n: number }).n
        } finally {
          db.close()
        }
      }
      const reply = await fetch(`${engineServer.url}/db/query?level=strong`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify([[sql, value]]) })
      return ((await reply.json()) as { results: Array<{ values: Array<Array<number>> }> }).results[0]?.values[0]?.[0]
    }
    await exec("INSERT INTO auth_challenges (nonce, namespace, wallet, device_id, expires_at) VALUES (?, 'shop', ?, NULL, ?)", ["deadnonce", member.address.toLowerCase(), past])
    await exec("INSERT INTO proof_nonces (key, expires_at) VALUES (?, ?)", ["deadproof", past])
    await exec(
      `INSERT INTO device_requests (device_code_hash, user_code, namespace, kind, wallet, device_id, public_jwk, label, status, created_at, expires_at)
       VALUES (?, 'DEAD-CODE', 'shop', 'login', NULL, '', '', '', 'pending', ?, ?)`,
      ["deadrequest", past, past]
    )
    expect(await count("auth_challenges", "nonce", "deadnonce")).toBe(1)
    await challenge(member.address)
    expect(await count("auth_challenges", "nonce", "deadnonce")).toBe(0)
    const device = await newDevice()
    const started = await gw.request("POST", "/v1/auth/device", { json: { namespace: "shop", device_key: device.jwk } })
    expect(started.status, started.text).toBe(200)
    expect(await count("device_requests", "device_code_hash", "deadrequest")).toBe(0)
    // a poll spends a proof nonce
    const polled = await gw.request("POST", "/v1/auth/device/token", {
      json: { device_code: started.body.device_code, device_proof: await proof(device, "claim", "shop", started.body.device_code) }
    })
    expectError(polled, 400, "authorization_pending")
    expect(await count("proof_nonces", "key", "deadproof")).toBe(0)
  })

  it("issues an EIP-4361 challenge naming the namespace host, wallet and resources", async () => {
    const device = await newDevice()
    const c = await challenge(member.address, device.id)
    expect(c.message).toContain("ns-shop.portico.localhost wants you to sign in with your Ethereum account:")
    expect(c.message).toContain(member.address)
    expect(c.message).toContain(`Nonce: ${c.nonce}`)
    expect(c.message).toContain("- urn:portico:namespace:shop")
    expect(c.message).toContain(`- urn:portico:device:${device.id}`)
    expect(c.expires_at - Date.now() / 1000).toBeGreaterThan(290)
    expectError(await gw.request("POST", "/v1/auth/challenge", { json: { wallet: member.address, namespace: "nope" } }), 404, "NOT_FOUND")
    expect((await gw.request("POST", "/v1/auth/challenge", { json: { wallet: "0x1", namespace: "shop" } })).status).toBe(400)
  })

  it("signs a member in with one spent nonce; a replay is 401", async () => {
    const { message } = await challenge(member.address)
    const signature = await member.signMessage(message)
    const reply = await gw.request("POST", "/v1/auth/verify", { json: { message, signature } })
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body).toMatchObject({ token_type: "Bearer", expires_in: 900, subject: member.address.toLowerCase(), namespace: "shop" })
    expect(reply.body.refresh_token).toMatch(/^rt1_/)
    expect(reply.body).not.toHaveProperty("device_id")
    const jwks = (await gw.request("GET", "/.well-known/jwks.json")).body
    const { payload } = await jose.jwtVerify(reply.body.access_token, jose.createLocalJWKSet(jwks))
    expect(payload).toMatchObject({ sub: member.address.toLowerCase(), ns: "shop", sid: reply.body.session_id })
    expect(payload.did).toBeUndefined()
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(900)
    const who = await gw.request("GET", "/v1/auth/whoami", { token: reply.body.access_token })
    expect(who.body).toMatchObject({ method: "jwt", role: "runtime", namespace: "shop" })
    expectError(await gw.request("POST", "/v1/auth/verify", { json: { message, signature } }), 401, "SIGNATURE_INVALID")
  })

  it("refuses outsiders, other signers and edited messages", async () => {
    expectError(await signIn(outsider), 403, "NOT_A_MEMBER")
    const { message } = await challenge(member.address)
    expectError(
      await gw.request("POST", "/v1/auth/verify", { json: { message, signature: await outsider.signMessage(message) } }),
      401,
      "SIGNATURE_INVALID"
    )
    const signature = await member.signMessage(message)
    const edited = message.replace("urn:portico:namespace:shop", "urn:portico:namespace:shoq")
    expectError(await gw.request("POST", "/v1/auth/verify", { json: { message: edited, signature } }), 401, "SIGNATURE_INVALID")
    expect((await gw.request("POST", "/v1/auth/verify", { json: { message, signature: "0xzz" } })).status).toBe(401)
    expect((await gw.request("POST", "/v1/auth/verify", { json: { message, signature, extra: 1 } })).status).toBe(400)
    // any other edit the parser would tolerate, signed by the right wallet, is not the issued message
    for (const edit of [
      (m: string) => m.replace(/URI: .*/, "URI: https://evil.example/login"),
      (m: string) => m.replace("Chain ID: 1", "Chain ID: 137"),
      (m: string) => m.replace(/Issued At: .*/, "Issued At: 2020-01-01T00:00:00.000Z"),
      (m: string) => m.replace(/Expiration Time: .*/, "Expiration Time: 2099-01-01T00:00:00.000Z"),
      (m: string) => m.replace(/(Expiration Time: .*)/, "$1\nRequest ID: abc")
    ]) {
      const fresh = (await challenge(member.address)).message
      const changed = edit(fresh)
      expect(changed).not.toBe(fresh)
      const reply = await gw.request("POST", "/v1/auth/verify", { json: { message: changed, signature: await member.signMessage(changed) } })
      expectError(reply, 401, "SIGNATURE_INVALID")
      // and the nonce is not spent by the refusal: the issued message still signs in
      expect((await gw.request("POST", "/v1/auth/verify", { json: { message: fresh, signature: await member.signMessage(fresh) } })).status).toBe(200)
    }
  })

  it("rotates refresh tokens: one grace reuse yields the same successor, further reuse ends the session", async () => {
    const first = (await signIn(member)).body
    const r1 = await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: first.refresh_token } })
    expect(r1.status, r1.text).toBe(200)
    expect(r1.body.refresh_token).not.toBe(first.refresh_token)
    expect(r1.body.session_id).toBe(first.session_id)
    const grace = await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: first.refresh_token } })
    expect(grace.status).toBe(200)
    expect(grace.body.refresh_token).toBe(r1.body.refresh_token)
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: first.refresh_token } }), 401, "INVALID_REFRESH_TOKEN")
    // the whole family is gone: the successor and the access tokens too
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: r1.body.refresh_token } }), 401, "INVALID_REFRESH_TOKEN")
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: r1.body.access_token }), 401, "INVALID_TOKEN")
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: "rt1_" + "A".repeat(43) } }), 401, "INVALID_REFRESH_TOKEN")
    // the grace is for a lost answer only: once the successor was used, an older token is reuse
    const a = (await signIn(member)).body
    const b = await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: a.refresh_token } })
    const c = await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: b.body.refresh_token } })
    expect(c.status).toBe(200)
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: a.refresh_token } }), 401, "INVALID_REFRESH_TOKEN")
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: c.body.refresh_token } }), 401, "INVALID_REFRESH_TOKEN")
  })

  it("lists and ends sessions; logout stops the access token at once", async () => {
    const a = (await signIn(member)).body
    const b = (await signIn(member)).body
    const list = await gw.request("GET", "/v1/auth/sessions", { token: a.access_token })
    const ids = list.body.sessions.map((s: { id: string }) => s.id)
    expect(ids).toEqual(expect.arrayContaining([a.session_id, b.session_id]))
    expect(list.body.sessions.find((s: { id: string }) => s.id === a.session_id).current).toBe(true)
    expect(list.text).not.toMatch(/rt1_|dv1_|refresh_token/)
    const ended = await gw.request("DELETE", `/v1/auth/sessions/${b.session_id}`, { token: a.access_token, json: {} })
    expect(ended.body).toEqual({ ended: b.session_id })
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: b.access_token }), 401, "INVALID_TOKEN")
    expectError(await gw.request("DELETE", `/v1/auth/sessions/${b.session_id}`, { token: a.access_token, json: {} }), 404, "NOT_FOUND")
    // what fetch sends for `body: ""`: an empty text/plain body is an empty JSON object
    const out = await gw.request("POST", "/v1/auth/logout", { token: a.access_token, body: "", headers: { "content-type": "text/plain;charset=UTF-8" } })
    expect(out.body).toEqual({ ended: a.session_id })
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: a.access_token }), 401, "INVALID_TOKEN")
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: a.refresh_token } }), 401, "INVALID_REFRESH_TOKEN")
    expectError(await gw.request("GET", "/v1/auth/sessions", { token: ownerKey }), 403, "SESSION_REQUIRED")
  })

  it("asks a device-bound session's logout for its device's proof", async () => {
    const device = await newDevice()
    const { message } = await challenge(member.address, device.id)
    const bound = await gw.request("POST", "/v1/auth/verify", {
      json: { message, signature: await member.signMessage(message), device_key: device.jwk, device_signature: await device.sign(message) }
    })
    expect(bound.status, bound.text).toBe(200)
    expectError(await gw.request("POST", "/v1/auth/logout", { token: bound.body.access_token }), 401, "DEVICE_PROOF_REQUIRED")
    const out = await gw.request("POST", "/v1/auth/logout", {
      token: bound.body.access_token,
      json: { device_proof: await proof(device, "end-session", "shop", bound.body.session_id) }
    })
    expect(out.body).toEqual({ ended: bound.body.session_id })
  })

  it("binds a session to a device: signatures, dv1_ refresh with fresh proofs only", async () => {
    const device = await newDevice()
    const { message } = await challenge(member.address, device.id)
    const signature = await member.signMessage(message)
    const deviceSig = await device.sign(message)
    // the device must sign the same message, with the key the message names
    const other = await newDevice()
    expectError(
      await gw.request("POST", "/v1/auth/verify", { json: { message, signature, device_key: other.jwk, device_signature: await other.sign(message) } }),
      400,
      "DEVICE_KEY_INVALID"
    )
    // anything that is not a public JWK is the same refusal, not a generic one
    for (const notAKey of ["hello", [1, 2], null, 7]) {
      expectError(await gw.request("POST", "/v1/auth/verify", { json: { message, signature, device_key: notAKey, device_signature: "x" } }), 400, "DEVICE_KEY_INVALID")
      expectError(await gw.request("POST", "/v1/auth/device", { json: { namespace: "shop", device_key: notAKey } }), 400, "DEVICE_KEY_INVALID")
    }
    expectError(
      await gw.request("POST", "/v1/auth/verify", { json: { message, signature, device_key: device.jwk, device_signature: await device.sign(message + " ") } }),
      401,
      "DEVICE_SIGNATURE_INVALID"
    )
    const reply = await gw.request("POST", "/v1/auth/verify", {
      json: { message, signature, device_key: device.jwk, device_signature: deviceSig, device_label: "phone" }
    })
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body.device_id).toBe(device.id)
    expect(reply.body.refresh_token).toMatch(/^dv1_/)
    expect(reply.body).not.toHaveProperty("api_key")
    const jwks = (await gw.request("GET", "/.well-known/jwks.json")).body
    const { payload } = await jose.jwtVerify(reply.body.access_token, jose.createLocalJWKSet(jwks))
    expect(payload.did).toBe(device.id)

    const token: string = reply.body.refresh_token
    const ns = "shop"
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: token } }), 401, "DEVICE_PROOF_REQUIRED")
    const stale = await proof(device, "refresh", ns, token, Math.floor(Date.now() / 1000) - 61)
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: token, device_proof: stale } }), 401, "DEVICE_PROOF_INVALID")
    const wrongAction = await proof(device, "revoke", ns, token)
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: token, device_proof: wrongAction } }), 401, "DEVICE_PROOF_INVALID")
    const wrongKey = await proof(other, "refresh", ns, token)
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: token, device_proof: wrongKey } }), 401, "DEVICE_PROOF_INVALID")
    // repeated members are refused, not resolved last-wins, in the body and inside the proof
    const good0 = await proof(device, "refresh", ns, token)
    const dupInner = `{"refresh_token":"${token}","device_proof":{"iat":${good0.iat},"iat":${good0.iat},"id":"${good0.id}","sig":"${good0.sig}"}}`
    expectError(await gw.request("POST", "/v1/auth/refresh", { body: dupInner, headers: { "content-type": "application/json" } }), 400, "MALFORMED_JSON")
    const dupOuter = `{"refresh_token":"rt1_${"A".repeat(43)}","refresh_token":"${token}"}`
    expectError(await gw.request("POST", "/v1/auth/refresh", { body: dupOuter, headers: { "content-type": "application/json" } }), 400, "MALFORMED_JSON")
    // only an integer literal is an integer: a validly signed proof whose iat is spelled with an
    // exponent or a fraction (JSON.parse reads both as the same integer) is refused
    for (const spell of [(iat: number) => `${iat / 1e9}e9`, (iat: number) => `${iat}.000`]) {
      const signed = await proof(device, "refresh", ns, token)
      const body = `{"refresh_token":"${token}","device_proof":{"iat":${spell(signed.iat)},"id":"${signed.id}","sig":"${signed.sig}"}}`
      expect(JSON.parse(body).device_proof.iat).toBe(signed.iat)
      const refused = await gw.request("POST", "/v1/auth/refresh", { body, headers: { "content-type": "application/json" } })
      expectError(refused, 401, "DEVICE_PROOF_INVALID")
      expect(refused.body.error).toContain("integer literal")
    }
    // none of the refused attempts spent the token: a good proof still rotates it
    const good = await proof(device, "refresh", ns, token)
    const rotated = await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: token, device_proof: good } })
    expect(rotated.status, rotated.text).toBe(200)
    expect(rotated.body.refresh_token).toMatch(/^dv1_/)
    expect(rotated.body.device_id).toBe(device.id)
    // the same proof never works twice
    const next: string = rotated.body.refresh_token
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: next, device_proof: good } }), 401, "DEVICE_PROOF_INVALID")

    // ending a session from a device-bound session takes a proof over the session id
    const plain = (await signIn(member)).body
    const withoutProof = await gw.request("DELETE", `/v1/auth/sessions/${plain.session_id}`, { token: rotated.body.access_token, json: {} })
    expectError(withoutProof, 401, "DEVICE_PROOF_REQUIRED")
    const endProof = await proof(device, "end-session", ns, plain.session_id)
    const ended = await gw.request("DELETE", `/v1/auth/sessions/${plain.session_id}`, {
      token: rotated.body.access_token,
      json: { device_proof: endProof }
    })
    expect(ended.body).toEqual({ ended: plain.session_id })
  })

  it("signs in with an Ed25519 device and refuses a small-order Ed25519 key", async () => {
    const pair = (await subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair
    const jwk = (await subtle.exportKey("jwk", pair.publicKey)) as jose.JWK
    const id = await jose.calculateJwkThumbprint(jwk)
    const c = await challenge(member.address, id)
    const sig = Buffer.from(await subtle.sign({ name: "Ed25519" }, pair.privateKey, new TextEncoder().encode(c.message))).toString("base64url")
    const ok = await gw.request("POST", "/v1/auth/verify", {
      json: { message: c.message, signature: await member.signMessage(c.message), device_key: jwk, device_signature: sig }
    })
    expect(ok.status, ok.text).toBe(200)
    expect(ok.body.device_id).toBe(id)
    // the identity point (order 1): any "signature" could be forged for it
    const weak = { kty: "OKP", crv: "Ed25519", x: Buffer.concat([Buffer.from([1]), Buffer.alloc(31)]).toString("base64url") }
    const weakId = await jose.calculateJwkThumbprint(weak)
    const w = await challenge(member.address, weakId)
    const refused = await gw.request("POST", "/v1/auth/verify", {
      json: { message: w.message, signature: await member.signMessage(w.message), device_key: weak, device_signature: Buffer.alloc(64).toString("base64url") }
    })
    expectError(refused, 400, "DEVICE_KEY_INVALID")
  })

  it("keeps one device key to one account", async () => {
    const device = await newDevice()
    const first = await challenge(member.address, device.id)
    const ok = await gw.request("POST", "/v1/auth/verify", {
      json: { message: first.message, signature: await member.signMessage(first.message), device_key: device.jwk, device_signature: await device.sign(first.message) }
    })
    expect(ok.status).toBe(200)
    const second = Wallet.createRandom()
    await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: second.address, role: "reader" } })
    const c = await challenge(second.address, device.id)
    const taken = await gw.request("POST", "/v1/auth/verify", {
      json: { message: c.message, signature: await second.signMessage(c.message), device_key: device.jwk, device_signature: await device.sign(c.message) }
    })
    expectError(taken, 403, "DEVICE_KEY_TAKEN")
  })
})

describe.each(["sqlite", "rqlite"] as const)("devices, revocation across gateways, session policy and sign-in keys, registry on %s", (engine) => {
  let gw: Gateway
  let engineServer: RqlitedServer | undefined
  const engineEnv = (): Record<string, string> => (engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url })
  const startEngine = async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
  }
  let other: Gateway
  let ownerKey: string
  const member = Wallet.createRandom()
  const admin = Wallet.createRandom()
  const outsider = Wallet.createRandom()

  type Signer = { readonly address: string; readonly signMessage: (m: string) => Promise<string> }

  const signIn = async (via: Gateway, signer: Signer, device?: Device) => {
    const c = await via.request("POST", "/v1/auth/challenge", {
      json: { wallet: signer.address, namespace: "apps", ...(device === undefined ? {} : { device_id: device.id }) }
    })
    const message: string = c.body.message
    return via.request("POST", "/v1/auth/verify", {
      json: {
        message,
        signature: await signer.signMessage(message),
        ...(device === undefined ? {} : { device_key: device.jwk, device_signature: await device.sign(message) })
      }
    })
  }

  beforeAll(async () => {
    await startEngine()
    gw = await startGateway({ env: engineEnv() })
    // a second gateway process on the same registry and root secret
    other = await startGateway({ dataDir: gw.dataDir, env: engineEnv() })
    ownerKey = (await gw.cli(["namespace", "create", "apps"])).api_key
    for (const [w, role] of [[member, "runtime"], [admin, "admin"]] as const) {
      const r = await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: w.address, role } })
      expect(r.status).toBe(200)
    }
  })
  afterAll(async () => {
    await gw?.stop()
    await other?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("revokes a device on one gateway and the other refuses its token within 10 s; the key never signs in again", async () => {
    const device = await newDevice()
    const bound = await signIn(gw, member, device)
    expect(bound.status, bound.text).toBe(200)
    expect((await other.request("GET", "/v1/auth/whoami", { token: bound.body.access_token })).status).toBe(200)
    const plain = (await signIn(gw, member)).body
    const list = await gw.request("GET", "/v1/auth/devices", { token: plain.access_token })
    expect(list.body.devices).toEqual([expect.objectContaining({ id: device.id, status: "active", revoked_at: null })])
    const revoked = await gw.request("DELETE", `/v1/auth/devices/${device.id}`, { token: plain.access_token, json: {} })
    expect(revoked.body).toEqual({ revoked: device.id })
    const deadline = Date.now() + 10_000
    let status = 200
    while (Date.now() < deadline) {
      status = (await other.request("GET", "/v1/auth/whoami", { token: bound.body.access_token })).status
      if (status === 401) break
      await new Promise((r) => setTimeout(r, 200))
    }
    expect(status).toBe(401)
    const p = await proof(device, "refresh", "apps", bound.body.refresh_token)
    expect((await other.request("POST", "/v1/auth/refresh", { json: { refresh_token: bound.body.refresh_token, device_proof: p } })).status).toBe(401)
    expectError(await signIn(other, member, device), 403, "DEVICE_REVOKED")
    const after = await gw.request("GET", "/v1/auth/devices", { token: plain.access_token })
    expect(after.body.devices[0]).toMatchObject({ id: device.id, status: "revoked" })
    expect(after.body.devices[0].revoked_at).toBeTypeOf("number")
    expectError(await gw.request("DELETE", `/v1/auth/devices/${"A".repeat(43)}`, { token: plain.access_token, json: {} }), 404, "DEVICE_NOT_FOUND")
    // after every device is revoked the next one enrols as the account's first
    const fresh = await newDevice()
    expect((await signIn(gw, member, fresh)).status).toBe(200)
  })

  it("revokes from a device-bound session only with that device's proof over the target", async () => {
    const phone = await newDevice()
    const laptop = await newDevice()
    const fromPhone = (await signIn(gw, member, phone)).body
    expect((await signIn(gw, member, laptop)).status).toBe(200)
    expectError(await gw.request("DELETE", `/v1/auth/devices/${laptop.id}`, { token: fromPhone.access_token, json: {} }), 401, "DEVICE_PROOF_REQUIRED")
    const wrongBinding = await proof(phone, "revoke", "apps", phone.id)
    expectError(
      await gw.request("DELETE", `/v1/auth/devices/${laptop.id}`, { token: fromPhone.access_token, json: { device_proof: wrongBinding } }),
      401,
      "DEVICE_PROOF_INVALID"
    )
    const good = await proof(phone, "revoke", "apps", laptop.id)
    const done = await gw.request("DELETE", `/v1/auth/devices/${laptop.id}`, { token: fromPhone.access_token, json: { device_proof: good } })
    expect(done.body).toEqual({ revoked: laptop.id })
  })

  it("lets members-write list and revoke any account's devices; others are refused", async () => {
    const device = await newDevice()
    const bound = (await signIn(gw, member, device)).body
    const listed = await gw.request("GET", `/v1/namespace/devices?subject=${member.address}`, { token: ownerKey })
    expect(listed.body.subject).toBe(member.address.toLowerCase())
    expect(listed.body.devices.map((d: { id: string }) => d.id)).toContain(device.id)
    // the operator routes are the owner's and admins': a runtime wallet is not the control plane,
    // and neither is a custom key that holds members-write
    expectError(await gw.request("GET", `/v1/namespace/devices?subject=${member.address}`, { token: bound.access_token }), 403, "CONTROL_PLANE_REQUIRED")
    const custom = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { scopes: ["members-write", "namespace-write"] } })
    expectError(await gw.request("GET", `/v1/namespace/devices?subject=${member.address}`, { token: custom.body.api_key }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("PUT", "/v1/namespace/session-policy", { token: custom.body.api_key, json: { sign_in: "open" } }), 403, "CONTROL_PLANE_REQUIRED")
    expect((await gw.request("GET", "/v1/namespace/devices?subject=0x12", { token: ownerKey })).status).toBe(400)
    const done = await gw.request("DELETE", `/v1/namespace/devices/${device.id}`, { token: ownerKey })
    expect(done.body).toEqual({ revoked: device.id })
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: bound.access_token }), 401, "INVALID_TOKEN")
    const audit = await gw.request("GET", "/v1/audit?action=device.revoke", { token: ownerKey })
    expect(audit.body.entries.map((e: { target: string }) => e.target)).toContain(device.id)
  })

  it("mints sign-in keys for plain sessions only, and a stricter policy revokes them", async () => {
    // the admin wallet's own sign-in key: control-plane roles are held to optional, so it stays
    const adminPlain = (await signIn(gw, admin)).body
    const adminKey = await gw.request("POST", "/v1/auth/api-key", { token: adminPlain.access_token, json: { label: "admin-cli" } })
    expect(adminKey.status, adminKey.text).toBe(201)
    const plain = (await signIn(gw, member)).body
    const minted = await gw.request("POST", "/v1/auth/api-key", { token: plain.access_token, json: { label: "cli" } })
    expect(minted.status, minted.text).toBe(201)
    expect(minted.body.scopes).toEqual(expect.arrayContaining(["cache", "storage"]))
    expect(minted.body.scopes).not.toContain("admin")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: minted.body.api_key })).status).toBe(200)
    const bound = (await signIn(gw, member, await newDevice())).body
    expectError(await gw.request("POST", "/v1/auth/api-key", { token: bound.access_token, json: {} }), 403, "FORBIDDEN")

    expect((await gw.request("GET", "/v1/namespace/session-policy", { token: ownerKey })).body).toEqual({
      namespace: "apps",
      device_policy: "optional",
      sign_in: "members"
    })
    expectError(await gw.request("PUT", "/v1/namespace/session-policy", { token: plain.access_token, json: { device_policy: "required" } }), 403, "CONTROL_PLANE_REQUIRED")
    expect((await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "strict" } })).status).toBe(400)
    const set = await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "required" } })
    expect(set.body).toEqual({ namespace: "apps", device_policy: "required", sign_in: "members", revoked_sign_in_keys: 1 })
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: minted.body.api_key }), 401, "INVALID_API_KEY")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: ownerKey })).status).toBe(200)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: adminKey.body.api_key })).status).toBe(200)

    // required: plain sign-in, refresh and key minting of end users answer DEVICE_REQUIRED
    expectError(await signIn(gw, member), 403, "DEVICE_REQUIRED")
    expectError(await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: plain.refresh_token } }), 403, "DEVICE_REQUIRED")
    expectError(await gw.request("POST", "/v1/auth/api-key", { token: plain.access_token, json: {} }), 403, "DEVICE_REQUIRED")
    expect((await signIn(gw, member, await newDevice())).status).toBe(200)
    // a wallet with a control-plane role is held to optional
    const adminSession = await signIn(gw, admin)
    expect(adminSession.status, adminSession.text).toBe(200)

    // open sign-in lets outsiders in as end users; the omitted member keeps its value
    const open = await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { sign_in: "open" } })
    expect(open.body).toMatchObject({ device_policy: "required", sign_in: "open" })
    const outsiderSession = await signIn(gw, outsider, await newDevice())
    expect(outsiderSession.status, outsiderSession.text).toBe(200)
    const who = await gw.request("GET", "/v1/auth/whoami", { token: outsiderSession.body.access_token })
    expect(who.body.role).toBe("user")
    expect(who.body.grants).not.toContain("admin")
    // an outsider's sign-in key does not outlive sign-in closing to members
    await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "optional" } })
    const outsiderPlain = (await signIn(gw, outsider)).body
    const outsiderKey = await gw.request("POST", "/v1/auth/api-key", { token: outsiderPlain.access_token, json: { label: "x" } })
    expect(outsiderKey.status, outsiderKey.text).toBe(201)
    const closed = await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { sign_in: "members" } })
    expect(closed.body.revoked_sign_in_keys).toBe(1)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: outsiderKey.body.api_key }), 401, "INVALID_API_KEY")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: adminKey.body.api_key })).status).toBe(200)
  })
})

describe.each(["sqlite", "rqlite"] as const)("approval of further devices, device links and plain logins, registry on %s", (engine) => {
  let gw: Gateway
  let engineServer: RqlitedServer | undefined
  const engineEnv = (): Record<string, string> => (engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url })
  const startEngine = async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
  }
  let ownerKey: string
  const member = Wallet.createRandom()
  const ns = "guarded"

  type Signer = { readonly address: string; readonly signMessage: (m: string) => Promise<string> }
  const challengeFor = async (signer: Signer, device?: Device) =>
    (await gw.request("POST", "/v1/auth/challenge", {
      json: { wallet: signer.address, namespace: ns, ...(device === undefined ? {} : { device_id: device.id }) }
    })).body.message as string
  const signIn = async (signer: Signer, device: Device) => {
    const message = await challengeFor(signer, device)
    return gw.request("POST", "/v1/auth/verify", {
      json: { message, signature: await signer.signMessage(message), device_key: device.jwk, device_signature: await device.sign(message) }
    })
  }
  const poll = async (device: Device | undefined, deviceCode: string) =>
    gw.request("POST", "/v1/auth/device/token", {
      json: { device_code: deviceCode, ...(device === undefined ? {} : { device_proof: await proof(device, "claim", ns, deviceCode) }) }
    })

  beforeAll(async () => {
    await startEngine()
    gw = await startGateway({ env: engineEnv() })
    ownerKey = (await gw.cli(["namespace", "create", ns])).api_key
    await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: member.address, role: "runtime" } })
    const set = await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "approval" } })
    expect(set.body.device_policy).toBe("approval")
  })
  afterAll(async () => {
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("enrols the first device, holds the second pending until an active device approves, then it collects once", async () => {
    const first = await newDevice()
    const firstSession = await signIn(member, first)
    expect(firstSession.status, firstSession.text).toBe(200)
    const second = await newDevice()
    const pending = await signIn(member, second)
    expect(pending.status, pending.text).toBe(202)
    expect(pending.body).toMatchObject({ status: "pending_approval" })
    expect(pending.body.user_code).toMatch(/^[A-Z]{4}-[A-Z]{4}$/)
    const list = await gw.request("GET", "/v1/auth/devices", { token: firstSession.body.access_token })
    expect(list.body.devices.find((d: { id: string }) => d.id === second.id).status).toBe("pending")
    // signing in again while pending answers 202 with a fresh request (spec §7: 202 on sign-in),
    // so a lost answer or an expired request never strands the device; the first stays valid
    const again = await signIn(member, second)
    expect(again.status, again.text).toBe(202)
    expect(again.body.user_code).not.toBe(pending.body.user_code)
    expect(again.body.device_code).not.toBe(pending.body.device_code)

    const code: string = pending.body.device_code
    expectError(await poll(second, code), 400, "authorization_pending")
    expectError(await poll(second, code), 400, "slow_down")
    expectError(await poll(first, code), 401, "DEVICE_PROOF_INVALID")
    // RFC 8628 §3.5: slow_down added 5 s to this request's interval, so waiting out the first 5 s
    // is still too soon, and says so with the interval to keep now
    await new Promise((resolve) => setTimeout(resolve, 5_500))
    const stillTooSoon = await poll(second, code)
    expectError(stillTooSoon, 400, "slow_down")
    expect(stillTooSoon.body.error).toContain("15 s")

    const userCode: string = pending.body.user_code
    expectError(
      await gw.request("POST", "/v1/auth/devices/approve", { token: firstSession.body.access_token, json: { user_code: userCode, device_proof: await proof(first, "approve", ns, "WRONG-CODE") } }),
      401,
      "DEVICE_PROOF_INVALID"
    )
    const approved = await gw.request("POST", "/v1/auth/devices/approve", {
      token: firstSession.body.access_token,
      json: { user_code: userCode, device_proof: await proof(first, "approve", ns, userCode) }
    })
    expect(approved.body).toEqual({ approved: userCode })
    const collected = await poll(second, code)
    expect(collected.status, collected.text).toBe(200)
    expect(collected.body.device_id).toBe(second.id)
    expect(collected.body.refresh_token).toMatch(/^dv1_/)
    expectError(await poll(second, code), 400, "expired_token")
    expect((await signIn(member, second)).status).toBe(200)

    // a device revoked between its approval and its collection collects nothing
    const third = await newDevice()
    const waiting = await signIn(member, third)
    expect(waiting.status, waiting.text).toBe(202)
    const ok = await gw.request("POST", "/v1/auth/devices/approve", {
      token: firstSession.body.access_token,
      json: { user_code: waiting.body.user_code, device_proof: await proof(first, "approve", ns, waiting.body.user_code) }
    })
    expect(ok.status, ok.text).toBe(200)
    expect((await gw.request("DELETE", `/v1/namespace/devices/${third.id}`, { token: ownerKey })).status).toBe(200)
    expectError(await poll(third, waiting.body.device_code), 403, "DEVICE_REVOKED")
  })

  it("enrols a pending device once no active device is left to approve it, or the policy stops asking", async () => {
    const wallet = Wallet.createRandom()
    await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: wallet.address, role: "runtime" } })
    const a = await newDevice()
    const b = await newDevice()
    expect((await signIn(wallet, a)).status).toBe(200)
    expect((await signIn(wallet, b)).status).toBe(202)
    expect((await gw.request("DELETE", `/v1/namespace/devices/${a.id}`, { token: ownerKey })).status).toBe(200)
    // spec §3.1: with every active device revoked, the next sign-in enrols its device as the first
    const enrolled = await signIn(wallet, b)
    expect(enrolled.status, enrolled.text).toBe(200)
    expect(enrolled.body.device_id).toBe(b.id)
    const listed = await gw.request("GET", "/v1/auth/devices", { token: enrolled.body.access_token })
    expect(listed.body.devices.find((d: { id: string }) => d.id === b.id).status).toBe("active")
    // a further device waits again, until the policy no longer asks for approval
    const c = await newDevice()
    expect((await signIn(wallet, c)).status).toBe(202)
    try {
      await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "required" } })
      const now = await signIn(wallet, c)
      expect(now.status, now.text).toBe(200)
      expect(now.body.device_id).toBe(c.id)
    } finally {
      await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "approval" } })
    }
    // a revoked device stays revoked
    expect((await gw.request("DELETE", `/v1/namespace/devices/${c.id}`, { token: ownerKey })).status).toBe(200)
    expectError(await signIn(wallet, c), 403, "DEVICE_REVOKED")
  })

  it("links a seedless device to the approver's account", async () => {
    // under approval a third device would itself wait; the approver here must be active
    await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "optional" } })
    const phone = await newDevice()
    const phoneSession = (await signIn(member, phone)).body
    const tablet = await newDevice()
    const started = await gw.request("POST", "/v1/auth/device", { json: { namespace: ns, device_key: tablet.jwk, device_label: "tablet" } })
    expect(started.status, started.text).toBe(200)
    expect(started.body).toMatchObject({ expires_in: 600, interval: 5 })
    // a wallet signature cannot approve a device link
    const message = await challengeFor(member)
    expectError(
      await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: started.body.user_code, message, signature: await member.signMessage(message) } }),
      403,
      "FORBIDDEN"
    )
    // nor where sessions need a device: a link is never a wallet's to approve (DEVICE_REQUIRED is a plain login's refusal)
    await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "required" } })
    const strictMessage = await challengeFor(member)
    expectError(
      await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: started.body.user_code, message: strictMessage, signature: await member.signMessage(strictMessage) } }),
      403,
      "FORBIDDEN"
    )
    await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "optional" } })
    const approval = await gw.request("POST", "/v1/auth/devices/approve", {
      token: phoneSession.access_token,
      json: { user_code: started.body.user_code.toLowerCase(), device_proof: await proof(phone, "approve", ns, started.body.user_code.toLowerCase()) }
    })
    expect(approval.status, approval.text).toBe(200)
    const linked = await poll(tablet, started.body.device_code)
    expect(linked.status, linked.text).toBe(200)
    expect(linked.body).toMatchObject({ subject: member.address.toLowerCase(), device_id: tablet.id })
  })

  it("answers a plain login with a wallet signature, or denies it; devices cannot approve it", async () => {
    const login = (await gw.request("POST", "/v1/auth/device", { json: { namespace: ns } })).body
    const phone = await newDevice()
    const phoneSession = (await signIn(member, phone)).body
    expectError(
      await gw.request("POST", "/v1/auth/devices/approve", { token: phoneSession.access_token, json: { user_code: login.user_code, device_proof: await proof(phone, "approve", ns, login.user_code) } }),
      403,
      "FORBIDDEN"
    )
    const message = await challengeFor(member)
    const answered = await gw.request("POST", "/v1/auth/device/approve", {
      json: { user_code: login.user_code, message, signature: await member.signMessage(message) }
    })
    expect(answered.body).toEqual({ user_code: login.user_code, status: "approved" })
    const session = await poll(undefined, login.device_code)
    expect(session.status, session.text).toBe(200)
    expect(session.body.refresh_token).toMatch(/^rt1_/)
    expect(session.body).not.toHaveProperty("device_id")

    const denied = (await gw.request("POST", "/v1/auth/device", { json: { namespace: ns } })).body
    const m2 = await challengeFor(member)
    await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: denied.user_code, message: m2, signature: await member.signMessage(m2), deny: true } })
    expectError(await poll(undefined, denied.device_code), 400, "access_denied")
    expectError(await poll(undefined, "dc_" + "x".repeat(43)), 400, "invalid_grant")

    // one signature, one try: a wrong code spends the challenge
    const third = (await gw.request("POST", "/v1/auth/device", { json: { namespace: ns } })).body
    const m3 = await challengeFor(member)
    const s3 = await member.signMessage(m3)
    expectError(await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: "ABCD-EFGH", message: m3, signature: s3 } }), 404, "NOT_FOUND")
    expectError(await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: third.user_code, message: m3, signature: s3 } }), 401, "SIGNATURE_INVALID")
    // a wallet that may not sign in here cannot deny either
    const stranger = Wallet.createRandom()
    const ms = await challengeFor(stranger)
    expectError(
      await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: third.user_code, message: ms, signature: await stranger.signMessage(ms), deny: true } }),
      403,
      "NOT_A_MEMBER"
    )
    // a message naming a device stands for a device, which cannot answer a plain login
    const md = await challengeFor(member, phone)
    expectError(
      await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: third.user_code, message: md, signature: await member.signMessage(md) } }),
      403,
      "FORBIDDEN"
    )
    expectError(await poll(undefined, third.device_code), 400, "authorization_pending")

    // the policy in force at collection decides: approved under optional, collected under required
    await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "optional" } })
    const late = (await gw.request("POST", "/v1/auth/device", { json: { namespace: ns } })).body
    const ml = await challengeFor(member)
    expect((await gw.request("POST", "/v1/auth/device/approve", { json: { user_code: late.user_code, message: ml, signature: await member.signMessage(ml) } })).status).toBe(200)
    await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "required" } })
    expectError(await poll(undefined, late.device_code), 403, "DEVICE_REQUIRED")
    await gw.request("PUT", "/v1/namespace/session-policy", { token: ownerKey, json: { device_policy: "optional" } })
  })
})

describe("sign-in rate limit per wallet", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      env: {
        PORTICO_RATE_LIMIT: "true",
        PORTICO_RATE_LIMIT_CLIENT_RPS: "10000",
        PORTICO_RATE_LIMIT_CLIENT_BURST: "10000",
        PORTICO_RATE_LIMIT_WALLET_RPS: "1",
        PORTICO_RATE_LIMIT_WALLET_BURST: "3"
      }
    })
    await gw.cli(["namespace", "create", "limits"])
  })
  afterAll(async () => {
    await gw?.stop()
  })

  it("limits challenges for one wallet without touching another", async () => {
    const one = Wallet.createRandom().address
    const statuses: Array<number> = []
    for (let i = 0; i < 5; i++) {
      statuses.push((await gw.request("POST", "/v1/auth/challenge", { json: { wallet: one, namespace: "limits" } })).status)
    }
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200])
    expect(statuses).toContain(429)
    const limited = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: one, namespace: "limits" } })
    expectError(limited, 429, "RATE_LIMITED")
    expect(limited.headers.get("retry-after")).not.toBeNull()
    const two = Wallet.createRandom().address
    expect((await gw.request("POST", "/v1/auth/challenge", { json: { wallet: two, namespace: "limits" } })).status).toBe(200)
  })
})
