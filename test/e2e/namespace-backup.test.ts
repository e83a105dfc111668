/**
 * Namespace backup and restore over HTTP (spec §4.9, docs/namespaces.md "Backup and restore"), on
 * both registry engines (rqlite: the registry and each namespace's cluster SQL store on real
 * rqlited processes). A namespace is filled (node-local databases, cluster SQL rows, stored
 * content, members, rate limit, CORS origins), backed up sealed to the gateway's restore key, and
 * restored into a second, empty namespace, which then answers the same data. A byte changed, an
 * archive sealed to another key, a namespace not empty, a caller not the owner and the caps are
 * refused, and a refused restore leaves the namespace as empty as it was.
 */
import { x25519 } from "@noble/curves/ed25519"
import { Effect } from "effect"
import { Wallet } from "ethers"
import Database from "better-sqlite3"
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { writeEntries } from "../../src/layers/namespaces/backup/ArchiveEntries.js"
import { open, seal } from "../../src/layers/namespaces/backup/SealedStream.js"
import { type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body?.code, reply.text).toBe(code)
  expect(reply.text).not.toMatch(/\/tmp\/|\/work\/|at .*\.ts:\d+|node_modules/)
}

type Signer = { readonly address: string; readonly signMessage: (m: string) => Promise<string> }
const signIn = async (gw: Gateway, namespace: string, wallet: Signer): Promise<string> => {
  const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address, namespace } })
  expect(c.status, c.text).toBe(200)
  const v = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await wallet.signMessage(c.body.message) } })
  expect(v.status, v.text).toBe(200)
  return v.body.access_token
}

const backup = async (gw: Gateway, token: string, publicKey: string) => {
  const res = await fetch(gw.url + "/v1/namespace/backup", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ public_key: publicKey })
  })
  const bytes = Buffer.from(await res.arrayBuffer())
  return { status: res.status, headers: res.headers, bytes, json: () => JSON.parse(bytes.toString("utf8")) }
}

const restore = async (gw: Gateway, token: string, archive: Uint8Array): Promise<Reply> => {
  const res = await fetch(gw.url + "/v1/namespace/restore", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" },
    body: archive
  })
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: res.status, headers: res.headers, text, body }
}

const upload = async (gw: Gateway, token: string, bytes: Uint8Array, name: string) => {
  const form = new FormData()
  form.append("name", name)
  form.append("file", new Blob([bytes]), "blob.bin")
  const res = await fetch(gw.url + "/v1/storage/upload", { method: "POST", body: form, headers: { authorization: `Bearer ${token}` } })
  expect(res.status).toBe(200)
  return (await res.json()) as { Cid: string }
}

describe.each(["embedded", "rqlite"] as const)("namespace backup and restore on %s engines", (engine) => {
  let gw: Gateway
  const servers: Array<RqlitedServer> = []
  const owner = Wallet.createRandom()
  const member = Wallet.createRandom()
  const keys: Record<string, string> = {}
  let session: string
  let cids: Array<string> = []
  const blobs = [randomBytes(300_000), Buffer.from("a small file")]

  const post = (route: string, json: unknown, token: string) => gw.request("POST", route, { token, json })
  const create = async (name: string) => {
    keys[name] = (await gw.cli(["namespace", "create", name, "--owner", owner.address])).api_key
  }
  /** What a namespace answers: databases with their rows, SQL tables with rows, members, settings. */
  const snapshot = async (ns: string) => {
    const token = keys[ns]!
    const dbs = (await gw.request("GET", "/v1/db/sqlite/list", { token })).body
    const rows = await post("/v1/db/sqlite/query", { database_name: "app", query: "SELECT * FROM notes ORDER BY id" }, token)
    const other = await post("/v1/db/sqlite/query", { database_name: "second", query: "SELECT * FROM t" }, token)
    const sql = await post("/v1/rqlite/query", { sql: "SELECT * FROM orders ORDER BY id" }, token)
    const members = (await gw.request("GET", "/v1/namespace/members", { token })).body
    const rate = (await gw.request("GET", "/v1/namespace/rate-limit", { token })).body
    const cors = (await gw.request("GET", "/v1/namespace/cors", { token })).body
    return {
      databases: (dbs.databases ?? dbs.items ?? []).map((d: any) => d.name).sort(),
      rows: rows.body,
      other: other.body,
      sql: sql.body,
      members: members.members.map((m: any) => ({ wallet: m.wallet, role: m.role })),
      rate: { rps: rate.requests_per_second, burst: rate.burst, source: rate.source },
      cors: cors.origins
    }
  }

  let env: Record<string, string>

  beforeAll(async () => {
    env = { PORTICO_BACKUP_MAX_PINS: "2", PORTICO_BACKUP_MAX_BYTES: String(3 * 1024 * 1024) }
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      for (let i = 0; i < 4; i++) servers.push(await Effect.runPromise(startRqlited()))
      env["PORTICO_RQLITE_URL"] = servers[0]!.url
      env["PORTICO_SQL_RQLITE_URLS"] = `bksrc=${servers[1]!.url},bkdst=${servers[2]!.url},bkround=${servers[3]!.url}`
    }
    gw = await startGateway({ env })
    for (const ns of ["bksrc", "bkdst", "bkfull", "bkbig", "bkround", "bkforge"]) await create(ns)
    const src = keys["bksrc"]!
    expect((await post("/v1/db/sqlite/create", { database_name: "app" }, src)).status).toBe(201)
    expect((await post("/v1/db/sqlite/create", { database_name: "second" }, src)).status).toBe(201)
    await post("/v1/db/sqlite/query", { database_name: "app", query: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, n REAL)" }, src)
    for (let i = 0; i < 50; i++) {
      await post("/v1/db/sqlite/query", { database_name: "app", query: "INSERT INTO notes (body, n) VALUES (?, ?)", params: [`note ${i} ✓`, i / 3] }, src)
    }
    await post("/v1/db/sqlite/query", { database_name: "second", query: "CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)" }, src)
    await post("/v1/db/sqlite/query", { database_name: "second", query: "INSERT INTO t VALUES ('a', x'00ff10')" }, src)
    expect((await post("/v1/rqlite/create-table", { schema: "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, qty INTEGER)" }, src)).status).toBe(200)
    for (let i = 0; i < 20; i++) await post("/v1/rqlite/exec", { sql: "INSERT INTO orders (item, qty) VALUES (?, ?)", args: [`item-${i}`, i] }, src)
    expect((await post("/v1/namespace/members", { wallet: member.address, role: "developer" }, src)).status).toBeLessThan(300)
    expect((await gw.request("PUT", "/v1/namespace/rate-limit", { token: src, json: { requests_per_second: 77, burst: 99 } })).status).toBe(200)
    expect((await gw.request("PUT", "/v1/namespace/cors", { token: src, json: { origins: ["https://app.example"] } })).status).toBe(200)
    session = await signIn(gw, "bksrc", owner)
    cids = []
    for (const [i, blob] of blobs.entries()) cids.push((await upload(gw, session, blob, `file-${i}`)).Cid)
  }, 180_000)

  afterAll(async () => {
    expect(await gw?.stop()).toBe(0)
    for (const s of servers) await Effect.runPromise(s.stop)
  })

  let archive: Buffer
  let restoreKey: string

  it("answers the restore key, and a backup sealed to it that only that key opens", async () => {
    const key = await gw.request("GET", "/v1/namespace/restore-key", { token: keys["bksrc"] })
    expect(key.status, key.text).toBe(200)
    expect(key.body.algorithm).toBe("X25519")
    expect(Buffer.from(key.body.public_key, "base64").toString("hex")).toBe(key.body.public_key_hex)
    restoreKey = key.body.public_key
    const sealed = await backup(gw, keys["bksrc"]!, restoreKey)
    expect(sealed.status).toBe(200)
    expect(sealed.headers.get("content-type")).toBe("application/octet-stream")
    expect(Number(sealed.headers.get("content-length"))).toBe(sealed.bytes.length)
    archive = sealed.bytes
    // no database row or SQL text travels in clear
    expect(archive.includes(Buffer.from("note 1"))).toBe(false)
    expect(archive.includes(Buffer.from("item-1"))).toBe(false)
    // a key of the caller's own opens its own backup (hex accepted as well)
    const mine = x25519.utils.randomPrivateKey()
    const own = await backup(gw, keys["bksrc"]!, Buffer.from(x25519.getPublicKey(mine)).toString("hex"))
    expect(own.status).toBe(200)
    const parts: Array<Uint8Array> = []
    for await (const p of open(mine, (async function* () { yield own.bytes })())) parts.push(p)
    const plain = Buffer.concat(parts)
    expect(plain.includes(Buffer.from("portico-namespace-backup"))).toBe(true)
    expect(plain.includes(Buffer.from("SQLite format 3\0"))).toBe(true)
  })

  it("refuses a tampered archive and one sealed to another key, writing nothing", async () => {
    const dst = keys["bkdst"]!
    for (const at of [5, 60, Math.floor(archive.length / 2), archive.length - 3]) {
      const changed = Buffer.from(archive)
      changed[at] = changed[at]! ^ 0x40
      expectError(await restore(gw, dst, changed), 400, "BAD_REQUEST")
    }
    expectError(await restore(gw, dst, archive.subarray(0, archive.length - 100)), 400, "BAD_REQUEST")
    const other = x25519.getPublicKey(x25519.utils.randomPrivateKey())
    const wrong = await backup(gw, keys["bksrc"]!, Buffer.from(other).toString("base64"))
    expect(wrong.status).toBe(200)
    expectError(await restore(gw, dst, wrong.bytes), 400, "BAD_REQUEST")
    expectError(await restore(gw, dst, Buffer.from("not an archive at all")), 400, "BAD_REQUEST")
    // nothing was written
    expect((await gw.request("GET", "/v1/db/sqlite/list", { token: dst })).body.databases ?? []).toEqual([])
    expect((await gw.request("GET", "/v1/rqlite/schema", { token: dst })).body.tables).toEqual([])
    expect((await gw.request("GET", "/v1/namespace/members", { token: dst })).body.members.length).toBe(1)
  })

  it("refuses a caller who is not the owner (403) and a bad public key (400)", async () => {
    const admin = (await post("/v1/namespace/keys", { profile: "admin" }, keys["bksrc"]!)).body.api_key
    expect((await backup(gw, admin, restoreKey)).status).toBe(403)
    expect((await restore(gw, admin, archive)).status).toBe(403)
    for (const bad of ["", "00", "zz".repeat(32), Buffer.alloc(32).toString("hex")]) {
      const refused = await backup(gw, keys["bksrc"]!, bad)
      expect(refused.status).toBe(400)
      expect(refused.json().code).toBe("VALIDATION_FAILED")
    }
  })

  it("restores into an empty namespace, which then answers the same data; a second restore is 409", async () => {
    const before = await snapshot("bksrc")
    const restored = await restore(gw, keys["bkdst"]!, archive)
    expect(restored.status, restored.text).toBe(200)
    expect(restored.body).toEqual({ status: "ok", databases: 2, members: 1, pins: 2, cluster_tables: 1 })
    const after = await snapshot("bkdst")
    expect(after).toEqual(before)
    expect(after.rows.rows.length).toBe(50)
    expect(after.sql.rows?.length ?? after.sql.values?.length ?? after.sql.results?.[0]?.values?.length).toBe(20)
    // the pinned content is the destination's now: its owner reads it
    const dstSession = await signIn(gw, "bkdst", owner)
    for (const [i, cid] of cids.entries()) {
      const res = await fetch(`${gw.url}/v1/storage/get/${cid}`, { headers: { authorization: `Bearer ${dstSession}` } })
      expect(res.status).toBe(200)
      expect(Buffer.from(await res.arrayBuffer()).equals(blobs[i]!)).toBe(true)
    }
    expectError(await restore(gw, keys["bkdst"]!, archive), 409, "NAMESPACE_NOT_EMPTY")
    // and the source still has all of it
    expect(await snapshot("bksrc")).toEqual(before)
  })

  it("refuses a backup over the pin cap or the byte cap (413)", async () => {
    const full = keys["bkfull"]!
    const fullSession = await signIn(gw, "bkfull", owner)
    for (let i = 0; i < 3; i++) await upload(gw, fullSession, randomBytes(100 + i), `p${i}`)
    const pins = await backup(gw, full, restoreKey)
    expect(pins.status).toBe(413)
    expect(pins.json().code).toBe("PAYLOAD_TOO_LARGE")
    const big = keys["bkbig"]!
    await post("/v1/db/sqlite/create", { database_name: "big" }, big)
    await post("/v1/db/sqlite/query", { database_name: "big", query: "CREATE TABLE b (v BLOB)" }, big)
    for (let i = 0; i < 4; i++) await post("/v1/db/sqlite/query", { database_name: "big", query: "INSERT INTO b VALUES (randomblob(1000000))" }, big)
    const bytes = await backup(gw, big, restoreKey)
    expect(bytes.status).toBe(413)
    expect(bytes.json().code).toBe("PAYLOAD_TOO_LARGE")
    // a restore body over the sealed size of the byte cap is refused before it is opened
    expectError(await restore(gw, keys["bkbig"]!, Buffer.alloc(4 * 1024 * 1024, 1)), 413, "PAYLOAD_TOO_LARGE")
    // the slot was given back each time: a backup right after is answered
    expect((await backup(gw, keys["bksrc"]!, restoreKey)).status).toBe(200)
  })

  it("shares the transfer slot with exports: a restore being sent makes an export wait (429), and frees it when cut", async () => {
    const dst = keys["bkforge"]!
    const req = http.request(gw.url + "/v1/namespace/restore", {
      method: "POST",
      headers: { authorization: `Bearer ${dst}`, "content-type": "application/octet-stream", "transfer-encoding": "chunked" }
    })
    req.on("error", () => {})
    req.write(archive.subarray(0, 1000))
    await new Promise((r) => setTimeout(r, 500))
    const busy = await gw.request("GET", "/v1/rqlite/export", { token: keys["bksrc"] })
    expect(busy.status, busy.text).toBe(429)
    expect(busy.body.code).toBe("RATE_LIMITED")
    expect(busy.headers.get("retry-after")).not.toBeNull()
    req.destroy()
    let status = 0
    for (let i = 0; i < 50 && status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100))
      status = (await gw.request("GET", "/v1/rqlite/export", { token: keys["bksrc"] })).status
    }
    expect(status).toBe(200)
  })

  it("round-trips through deletion: backup, delete, create, restore gives back the same data; content gone since is refused first", async () => {
    let key = keys["bkround"]!
    await post("/v1/db/sqlite/create", { database_name: "app" }, key)
    await post("/v1/db/sqlite/query", { database_name: "app", query: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)" }, key)
    for (let i = 0; i < 10; i++) await post("/v1/db/sqlite/query", { database_name: "app", query: "INSERT INTO notes (body) VALUES (?)", params: [`r${i}`] }, key)
    await post("/v1/rqlite/create-table", { schema: "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)" }, key)
    await post("/v1/rqlite/exec", { sql: "INSERT INTO kv VALUES ('a', 'b')" }, key)
    await post("/v1/namespace/members", { wallet: member.address, role: "reader" }, key)
    const roundSession = await signIn(gw, "bkround", owner)
    // the same bytes bksrc pins: content that outlives this namespace's deletion
    const shared = (await upload(gw, roundSession, blobs[1]!, "shared")).Cid
    expect(shared).toBe(cids[1])
    const lonely = (await upload(gw, roundSession, randomBytes(5000), "lonely")).Cid
    const withLonely = await backup(gw, key, restoreKey)
    expect(withLonely.status).toBe(200)
    const unpinned = await fetch(`${gw.url}/v1/storage/unpin/${lonely}?immediate=true`, { method: "DELETE", headers: { authorization: `Bearer ${roundSession}` } })
    expect(unpinned.status).toBe(200)
    const archived = await backup(gw, key, restoreKey)
    expect(archived.status).toBe(200)
    const read = async () => ({
      rows: (await post("/v1/db/sqlite/query", { database_name: "app", query: "SELECT * FROM notes ORDER BY id" }, key)).body,
      sql: (await post("/v1/rqlite/query", { sql: "SELECT * FROM kv" }, key)).body,
      members: (await gw.request("GET", "/v1/namespace/members", { token: key })).body.members.map((m: any) => [m.wallet, m.role])
    })
    const before = await read()

    const deleted = await post("/v1/namespace/delete", { namespace: "bkround" }, key)
    expect(deleted.body, deleted.text).toMatchObject({ deleted: true, cleanup_pending: false })
    await create("bkround")
    key = keys["bkround"]!
    // the lonely content was evicted with its last pin: refused before anything is written
    expectError(await restore(gw, key, withLonely.bytes), 409, "CONFLICT")
    expect((await gw.request("GET", "/v1/db/sqlite/list", { token: key })).body.databases).toEqual([])
    // no table (embedded: no store file at all since the deletion, which the store answers 404)
    const schema = await gw.request("GET", "/v1/rqlite/schema", { token: key })
    expect(schema.status === 404 ? [] : schema.body.tables, schema.text).toEqual([])
    const restored = await restore(gw, key, archived.bytes)
    expect(restored.status, restored.text).toBe(200)
    expect(restored.body).toMatchObject({ databases: 1, members: 1, pins: 1, cluster_tables: 1 })
    expect(await read()).toEqual(before)
    const res = await fetch(`${gw.url}/v1/storage/get/${shared}`, { headers: { authorization: `Bearer ${await signIn(gw, "bkround", owner)}` } })
    expect(Buffer.from(await res.arrayBuffer()).equals(blobs[1]!)).toBe(true)
  })

  it("takes an archive it did not write only without content another namespace holds", async () => {
    // an archive anyone can seal to the restore key: right format, no attestation of this gateway
    const file = path.join(mkdtempSync(path.join(testTmp(), "portico-forge-")), "empty.db")
    const db = new Database(file)
    db.exec("PRAGMA user_version = 1")
    db.close()
    const sqlFile = readFileSync(file)
    const forged = async (pins: ReadonlyArray<unknown>) => {
      const json = (kind: "manifest" | "registry" | "pins", value: unknown) => {
        const bytes = Buffer.from(JSON.stringify(value))
        return { kind, name: "", size: bytes.length, bytes: async function* () { yield bytes } }
      }
      const entries = [
        json("manifest", { format: "portico-namespace-backup", version: 1, namespace: "elsewhere", created_at: Date.now(), node: "x", databases: 0, pins: pins.length }),
        json("registry", { settings: { rate_limit_rps: null, rate_limit_burst: null, cors_origins: [] }, members: [], databases: [] }),
        { kind: "cluster-sql" as const, name: "", size: sqlFile.length, bytes: async function* () { yield sqlFile } },
        json("pins", pins)
      ]
      const parts: Array<Uint8Array> = []
      for await (const p of seal(Buffer.from(restoreKey, "base64"), writeEntries(entries, () => Buffer.alloc(43, 65)))) parts.push(p)
      return Buffer.concat(parts)
    }
    const stolen = await forged([{ cid: cids[0], name: "mine now", size: blobs[0]!.length, created_at: 1 }])
    expectError(await restore(gw, keys["bkforge"]!, stolen), 409, "CONFLICT")
    const harmless = await restore(gw, keys["bkforge"]!, await forged([]))
    expect(harmless.status, harmless.text).toBe(200)
    expect(harmless.body).toEqual({ status: "ok", databases: 0, members: 0, pins: 0, cluster_tables: 0 })
  })

  // last: the gateway is killed and started again
  if (engine === "embedded")
    it("takes back, at the next start, a restore the gateway was killed in the middle of", async () => {
      await create("bkcrash")
      await gw.stop()
      // a pause before the registry batch: the store loaded and the files placed, nothing registered
      gw = await startGateway({ env: { ...env, PORTICO_RESTORE_PAUSE_MS: "60000" }, dataDir: gw.dataDir })
      const key = keys["bkcrash"]!
      const dbDir = path.join(gw.dataDir, "databases", "bkcrash")
      const storeFile = path.join(gw.dataDir, "sql", "bkcrash.db")
      const running = restore(gw, key, archive).catch(() => undefined)
      const until = Date.now() + 30_000
      while (!(existsSync(path.join(dbDir, "app.db")) && existsSync(path.join(dbDir, "second.db")) && existsSync(storeFile))) {
        if (Date.now() > until) throw new Error("the restore never placed its files")
        await new Promise((r) => setTimeout(r, 50))
      }
      process.kill(gw.pid, "SIGKILL")
      await running
      // the next start takes the writes back: no database file, no store, nothing registered
      gw = await startGateway({ env, dataDir: gw.dataDir })
      expect(existsSync(path.join(dbDir, "app.db"))).toBe(false)
      expect(existsSync(path.join(dbDir, "second.db"))).toBe(false)
      expect((await gw.request("GET", "/v1/db/sqlite/list", { token: key })).body.databases).toEqual([])
      // the store as it was: no table (or no store at all, which it answers 404)
      const schema = await gw.request("GET", "/v1/rqlite/schema", { token: key })
      expect(schema.status === 404 ? [] : schema.body.tables, schema.text).toEqual([])
      expect(gw.logs()).toContain("a restore stopped half way was taken back")
      // so the namespace is empty, and the restore can be made again
      const again = await restore(gw, key, archive)
      expect(again.status, again.text).toBe(200)
      expect(again.body).toEqual({ status: "ok", databases: 2, members: 1, pins: 2, cluster_tables: 1 })
    }, 120_000)
})
