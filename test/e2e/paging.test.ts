/**
 * Lists over HTTP in pages (docs/api.md, "Lists and paging"): every list that can grow is read
 * with `limit` and `cursor`, and answers `next_cursor` (null on the last page). Each list gets
 * more items than a page holds, and is read to its end: every item once, in the list's order.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import * as jose from "jose"
import { webcrypto } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const subtle = webcrypto.subtle

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code).toBe(code)
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
}

/** Reads a list to its end with `limit`, checking each page's size bound and its cursor. */
const readAll = async (
  gw: Gateway,
  path: string,
  token: string,
  member: string,
  limit: number
): Promise<{ readonly items: Array<any>; readonly pages: Array<number> }> => {
  const items: Array<any> = []
  const pages: Array<number> = []
  let cursor: string | null = null
  const join = path.includes("?") ? "&" : "?"
  for (let i = 0; i < 100; i++) {
    const reply = await gw.request("GET", `${path}${join}limit=${limit}${cursor === null ? "" : `&cursor=${cursor}`}`, { token })
    expect(reply.status, reply.text).toBe(200)
    const page = reply.body[member] as Array<any>
    expect(page.length).toBeLessThanOrEqual(limit)
    items.push(...page)
    pages.push(page.length)
    expect(reply.body).toHaveProperty("next_cursor")
    cursor = reply.body.next_cursor
    if (cursor === null) return { items, pages }
    expect(cursor).toMatch(/^[A-Za-z0-9_.-]+$/)
  }
  throw new Error("the list never ended")
}

const newDevice = async () => {
  const pair = await subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
  const jwk = (await subtle.exportKey("jwk", pair.publicKey)) as jose.JWK
  return {
    jwk,
    id: await jose.calculateJwkThumbprint(jwk),
    sign: async (text: string) =>
      Buffer.from(await subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(text))).toString("base64url")
  }
}

describe.each(["sqlite", "rqlite"] as const)("lists in pages, registry on %s", (engine) => {
  let gw: Gateway
  let ownerKey: string
  let engineServer: RqlitedServer | undefined
  const user = Wallet.createRandom()

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway(engineServer === undefined ? {} : { env: { PORTICO_RQLITE_URL: engineServer.url } })
    ownerKey = (await gw.cli(["namespace", "create", "pages"])).api_key
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("pages API keys: 25 keys in pages of 10, every key once, oldest first", async () => {
    const minted: Array<string> = []
    for (let i = 0; i < 25; i++) {
      const reply = await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "runtime", label: `k${i}` } })
      expect(reply.status, reply.text).toBe(201)
      minted.push(reply.body.id)
    }
    const { items, pages } = await readAll(gw, "/v1/namespace/keys", ownerKey, "keys", 10)
    // the owner key the CLI made comes first
    expect(pages).toEqual([10, 10, 6])
    expect(items.slice(1).map((k) => k.id)).toEqual(minted)
    expect(new Set(items.map((k) => k.id)).size).toBe(26)
    // without limit: the default page (100) holds them all, and says it is the last
    const whole = await gw.request("GET", "/v1/namespace/keys", { token: ownerKey })
    expect(whole.body.keys).toHaveLength(26)
    expect(whole.body.next_cursor).toBeNull()
  })

  it("pages members", async () => {
    const added: Array<string> = []
    for (let i = 0; i < 25; i++) {
      const wallet = Wallet.createRandom().address
      const reply = await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet, role: "reader" } })
      expect(reply.status, reply.text).toBe(200)
      added.push(wallet)
    }
    const { items, pages } = await readAll(gw, "/v1/namespace/members", ownerKey, "members", 10)
    expect(pages.reduce((a, b) => a + b)).toBe(items.length)
    expect(pages.slice(0, -1).every((n) => n === 10)).toBe(true)
    const wallets = items.map((m) => m.wallet)
    expect(new Set(wallets).size).toBe(wallets.length)
    expect(wallets.map((w) => w.toLowerCase())).toEqual(expect.arrayContaining(added.map((w) => w.toLowerCase())))
    expect(items.map((m) => m.added_at)).toEqual([...items.map((m) => m.added_at)].sort((a, b) => a - b))
  })

  it("pages sessions, devices (the account's and an admin's view) and the audit trail", async () => {
    expect((await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: user.address, role: "runtime" } })).status).toBe(200)
    const sessions: Array<string> = []
    const devices: Array<string> = []
    let token = ""
    for (let i = 0; i < 23; i++) {
      const device = await newDevice()
      const challenge = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: user.address, namespace: "pages", device_id: device.id } })
      expect(challenge.status, challenge.text).toBe(200)
      const message = challenge.body.message as string
      const verified = await gw.request("POST", "/v1/auth/verify", {
        json: { message, signature: await user.signMessage(message), device_key: device.jwk, device_signature: await device.sign(message) }
      })
      expect(verified.status, verified.text).toBe(200)
      sessions.push(verified.body.session_id)
      devices.push(device.id)
      token = verified.body.access_token
    }
    const listedSessions = await readAll(gw, "/v1/auth/sessions", token, "sessions", 10)
    expect(listedSessions.pages).toEqual([10, 10, 3])
    expect(listedSessions.items.map((s) => s.id).sort()).toEqual([...sessions].sort())
    expect(listedSessions.items.filter((s) => s.current)).toHaveLength(1)

    const own = await readAll(gw, "/v1/auth/devices", token, "devices", 10)
    expect(own.pages).toEqual([10, 10, 3])
    expect(own.items.map((d) => d.id).sort()).toEqual([...devices].sort())
    const theirs = await readAll(gw, `/v1/namespace/devices?subject=${user.address}`, ownerKey, "devices", 7)
    expect(theirs.pages).toEqual([7, 7, 7, 2])
    expect(theirs.items.map((d) => d.id)).toEqual(own.items.map((d) => d.id))

    // the audit trail: its own bounds (default 50, at most 200), newest first
    const audit = await readAll(gw, "/v1/audit", ownerKey, "entries", 20)
    expect(audit.items.length).toBeGreaterThanOrEqual(50)
    const ids = audit.items.map((e) => e.id)
    expect(ids).toEqual([...ids].sort((a, b) => b - a))
    expect(new Set(ids).size).toBe(ids.length)
    const filtered = await readAll(gw, "/v1/audit?action=key.create", ownerKey, "entries", 10)
    expect(filtered.items.every((e) => e.action === "key.create")).toBe(true)
    expect(filtered.items).toHaveLength(25)
    const first = await gw.request("GET", "/v1/audit", { token: ownerKey })
    expect(first.body.entries).toHaveLength(50)
    expect(first.body.count).toBe(50)
    expect(typeof first.body.next_cursor).toBe("string")
    expectError(await gw.request("GET", "/v1/audit?limit=201", { token: ownerKey }), 400, "VALIDATION_FAILED")
  })

  it("pages node-local databases and their backups", async () => {
    for (let i = 0; i < 12; i++) {
      const name = `db${String(i).padStart(2, "0")}`
      const reply = await gw.request("POST", "/v1/db/sqlite/create", { token: ownerKey, json: { database_name: name } })
      expect(reply.status, reply.text).toBe(201)
    }
    const dbs = await readAll(gw, "/v1/db/sqlite/list", ownerKey, "databases", 5)
    expect(dbs.pages).toEqual([5, 5, 2])
    expect(dbs.items.map((d) => d.name)).toEqual(Array.from({ length: 12 }, (_, i) => `db${String(i).padStart(2, "0")}`))
    const taken: Array<string> = []
    for (let i = 0; i < 7; i++) {
      const reply = await gw.request("POST", "/v1/db/sqlite/backup", { token: ownerKey, json: { database_name: "db00" } })
      expect(reply.status, reply.text).toBe(201)
      taken.push(reply.body.id)
    }
    const backups = await readAll(gw, "/v1/db/sqlite/backups?database_name=db00", ownerKey, "backups", 3)
    expect(backups.pages).toEqual([3, 3, 1])
    expect(backups.items.map((b) => b.id).sort()).toEqual([...taken].sort())
    const times = backups.items.map((b) => b.created_at)
    expect(times).toEqual([...times].sort((a, b) => b - a))
  })

  it("refuses a bad cursor and a limit out of bounds with 400 and the envelope", async () => {
    // not of the list's form: another key shape, characters outside base64url, too long, empty
    const notCursors: Record<string, ReadonlyArray<string>> = {
      "/v1/namespace/keys": ["!!!", "bm90IGpzb24", "abc.def", "1.2.3", `1.${"A".repeat(600)}`, "", "1,abc"],
      "/v1/namespace/members": ["x.y", "12", "-1.abc", "1.a=b"],
      "/v1/db/sqlite/list": ["!!!", "a.b", "A".repeat(600), ""],
      "/v1/audit": ["abc", "1.x", "9".repeat(16), "-5", ""]
    }
    for (const [path, cursors] of Object.entries(notCursors)) {
      expectError(await gw.request("GET", `${path}?limit=1001`, { token: ownerKey }), 400, "VALIDATION_FAILED")
      expectError(await gw.request("GET", `${path}?limit=0`, { token: ownerKey }), 400, "VALIDATION_FAILED")
      expectError(await gw.request("GET", `${path}?limit=ten`, { token: ownerKey }), 400, "VALIDATION_FAILED")
      for (const cursor of cursors) {
        const reply = await gw.request("GET", `${path}?cursor=${encodeURIComponent(cursor)}`, { token: ownerKey })
        expectError(reply, 400, "VALIDATION_FAILED")
        expect(reply.body.error).toMatch(/cursor/)
      }
    }
    // every string of the documented form is a position, never a refusal: a generated client
    // that keeps to the pattern is answered
    const fromStart = await gw.request("GET", "/v1/namespace/keys?limit=1000&cursor=0.", { token: ownerKey })
    expect(fromStart.status, fromStart.text).toBe(200)
    expect(fromStart.body.keys.length).toBeGreaterThan(0)
    const pastEnd = await gw.request("GET", "/v1/namespace/keys?cursor=999999999999999.zzzz", { token: ownerKey })
    expect(pastEnd.body).toMatchObject({ keys: [], next_cursor: null })
    expect((await gw.request("GET", "/v1/audit?cursor=1", { token: ownerKey })).body).toMatchObject({ entries: [], count: 0, next_cursor: null })
    expect((await gw.request("GET", "/v1/db/sqlite/list?cursor=bm90IGpzb24", { token: ownerKey })).status).toBe(200)
    // a cursor of one list is not one of another whose key has another shape
    const keys = await gw.request("GET", "/v1/namespace/keys?limit=1", { token: ownerKey })
    expectError(await gw.request("GET", `/v1/audit?cursor=${keys.body.next_cursor}`, { token: ownerKey }), 400, "VALIDATION_FAILED")
    // the OpenAPI document states the bounds
    const doc = await gw.request("GET", "/v1/openapi.json")
    const params = doc.body.paths["/v1/namespace/keys"].get.parameters as Array<any>
    expect(params.map((p) => p.name).sort()).toEqual(["cursor", "limit"])
    expect(params.find((p) => p.name === "cursor").schema.pattern).toBe("^[0-9]{1,15}\\.[A-Za-z0-9_-]{0,342}$")
    expect(params.find((p) => p.name === "limit").schema).toMatchObject({ type: "integer", minimum: 1, maximum: 1000 })
    const audit = doc.body.paths["/v1/audit"].get.parameters as Array<any>
    expect(audit.find((p) => p.name === "limit").schema).toMatchObject({ type: "integer", minimum: 1, maximum: 200 })
  })
})
