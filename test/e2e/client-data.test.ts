/**
 * The typed client (src/client.ts) against a real gateway, on the data-plane families: cache,
 * node-local databases, the cluster SQL store, content storage and functions. As in client.test.ts, every
 * request goes through the client, every success is decoded by it and again strictly
 * (test/support/client.ts), and every refusal checked is the declared error with its status and
 * code. The upload (multipart) and the import (a SQLite file) go through the client's typed forms
 * of those two streamed bodies.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { Wallet } from "ethers"
import * as jose from "jose"
import { webcrypto } from "node:crypto"
import { mkdtempSync, readFileSync } from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NamespaceName } from "../../src/client.js"
import { call, expectRefusal, notCalled, refusal, signIn } from "../support/client.js"
import { goFunction } from "../support/functions.js"
import { type Gateway, startGateway, testTmp } from "../support/gateway.js"

describe("the typed client on the data plane", () => {
  let gw: Gateway
  let ownerKey: string
  let cacheKey: string
  let runtimeKey: string
  const owner = Wallet.createRandom()

  beforeAll(async () => {
    gw = await startGateway()
    ownerKey = (await gw.cli(["namespace", "create", "shop", "--owner", owner.address])).api_key
    cacheKey = (await call(gw, ownerKey, (c) => c.namespace.mintKey({ payload: { scopes: ["cache"] } }))).api_key
    runtimeKey = (await call(gw, ownerKey, (c) => c.namespace.mintKey({ payload: { profile: "runtime" } }))).api_key
  })
  afterAll(async () => {
    await gw?.stop()
  })

  it("cache: put, get, mget, scan, delete and health; a miss is 404, a key without the grant 403, a long pair 413", async () => {
    expect(await call(gw, cacheKey, (c) => c.cache.health())).toEqual({ status: "ok", service: "cache" })
    const value = { cart: [1, 2, 3], note: "é", nested: { ok: true } }
    expect(await call(gw, cacheKey, (c) => c.cache.put({ payload: { dmap: "carts", key: "u1", value, ttl: "1h" } }))).toEqual({
      status: "ok",
      key: "u1",
      dmap: "carts"
    })
    await call(gw, cacheKey, (c) => c.cache.put({ payload: { dmap: "carts", key: "u2", value: "second" } }))
    expect(await call(gw, cacheKey, (c) => c.cache.get({ payload: { dmap: "carts", key: "u1" } }))).toEqual({ key: "u1", value, dmap: "carts" })
    const many = await call(gw, cacheKey, (c) => c.cache.mget({ payload: { dmap: "carts", keys: ["u1", "nope", "u2"] } }))
    expect(many).toEqual({
      dmap: "carts",
      results: [
        { key: "u1", value },
        { key: "nope", value: null },
        { key: "u2", value: "second" }
      ]
    })
    const scanned = await call(gw, cacheKey, (c) => c.cache.scan({ payload: { dmap: "carts", match: "^u" } }))
    expect([...scanned.keys].sort()).toEqual(["u1", "u2"])
    expect(scanned.count).toBe(2)
    expect(await call(gw, cacheKey, (c) => c.cache.delete({ payload: { dmap: "carts", key: "u1" } }))).toEqual({
      status: "ok",
      key: "u1",
      dmap: "carts"
    })
    expectRefusal(await refusal(gw, cacheKey, (c) => c.cache.get({ payload: { dmap: "carts", key: "u1" } })), 404, "NOT_FOUND")
    const noCache = (await call(gw, ownerKey, (c) => c.namespace.mintKey({ payload: { scopes: ["storage"] } }))).api_key
    expectRefusal(await refusal(gw, noCache, (c) => c.cache.get({ payload: { dmap: "carts", key: "u2" } })), 403, "GRANT_REQUIRED")
    // a rule no schema states: the map name and the key together are at most 255 bytes
    expectRefusal(
      await refusal(gw, cacheKey, (c) => c.cache.put({ payload: { dmap: "carts", key: "k".repeat(300), value: 1 } })),
      413,
      "PAYLOAD_TOO_LARGE"
    )
  })

  it("databases: create, query (write and read), list, back up, delete; a second create is 409, an unknown database 404", async () => {
    const created = await call(gw, ownerKey, (c) => c.databases.create({ payload: { database_name: "orders" } }))
    expect(created.name).toBe("orders")
    expect(typeof created.home_node).toBe("string")
    await call(gw, ownerKey, (c) =>
      c.databases.query({ payload: { database_name: "orders", query: "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER)" } })
    )
    const wrote = await call(gw, ownerKey, (c) =>
      c.databases.query({ payload: { database_name: "orders", query: "INSERT INTO items (name, qty) VALUES (?, ?)", params: ["pen", 3] } })
    )
    expect(wrote).toEqual({ rows_affected: 1, last_insert_id: 1 })
    const read = await call(gw, ownerKey, (c) =>
      c.databases.query({ payload: { database_name: "orders", query: "SELECT name, qty FROM items WHERE qty > ?", params: [1] } })
    )
    expect(read).toEqual({ columns: ["name", "qty"], rows: [["pen", 3]] })
    const listed = await call(gw, ownerKey, (c) => c.databases.list({ urlParams: {} }))
    expect(listed.databases.map((d) => d.name)).toEqual(["orders"])
    expect(listed).toMatchObject({ count: 1, next_cursor: null })
    const backup = await call(gw, ownerKey, (c) => c.databases.backup({ payload: { database_name: "orders" } }))
    expect(backup).toMatchObject({ database_name: "orders" })
    const backups = await call(gw, ownerKey, (c) => c.databases.backups({ urlParams: { database_name: "orders" } }))
    expect(backups.backups.map((b) => b.backup_cid)).toEqual([backup.backup_cid])
    expectRefusal(await refusal(gw, ownerKey, (c) => c.databases.create({ payload: { database_name: "orders" } })), 409, "DATABASE_EXISTS")
    expectRefusal(
      await refusal(gw, ownerKey, (c) => c.databases.query({ payload: { database_name: "nosuch", query: "SELECT 1" } })),
      404,
      "NOT_FOUND"
    )
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.databases.list({ urlParams: {} })), 403, "CONTROL_PLANE_REQUIRED")
    expect(await call(gw, ownerKey, (c) => c.databases.delete({ payload: { database_name: "orders" } }))).toEqual({ name: "orders", deleted: true })
    expect((await call(gw, ownerKey, (c) => c.databases.list({ urlParams: {} }))).databases).toEqual([])
  })

  it("cluster SQL: create table, exec, query, find, select, transaction, schema, export and import; a write sent as a query is 400", async () => {
    expect(
      await call(gw, ownerKey, (c) => c.sql.createTable({ payload: { schema: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)" } }))
    ).toMatchObject({ rows_affected: 0 })
    const inserted = await call(gw, ownerKey, (c) => c.sql.exec({ payload: { sql: "INSERT INTO notes (body) VALUES (?), (?)", args: ["a", "b"] } }))
    expect(inserted).toEqual({ rows_affected: 2, last_insert_id: 2 })
    expect(await call(gw, ownerKey, (c) => c.sql.query({ payload: { sql: "SELECT id, body FROM notes ORDER BY id" } }))).toEqual({
      columns: ["id", "body"],
      rows: [
        [1, "a"],
        [2, "b"]
      ],
      count: 2
    })
    expect(await call(gw, ownerKey, (c) => c.sql.find({ payload: { table: "notes", criteria: { body: "b" } } }))).toEqual({
      items: [{ id: 2, body: "b" }],
      count: 1
    })
    expect(await call(gw, ownerKey, (c) => c.sql.findOne({ payload: { table: "notes", criteria: { body: "zzz" } } }))).toBeNull()
    expect(
      await call(gw, ownerKey, (c) => c.sql.select({ payload: { table: "notes", where: [{ expr: "id = ?", args: [1] }], one: true } }))
    ).toEqual({ id: 1, body: "a" })
    const tx = await call(gw, ownerKey, (c) =>
      c.sql.transaction({
        payload: {
          ops: [
            { kind: "exec", sql: "UPDATE notes SET body = ? WHERE id = ?", args: ["A", 1] },
            { kind: "query", sql: "SELECT body FROM notes WHERE id = 1" }
          ],
          return_results: true
        }
      })
    )
    expect(tx).toEqual({
      results: [
        { rows_affected: 1, last_insert_id: 2 },
        { columns: ["body"], rows: [["A"]], count: 1 }
      ],
      count: 2
    })
    const schema = await call(gw, ownerKey, (c) => c.sql.schema())
    expect(schema.tables.map((t) => t.name)).toContain("notes")
    const exported = await call(gw, ownerKey, (c) => c.sql.export())
    expect(exported).toBeInstanceOf(Uint8Array)
    expect(new TextDecoder().decode(exported.subarray(0, 15))).toBe("SQLite format 3")
    expectRefusal(
      await refusal(gw, ownerKey, (c) => c.sql.query({ payload: { sql: "INSERT INTO notes (body) VALUES ('c')" } })),
      400,
      "VALIDATION_FAILED"
    )
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.sql.schema()), 403, "CONTROL_PLANE_REQUIRED")
    // an integer argument past 2^53 (a bigint) has no JSON.stringify form: the client refuses it
    // before sending (docs/api.md, "Typed client"); the HTTP API itself takes it as a JSON literal
    const wide = await refusal(gw, ownerKey, (c) => c.sql.exec({ payload: { sql: "INSERT INTO notes (id) VALUES (?)", args: [2n ** 60n] } }))
    expect((wide.error as { _tag: string })._tag).toBe("ParseError")
    expect(wide.status).toBe(0)
    // the import replaces the database with the file sent
    const imported = await call(gw, ownerKey, (c) => c.sql.import({ payload: sqliteFile() }))
    expect(imported).toMatchObject({ status: "ok", tables: 1 })
    expect(await call(gw, ownerKey, (c) => c.sql.query({ payload: { sql: "SELECT word FROM words" } }))).toEqual({
      columns: ["word"],
      rows: [["imported"]],
      count: 1
    })
    expect(await call(gw, ownerKey, (c) => c.sql.dropTable({ payload: { table: "words" } }))).toMatchObject({ rows_affected: 0 })
  })

  it("storage: upload (multipart), status, pin, get, unpin; an API key is 403 SESSION_REQUIRED, unknown content 404", async () => {
    const session = (await signIn(gw, "shop", owner)).access_token
    const bytes = new TextEncoder().encode("hello from the typed client\n")
    const form = new FormData()
    form.append("file", new Blob([bytes]), "hello.txt")
    const uploaded = await call(gw, session, (c) => c.storage.upload({ payload: form }))
    expect(uploaded).toMatchObject({ Name: "hello.txt", Size: bytes.length })
    expect(uploaded.Cid).toMatch(/^bafkrei/)
    const status = await call(gw, session, (c) => c.storage.status({ path: { cid: uploaded.Cid } }))
    expect(status).toMatchObject({ Cid: uploaded.Cid, Status: "pinned" })
    const pinned = await call(gw, session, (c) => c.storage.pin({ payload: { cid: uploaded.Cid, name: "greeting" } }))
    expect(pinned.Cid).toBe(uploaded.Cid)
    const got = await call(gw, session, (c) => c.storage.get({ path: { cid: uploaded.Cid } }))
    expect(new TextDecoder().decode(got)).toBe("hello from the typed client\n")
    const unpinned = await call(gw, session, (c) => c.storage.unpin({ path: { cid: uploaded.Cid }, urlParams: {} }))
    expect(unpinned.Cid).toBe(uploaded.Cid)
    expectRefusal(await refusal(gw, ownerKey, (c) => c.storage.upload({ payload: form })), 403, "SESSION_REQUIRED")
    const unknown = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
    // status answers for any CID (unpinned for one never held); a read needs the content held
    expect((await call(gw, session, (c) => c.storage.status({ path: { cid: unknown } }))).Status).toBe("unpinned")
    expectRefusal(await refusal(gw, session, (c) => c.storage.get({ path: { cid: unknown } })), 404, "NOT_FOUND")
  })

  it("storage: a device-bound session mints fetch capabilities, the relayed fetch reads with one, its revoke key revokes it", async () => {
    const device = await newDevice()
    const challenge = await call(gw, undefined, (c) =>
      c.auth.challenge({ payload: { wallet: owner.address, namespace: NamespaceName.make("shop"), device_id: device.id } })
    )
    const signature = await owner.signMessage(challenge.message)
    const deviceSignature = await device.sign(challenge.message)
    const session = await call(gw, undefined, (c) =>
      c.auth.verify({ payload: { message: challenge.message, signature, device_key: device.jwk, device_signature: deviceSignature } })
    )
    if (!("access_token" in session)) throw new Error("pending")
    const form = new FormData()
    form.append("file", new Blob([new TextEncoder().encode("relayed bytes")]), "relayed.txt")
    const { Cid } = await call(gw, session.access_token, (c) => c.storage.upload({ payload: form }))
    const minted = await call(gw, session.access_token, (c) => c.storage.mintFetchCaps({ payload: { cid: Cid, count: 1, ttl_seconds: 3600 } }))
    const cap = minted.caps[0]!
    const relayed = await call(gw, undefined, (c) => c.storage.relayed({ path: { cid: Cid }, headers: { "x-portico-fetch-cap": cap.token } }))
    expect(new TextDecoder().decode(relayed)).toBe("relayed bytes")
    expectRefusal(
      await refusal(gw, undefined, (c) => c.storage.revokeFetchCap({ path: { id: cap.id }, headers: { "x-portico-revoke-key": "x".repeat(43) } })),
      403,
      "FETCH_CAP_REVOKE_KEY_INVALID"
    )
    expect(
      await call(gw, undefined, (c) => c.storage.revokeFetchCap({ path: { id: cap.id }, headers: { "x-portico-revoke-key": cap.revoke_key } }))
    ).toEqual({ revoked: cap.id })
    expectRefusal(
      await refusal(gw, undefined, (c) => c.storage.relayed({ path: { cid: Cid }, headers: { "x-portico-fetch-cap": cap.token } })),
      403,
      "FETCH_CAP_REVOKED"
    )
    // an API key cannot mint: capabilities are handed out by a device-bound session
    expectRefusal(
      await refusal(gw, ownerKey, (c) => c.storage.mintFetchCaps({ payload: { cid: Cid, count: 1, ttl_seconds: 3600 } })),
      403,
      "FETCH_CAP_DEVICE_REQUIRED"
    )
  })

  it("functions: deploy (the form), get, list, change, versions, rollback, secrets, logs, invoke on both routes, delete; a stranger's call of a private function is 404", async () => {
    const form = new FormData()
    form.append("name", "hello")
    form.append("metadata", JSON.stringify({ env_vars: { GREETING: "hi" } }))
    form.append("wasm", new Blob([goFunction("hello")]), "hello.wasm")
    expect(await call(gw, ownerKey, (c) => c.functions.deploy({ payload: form }))).toMatchObject({ name: "hello", version: 1, env_vars: { GREETING: "hi" } })
    expect((await call(gw, ownerKey, (c) => c.functions.list({ urlParams: {} }))).functions.map((f) => f.name)).toEqual(["hello"])
    expect(await call(gw, runtimeKey, (c) => c.invoke.invoke({ path: { name: "hello" }, payload: JSON.stringify({ name: "client" }) }))).toMatchObject({ message: "hi, client" })
    expectRefusal(await refusal(gw, undefined, (c) => c.invoke.invokeIn({ path: { namespace: "shop", target: "hello" }, payload: "{}" })), 404, "NOT_FOUND")
    expect(await call(gw, ownerKey, (c) => c.functions.change({ path: { name: "hello" }, payload: { is_public: true } }))).toMatchObject({ is_public: true })
    expect(await call(gw, undefined, (c) => c.invoke.invokeIn({ path: { namespace: "shop", target: "hello@1" }, payload: JSON.stringify({ name: "anyone" }) }))).toMatchObject({ message: "hi, anyone" })
    expect((await call(gw, ownerKey, (c) => c.functions.rollback({ path: { name: "hello" }, payload: { version: 1 } }))).version).toBe(2)
    expect((await call(gw, ownerKey, (c) => c.functions.versions({ path: { name: "hello" } }))).versions.map((v) => v.version)).toEqual([2, 1])
    expect((await call(gw, ownerKey, (c) => c.functions.get({ path: { name: "hello" } }))).version).toBe(2)
    expect(await call(gw, ownerKey, (c) => c.functions.putSecret({ path: { name: "hello", key: "TOKEN" }, payload: { value: "s" } }))).toEqual({ status: "ok", key: "TOKEN" })
    expect((await call(gw, ownerKey, (c) => c.functions.secrets({ path: { name: "hello" } }))).secrets.map((s) => s.key)).toEqual(["TOKEN"])
    expect(await call(gw, ownerKey, (c) => c.functions.deleteSecret({ path: { name: "hello", key: "TOKEN" } }))).toEqual({ status: "ok", key: "TOKEN" })
    expect((await call(gw, ownerKey, (c) => c.functions.logs({ path: { name: "hello" }, urlParams: {} }))).name).toBe("hello")
    // the socket route is a WebSocket: without an upgrade, the client hears why
    expectRefusal(await refusal(gw, ownerKey, (c) => c.invoke.ws({ path: { name: "hello" }, urlParams: {} })), 400, "BAD_REQUEST")
    expect(await call(gw, ownerKey, (c) => c.functions.remove({ path: { name: "hello" } }))).toEqual({ status: "deleted", name: "hello" })
    expectRefusal(await refusal(gw, ownerKey, (c) => c.functions.get({ path: { name: "hello" } })), 404, "NOT_FOUND")
  }, 60_000)

  it("has driven every endpoint of these families through the client", () => {
    expect(notCalled(["cache", "databases", "sql", "storage", "functions", "invoke"])).toEqual([])
  })
})

/** A small SQLite file with one table, made offline for the import. */
const sqliteFile = (): Uint8Array => {
  const file = path.join(mkdtempSync(path.join(testTmp(), "portico-client-import-")), "import.db")
  const db = new Database(file)
  db.exec("CREATE TABLE words (word TEXT); INSERT INTO words VALUES ('imported')")
  db.close()
  return new Uint8Array(readFileSync(file))
}

interface Device {
  readonly jwk: jose.JWK
  readonly id: string
  readonly sign: (text: string) => Promise<string>
}

const newDevice = async (): Promise<Device> => {
  const pair = await webcrypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])
  const jwk = (await webcrypto.subtle.exportKey("jwk", pair.publicKey)) as jose.JWK
  return {
    jwk,
    id: await jose.calculateJwkThumbprint(jwk),
    sign: async (text) =>
      Buffer.from(await webcrypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(text))).toString(
        "base64url"
      )
  }
}
