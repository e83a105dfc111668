/**
 * The typed client (src/client.ts) against a real gateway, on the control-plane families:
 * system, auth, namespace, cors, audit and devices. Every request goes through the client (no
 * hand-made fetch); every success is decoded by the client with the endpoint's declared schema
 * and again strictly (test/support/client.ts); every refusal checked here is the declared error
 * with its status and wire code. The data-plane families are in client-data.test.ts.
 */
import { FetchHttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Effect, Exit, Layer } from "effect"
import { Wallet } from "ethers"
import * as jose from "jose"
import { webcrypto } from "node:crypto"
import { execFile } from "node:child_process"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NamespaceName, PorticoClient } from "../../src/client.js"
import { call, expectRefusal, notCalled, refusal, signIn, strictDecode } from "../support/client.js"
import { type Gateway, startGateway } from "../support/gateway.js"

const root = path.resolve(import.meta.dirname, "../..")
const run = promisify(execFile)

describe("the strict answer check of these suites", () => {
  const answer = (status: number, body: string) =>
    HttpClientResponse.fromWeb(HttpClientRequest.get("/v1/health"), new Response(body, { status, headers: { "content-type": "application/json" } }))
  const check = (status: number, body: string) => Effect.runPromise(Effect.exit(strictDecode("system.health", answer(status, body))))

  it("passes a declared answer and fails an undeclared member, a missing one, or an undeclared status", async () => {
    expect(Exit.isSuccess(await check(200, '{"status":"ok","checks":{"registry":"ok"}}'))).toBe(true)
    expect(Exit.isFailure(await check(200, '{"status":"ok","checks":{},"extra":1}'))).toBe(true)
    expect(Exit.isFailure(await check(200, '{"status":"ok"}'))).toBe(true)
    expect(Exit.isFailure(await check(201, '{"status":"ok","checks":{}}'))).toBe(true)
  })
})

describe("the typed client on the control plane", () => {
  let gw: Gateway
  let ownerKey: string
  let runtimeKey: string
  let accessToken: string
  const owner = Wallet.createRandom()
  const member = Wallet.createRandom()

  beforeAll(async () => {
    gw = await startGateway()
    ownerKey = (await gw.cli(["namespace", "create", "acme", "--owner", owner.address])).api_key
    runtimeKey = (await gw.cli(["keys", "create", "--namespace", "acme", "--profile", "runtime", "--label", "worker"])).api_key
    accessToken = (await signIn(gw, "acme", owner)).access_token
  })
  afterAll(async () => {
    await gw?.stop()
  })

  it("system: health, status, version, schema status and the key set, open but for the schema status", async () => {
    const health = await call(gw, undefined, (c) => c.system.health())
    expect(health.status).toBe("ok")
    expect((await call(gw, undefined, (c) => c.system.healthV1())).status).toBe("ok")
    const status = await call(gw, undefined, (c) => c.system.status())
    expect(status).toMatchObject({ service: "portico", api: "v1", status: "ok" })
    const version = await call(gw, undefined, (c) => c.system.version())
    expect(version).toEqual({ version: status.version, api: "v1" })
    const jwks = await call(gw, undefined, (c) => c.system.jwks())
    expect(jwks.keys.length).toBeGreaterThan(0)
    expect(await call(gw, undefined, (c) => c.system.wellKnownJwks())).toEqual(jwks)
    expect(await call(gw, undefined, (c) => c.system.statusPage())).toMatchObject({ service: "portico", version: status.version })
    expect((await call(gw, ownerKey, (c) => c.system.schemaStatus())).status).toBe("current")
    expectRefusal(await refusal(gw, undefined, (c) => c.system.schemaStatus()), 401, "UNAUTHORIZED")
  })

  it("serves as an Effect service, over fetch or over the HttpClient the application provides", async () => {
    const version = Effect.flatMap(PorticoClient, (portico) => portico.system.version())
    const viaFetch = await Effect.runPromise(version.pipe(Effect.provide(PorticoClient.layer({ baseUrl: gw.url }))))
    expect(viaFetch.api).toBe("v1")
    const whoami = Effect.flatMap(PorticoClient, (portico) => portico.auth.whoami())
    const layer = PorticoClient.layerWithoutHttpClient({ baseUrl: new URL(gw.url), token: ownerKey }).pipe(Layer.provide(FetchHttpClient.layer))
    expect((await Effect.runPromise(whoami.pipe(Effect.provide(layer)))).namespace).toBe("acme")
    // the families users call; the node-to-node groups are the gateways' own
    const groups = await Effect.runPromise(Effect.map(PorticoClient, Object.keys).pipe(Effect.provide(layer)))
    expect(groups.sort()).toEqual([
      "audit", "auth", "cache", "cors", "databases", "deploymentDomains", "deploymentRuntime", "deployments", "devices", "functions", "invoke", "namespace",
      "namespaceBackup", "namespaceCreate", "namespaceDelete", "network", "node", "operator", "proxy", "pubsub", "push", "pushRegistrations", "pushSend", "sql", "storage", "system",
      "vault", "webrtc", "webrtcNamespace"
    ])
  })

  it("runs the README's typed-client example as written and prints what the README shows", async () => {
    const readme = readFileSync(path.join(root, "README.md"), "utf8")
    const section = readme.indexOf("## Typed client")
    const start = readme.indexOf("```ts\n", section)
    const end = readme.indexOf("\n```", start + 6)
    expect(section >= 0 && start > section && end > start, "README.md has a ts block under '## Typed client'").toBe(true)
    const example = readme.slice(start + 6, end)
    const shown = example.split("\n").flatMap((line) => /^\/\/ → (.*)$/.exec(line)?.[1] ?? [])
    expect(shown.length).toBeGreaterThan(1)
    // the README's file sits in the checkout; this copy sits one level down, in the ignored tmp/
    mkdirSync(path.join(root, "tmp"), { recursive: true })
    const file = path.join(root, "tmp", `client-example-${process.pid}.ts`)
    writeFileSync(file, example.replace('from "./src/client.js"', 'from "../src/client.js"'))
    try {
      const { stdout } = await run(process.execPath, ["--import", "tsx", file], {
        cwd: root,
        env: { ...process.env, PORTICO_URL: gw.url, PORTICO_KEY: ownerKey }
      })
      expect(stdout.trim().split("\n")).toEqual(shown)
    } finally {
      rmSync(file, { force: true })
    }
  })

  it("auth: whoami for a key and a session, key → token exchange, and the refusals of each", async () => {
    const byKey = await call(gw, ownerKey, (c) => c.auth.whoami())
    expect(byKey).toMatchObject({ namespace: "acme", method: "api_key", role: "owner" })
    expect(byKey.subject).toMatch(/^key:key_/)
    const bySession = await call(gw, accessToken, (c) => c.auth.whoami())
    expect(bySession).toMatchObject({ namespace: "acme", method: "jwt", role: "owner", subject: owner.address.toLowerCase() })
    const token = await call(gw, ownerKey, (c) => c.auth.token({ payload: {} }))
    expect(token.token_type).toBe("Bearer")
    expect(token.expires_in).toBeGreaterThan(0)
    expect((await call(gw, token.access_token, (c) => c.auth.whoami())).role).toBe("owner")
    expectRefusal(await refusal(gw, undefined, (c) => c.auth.whoami()), 401, "UNAUTHORIZED")
    expectRefusal(await refusal(gw, ownerKey.slice(0, -4) + "AAAA", (c) => c.auth.whoami()), 401, "INVALID_API_KEY")
    // a JWT made from a key is still a key's credential: no session routes
    expectRefusal(await refusal(gw, token.access_token, (c) => c.auth.sessions({ urlParams: {} })), 403, "SESSION_REQUIRED")
    // renewal is a deployed app's, with its workload token (test/e2e/workload-tokens.test.ts): a key's or a session's is refused
    expectRefusal(await refusal(gw, ownerKey, (c) => c.auth.renew({ payload: {} })), 403, "WORKLOAD_TOKEN_REQUIRED")
    expectRefusal(await refusal(gw, accessToken, (c) => c.auth.renew({ payload: {} })), 403, "WORKLOAD_TOKEN_REQUIRED")
  })

  it("auth: challenge and verify sign a wallet in; sessions lists it; logout ends it", async () => {
    // a signature by another wallet is refused, and spends the challenge
    const { message } = await call(gw, undefined, (c) =>
      c.auth.challenge({ payload: { wallet: owner.address, namespace: NamespaceName.make("acme") } })
    )
    expect(message).toContain(owner.address)
    const forged = await member.signMessage(message)
    expectRefusal(await refusal(gw, undefined, (c) => c.auth.verify({ payload: { message, signature: forged } })), 401, "SIGNATURE_INVALID")
    const signed = await signIn(gw, "acme", owner)
    expect(signed).toMatchObject({ token_type: "Bearer", namespace: "acme", subject: owner.address.toLowerCase() })
    expect(signed.session_id).toMatch(/^ses_[0-9a-f]{32}$/)
    const listed = await call(gw, signed.access_token, (c) => c.auth.sessions({ urlParams: {} }))
    expect(listed.sessions.find((s) => s.id === signed.session_id)).toMatchObject({ current: true, device_id: null })
    const paged = await call(gw, signed.access_token, (c) => c.auth.sessions({ urlParams: { limit: 1 } }))
    expect(paged.sessions).toHaveLength(1)
    expect(paged.next_cursor).not.toBeNull()
    expect(await call(gw, signed.access_token, (c) => c.auth.logout({ payload: {} }))).toEqual({ ended: signed.session_id })
    // the session is over: its refresh token no longer works
    expectRefusal(
      await refusal(gw, undefined, (c) => c.auth.refresh({ payload: { refresh_token: signed.refresh_token } })),
      401,
      "INVALID_REFRESH_TOKEN"
    )
    // a wallet that is not a member of a members-only namespace is refused
    const stranger = Wallet.createRandom()
    const refused = await refusal(gw, undefined, (c) =>
      Effect.gen(function* () {
        const challenge = yield* c.auth.challenge({ payload: { wallet: stranger.address, namespace: NamespaceName.make("acme") } })
        const signature = yield* Effect.promise(() => stranger.signMessage(challenge.message))
        return yield* c.auth.verify({ payload: { message: challenge.message, signature } })
      })
    )
    expectRefusal(refused, 403, "NOT_A_MEMBER")
  })

  it("auth: a device-flow login approved by the wallet, refresh, a sign-in key, and ending a session by id", async () => {
    const codes = await call(gw, undefined, (c) => c.auth.startDevice({ payload: { namespace: NamespaceName.make("acme") } }))
    expect(codes.user_code).toMatch(/^[A-Z]{4}-?[A-Z]{4}$/)
    // polling before anyone answers: the RFC 8628 code, in the error envelope
    expectRefusal(
      await refusal(gw, undefined, (c) => c.auth.deviceToken({ payload: { device_code: codes.device_code } })),
      400,
      "authorization_pending"
    )
    const { message } = await call(gw, undefined, (c) =>
      c.auth.challenge({ payload: { wallet: owner.address, namespace: NamespaceName.make("acme") } })
    )
    const signature = await owner.signMessage(message)
    expect(await call(gw, undefined, (c) => c.auth.answerLogin({ payload: { user_code: codes.user_code, message, signature } }))).toEqual({
      user_code: codes.user_code,
      status: "approved"
    })
    const session = await call(gw, undefined, (c) => c.auth.deviceToken({ payload: { device_code: codes.device_code } }))
    expect(session).toMatchObject({ namespace: "acme", subject: owner.address.toLowerCase(), token_type: "Bearer" })
    const refreshed = await call(gw, undefined, (c) => c.auth.refresh({ payload: { refresh_token: session.refresh_token } }))
    expect(refreshed.session_id).toBe(session.session_id)
    expect(refreshed.refresh_token).not.toBe(session.refresh_token)
    const key = await call(gw, refreshed.access_token, (c) => c.auth.apiKey({ payload: { label: "laptop", expires_in_days: 30 } }))
    expect(key).toMatchObject({ namespace: "acme", label: "laptop" })
    expect((await call(gw, key.api_key, (c) => c.auth.whoami())).method).toBe("api_key")
    // another session of the same wallet ends this one by its id
    const other = await signIn(gw, "acme", owner)
    expect(await call(gw, other.access_token, (c) => c.auth.endSession({ path: { id: session.session_id }, payload: {} }))).toEqual({
      ended: session.session_id
    })
    expectRefusal(
      await refusal(gw, other.access_token, (c) => c.auth.endSession({ path: { id: "ses_" + "0".repeat(32) }, payload: {} })),
      404,
      "NOT_FOUND"
    )
  })

  it("namespace: members, keys, rate limit; a runtime key is refused the control plane, an unknown key is 404", async () => {
    const added = await call(gw, ownerKey, (c) => c.namespace.addMember({ payload: { wallet: member.address, role: "developer" } }))
    expect(added).toMatchObject({ namespace: "acme", created: true, member: { wallet: member.address.toLowerCase(), role: "developer" } })
    const members = await call(gw, ownerKey, (c) => c.namespace.listMembers({ urlParams: {} }))
    expect(members.owner).toBe(owner.address.toLowerCase())
    expect(members.members.map((m) => m.wallet)).toContain(member.address.toLowerCase())
    const minted = await call(gw, ownerKey, (c) => c.namespace.mintKey({ payload: { scopes: ["cache"], label: "cache only" } }))
    expect(minted).toMatchObject({ namespace: "acme", label: "cache only", role: "custom", scopes: ["cache"], expires_at: null })
    const keys = await call(gw, ownerKey, (c) => c.namespace.listKeys({ urlParams: { limit: 100 } }))
    expect(keys.keys.find((k) => k.id === minted.id)).toMatchObject({ revoked_at: null })
    expect(await call(gw, ownerKey, (c) => c.namespace.revokeKey({ path: { id: minted.id } }))).toEqual({ id: minted.id, revoked: true })
    expectRefusal(await refusal(gw, ownerKey, (c) => c.namespace.revokeKey({ path: { id: "key_" + "a".repeat(16) } })), 404, "NOT_FOUND")
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.namespace.listKeys({ urlParams: {} })), 403, "CONTROL_PLANE_REQUIRED")
    // a rule no schema states: exactly one of scopes or profile
    expectRefusal(
      await refusal(gw, ownerKey, (c) => c.namespace.mintKey({ payload: { scopes: ["cache"], profile: "runtime" } })),
      400,
      "VALIDATION_FAILED"
    )
    expect(await call(gw, runtimeKey, (c) => c.namespace.getRateLimit())).toMatchObject({ namespace: "acme", source: "default" })
    const set = await call(gw, ownerKey, (c) => c.namespace.setRateLimit({ payload: { requests_per_second: 500, burst: 1000 } }))
    expect(set).toEqual({ namespace: "acme", requests_per_second: 500, burst: 1000, source: "namespace" })
    expectRefusal(
      await refusal(gw, runtimeKey, (c) => c.namespace.setRateLimit({ payload: { requests_per_second: null } })),
      403,
      "CONTROL_PLANE_REQUIRED"
    )
    expect((await call(gw, ownerKey, (c) => c.namespace.setRateLimit({ payload: { requests_per_second: null } }))).source).toBe("default")
    // ownership moves in two steps: an offer the recipient accepts; here the owner cancels it
    expect(await call(gw, runtimeKey, (c) => c.namespace.pendingTransfer())).toEqual({ namespace: "acme", offer: null })
    const offered = await call(gw, accessToken, (c) => c.namespace.transfer({ payload: { wallet: member.address } }))
    expect(offered).toMatchObject({ namespace: "acme", status: "pending", to: member.address.toLowerCase() })
    expect((await call(gw, runtimeKey, (c) => c.namespace.pendingTransfer())).offer).toMatchObject({ to: member.address.toLowerCase() })
    expectRefusal(await refusal(gw, accessToken, (c) => c.namespace.acceptTransfer({ payload: {} })), 403, "FORBIDDEN")
    expect(await call(gw, accessToken, (c) => c.namespace.cancelTransfer({ payload: {} }))).toEqual({ namespace: "acme", cancelled: member.address.toLowerCase() })
    expectRefusal(await refusal(gw, accessToken, (c) => c.namespace.cancelTransfer({ payload: {} })), 404, "NOT_FOUND")
    expect(await call(gw, ownerKey, (c) => c.namespace.removeMember({ path: { wallet: member.address } }))).toEqual({
      namespace: "acme",
      removed: member.address.toLowerCase()
    })
    expectRefusal(await refusal(gw, ownerKey, (c) => c.namespace.removeMember({ path: { wallet: member.address } })), 404, "NOT_FOUND")
  })

  it("namespace: the session policy is read by anyone of the namespace and set by its owner", async () => {
    expect(await call(gw, runtimeKey, (c) => c.devices.getPolicy())).toEqual({ namespace: "acme", device_policy: "optional", sign_in: "members" })
    const changed = await call(gw, ownerKey, (c) => c.devices.setPolicy({ payload: { device_policy: "optional", sign_in: "members" } }))
    expect(changed).toMatchObject({ namespace: "acme", device_policy: "optional", sign_in: "members" })
    expect(typeof changed.revoked_sign_in_keys).toBe("number")
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.devices.setPolicy({ payload: { sign_in: "open" } })), 403, "CONTROL_PLANE_REQUIRED")
  })

  it("cors: the origins are read by anyone of the namespace and set by its owner, stored as a browser sends them", async () => {
    expect(await call(gw, runtimeKey, (c) => c.cors.get())).toEqual({ namespace: "acme", origins: [] })
    const set = await call(gw, ownerKey, (c) => c.cors.set({ payload: { origins: ["https://app.example", "https://App.Example:443"] } }))
    expect(set.origins).toEqual(["https://app.example"])
    expect((await call(gw, runtimeKey, (c) => c.cors.get())).origins).toEqual(["https://app.example"])
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.cors.set({ payload: { origins: [] } })), 403, "CONTROL_PLANE_REQUIRED")
    // the client checks the payload with the endpoint's schema before sending: a bad origin never leaves
    const local = await refusal(gw, ownerKey, (c) => c.cors.set({ payload: { origins: ["https://*.example"] } }))
    expect((local.error as { _tag: string })._tag).toBe("ParseError")
    expect(local.status).toBe(0)
  })

  it("audit: the trail pages newest first, filters by action, and is the control plane's", async () => {
    const page = await call(gw, ownerKey, (c) => c.audit.list({ urlParams: { action: "namespace.cors", limit: 5 } }))
    expect(page.namespace).toBe("acme")
    expect(page.entries[0]).toMatchObject({ action: "namespace.cors", target: "acme" })
    const all = await call(gw, ownerKey, (c) => c.audit.list({ urlParams: { limit: 2 } }))
    expect(all.count).toBe(2)
    expect(all.next_cursor).not.toBeNull()
    const next = await call(gw, ownerKey, (c) => c.audit.list({ urlParams: { limit: 2, cursor: [all.entries[1]!.id] } }))
    expect(next.entries[0]!.id).toBeLessThan(all.entries[1]!.id)
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.audit.list({ urlParams: {} })), 403, "CONTROL_PLANE_REQUIRED")
  })

  it("devices: a device-bound sign-in lists its device; the owner lists and revokes by subject; unknown devices are 404", async () => {
    const device = await newDevice()
    const { message } = await call(gw, undefined, (c) =>
      c.auth.challenge({ payload: { wallet: owner.address, namespace: NamespaceName.make("acme"), device_id: device.id } })
    )
    const signature = await owner.signMessage(message)
    const deviceSignature = await device.sign(message)
    const session = await call(gw, undefined, (c) =>
      c.auth.verify({
        payload: { message, signature, device_key: device.jwk, device_signature: deviceSignature, device_label: "laptop" }
      })
    )
    if (!("access_token" in session)) throw new Error("pending")
    expect(session.device_id).toBe(device.id)
    const mine = await call(gw, session.access_token, (c) => c.devices.list({ urlParams: {} }))
    expect(mine.devices).toEqual([expect.objectContaining({ id: device.id, label: "laptop", status: "active", revoked_at: null })])
    const theirs = await call(gw, ownerKey, (c) => c.devices.listFor({ urlParams: { subject: owner.address } }))
    expect(theirs.subject).toBe(owner.address.toLowerCase())
    expect(theirs.devices.map((d) => d.id)).toEqual([device.id])
    const unknown = "A".repeat(43)
    expectRefusal(await refusal(gw, ownerKey, (c) => c.devices.revokeAny({ path: { id: unknown } })), 404, "DEVICE_NOT_FOUND")
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.devices.listFor({ urlParams: { subject: owner.address } })), 403, "CONTROL_PLANE_REQUIRED")
    expectRefusal(await refusal(gw, ownerKey, (c) => c.devices.list({ urlParams: {} })), 403, "SESSION_REQUIRED")
    // a new device with no wallet links to the account: the active device approves, the new one collects
    const phone = await newDevice()
    const link = await call(gw, undefined, (c) =>
      c.auth.startDevice({ payload: { namespace: NamespaceName.make("acme"), device_key: phone.jwk, device_label: "phone" } })
    )
    const approval = await device.proof("approve", "acme", link.user_code)
    expect(await call(gw, session.access_token, (c) => c.auth.approveDevice({ payload: { user_code: link.user_code, device_proof: approval } }))).toEqual({
      approved: link.user_code
    })
    const claim = await phone.proof("claim", "acme", link.device_code)
    const linked = await call(gw, undefined, (c) => c.auth.deviceToken({ payload: { device_code: link.device_code, device_proof: claim } }))
    expect(linked).toMatchObject({ namespace: "acme", subject: owner.address.toLowerCase(), device_id: phone.id })
    // a device cannot approve a plain login
    const login = await call(gw, undefined, (c) => c.auth.startDevice({ payload: { namespace: NamespaceName.make("acme") } }))
    const refusedApproval = await device.proof("approve", "acme", login.user_code)
    expectRefusal(
      await refusal(gw, session.access_token, (c) => c.auth.approveDevice({ payload: { user_code: login.user_code, device_proof: refusedApproval } })),
      403,
      "FORBIDDEN"
    )
    // the device-bound session revokes its own device with a proof
    const proof = await device.proof("revoke", "acme", device.id)
    expect(await call(gw, session.access_token, (c) => c.devices.revoke({ path: { id: device.id }, payload: { device_proof: proof } }))).toEqual({
      revoked: device.id
    })
    const after = await call(gw, ownerKey, (c) => c.devices.listFor({ urlParams: { subject: owner.address } }))
    expect(after.devices.find((d) => d.id === device.id)).toMatchObject({ status: "revoked" })
    expect(after.devices.find((d) => d.id === phone.id)).toMatchObject({ status: "active", label: "phone" })
  })

  it("namespace: an ownership offer accepted by its recipient's session moves the namespace", async () => {
    const first = Wallet.createRandom()
    const next = Wallet.createRandom()
    await gw.cli(["namespace", "create", "handover", "--owner", first.address])
    const firstSession = (await signIn(gw, "handover", first)).access_token
    await call(gw, firstSession, (c) => c.namespace.addMember({ payload: { wallet: next.address, role: "admin" } }))
    const offer = await call(gw, firstSession, (c) => c.namespace.transfer({ payload: { wallet: next.address } }))
    expect(offer).toMatchObject({ status: "pending", from: first.address.toLowerCase(), to: next.address.toLowerCase() })
    const nextSession = (await signIn(gw, "handover", next)).access_token
    expect(await call(gw, nextSession, (c) => c.namespace.acceptTransfer({ payload: {} }))).toEqual({ namespace: "handover", owner: next.address.toLowerCase() })
    expect((await call(gw, nextSession, (c) => c.namespace.listMembers({ urlParams: {} }))).owner).toBe(next.address.toLowerCase())
    expectRefusal(await refusal(gw, nextSession, (c) => c.namespace.acceptTransfer({ payload: {} })), 404, "NOT_FOUND")
  })

  it("has driven every endpoint of these families through the client", () => {
    expect(notCalled(["system", "auth", "namespace", "cors", "audit", "devices"])).toEqual([])
  })
})

interface Device {
  readonly jwk: jose.JWK
  readonly id: string
  readonly sign: (text: string) => Promise<string>
  /** A device proof (docs/auth.md): the action, namespace and binding signed with the device key. */
  readonly proof: (action: string, namespace: string, binding: string) => Promise<{ iat: number; id: string; sig: string }>
}

const newDevice = async (): Promise<Device> => {
  const pair = await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
  const jwk = (await webcrypto.subtle.exportKey("jwk", pair.publicKey)) as jose.JWK
  const sign = async (text: string) =>
    Buffer.from(await webcrypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(text))).toString(
      "base64url"
    )
  return {
    jwk,
    id: await jose.calculateJwkThumbprint(jwk),
    sign,
    proof: async (action, namespace, binding) => {
      const iat = Math.floor(Date.now() / 1000)
      const id = Buffer.from(webcrypto.getRandomValues(new Uint8Array(18))).toString("base64url")
      return { iat, id, sig: await sign(["portico-device-proof-v1", action, namespace, binding, String(iat), id].join("\n")) }
    }
  }
}
