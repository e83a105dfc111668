/**
 * The operator plane and namespace creation over HTTP (issue 25, N1), on both registry engines:
 * `portico operator add` bootstraps the first operator, who signs in to the platform realm (a
 * challenge with no namespace); invites, the operator list, the creators allowlist, settings and
 * the operator audit trail; POST /v1/namespaces under each `namespace-creation` setting and the
 * per-wallet cap; list and status; a realm token refused on every namespace route family (403
 * NAMESPACE_REQUIRED); an admin key (and a token exchanged from it) of a namespace an operator owns
 * refused on every operator route.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as path from "node:path"
import { WebSocket } from "ws"
import { ensureDist, runPortico } from "../support/cli.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
  expect(typeof reply.body.error).toBe("string")
}

type Signer = { readonly address: string; readonly signMessage: (m: string) => Promise<string> }

describe.each(["sqlite", "rqlite"] as const)("operators and namespace creation, registry on %s", (engine) => {
  let gw: Gateway
  let engineServer: RqlitedServer | undefined
  const op = Wallet.createRandom()
  const alice = Wallet.createRandom()
  const bob = Wallet.createRandom()
  const carol = Wallet.createRandom()
  const tokens: Record<string, string> = {}

  const signIn = async (signer: Signer, namespace?: string): Promise<string> => {
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: signer.address, ...(namespace === undefined ? {} : { namespace }) } })
    expect(c.status, c.text).toBe(200)
    const v = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await signer.signMessage(c.body.message) } })
    expect(v.status, v.text).toBe(200)
    return v.body.access_token
  }

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway({ env: engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url } })
    const added = await gw.cli(["operator", "add", op.address])
    expect(added).toEqual({ wallet: op.address.toLowerCase(), added: true })
    expect((await gw.cli(["operator", "add", op.address])).added).toBe(false)
    tokens.op = await signIn(op)
    tokens.alice = await signIn(alice)
    tokens.bob = await signIn(bob)
  }, 60_000)

  afterAll(async () => {
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("a realm session reaches only the wallet and operator routes: every namespace route family answers it 403 NAMESPACE_REQUIRED", async () => {
    const secret = "ab".repeat(32)
    const cid = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    // one route of each family whose policy is neither `wallet` nor `operator`, through the
    // fast lane where the route has one (whoami, cache get, rqlite query, sqlite query)
    const routes: ReadonlyArray<readonly [family: string, method: string, path: string, json?: unknown]> = [
      ["auth", "GET", "/v1/auth/whoami"],
      ["auth (session only)", "POST", "/v1/auth/api-key", { label: "x" }],
      ["auth (token exchange)", "POST", "/v1/auth/token"],
      ["auth (workload renew)", "POST", "/v1/auth/renew"],
      ["sessions", "GET", "/v1/auth/sessions"],
      ["devices", "GET", "/v1/auth/devices"],
      ["namespace devices", "GET", `/v1/namespace/devices?subject=${alice.address}`],
      ["members", "GET", "/v1/namespace/members"],
      ["keys", "GET", "/v1/namespace/keys"],
      ["rate limit", "GET", "/v1/namespace/rate-limit"],
      ["session policy", "GET", "/v1/namespace/session-policy"],
      ["cors", "GET", "/v1/namespace/cors"],
      ["audit", "GET", "/v1/audit"],
      ["backup", "GET", "/v1/namespace/restore-key"],
      ["deletion", "POST", "/v1/namespace/delete", { namespace: "portico" }],
      ["transfer", "POST", "/v1/namespace/members/transfer/accept"],
      ["cache", "POST", "/v1/cache/get", { dmap: "m", key: "k" }],
      ["node-local databases", "GET", "/v1/db/sqlite/list"],
      ["node-local query", "POST", "/v1/db/sqlite/query", { database_name: "db", sql: "SELECT 1" }],
      ["cluster SQL", "POST", "/v1/rqlite/query", { sql: "SELECT 1" }],
      ["storage", "GET", `/v1/storage/status/${cid}`],
      ["push credentials", "GET", "/v1/namespace/push-credentials"],
      ["push legacy config", "GET", "/v1/push/config"],
      ["push devices", "GET", "/v1/push/devices"],
      ["push topics", "POST", "/v1/push/topics", { topic_secret: secret, provider: "relay_push", token: "abc" }],
      ["push topic removal", "DELETE", "/v1/push/topics", { topic_secret: secret }],
      ["push topic send", "POST", "/v1/push/topics/send", { topic_id: "ab".repeat(32), title: "t", body: "b" }],
      ["push send", "POST", "/v1/push/send", { user_id: "u", title: "t", body: "b" }],
      ["deployments", "GET", "/v1/deployments/list"],
      ["deployment runtime", "GET", "/v1/deployments/logs?name=app"],
      ["deployment domains", "GET", "/v1/deployments/domains/list?name=app"],
      ["proxy", "POST", "/v1/proxy/anon", { method: "GET", url: "https://example.com/" }],
      ["schema status", "GET", "/v1/schema-status"]
    ]
    for (const [family, method, route, json] of routes) {
      const reply = await gw.request(method, route, { token: tokens.alice, ...(json === undefined ? {} : { json }) })
      expect(reply.status, `${family}: ${method} ${route}: ${reply.text}`).toBe(403)
      expect(reply.body, `${family}: ${method} ${route}`).toEqual({
        error: expect.stringContaining("platform sign-in token"),
        code: "NAMESPACE_REQUIRED",
        hint: expect.stringContaining("--namespace")
      })
    }
    // the proxy's WebSocket handshake asks the same gate
    const handshake = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/proxy/tunnel?host=example.com&port=443`, { headers: { authorization: `Bearer ${tokens.alice}` } })
      ws.on("open", () => reject(new Error("a realm token opened a tunnel")))
      ws.on("unexpected-response", (_req, res) => {
        let text = ""
        res.on("data", (c: Buffer) => (text += c.toString()))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }))
      })
      ws.on("error", reject)
    })
    expect(handshake.status, JSON.stringify(handshake.body)).toBe(403)
    expect(handshake.body.code).toBe("NAMESPACE_REQUIRED")
    expectError(await gw.request("GET", "/v1/operator/settings", { token: tokens.alice }), 403, "NOT_AN_OPERATOR")
    // what the refusal says the token reaches is what it reaches: an operator's realm session is
    // answered by the operator routes of every family the message names (it named /v1/operator/* alone)
    const refusal = (await gw.request("GET", "/v1/auth/whoami", { token: tokens.alice })).body.error as string
    for (const [family, route] of [["/v1/operator/*", "/v1/operator/settings"], ["/v1/network/*", "/v1/network/peers"], ["/v1/node/*", "/v1/node/status"]] as const) {
      expect(refusal, family).toContain(family)
      const reached = await gw.request("GET", route, { token: tokens.op })
      expect(reached.status, `${route}: ${reached.text}`).toBe(200)
    }
    const list = await gw.request("GET", "/v1/namespace/list", { token: tokens.alice })
    expect(list.status, list.text).toBe(200)
    expect(list.body).toEqual({ namespaces: [], all: false })

    // a realm session refreshes like any other, into the realm again
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: alice.address } })
    expect(c.body.message).toContain("ns-portico.")
    const v = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await alice.signMessage(c.body.message) } })
    expect(v.body.namespace).toBe("portico")
    const refreshed = await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: v.body.refresh_token } })
    expect(refreshed.status, refreshed.text).toBe(200)
    expect(refreshed.body.namespace).toBe("portico")
    expect((await gw.request("GET", "/v1/namespace/list", { token: refreshed.body.access_token })).status).toBe(200)
  })

  it("a realm session logs out like any session: its access and refresh tokens stop working", async () => {
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: carol.address } })
    const v = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await carol.signMessage(c.body.message) } })
    expect(v.body.namespace).toBe("portico")
    const access: string = v.body.access_token
    expect((await gw.request("GET", "/v1/namespace/list", { token: access })).status).toBe(200)
    const out = await gw.request("POST", "/v1/auth/logout", { token: access, json: {} })
    expect(out.status, out.text).toBe(200)
    expect(out.body).toEqual({ ended: v.body.session_id })
    const after = await gw.request("GET", "/v1/namespace/list", { token: access })
    expect(after.status, after.text).toBe(401)
    const refreshed = await gw.request("POST", "/v1/auth/refresh", { json: { refresh_token: v.body.refresh_token } })
    expect(refreshed.status, refreshed.text).toBe(401)
    // the realm reaches nothing else of a session's: its sessions list stays a namespace's
    expectError(await gw.request("GET", "/v1/auth/sessions", { token: tokens.alice }), 403, "NAMESPACE_REQUIRED")
  })

  it("creation follows the setting: operators by default, then the allowlist, then open", async () => {
    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.alice, json: { name: "alice-shop" } }), 403, "FORBIDDEN")
    const opCreated = await gw.request("POST", "/v1/namespaces", { token: tokens.op, json: { name: "op-shop" } })
    expect(opCreated.status, opCreated.text).toBe(201)
    expect(opCreated.body.owner).toBe(op.address.toLowerCase())
    expect(opCreated.body.api_key).toMatch(/^/)
    tokens.opKey = opCreated.body.api_key

    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.op, json: { name: "op-shop" } }), 409, "NAMESPACE_EXISTS")
    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.op, json: { name: "portico" } }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.op, json: { name: "Bad_Name" } }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.opKey, json: { name: "by-key" } }), 403, "SESSION_REQUIRED")

    let put = await gw.request("PUT", "/v1/operator/settings/namespace-creation", { token: tokens.op, json: { value: "allowlist" } })
    expect(put.status, put.text).toBe(200)
    const allowed = await gw.request("POST", "/v1/operator/creators", { token: tokens.op, json: { wallet: alice.address } })
    expect(allowed.body).toEqual({ wallet: alice.address.toLowerCase(), changed: true })
    const aliceCreated = await gw.request("POST", "/v1/namespaces", { token: tokens.alice, json: { name: "alice-shop" } })
    expect(aliceCreated.status, aliceCreated.text).toBe(201)
    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.bob, json: { name: "bob-shop" } }), 403, "FORBIDDEN")

    put = await gw.request("PUT", "/v1/operator/settings/namespace-creation", { token: tokens.op, json: { value: "open" } })
    expect(put.status, put.text).toBe(200)
    expect((await gw.request("POST", "/v1/namespaces", { token: tokens.bob, json: { name: "bob-shop" } })).status).toBe(201)

    // the creator is the owner: it signs in to its namespace as owner, and the key works there
    const inShop = await signIn(alice, "alice-shop")
    const who = await gw.request("GET", "/v1/auth/whoami", { token: inShop })
    expect(who.body.role ?? who.body.namespace, who.text).toBeDefined()
    expect(who.body.namespace).toBe("alice-shop")
    expect((await gw.request("GET", "/v1/auth/whoami", { token: aliceCreated.body.api_key })).body.namespace).toBe("alice-shop")
  })

  it("the per-wallet cap counts owned namespaces, and caps ownership transfer", async () => {
    const bobOwner = await signIn(bob, "bob-shop")
    const member = await gw.request("POST", "/v1/namespace/members", { token: bobOwner, json: { wallet: alice.address, role: "admin" } })
    expect(member.status, member.text).toBeLessThan(300)
    // an offer made below the cap is refused at its acceptance once the recipient is at the cap
    const offered = await gw.request("POST", "/v1/namespace/members/transfer", { token: bobOwner, json: { wallet: alice.address } })
    expect(offered.status, offered.text).toBe(202)
    // spec §4.9: an integer (the digit string is taken too, below)
    const put = await gw.request("PUT", "/v1/operator/settings/max-namespaces-per-wallet", { token: tokens.op, json: { value: 1 } })
    expect(put.status, put.text).toBe(200)
    expect(put.body).toEqual({ name: "max-namespaces-per-wallet", value: "1" })
    expectError(await gw.request("POST", "/v1/namespace/members/transfer/accept", { token: await signIn(alice, "bob-shop") }), 403, "TRANSFER_REFUSED")
    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.bob, json: { name: "bob-two" } }), 403, "FORBIDDEN")
    // alice (at the cap with alice-shop) is refused bob's namespace at the offer too
    const offer = await gw.request("POST", "/v1/namespace/members/transfer", { token: bobOwner, json: { wallet: alice.address } })
    expectError(offer, 403, "TRANSFER_REFUSED")
    expect((await gw.request("GET", "/v1/namespace/status?id=bob-shop", { token: tokens.bob })).body.owner).toBe(bob.address.toLowerCase())
    const back = await gw.request("PUT", "/v1/operator/settings/max-namespaces-per-wallet", { token: tokens.op, json: { value: "10" } })
    expect(back.status).toBe(200)
  })

  it("list and status", async () => {
    const mine = await gw.request("GET", "/v1/namespace/list", { token: tokens.alice })
    expect(mine.body.all).toBe(false)
    expect(mine.body.namespaces.map((n: any) => n.name)).toEqual(["alice-shop", "bob-shop"])
    const all = await gw.request("GET", "/v1/namespace/list", { token: tokens.op })
    expect(all.body.all).toBe(true)
    expect(all.body.namespaces.map((n: any) => n.name)).toEqual(["alice-shop", "bob-shop", "op-shop"])

    expectError(await gw.request("GET", "/v1/namespace/status", { token: tokens.alice }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("GET", "/v1/namespace/status?id=nope-nope", { token: tokens.alice }), 404, "NOT_FOUND")
    expectError(await gw.request("GET", "/v1/namespace/status?id=op-shop", { token: tokens.alice }), 404, "NOT_FOUND")
    const status = await gw.request("GET", "/v1/namespace/status?id=alice-shop", { token: tokens.alice })
    expect(status.status, status.text).toBe(200)
    expect(status.body).toMatchObject({ name: "alice-shop", owner: alice.address.toLowerCase(), members: 1, deleting: false })
    expect((await gw.request("GET", "/v1/namespace/status?id=bob-shop", { token: tokens.op })).status).toBe(200)
  })

  it("settings: bad values are 400 and not stored; GET reads them", async () => {
    const bad: Array<[string, unknown]> = [
      ["namespace-creation", "everyone"],
      ["namespace-creation", 1],
      ["max-namespaces-per-wallet", "0"],
      ["max-namespaces-per-wallet", "10001"],
      ["max-namespaces-per-wallet", 0],
      ["max-namespaces-per-wallet", 10001],
      ["max-namespaces-per-wallet", 2.5],
      ["max-namespaces-per-wallet", "5.0"],
      ["max-namespaces-per-wallet", true],
      ["max-namespaces-per-wallet", null],
      ["max-namespaces-per-wallet", [5]],
      ["auto-update", "sometimes"],
      ["update-channel", "Stable"],
      ["update-channel", "x".repeat(33)],
      ["update-window", "25-03"],
      ["update-window", "3-4"],
      ["release-repo", "http://example.test/repo"]
    ]
    for (const [name, value] of bad) {
      const reply = await gw.request("PUT", `/v1/operator/settings/${name}`, { token: tokens.op, json: { value } })
      expectError(reply, 400, "VALIDATION_FAILED")
      expect(reply.body.error, `${name} ${JSON.stringify(value)}`).toMatch(new RegExp(`^value: ${name} is `))
    }
    // no such setting: no such route, for either method
    expectError(await gw.request("PUT", "/v1/operator/settings/colour", { token: tokens.op, json: { value: "x" } }), 404, "ROUTE_NOT_FOUND")
    expectError(await gw.request("GET", "/v1/operator/settings/colour", { token: tokens.op }), 404, "ROUTE_NOT_FOUND")
    // nothing of the refused values was stored, and none was audited
    expect((await gw.request("GET", "/v1/operator/settings/max-namespaces-per-wallet", { token: tokens.op })).body.value).toBe("10")
    const good: Array<[string, unknown, string]> = [
      ["auto-update", "notify", "notify"],
      ["update-channel", "beta-2", "beta-2"],
      ["update-window", "02-04", "02-04"],
      ["release-repo", "https://example.test/portico", "https://example.test/portico"],
      ["max-namespaces-per-wallet", 10000, "10000"],
      ["max-namespaces-per-wallet", "10", "10"]
    ]
    for (const [name, value, stored] of good) {
      const ok = await gw.request("PUT", `/v1/operator/settings/${name}`, { token: tokens.op, json: { value } })
      expect(ok.status, ok.text).toBe(200)
      expect(ok.body).toEqual({ name, value: stored })
    }
    const audited = await gw.request("GET", "/v1/operator/audit?limit=200", { token: tokens.op })
    const values = audited.body.entries.filter((e: any) => e.action === "settings.set" && e.target === "max-namespaces-per-wallet").map((e: any) => e.detail.value)
    expect(values.slice(0, 2)).toEqual(["10", "10000"])
    const all = await gw.request("GET", "/v1/operator/settings", { token: tokens.op })
    expect(all.body.settings).toEqual({
      "namespace-creation": "open",
      "max-namespaces-per-wallet": "10",
      "auto-update": "notify",
      "update-channel": "beta-2",
      "update-window": "02-04",
      "release-repo": "https://example.test/portico"
    })
    expect((await gw.request("GET", "/v1/operator/settings/update-window", { token: tokens.op })).body).toEqual({ name: "update-window", value: "02-04" })
  })

  it("an invite lets one wallet join the operator list", async () => {
    expectError(await gw.request("POST", "/v1/operator/invites", { token: tokens.op, json: { expiry_seconds: 3601 } }), 400, "VALIDATION_FAILED")
    const made = await gw.request("POST", "/v1/operator/invites", { token: tokens.op, json: {} })
    expect(made.status, made.text).toBe(201)
    const now = Math.floor(Date.now() / 1000)
    expect(made.body.expires_at).toBeGreaterThan(now + 3500)
    expect(made.body.expires_at).toBeLessThanOrEqual(now + 3601)
    tokens.carol = await signIn(carol)
    const joined = await gw.request("POST", "/v1/operator/invites/redeem", { token: tokens.carol, json: { invite: made.body.invite } })
    expect(joined.status, joined.text).toBe(200)
    expectError(await gw.request("POST", "/v1/operator/invites/redeem", { token: tokens.bob, json: { invite: made.body.invite } }), 404, "NOT_FOUND")
    expect((await gw.request("GET", "/v1/operator/settings", { token: tokens.carol })).status).toBe(200)
    expectError(await gw.request("GET", "/v1/operator/settings", { token: tokens.bob }), 403, "NOT_AN_OPERATOR")
    const list = await gw.request("GET", "/v1/operator/operators", { token: tokens.op })
    expect(list.body.operators.map((o: any) => o.wallet)).toEqual([op.address.toLowerCase(), carol.address.toLowerCase()])
    expect(list.body.operators[1].added_by).toBe(op.address.toLowerCase())
  })

  it("an operator removes another at once; the last one stays", async () => {
    const removed = await gw.request("DELETE", `/v1/operator/operators/${carol.address}`, { token: tokens.op })
    expect(removed.body, removed.text).toEqual({ wallet: carol.address.toLowerCase(), changed: true })
    // the list is read at each request: carol's session is no operator's any more
    expectError(await gw.request("GET", "/v1/operator/settings", { token: tokens.carol }), 403, "NOT_AN_OPERATOR")
    expect((await gw.request("DELETE", `/v1/operator/operators/${carol.address}`, { token: tokens.op })).body.changed).toBe(false)
    expectError(await gw.request("DELETE", `/v1/operator/operators/${op.address}`, { token: tokens.op }), 409, "CONFLICT")
    expectError(await gw.request("DELETE", "/v1/operator/operators/not-a-wallet", { token: tokens.op }), 400, "VALIDATION_FAILED")
    const list = await gw.request("GET", "/v1/operator/operators", { token: tokens.op })
    expect(list.body.operators.map((o: any) => o.wallet)).toEqual([op.address.toLowerCase()])
  })

  it("an admin key of an operator's namespace, and a token exchanged from it, is never an operator credential", async () => {
    const exchanged = await gw.request("POST", "/v1/auth/token", { token: tokens.opKey })
    expect(exchanged.status, exchanged.text).toBe(200)
    const routes: Array<[string, string, unknown?]> = [
      ["POST", "/v1/operator/invites", {}],
      ["POST", "/v1/operator/invites/redeem", { invite: "inv_x" }],
      ["GET", "/v1/operator/operators"],
      ["DELETE", `/v1/operator/operators/${op.address}`],
      ["GET", "/v1/operator/creators"],
      ["POST", "/v1/operator/creators", { wallet: bob.address }],
      ["DELETE", `/v1/operator/creators/${bob.address}`],
      ["GET", "/v1/operator/settings"],
      ["GET", "/v1/operator/settings/auto-update"],
      ["PUT", "/v1/operator/settings/auto-update", { value: "auto" }],
      ["GET", "/v1/operator/audit"],
      ["GET", "/v1/operator/health"],
      ["GET", "/v1/operator/telemetry/stream"],
      ["POST", "/v1/operator/namespaces/remove", { namespace: "bob-shop", reason: "test" }]
    ]
    for (const credential of [tokens.opKey!, exchanged.body.access_token as string]) {
      for (const [method, path, json] of routes) {
        const reply = await gw.request(method, path, { token: credential, ...(json === undefined ? {} : { json }) })
        expect([403], `${method} ${path}: ${reply.text}`).toContain(reply.status)
        expect(["NOT_AN_OPERATOR", "SESSION_REQUIRED"]).toContain(reply.body.code)
        if (path.startsWith("/v1/operator/") && !path.endsWith("/redeem")) expect(reply.body.code).toBe("NOT_AN_OPERATOR")
      }
    }
    // nothing changed
    expect((await gw.request("GET", "/v1/operator/settings/auto-update", { token: tokens.op })).body.value).toBe("notify")
  })

  it("health names each check's latency and error and the namespaces hosted; the telemetry stream sends snapshots", async () => {
    expectError(await gw.request("GET", "/v1/operator/health", { token: tokens.alice }), 403, "NOT_AN_OPERATOR")
    const health = await gw.request("GET", "/v1/operator/health", { token: tokens.op })
    expect(health.status, health.text).toBe(200)
    expect(health.body).toMatchObject({ status: "ok", namespaces: 3, registry_engine: engine })
    expect(health.body.checks.registry.ok).toBe(true)
    expect(typeof health.body.checks.registry.latency_ms).toBe("number")
    expect(health.body.checks.cache.ok).toBe(true)

    expectError(await gw.request("GET", "/v1/operator/telemetry/stream?interval=1", { token: tokens.op }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("GET", "/v1/operator/telemetry/stream?interval=61", { token: tokens.op }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("GET", "/v1/operator/telemetry/stream", { token: tokens.opKey }), 403, "NOT_AN_OPERATOR")
    const controller = new AbortController()
    const response = await fetch(`${gw.url}/v1/operator/telemetry/stream?interval=2`, {
      headers: { authorization: `Bearer ${tokens.op}` },
      signal: controller.signal
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("text/event-stream")
    const reader = response.body!.getReader()
    let text = ""
    const decoder = new TextDecoder()
    const started = Date.now()
    while ((text.match(/event: snapshot\n/g) ?? []).length < 2 && Date.now() - started < 10_000) {
      const { value, done } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    controller.abort()
    const events = text.split("\n\n").filter((e) => e.startsWith("event: snapshot\n"))
    expect(events.length).toBeGreaterThanOrEqual(2)
    const snapshot = JSON.parse(events[0]!.split("\ndata: ")[1]!)
    expect(snapshot).toMatchObject({ status: "ok", namespaces: 3 })
    expect(snapshot.memory_rss_bytes).toBeGreaterThan(0)
    // two snapshots 2 s apart
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500)
  })

  it("every operator action is in the operator audit trail", async () => {
    const page = await gw.request("GET", "/v1/operator/audit?limit=200", { token: tokens.op })
    expect(page.status, page.text).toBe(200)
    const actions = page.body.entries.map((e: any) => e.action).reverse()
    expect(actions.slice(0, 1)).toEqual(["operator.add"])
    expect(actions).toEqual(expect.arrayContaining(["namespace.create", "settings.set", "creators.add", "operator.invite", "operator.join", "operator.remove"]))
    const first = await gw.request("GET", "/v1/operator/audit?limit=2", { token: tokens.op })
    expect(first.body.entries).toHaveLength(2)
    const second = await gw.request("GET", `/v1/operator/audit?limit=2&after=${first.body.next}`, { token: tokens.op })
    expect(second.body.entries[0].id).toBeLessThan(first.body.entries[1].id)
  })

  // last: the registry goes away
  if (engine === "rqlite") it("status, list and creation answer 503 when the registry cannot be read", async () => {
    await Effect.runPromise(engineServer!.stop)
    engineServer = undefined
    expectError(await gw.request("GET", "/v1/namespace/status?id=alice-shop", { token: tokens.alice }), 503, "UNAVAILABLE")
    expectError(await gw.request("GET", "/v1/namespace/list", { token: tokens.alice }), 503, "UNAVAILABLE")
    expectError(await gw.request("POST", "/v1/namespaces", { token: tokens.alice, json: { name: "later" } }), 503, "UNAVAILABLE")
    expectError(await gw.request("GET", "/v1/operator/settings", { token: tokens.op }), 503, "UNAVAILABLE")
  }, 60_000)
})

// what a new user runs (README's tour): a wallet key, operator add, login to the realm, create
describe("the tour: from a fresh gateway to a namespace over HTTP", () => {
  let gw: Gateway
  beforeAll(async () => {
    ensureDist()
    gw = await startGateway()
  }, 180_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("portico wallet new, operator add, login (no --namespace), POST /v1/namespaces", async () => {
    const file = path.join(gw.dataDir, "operator-key.txt")
    const made = await runPortico(["wallet", "new", "--out", file])
    expect(made.code, made.stderr).toBe(0)
    const address = made.stdout.trim()
    const added = await runPortico(["operator", "add", address, "--data-dir", gw.dataDir])
    expect(added.code, added.stderr).toBe(0)
    expect(JSON.parse(added.stdout)).toEqual({ wallet: address.toLowerCase(), added: true })
    const login = await runPortico(["login", "--wallet-key-file", file, "--url", gw.url])
    expect(login.code, login.stderr).toBe(0)
    const token = login.stdout.trim()
    const created = await gw.request("POST", "/v1/namespaces", { token, json: { name: "tour" } })
    expect(created.status, created.text).toBe(201)
    const who = await gw.request("GET", "/v1/auth/whoami", { token: created.body.api_key })
    expect(who.body).toMatchObject({ namespace: "tour" })
    const owner = await runPortico(["login", "--namespace", "tour", "--wallet-key-file", file, "--url", gw.url])
    expect((await gw.request("GET", "/v1/auth/whoami", { token: owner.stdout.trim() })).body).toMatchObject({ namespace: "tour", role: "owner" })
  }, 60_000)
})
