/**
 * The foundation as a new user meets it: a real gateway process, a namespace made with the CLI,
 * its key used over HTTP. Each check lists what must appear and, where it matters, what must not.
 */
import * as jose from "jose"
import * as net from "node:net"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"

const OWNER = "0x" + "ab".repeat(20)
const DEV = "0x" + "cd".repeat(20)

/** Sends raw bytes and reads what comes back until the server closes or `ms` pass. */
const rawExchange = (port: number, request: string, ms = 3000): Promise<string> =>
  new Promise((resolve) => {
    let answer = ""
    const socket = net.connect(port, "127.0.0.1", () => socket.write(request))
    socket.setEncoding("latin1")
    socket.on("data", (chunk: string) => (answer += chunk))
    const done = () => resolve(answer)
    socket.on("close", done)
    socket.on("error", done)
    setTimeout(() => {
      socket.destroy()
      done()
    }, ms)
  })

const expectError = (reply: Reply, status: number, code?: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(typeof reply.body?.error).toBe("string")
  expect(typeof reply.body?.code).toBe("string")
  if (code !== undefined) expect(reply.body.code).toBe(code)
  // The envelope is the whole body: no tags, stacks or parser internals leak.
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
  expect(reply.text).not.toMatch(/_tag|at .*\.ts:\d+|node_modules|SQLITE|sqlite_/)
}

describe.each(["sqlite", "rqlite"] as const)("foundation over HTTP, registry on %s", (engine) => {
  let gw: Gateway
  let ownerKey: string
  let engineServer: RqlitedServer | undefined

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway(engineServer === undefined ? {} : { env: { PORTICO_RQLITE_URL: engineServer.url } })
    const created = await gw.cli(["namespace", "create", "acme", "--owner", OWNER])
    expect(created.namespace).toBe("acme")
    expect(created.api_key).toMatch(/^portico_key_[a-z2-7]{16}_[A-Za-z0-9_-]{43}$/)
    ownerKey = created.api_key
  })
  afterAll(async () => {
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("whoami answers for a key created by the CLI while the server runs", async () => {
    const reply = await gw.request("GET", "/v1/auth/whoami", { token: ownerKey })
    expect(reply.status).toBe(200)
    expect(reply.body).toMatchObject({ namespace: "acme", method: "api_key", role: "owner" })
    expect(reply.body.subject).toMatch(/^key:key_/)
    expect(reply.body.grants).toEqual(expect.arrayContaining(["admin", "members-write", "cache"]))
    expect(reply.text).not.toContain(ownerKey)
  })

  it("refuses missing, malformed, unknown and revoked credentials with 401", async () => {
    expectError(await gw.request("GET", "/v1/auth/whoami"), 401, "UNAUTHORIZED")
    expectError(await gw.request("GET", "/v1/auth/whoami", { headers: { authorization: "Basic abc" } }), 401)
    const forged = ownerKey.slice(0, -4) + "AAAA"
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: forged }), 401, "INVALID_API_KEY")
    const minted = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "runtime", label: "temp" } })
    expect(minted.status).toBe(201)
    expect((await gw.request("GET", "/v1/auth/whoami", { token: minted.body.api_key })).status).toBe(200)
    const revoked = await gw.request("DELETE", `/v1/namespace/keys/${minted.body.id}`, { token: ownerKey })
    expect(revoked.body).toEqual({ id: minted.body.id, revoked: true })
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: minted.body.api_key }), 401, "INVALID_API_KEY")
    expectError(await gw.request("DELETE", `/v1/namespace/keys/${minted.body.id}`, { token: ownerKey }), 404)
  })

  it("exchanges a key for a 15-minute JWT verifiable against the published JWKS", async () => {
    const reply = await gw.request("POST", "/v1/auth/token", { token: ownerKey })
    expect(reply.status).toBe(200)
    expect(reply.body.token_type).toBe("Bearer")
    expect(reply.body.expires_in).toBe(900)
    const jwks = await gw.request("GET", "/.well-known/jwks.json")
    expect(jwks.status).toBe(200)
    for (const key of jwks.body.keys) expect(key).not.toHaveProperty("d")
    expect((await gw.request("GET", "/v1/auth/jwks")).body).toEqual(jwks.body)
    const { payload, protectedHeader } = await jose.jwtVerify(reply.body.access_token, jose.createLocalJWKSet(jwks.body))
    expect(protectedHeader.kid).toBeTypeOf("string")
    expect(payload.ns).toBe("acme")
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(900)
    const who = await gw.request("GET", "/v1/auth/whoami", { token: reply.body.access_token })
    expect(who.body).toMatchObject({ namespace: "acme", method: "jwt", role: "owner" })
    // a JWT cannot be exchanged again
    expectError(await gw.request("POST", "/v1/auth/token", { token: reply.body.access_token }), 400)
  })

  it("refuses forged JWTs: alg none, edited payload, wrong key, and tokens of a revoked key", async () => {
    const minted = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { scopes: ["cache"] } })
    const token: string = (await gw.request("POST", "/v1/auth/token", { token: minted.body.api_key })).body.access_token
    const [h, p, s] = token.split(".") as [string, string, string]
    const claims = JSON.parse(Buffer.from(p, "base64url").toString())
    const none = Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url") + "." + p + "."
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: none }), 401, "INVALID_TOKEN")
    const edited = h + "." + Buffer.from(JSON.stringify({ ...claims, role: "owner", grants: ["admin"] })).toString("base64url") + "." + s
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: edited }), 401, "INVALID_TOKEN")
    const { privateKey } = await jose.generateKeyPair("EdDSA", { crv: "Ed25519" })
    const kid = JSON.parse(Buffer.from(h, "base64url").toString()).kid
    const wrong = await new jose.SignJWT(claims).setProtectedHeader({ alg: "EdDSA", kid }).sign(privateKey)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: wrong }), 401, "INVALID_TOKEN")
    expect((await gw.request("GET", "/v1/auth/whoami", { token })).status).toBe(200)
    await gw.request("DELETE", `/v1/namespace/keys/${minted.body.id}`, { token: ownerKey })
    expectError(await gw.request("GET", "/v1/auth/whoami", { token }), 401, "INVALID_TOKEN")
  })

  it("mints, lists and never shows key secrets again", async () => {
    const minted = await gw.request("POST", "/v1/namespace/keys", {
      token: ownerKey,
      json: { scopes: ["cache:key=sessions/*", "storage"], label: "worker", expires_in_days: 30 }
    })
    expect(minted.status).toBe(201)
    expect(minted.body).toMatchObject({ namespace: "acme", label: "worker", role: "custom", scopes: ["cache:key=sessions/*", "storage"] })
    expect(minted.body.expires_at).toBeGreaterThan(Date.now() / 1000 + 29 * 86400)
    const list = await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })
    expect(list.status).toBe(200)
    const row = list.body.keys.find((k: { id: string }) => k.id === minted.body.id)
    expect(row).toMatchObject({ label: "worker", revoked_at: null })
    expect(list.text).not.toContain(minted.body.api_key)
    expect(list.text).not.toMatch(/"api_key"|"hash"/)
    const who = await gw.request("GET", "/v1/auth/whoami", { token: minted.body.api_key })
    expect(who.body.grants).toEqual(["cache:key=sessions/*", "storage"])
  })

  it("refuses bad mint requests with 400 and escalation with 403", async () => {
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: {} }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { scopes: ["root"] } }), 400)
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { scopes: ["cache"], profile: "runtime" } }), 400)
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "runtime", extra: 1 } }), 400)
    const wrongType = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: 7 } })
    expectError(wrongType, 400, "VALIDATION_FAILED")
    // the text names the member, not the schema's internal names
    expect(wrongType.body.error).toMatch(/^profile: /)
    expect(wrongType.body.error).not.toMatch(/MintKey|\n/)
    const runtime = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "runtime" } })
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: runtime.body.api_key, json: { profile: "admin" } }), 403)
    expectError(await gw.request("GET", "/v1/audit", { token: runtime.body.api_key }), 403, "CONTROL_PLANE_REQUIRED")
    // keys are control plane (spec §5.5): a custom key is refused whatever grants it holds
    const custom = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { scopes: ["members-write", "namespace-write"] } })
    expect(custom.status).toBe(201)
    const mk = custom.body.api_key
    expectError(await gw.request("GET", "/v1/namespace/keys", { token: mk }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("POST", "/v1/namespace/keys", { token: mk, json: { profile: "runtime" } }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("DELETE", `/v1/namespace/keys/${runtime.body.id}`, { token: mk }), 403, "CONTROL_PLANE_REQUIRED")
    // and cannot manage members either, with a message that says why
    expectError(await gw.request("POST", "/v1/namespace/members", { token: mk, json: { wallet: "0x" + "44".repeat(20), role: "reader" } }), 403, "CONTROL_PLANE_REQUIRED")
    // an admin key revokes keys below it, its own, never another admin's or the owner's
    const admin = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "admin" } })
    const admin2 = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "admin" } })
    const ownerId = (await gw.request("GET", "/v1/auth/whoami", { token: ownerKey })).body.subject.replace("key:", "")
    expectError(await gw.request("DELETE", `/v1/namespace/keys/${ownerId}`, { token: admin.body.api_key }), 403, "OWNER_REQUIRED")
    expectError(await gw.request("DELETE", `/v1/namespace/keys/${admin2.body.id}`, { token: admin.body.api_key }), 403, "OWNER_REQUIRED")
    expect((await gw.request("DELETE", `/v1/namespace/keys/${runtime.body.id}`, { token: admin.body.api_key })).status).toBe(200)
    expect((await gw.request("DELETE", `/v1/namespace/keys/${admin.body.id}`, { token: admin.body.api_key })).status).toBe(200)
    expect((await gw.request("DELETE", `/v1/namespace/keys/${admin2.body.id}`, { token: ownerKey })).status).toBe(200)
    expect((await gw.request("DELETE", `/v1/namespace/keys/${custom.body.id}`, { token: ownerKey })).status).toBe(200)
  })

  it("manages members, refuses the owner's removal, transfers ownership", async () => {
    const add = await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: DEV.toUpperCase().replace("0X", "0x"), role: "developer" } })
    expect(add.status).toBe(200)
    expect(add.body).toMatchObject({ namespace: "acme", created: true, member: { wallet: DEV, role: "developer" } })
    const list = await gw.request("GET", "/v1/namespace/members", { token: ownerKey })
    expect(list.body.owner).toBe(OWNER)
    expect(list.body.members.map((m: { wallet: string }) => m.wallet).sort()).toEqual([OWNER, DEV].sort())
    expectError(await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: "0x12", role: "developer" } }), 400)
    expectError(await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: DEV, role: "owner" } }), 400)
    expectError(await gw.request("DELETE", `/v1/namespace/members/${OWNER}`, { token: ownerKey }), 403)
    const other = "0x" + "ef".repeat(20)
    expectError(await gw.request("DELETE", `/v1/namespace/members/${other}`, { token: ownerKey }), 404)
    // a transfer is an offer: nothing moves until the recipient accepts from its own session
    // (test/e2e/signin.test.ts takes it to the end); the zero address is refused outright
    expectError(await gw.request("POST", "/v1/namespace/members/transfer", { token: ownerKey, json: { wallet: "0x" + "0".repeat(40) } }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("POST", "/v1/namespace/members/transfer", { token: ownerKey, json: { wallet: other } }), 409, "CONFLICT")
    const transfer = await gw.request("POST", "/v1/namespace/members/transfer", { token: ownerKey, json: { wallet: DEV } })
    expect(transfer.status, transfer.text).toBe(202)
    expect(transfer.body).toMatchObject({ namespace: "acme", status: "pending", from: OWNER, to: DEV })
    expect(Math.abs(transfer.body.expires_at - (Date.now() / 1000 + 24 * 3600))).toBeLessThan(60)
    // a new offer replaces the pending one (one per namespace)
    const again = await gw.request("POST", "/v1/namespace/members/transfer", { token: ownerKey, json: { wallet: DEV } })
    expect(again.status, again.text).toBe(202)
    expect(again.body.expires_at).toBeGreaterThanOrEqual(transfer.body.expires_at)
    const pending = await gw.request("GET", "/v1/namespace/members/transfer", { token: ownerKey })
    expect(pending.body).toEqual({ namespace: "acme", offer: { from: OWNER, to: DEV, offered_at: expect.any(Number), expires_at: again.body.expires_at } })
    const after = await gw.request("GET", "/v1/namespace/members", { token: ownerKey })
    const roles = Object.fromEntries(after.body.members.map((m: { wallet: string; role: string }) => [m.wallet, m.role]))
    expect(roles).toEqual({ [DEV]: "developer", [OWNER]: "owner" })
    expect((await gw.request("GET", "/v1/auth/whoami", { token: ownerKey })).body.role).toBe("owner")
    // an API key cannot accept: the recipient's own signed-in session does
    expectError(await gw.request("POST", "/v1/namespace/members/transfer/accept", { token: ownerKey }), 403, "SESSION_REQUIRED")
    // the owner withdraws it
    expect((await gw.request("POST", "/v1/namespace/members/transfer/cancel", { token: ownerKey })).body).toEqual({ namespace: "acme", cancelled: DEV })
    expect((await gw.request("GET", "/v1/namespace/members/transfer", { token: ownerKey })).body).toEqual({ namespace: "acme", offer: null })
    expectError(await gw.request("POST", "/v1/namespace/members/transfer/cancel", { token: ownerKey }), 404, "NOT_FOUND")
    const audit = await gw.request("GET", "/v1/audit?limit=10", { token: ownerKey })
    const actions = audit.body.entries.map((e: { action: string }) => e.action)
    expect(actions).toEqual(expect.arrayContaining(["namespace.transfer_offer", "namespace.transfer_cancel"]))
    expect(actions).not.toContain("namespace.transfer")
    expect(audit.body.entries.find((e: { action: string }) => e.action === "namespace.transfer_offer")).toMatchObject({ target: DEV })
  })

  it("records control-plane changes in the audit trail with filters and limits", async () => {
    const all = await gw.request("GET", "/v1/audit?limit=200", { token: ownerKey })
    expect(all.status).toBe(200)
    const actions = new Set(all.body.entries.map((e: { action: string }) => e.action))
    for (const a of ["namespace.create", "key.create", "key.revoke", "member.put"]) expect(actions).toContain(a)
    const ids = all.body.entries.map((e: { id: number }) => e.id)
    expect([...ids].sort((a, b) => b - a)).toEqual(ids)
    const one = await gw.request("GET", "/v1/audit?limit=1", { token: ownerKey })
    expect(one.body.count).toBe(1)
    expectError(await gw.request("GET", "/v1/audit?limit=201", { token: ownerKey }), 400)
    expectError(await gw.request("GET", "/v1/audit?limit=abc", { token: ownerKey }), 400)
    // an unknown query member is a 400 like an unknown body member, never silently ignored
    expectError(await gw.request("GET", "/v1/audit?foo=bar", { token: ownerKey }), 400, "VALIDATION_FAILED")
    const future = await gw.request("GET", `/v1/audit?since=${Math.floor(Date.now() / 1000) + 3600}`, { token: ownerKey })
    expect(future.body.entries).toEqual([])
    expect(all.text).not.toContain("portico_key_")
  })

  it("refuses key labels that are not plain text: lone surrogates and control characters", async () => {
    const mint = (labelJson: string) =>
      gw.request("POST", "/v1/namespace/keys", {
        token: ownerKey,
        headers: { "content-type": "application/json" },
        body: `{"profile":"runtime","label":${labelJson}}`
      })
    const before = (await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })).body.keys.length
    for (const label of ['"\\ud800"', '"x\\udc00y"', '"\\ude00\\ud83d"', '"a\\u0000b"', '"a\\nb"', '"\\u007f"']) {
      const reply = await mint(label)
      expectError(reply, 400, "VALIDATION_FAILED")
      expect(reply.body.error).toMatch(/^label: /)
    }
    expect((await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })).body.keys.length).toBe(before)
    // a pair is one character, and any other printable text is a label
    const pair = await mint('"\\ud83d\\ude00 caf\\u00e9 \\u00a0"')
    expect(pair.status, pair.text).toBe(201)
    expect(pair.body.label).toBe("😀 café \u00a0")
    // what the audit trail shows is strict UTF-8 JSON a strict parser reads back
    const audit = await fetch(gw.url + "/v1/audit?action=key.create", { headers: { authorization: `Bearer ${ownerKey}` } })
    const text = new TextDecoder("utf-8", { fatal: true }).decode(await audit.arrayBuffer())
    expect(text).not.toMatch(/\\u[dD][89a-fA-F]/)
  })

  it("refuses any body but {} or none on a route that takes no members, and says so in the document", async () => {
    const token = (body: string) =>
      gw.request("POST", "/v1/auth/token", { token: ownerKey, body, headers: { "content-type": "application/json" } })
    expectError(await token("not json"), 400, "MALFORMED_JSON")
    for (const body of ['{"x":1}', "[]", "5", '"x"', "null"]) expectError(await token(body), 400, "VALIDATION_FAILED")
    expect((await token("{}")).status).toBe(200)
    expect((await token("")).status).toBe(200)
    // the transfer's steps read their body too: a stray member is refused before anything moves
    const cancel = await gw.request("POST", "/v1/namespace/members/transfer/cancel", { token: ownerKey, json: { x: 1 } })
    expectError(cancel, 400, "VALIDATION_FAILED")
    const doc = await gw.request("GET", "/v1/openapi.json")
    expect(doc.body.paths["/v1/auth/token"].post.requestBody).toEqual({
      required: false,
      content: { "application/json": { schema: { type: "object", additionalProperties: false } } }
    })
  })

  it("reads integer query parameters as plain decimal digits only", async () => {
    for (const query of ["limit=0x10", "limit=1e2", "limit=5.0", "limit=%205", "limit=5%20", "limit=+5", "limit=", "limit=-1", "since=1e9", "since=-0", "since=0x10", "since=1.5"]) {
      const reply = await gw.request("GET", `/v1/audit?${query}`, { token: ownerKey })
      expectError(reply, 400, "VALIDATION_FAILED")
      expect(reply.body.error).toMatch(/^(limit|since): /)
    }
    expect((await gw.request("GET", "/v1/audit?limit=5&since=0", { token: ownerKey })).status).toBe(200)
    expect((await gw.request("GET", "/v1/audit?limit=200", { token: ownerKey })).body.count).toBeLessThanOrEqual(200)
    // the document says what the schema takes
    const doc = await gw.request("GET", "/v1/openapi.json")
    const params = doc.body.paths["/v1/audit"].get.parameters
    expect(params.find((p: { name: string }) => p.name === "limit").schema).toMatchObject({ type: "integer", minimum: 1, maximum: 200 })
    expect(params.find((p: { name: string }) => p.name === "since").schema).toMatchObject({ type: "integer", minimum: 0 })
  })

  it("names only the real expectation when an optional member has the wrong type", async () => {
    const label = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "runtime", label: 7 } })
    expectError(label, 400, "VALIDATION_FAILED")
    expect(label.body.error).toMatch(/^label: Expected string, actual 7$/)
    const days = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "runtime", expires_in_days: "x" } })
    expectError(days, 400, "VALIDATION_FAILED")
    expect(days.body.error).toMatch(/^expires_in_days: /)
    const limit = await gw.request("GET", "/v1/audit?limit=abc", { token: ownerKey })
    for (const reply of [label, days, limit]) expect(reply.body.error).not.toMatch(/undefined/)
  })

  it("answers the envelope for unknown routes, wrong methods, malformed and oversized bodies", async () => {
    expectError(await gw.request("GET", "/v1/nope"), 404, "ROUTE_NOT_FOUND")
    const wrong = await gw.request("PATCH", "/v1/namespace/keys", { token: ownerKey })
    expectError(wrong, 405, "METHOD_NOT_ALLOWED")
    expect(wrong.headers.get("allow")).toContain("GET")
    expectError(
      await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, body: "{not json", headers: { "content-type": "application/json" } }),
      400
    )
    // bodies are JSON whatever type they state: a form is malformed JSON and mints nothing
    const before = (await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })).body.keys.length
    const form = await gw.request("POST", "/v1/namespace/keys", {
      token: ownerKey,
      body: "profile=runtime&label=form",
      headers: { "content-type": "application/x-www-form-urlencoded" }
    })
    expectError(form, 400, "MALFORMED_JSON")
    const multipart = await gw.request("POST", "/v1/namespace/keys", {
      token: ownerKey,
      body: '--xx\r\nContent-Disposition: form-data; name="profile"\r\n\r\nruntime\r\n--xx--\r\n',
      headers: { "content-type": "multipart/form-data; boundary=xx" }
    })
    expectError(multipart, 400, "MALFORMED_JSON")
    expect((await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })).body.keys.length).toBe(before)
    // and `curl -d '{…}'`, which states form-urlencoded, is read as the JSON it is
    const curlish = await gw.request("POST", "/v1/namespace/keys", {
      token: ownerKey,
      body: '{"profile":"runtime","label":"curl"}',
      headers: { "content-type": "application/x-www-form-urlencoded" }
    })
    expect(curlish.status, curlish.text).toBe(201)
    // no body at all is an empty object: the missing member is named
    const empty = await gw.request("PUT", "/v1/namespace/rate-limit", { token: ownerKey, headers: { "content-type": "application/json" }, body: "" })
    expectError(empty, 400, "VALIDATION_FAILED")
    expect(empty.body.error).toContain("requests_per_second")
    const huge = JSON.stringify({ profile: "runtime", label: "x".repeat(5 * 1024 * 1024) })
    expectError(
      await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, body: huge, headers: { "content-type": "application/json" } }),
      413,
      "PAYLOAD_TOO_LARGE"
    )
    expectError(await gw.request("GET", "/v1/auth/whoami", { token: "x".repeat(5000) }), 401)
    // what node's parser refuses still gets the envelope
    const badLine = await rawExchange(gw.port, "GET /v1/health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")
    expect(badLine).toMatch(/^HTTP\/1\.1 400 /)
    expect(badLine).toContain('{"error":"malformed HTTP request","code":"BAD_REQUEST"}')
    const bigHeaders = await rawExchange(gw.port, `GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Pad: ${"a".repeat(20_000)}\r\n\r\n`)
    expect(bigHeaders).toMatch(/^HTTP\/1\.1 431 /)
    expect(bigHeaders).toContain('"code":"HEADERS_TOO_LARGE"')
    // an announced oversize body behind Expect: 100-continue is refused without inviting it
    const expect100 = await rawExchange(
      gw.port,
      `POST /v1/namespace/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ownerKey}\r\nContent-Type: application/json\r\nContent-Length: ${64 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`,
      1500
    )
    expect(expect100).not.toContain("100 Continue")
    expect(expect100).toMatch(/^HTTP\/1\.1 413 /)
    // a body within the cap is invited and served
    const small = '{"profile":"runtime","label":"continue"}'
    const invited = await rawExchange(
      gw.port,
      `POST /v1/namespace/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ownerKey}\r\nContent-Type: application/json\r\nContent-Length: ${small.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n${small}`
    )
    expect(invited).toContain("HTTP/1.1 100 Continue")
    expect(invited).toContain("HTTP/1.1 201 ")
  })

  it("refuses a path parameter past the router's cap as a validation failure, never a wrong method", async () => {
    const long = "b".repeat(3000)
    for (const [method, route] of [
      ["GET", `/v1/storage/get/${long}`],
      ["HEAD", `/v1/storage/get/${long}`],
      ["GET", `/v1/storage/relayed/${long}`],
      ["DELETE", `/v1/namespace/keys/${long}`],
      ["DELETE", `/v1/namespace/members/${long}`],
      ["DELETE", `/v1/auth/sessions/${long}`],
      ["DELETE", `/v1/storage/fetch-caps/${long}`],
      // counted decoded, as the router counts: 2100 escapes are 2100 characters
      ["GET", `/v1/storage/status/${"%41".repeat(2100)}`]
    ] as const) {
      const reply = await gw.request(method, route, { token: ownerKey })
      expect(reply.status, `${method} ${route.slice(0, 40)}: ${reply.text}`).toBe(400)
      expect(reply.headers.get("allow")).toBeNull()
      if (method === "HEAD") continue
      expectError(reply, 400, "VALIDATION_FAILED")
      expect(reply.body.hint).toMatch(/path segment.*2048/)
      expect(reply.text).not.toContain("b".repeat(100))
    }
    // at the cap the route's own check answers
    const atCap = await gw.request("DELETE", `/v1/namespace/keys/${"b".repeat(2048)}`, { token: ownerKey })
    expectError(atCap, 400, "VALIDATION_FAILED")
    expect(atCap.body.error).toMatch(/key id/)
    // another method on such a path is still 405, and the answer does not echo the path whole
    const wrong = await gw.request("PUT", `/v1/storage/get/${long}`, { token: ownerKey })
    expectError(wrong, 405, "METHOD_NOT_ALLOWED")
    expect(wrong.headers.get("allow")).toBe("GET, HEAD")
    expect(wrong.text).not.toContain("b".repeat(300))
  })

  it("refuses a body that is not valid UTF-8 instead of reading it with replacement characters", async () => {
    const send = (bytes: Buffer) =>
      fetch(gw.url + "/v1/namespace/keys", {
        method: "POST",
        headers: { authorization: `Bearer ${ownerKey}`, "content-type": "application/json" },
        body: bytes
      }).then(async (res) => ({ status: res.status, headers: res.headers, text: await res.text() }))
    const before = (await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })).body.keys.length
    // "a\xff" and "a\xfe" would both become "a\ufffd"; an encoded surrogate (CESU-8) and an
    // overlong "/" are not UTF-8 either
    for (const bad of [[0xff], [0xfe], [0xed, 0xa0, 0x80], [0xc0, 0xaf]]) {
      const body = Buffer.concat([Buffer.from('{"profile":"runtime","label":"a'), Buffer.from(bad), Buffer.from('"}')])
      const reply = await send(body)
      const parsed = JSON.parse(reply.text)
      expectError({ ...reply, body: parsed }, 400, "MALFORMED_JSON")
      expect(parsed.hint).toMatch(/UTF-8/)
    }
    expect((await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })).body.keys.length).toBe(before)
    // valid multi-byte UTF-8 is read as it is
    const ok = await send(Buffer.from('{"profile":"runtime","label":"café 😀"}'))
    expect(ok.status, ok.text).toBe(201)
    expect(JSON.parse(ok.text).label).toBe("café 😀")
  })

  it("serves health, status, version and schema status", async () => {
    const health = await gw.request("GET", "/health")
    expect(health.body).toEqual({ status: "ok", checks: { registry: "ok" } })
    expect((await gw.request("GET", "/v1/health")).body).toEqual(health.body)
    const status = await gw.request("GET", "/v1/status")
    expect(status.body).toMatchObject({ status: "ok", service: "portico", api: "v1" })
    expect(status.text).not.toMatch(/127\.0\.0\.1|localhost|peer|"host"|acme/)
    const json = await gw.request("GET", "/status")
    expect(json.body).toMatchObject({ service: "portico" })
    const html = await gw.request("GET", "/status", { headers: { accept: "text/html" } })
    expect(html.headers.get("content-type")).toContain("text/html")
    expect(html.text).toContain("<h1>Portico: ok</h1>")
    expect(html.headers.get("vary")).toBe("Accept")
    expect((await gw.request("GET", "/status", { headers: { accept: "TEXT/HTML,*/*;q=0.8" } })).headers.get("content-type")).toContain("text/html")
    const refusedHtml = await gw.request("GET", "/status", { headers: { accept: "text/html;q=0, application/json" } })
    expect(refusedHtml.body).toMatchObject({ service: "portico" })
    expect(refusedHtml.headers.get("vary")).toBe("Accept")
    expect(status.body.capabilities).toEqual(expect.arrayContaining(["keys", "sign-in", "cache", "sqlite", "rqlite", "storage", "fetch-caps"]))
    expect((await gw.request("GET", "/v1/version")).body.api).toBe("v1")
    expectError(await gw.request("GET", "/v1/schema-status"), 401)
    const schema = await gw.request("GET", "/v1/schema-status", { token: ownerKey })
    expect(schema.body).toMatchObject({ engine, status: "current" })
  })

  it("publishes an OpenAPI document listing every route, and a docs page", async () => {
    const doc = await gw.request("GET", "/v1/openapi.json")
    expect(doc.status).toBe(200)
    expect(doc.body.openapi).toMatch(/^3\./)
    const paths = Object.keys(doc.body.paths)
    for (const p of ["/v1/auth/whoami", "/v1/namespace/keys", "/v1/namespace/keys/{id}", "/v1/audit", "/health", "/.well-known/jwks.json"]) {
      expect(paths).toContain(p)
    }
    expect(doc.text).not.toContain("HttpApiDecodeError")
    // a generated client must know to send the credential: the route table decides where
    expect(doc.body.components.securitySchemes.bearer).toMatchObject({ type: "http", scheme: "bearer" })
    expect(doc.body.paths["/v1/auth/whoami"].get.security).toEqual([{ bearer: [] }])
    expect(doc.body.paths["/v1/schema-status"].get.security).toEqual([{ bearer: [] }])
    expect(doc.body.paths["/health"].get.security).toEqual([])
    expect(doc.body.paths["/v1/auth/challenge"].post.security).toEqual([])
    expect(doc.body.paths["/v1/internal/storage/evict"].post["x-internal"]).toBe(true)
    // what the handlers write by hand is declared: 206 ranges, Retry-After, optional bodies
    expect(Object.keys(doc.body.paths["/v1/storage/get/{cid}"].get.responses)).toEqual(expect.arrayContaining(["200", "206", "304"]))
    // an unsatisfiable range is 416 with the catalogue's envelope on both routes that read content
    for (const route of ["/v1/storage/get/{cid}", "/v1/storage/relayed/{cid}"]) {
      const answer = doc.body.paths[route].get.responses["416"]
      expect(answer, route).toBeDefined()
      expect(answer.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/RangeNotSatisfiable" })
      expect(answer.headers["Content-Range"]).toBeDefined()
    }
    expect(doc.body.components.schemas.RangeNotSatisfiable.required).toEqual(["error", "code"])
    expect(doc.body.components.schemas.RangeNotSatisfiable.properties.code.enum).toEqual(["RANGE_NOT_SATISFIABLE"])
    expect(doc.body.paths["/v1/auth/whoami"].get.responses["503"].headers["Retry-After"]).toBeDefined()
    expect(doc.body.paths["/v1/auth/logout"].post.requestBody.required).toBe(false)
    // no schema id repeated (JSON Schema validators refuse a document that repeats one)
    expect(doc.text).not.toContain('"$id"')
    // and it validates as OpenAPI with the tool generators build on
    const SwaggerParser = (await import("@apidevtools/swagger-parser")).default
    await expect(SwaggerParser.validate(structuredClone(doc.body))).resolves.toBeDefined()
    const docs = await gw.request("GET", "/v1/docs")
    expect(docs.status).toBe(200)
    expect(docs.headers.get("content-type")).toContain("text/html")
    // the reference embeds the document itself, so it renders with no network
    expect(docs.text.includes('id="api-reference"')).toBe(true)
    expect(docs.text.includes("/v1/namespace/keys")).toBe(true)
  })

  it("logs one line per request with namespace and never a credential", async () => {
    await gw.request("GET", "/v1/auth/whoami", { token: ownerKey })
    await new Promise((r) => setTimeout(r, 100))
    const lines = gw.logs().split("\n").filter((l) => l.includes('"msg":"request"'))
    const line = lines.map((l) => JSON.parse(l)).find((l) => l.route === "/v1/auth/whoami" && l.status === 200)
    expect(line).toMatchObject({ method: "GET", namespace: "acme" })
    expect(typeof line.ms).toBe("number")
    expect(gw.logs()).not.toContain(ownerKey)
    expect(gw.logs()).not.toMatch(/portico_key_[a-z2-7]{16}_/)
  })

  it("logs one line for what is refused before any route runs: 413s and requests node cannot parse", async () => {
    const requestLines = () =>
      gw.logs().split("\n").filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l))
    const linesFor = (route: string | null) => requestLines().filter((l) => l.route === route)
    const parserRefusals = linesFor(null).length
    // announced over the cap: refused before a byte is read
    const announced = await rawExchange(
      gw.port,
      `POST /v1/log-probe/announced?token=${ownerKey} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ownerKey}\r\nContent-Type: application/json\r\nContent-Length: ${64 * 1024 * 1024}\r\n\r\n{`,
      1500
    )
    expect(announced).toMatch(/^HTTP\/1\.1 413 /)
    // chunked, refused when it crosses the cap while being read
    const chunk = "x".repeat(4 * 1024 * 1024 + 1)
    const chunked = await rawExchange(
      gw.port,
      `POST /v1/log-probe/chunked HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n`,
      3000
    )
    expect(chunked).toMatch(/^HTTP\/1\.1 413 /)
    // and a request line node's parser refuses
    expect(await rawExchange(gw.port, "GET /v1/health HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n")).toMatch(/^HTTP\/1\.1 400 /)
    await new Promise((r) => setTimeout(r, 200))
    const [announcedLine, ...moreAnnounced] = linesFor("/v1/log-probe/announced")
    expect(moreAnnounced).toEqual([])
    expect(announcedLine).toMatchObject({ level: "info", method: "POST", status: 413, namespace: null })
    expect(typeof announcedLine.ms).toBe("number")
    const chunkedLines = linesFor("/v1/log-probe/chunked")
    expect(chunkedLines).toHaveLength(1)
    expect(chunkedLines[0]).toMatchObject({ method: "POST", status: 413 })
    const refusals = linesFor(null)
    expect(refusals).toHaveLength(parserRefusals + 1)
    expect(refusals.at(-1)).toMatchObject({ method: null, status: 400 })
    // the query string (a credential here) is never logged
    expect(gw.logs()).not.toContain(ownerKey)
  })
})

describe("rate limits", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      env: { PORTICO_RATE_LIMIT: "true", PORTICO_RATE_LIMIT_CLIENT_RPS: "1", PORTICO_RATE_LIMIT_CLIENT_BURST: "5" }
    })
  })
  afterAll(async () => {
    await gw?.stop()
  })

  it("answers 429 RATE_LIMITED with Retry-After past the client-network burst", async () => {
    const replies = []
    for (let i = 0; i < 8; i++) replies.push(await gw.request("GET", "/v1/version"))
    expect(replies.slice(0, 5).every((r) => r.status === 200)).toBe(true)
    const limited = replies[replies.length - 1]
    if (limited === undefined) throw new Error("no reply")
    expectError(limited, 429, "RATE_LIMITED")
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  })
})

describe("namespace rate limit", () => {
  let gw: Gateway
  let key: string
  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_RATE_LIMIT: "true", PORTICO_RATE_LIMIT_CLIENT_RPS: "10000", PORTICO_RATE_LIMIT_CLIENT_BURST: "10000" } })
    key = (await gw.cli(["namespace", "create", "limited"])).api_key
  })
  afterAll(async () => {
    await gw?.stop()
  })

  it("reports the default, applies a namespace's own limit at once, and restores the default", async () => {
    const initial = await gw.request("GET", "/v1/namespace/rate-limit", { token: key })
    expect(initial.body).toEqual({ namespace: "limited", requests_per_second: 1000, burst: 2000, source: "default" })
    expectError(await gw.request("PUT", "/v1/namespace/rate-limit", { token: key, json: { requests_per_second: 0 } }), 400)
    const set = await gw.request("PUT", "/v1/namespace/rate-limit", { token: key, json: { requests_per_second: 1, burst: 3 } })
    expect(set.body).toEqual({ namespace: "limited", requests_per_second: 1, burst: 3, source: "namespace" })
    const statuses: Array<number> = []
    let limited: Reply | undefined
    for (let i = 0; i < 6; i++) {
      const r = await gw.request("GET", "/v1/auth/whoami", { token: key })
      statuses.push(r.status)
      if (r.status === 429) limited = r
    }
    expect(statuses).toContain(429)
    if (limited === undefined) throw new Error("never limited")
    expectError(limited, 429, "RATE_LIMITED")
    expect(limited.headers.get("retry-after")).not.toBeNull()
    // open routes are not charged to the namespace
    expect((await gw.request("GET", "/v1/version")).status).toBe(200)
    await new Promise((r) => setTimeout(r, 1100))
    const reset = await gw.request("PUT", "/v1/namespace/rate-limit", { token: key, json: { requests_per_second: null } })
    expect(reset.body.source).toBe("default")
    // a burst with the default rate says nothing coherent: refused, not silently dropped
    expectError(await gw.request("PUT", "/v1/namespace/rate-limit", { token: key, json: { requests_per_second: null, burst: 50 } }), 400, "VALIDATION_FAILED")
  })
})

describe("process lifecycle", () => {
  it("stops on SIGTERM with exit code 0 and keeps data across restarts", async () => {
    const first = await startGateway()
    const key = (await first.cli(["namespace", "create", "durable"])).api_key
    const jwks = (await first.request("GET", "/v1/auth/jwks")).body
    expect(await first.stop()).toBe(0)
    expect(first.logs()).toContain('"msg":"shutting down"')
    const second = await startGateway({ dataDir: first.dataDir })
    try {
      expect((await second.request("GET", "/v1/auth/whoami", { token: key })).body.namespace).toBe("durable")
      // signing keys persist, sealed, so earlier tokens stay verifiable
      expect((await second.request("GET", "/v1/auth/jwks")).body).toEqual(jwks)
    } finally {
      await second.stop()
    }
  }, 90_000)

  it("refuses a second namespace of the same name and bad names from the CLI", async () => {
    const gw = await startGateway()
    try {
      await gw.cli(["namespace", "create", "twice"])
      await expect(gw.cli(["namespace", "create", "twice"])).rejects.toThrow(/exists/)
      await expect(gw.cli(["namespace", "create", "Bad_Name"])).rejects.toThrow(/namespace name/)
      await expect(gw.cli(["namespace", "create", "lobby"])).rejects.toThrow(/reserved/)
      const key = await gw.cli(["keys", "create", "--namespace", "twice", "--scopes", "cache,storage", "--label", "app"])
      expect(key).toMatchObject({ namespace: "twice", role: "custom", scopes: ["cache", "storage"], label: "app" })
      const who = await gw.request("GET", "/v1/auth/whoami", { token: key.api_key })
      expect(who.body.grants).toEqual(["cache", "storage"])
      await expect(gw.cli(["keys", "create", "--namespace", "twice", "--scopes", "root"])).rejects.toThrow(/scopes/)
      await expect(gw.cli(["keys", "create", "--namespace", "twice", "--profile", "runtime", "--label", "a\u0001b"])).rejects.toThrow(/--label/)
      await expect(gw.cli(["keys", "create", "--namespace", "nope", "--profile", "runtime"])).rejects.toThrow(/no namespace/)
    } finally {
      await gw.stop()
    }
    // eight CLI processes, each loading TypeScript through tsx: slow on a loaded CI machine
  }, 120_000)
})
