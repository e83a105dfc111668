/**
 * Deleting a namespace (spec §4.9; docs/namespaces.md, "Deleting a namespace") on a real gateway:
 * a namespace with something in every capability is deleted, and each engine is then asked
 * directly that nothing of it is left (the registry's tables, the database files, the cluster SQL
 * store, the cache, the content engine), while content another namespace holds stays. Then the
 * crash: a gateway killed (SIGKILL) mid-deletion, with a second delete answered 409 while it ran,
 * is finished by the next start. Engines: the SQLite registry with the embedded cache; rqlite
 * (registry and the namespace's cluster SQL store) with the cache on Redis; and, inside the
 * loopback-only network namespace namespace-delete.cluster.test.ts starts, the same on Kubo and
 * IPFS Cluster.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { type HDNodeWallet, Wallet } from "ethers"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { Redis } from "ioredis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PorticoConfig, testSettings } from "../../src/layers/config/PorticoConfig.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { registryLayer } from "../../src/layers/registry/registryLayer.js"
import { NamespaceName } from "../../src/domain/Names.js"
import { call, expectRefusal, notCalled, refusal } from "../support/client.js"
import { newDevice } from "../support/device.js"
import { waitFor } from "../support/wait.js"
import { type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { hasRedisServer, type RedisServer, redisMissingMessage, startRedis } from "../support/redis.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { type StorageEngine, storageEngines } from "../support/storageEngines.js"
import { tarOf } from "../support/tarball.js"
import { newIdentity, pushBody } from "../support/vault.js"
import Database from "better-sqlite3"

/** A tar.gz of `files` made by GNU tar. */
const parse = (text: string) => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const form = async (gw: Gateway, route: string, token: string, data: FormData): Promise<Reply> => {
  const res = await fetch(gw.url + route, { method: "POST", body: data, headers: { authorization: `Bearer ${token}` } })
  const text = await res.text()
  return { status: res.status, headers: res.headers, text, body: parse(text) }
}

const ok = (reply: Reply, status = 200) => {
  expect(reply.status, reply.text).toBe(status)
  return reply.body
}

/** Registry tables keyed by a `namespace` column: every one must hold no row of a deleted namespace. */
const NAMESPACE_TABLES = [
  "members",
  "api_keys",
  "audit",
  "auth_challenges",
  "sessions",
  "devices",
  "device_requests",
  "local_databases",
  "local_database_backups",
  "content_refs",
  "fetch_caps",
  "ownership_offers",
  "push_credentials",
  "push_devices",
  "push_topics",
  "deployments",
  "portico_teardowns",
  "portico_teardown_parts",
  "webrtc_settings"
]

interface Setup {
  readonly label: string
  readonly registry: "sqlite" | "rqlite"
  readonly cache: "memory" | "redis"
  readonly storage: readonly [string, () => Promise<StorageEngine>]
}

const setups: Array<Setup> = storageEngines().flatMap(([name, start]): Array<Setup> => {
  const storage = [name, start] as const
  return name === "embedded"
    ? [
        { label: "sqlite registry, embedded cache and storage", registry: "sqlite", cache: "memory", storage },
        { label: "rqlite registry and cluster SQL, Redis cache, embedded storage", registry: "rqlite", cache: "redis", storage }
      ]
    : [{ label: `rqlite registry and cluster SQL, Redis cache, storage on the ${name} engine`, registry: "rqlite", cache: "redis", storage }]
})

// a describe per setup, named in full (describe.each's $label would be cut short, and -t reads the name)
for (const setup of setups) describe(`namespace deletion: ${setup.label}`, () => {
  let gw: Gateway
  let env: Record<string, string>
  let engine: StorageEngine
  let redis: RedisServer | undefined
  let redisClient: Redis | undefined
  const rqlites: Array<RqlitedServer> = []
  /** Namespaces whose cluster SQL store is an rqlite cluster of their own: its URL. */
  const sqlStores: Record<string, string> = {}
  let registry: ManagedRuntime.ManagedRuntime<RegistryStore, unknown>
  let keeperKey: string
  let keeperSession: string

  const rows = (sql: string, params: ReadonlyArray<string> = []) =>
    registry.runPromise(Effect.flatMap(RegistryStore, (r) => r.query({ sql, params })))

  /** Every registry row of `namespace` still there, by table (empty when none). */
  const leftInRegistry = async (namespace: string) => {
    const left: Record<string, number> = {}
    for (const table of NAMESPACE_TABLES) {
      const n = Number((await rows(`SELECT COUNT(*) AS n FROM ${table} WHERE namespace = ?`, [namespace]))[0]?.["n"])
      if (n > 0) left[table] = n
    }
    const ns = Number((await rows("SELECT COUNT(*) AS n FROM namespaces WHERE name = ?", [namespace]))[0]?.["n"])
    if (ns > 0) left["namespaces"] = ns
    return left
  }

  /** The namespace's cluster SQL store's tables, asked of its engine directly. */
  const clusterTables = async (namespace: string): Promise<ReadonlyArray<string>> => {
    const sqlStoreUrl = sqlStores[namespace]
    if (sqlStoreUrl === undefined) return fs.existsSync(path.join(gw.dataDir, "sql", `${namespace}.db`)) ? ["<file>"] : []
    const res = await fetch(`${sqlStoreUrl}/db/query?q=${encodeURIComponent("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}`)
    const answer = (await res.json()) as { results: Array<{ values?: Array<Array<string>> }> }
    return (answer.results[0]?.values ?? []).map((v) => v[0]!)
  }

  /** Cache entries of the namespace on Redis, scanned directly; on the embedded cache, a read through the gateway. */
  const redisKeys = async (namespace: string): Promise<number> => {
    if (redisClient === undefined) return 0
    const found = await redisClient.keys(`pc:${Buffer.byteLength(namespace)}:{${namespace}}:*`)
    return found.length
  }

  const fill = async (namespace: string, ownerWallet: HDNodeWallet, ownerKey: string) => {
    const post = (route: string, json: unknown, token = ownerKey) => gw.request("POST", route, { token, json })
    ok(await post("/v1/namespace/members", { wallet: Wallet.createRandom().address, role: "developer" }))
    ok(await post("/v1/namespace/keys", { profile: "runtime", label: "app" }), 201)
    // a device-bound session: a session, its refresh token and an enrolled device
    const device = await newDevice()
    const challenge = ok(await gw.request("POST", "/v1/auth/challenge", { json: { wallet: ownerWallet.address, namespace, device_id: device.id } }))
    const verified = ok(
      await gw.request("POST", "/v1/auth/verify", {
        json: {
          message: challenge.message,
          signature: await ownerWallet.signMessage(challenge.message),
          device_key: device.jwk,
          device_signature: await device.sign(challenge.message)
        }
      })
    )
    const session: string = verified.access_token
    ok(await post("/v1/cache/put", { dmap: "m", key: "k", value: { kept: false } }))
    ok(await post("/v1/cache/put", { dmap: "other", key: "k2", value: 2 }))
    ok(await post("/v1/db/sqlite/create", { database_name: "notes" }), 201)
    ok(await post("/v1/db/sqlite/query", { database_name: "notes", query: "CREATE TABLE t (x)" }))
    ok(await post("/v1/rqlite/create-table", { schema: "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)" }))
    ok(await post("/v1/rqlite/exec", { sql: "INSERT INTO items (name) VALUES ('a')" }))
    // uploads are a signed-in user's (or a deployed app's)
    const uploadBytes = async (bytes: string, token = session) => {
      const data = new FormData()
      data.append("file", new Blob([bytes]), "f.txt")
      return ok(await form(gw, "/v1/storage/upload", token, data)).Cid as string
    }
    const own = await uploadBytes(`only ${namespace}'s ${Math.random()}`)
    const shared = await uploadBytes(`shared with keeper ${namespace}`)
    expect(await uploadBytes(`shared with keeper ${namespace}`, keeperSession)).toBe(shared)
    ok(await gw.request("PUT", "/v1/namespace/push-credentials/legacy_push", { token: ownerKey, json: { access_token: "expo-access" } }))
    ok(await post("/v1/push/devices", { device_id: "phone", provider: "legacy_push", token: "ExponentPushToken[abc]" }, session))
    ok(await post("/v1/push/topics", { topic_secret: "ab".repeat(16), provider: "legacy_push", token: "ExponentPushToken[def]" }))
    const site = new FormData()
    site.append("name", "site")
    site.append("archive", new Blob([tarOf({ "index.html": `<h1>${namespace}</h1>` })]), "site.tar.gz")
    const deployment = ok(await form(gw, "/v1/deployments/static/upload", ownerKey, site), 201)
    ok(await post("/v1/namespace/webrtc/enable", {}))
    ok(await post("/v1/vault/push", pushBody(newIdentity(), 1, new Uint8Array(Buffer.from(`${namespace}'s backup`)))))
    expect(vaultShares(namespace)).toBe(1)
    // every capability holds something now
    const before = await leftInRegistry(namespace)
    for (const table of ["members", "api_keys", "audit", "sessions", "devices", "local_databases", "content_refs", "push_credentials", "push_devices", "push_topics", "deployments", "webrtc_settings"]) {
      expect(before[table], `${table} filled`).toBeGreaterThan(0)
    }
    expect(await clusterTables(namespace)).not.toEqual([])
    if (redisClient !== undefined) expect(await redisKeys(namespace)).toBe(2)
    expect(await engine.holds(gw, own)).toBe(true)
    return { own, shared, session, deploymentId: deployment.id as string }
  }

  /** The namespace's vault shares this node's guardian holds (docs/vault.md: its own store, not the registry). */
  const vaultShares = (namespace: string): number => {
    const db = new Database(path.join(gw.dataDir, "vault.db"), { readonly: true })
    try {
      return (db.prepare("SELECT COUNT(*) AS n FROM shares WHERE namespace = ?").get(namespace) as { n: number }).n
    } finally {
      db.close()
    }
  }

  /** Nothing of `namespace` is left on any engine; `shared` (also keeper's) stays. */
  const expectGone = async (namespace: string, filled: { own: string; shared: string; deploymentId: string }) => {
    expect(await leftInRegistry(namespace)).toEqual({})
    for (const table of ["deployment_versions", "deployment_events"]) {
      expect(await rows(`SELECT deployment_id FROM ${table} WHERE deployment_id = ?`, [filled.deploymentId])).toEqual([])
    }
    expect(await clusterTables(namespace)).toEqual([])
    expect(vaultShares(namespace)).toBe(0)
    expect(fs.existsSync(path.join(gw.dataDir, "databases", namespace, "notes.db"))).toBe(false)
    expect(await redisKeys(namespace)).toBe(0)
    expect(await rows("SELECT cid FROM content_pins WHERE cid = ?", [filled.own])).toEqual([])
    expect(await engine.holds(gw, filled.own)).toBe(false)
    // content another namespace holds stays, pinned and readable
    expect(await rows("SELECT cid FROM content_pins WHERE cid = ?", [filled.shared])).toHaveLength(1)
    expect(await engine.holds(gw, filled.shared)).toBe(true)
    expect((await gw.request("GET", `/v1/storage/get/${filled.shared}`, { token: keeperSession })).status).toBe(200)
  }

  beforeAll(async () => {
    env = {}
    if (setup.registry === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      const [reg, doomed, crashy] = await Promise.all([1, 2, 3].map(() => Effect.runPromise(startRqlited())))
      rqlites.push(reg!, doomed!, crashy!)
      env["PORTICO_RQLITE_URL"] = reg!.url
      sqlStores["doomed"] = doomed!.url
      sqlStores["crashy"] = crashy!.url
      env["PORTICO_SQL_RQLITE_URLS"] = `doomed=${doomed!.url},crashy=${crashy!.url}`
    }
    if (setup.cache === "redis") {
      if (!hasRedisServer()) throw new Error(redisMissingMessage())
      redis = await Effect.runPromise(startRedis({ maxmemory: "16mb" }))
      env["PORTICO_REDIS_URL"] = redis.url
      redisClient = new Redis(redis.url)
      // the last test stops the server: the client's reconnection errors are expected
      redisClient.on("error", () => {})
    }
    engine = await setup.storage[1]()
    Object.assign(env, engine.env)
    gw = await startGateway({ env })
    const keeperWallet = Wallet.createRandom()
    keeperKey = (await gw.cli(["namespace", "create", "keeper", "--owner", keeperWallet.address])).api_key
    keeperSession = await plainSession(gw, "keeper", keeperWallet)
    const settings = testSettings(
      gw.dataDir,
      setup.registry === "rqlite" ? { registry: { engine: "rqlite", url: env["PORTICO_RQLITE_URL"]!, user: undefined, password: undefined } } : {}
    )
    registry = ManagedRuntime.make(registryLayer(settings).pipe(Layer.provide(PorticoConfig.layer(settings))))
  }, 180_000)

  afterAll(async () => {
    await registry?.dispose()
    await gw?.stop()
    redisClient?.disconnect()
    if (redis !== undefined) await Effect.runPromise(redis.stop)
    for (const r of rqlites) await Effect.runPromise(r.stop)
    await engine?.stop()
  })

  it("removes everything the namespace holds on every engine, is idempotent, and the name can be created again", async () => {
    const wallet = Wallet.createRandom()
    const ownerKey: string = (await gw.cli(["namespace", "create", "doomed", "--owner", wallet.address])).api_key
    const filled = await fill("doomed", wallet, ownerKey)
    // the confirmation must name the caller's own namespace
    expectRefusal(await refusal(gw, ownerKey, (c) => c.namespaceDelete.deleteNamespace({ payload: { namespace: "keeper" } })), 400, "VALIDATION_FAILED")
    const deleted = await gw.request("POST", "/v1/namespace/delete", { token: ownerKey, json: { namespace: "doomed" } })
    expect(deleted.body, deleted.text).toEqual({ namespace: "doomed", deleted: true, cleanup_pending: false })
    await expectGone("doomed", filled)
    // its credentials are gone with it
    expect((await gw.request("POST", "/v1/cache/get", { token: ownerKey, json: { dmap: "m", key: "k" } })).status).toBe(401)
    expect((await gw.request("GET", "/v1/namespace/members", { token: filled.session })).status).toBe(401)
    // created again: empty
    const again: string = (await gw.cli(["namespace", "create", "doomed", "--owner", wallet.address])).api_key
    expect((await gw.request("POST", "/v1/cache/get", { token: again, json: { dmap: "m", key: "k" } })).status).toBe(404)
    expect((await gw.request("GET", "/v1/db/sqlite/list", { token: again })).body.databases).toEqual([])
    expect((await gw.request("GET", "/v1/deployments/list", { token: again })).body.deployments).toEqual([])
    const items = await gw.request("POST", "/v1/rqlite/query", { token: again, json: { sql: "SELECT * FROM items" } })
    // on either engine a fresh, empty store: no table of the old one
    expect(items.text).toContain("no such table")
    // the re-created namespace's store takes writes at once (the gateway does not remember the old file)
    const fresh = await gw.request("POST", "/v1/rqlite/create-table", { token: again, json: { schema: "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)" } })
    expect(fresh.status, fresh.text).toBe(200)
    const written = await gw.request("POST", "/v1/rqlite/exec", { token: again, json: { sql: "INSERT INTO items (name) VALUES ('b')" } })
    expect(written.status, written.text).toBe(200)
    // and deleted again (through the typed client): idempotent, nothing owed
    expect(await call(gw, again, (c) => c.namespaceDelete.deleteNamespace({ payload: { namespace: "doomed" } }))).toEqual({
      namespace: "doomed",
      deleted: true,
      cleanup_pending: false
    })
    expect(await leftInRegistry("doomed")).toEqual({})
  }, 180_000)

  if (setup.registry === "sqlite")
    it("answers 500 NAMESPACE_DELETE_FAILED when the deletion cannot be recorded, and removes nothing", async () => {
      const exec = (sql: string) => registry.runPromise(Effect.flatMap(RegistryStore, (r) => r.exec({ sql, params: [] })))
      const wallet = Wallet.createRandom()
      const ownerKey: string = (await gw.cli(["namespace", "create", "stubborn", "--owner", wallet.address])).api_key
      ok(await gw.request("POST", "/v1/cache/put", { token: ownerKey, json: { dmap: "m", key: "k", value: 1 } }))
      ok(await gw.request("POST", "/v1/db/sqlite/create", { token: ownerKey, json: { database_name: "kept" } }), 201)
      // the registry refuses the deletion's record
      await exec("CREATE TRIGGER refuse_teardowns BEFORE INSERT ON portico_teardowns BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
      try {
        const refused = await gw.request("POST", "/v1/namespace/delete", { token: ownerKey, json: { namespace: "stubborn" } })
        expect(refused.status, refused.text).toBe(500)
        expect(refused.body.code).toBe("NAMESPACE_DELETE_FAILED")
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
        // nothing was removed: the key, the cache entry and the database still answer
        expect((await gw.request("POST", "/v1/cache/get", { token: ownerKey, json: { dmap: "m", key: "k" } })).status).toBe(200)
        expect((await gw.request("GET", "/v1/db/sqlite/list", { token: ownerKey })).body.databases.map((d: any) => d.name)).toEqual(["kept"])
        expect(await rows("SELECT namespace FROM portico_teardowns WHERE namespace = 'stubborn'")).toEqual([])
      } finally {
        await exec("DROP TRIGGER refuse_teardowns")
      }
      // the retry the answer asks for succeeds
      expect(ok(await gw.request("POST", "/v1/namespace/delete", { token: ownerKey, json: { namespace: "stubborn" } }))).toEqual({
        namespace: "stubborn",
        deleted: true,
        cleanup_pending: false
      })
      expect(await leftInRegistry("stubborn")).toEqual({})
    }, 60_000)

  it("answers 409 to a second delete while one runs, and a gateway killed mid-deletion finishes it at its next start", async () => {
    await gw.stop()
    // each part waits 1.5 s first, so the deletion can be caught running
    gw = await startGateway({ env: { ...env, PORTICO_TEARDOWN_PART_DELAY_MS: "1500" }, dataDir: gw.dataDir })
    const wallet = Wallet.createRandom()
    const ownerKey: string = (await gw.cli(["namespace", "create", "crashy", "--owner", wallet.address])).api_key
    const filled = await fill("crashy", wallet, ownerKey)
    for (let i = 0; i < 5; i++) ok(await gw.request("POST", "/v1/db/sqlite/create", { token: ownerKey, json: { database_name: `db${i}` } }), 201)
    const first = gw.request("POST", "/v1/namespace/delete", { token: ownerKey, json: { namespace: "crashy" } }).catch(() => undefined)
    // recorded (its access goes after the first pause): a second delete finds it running
    await waitFor("the deletion's record", async () => (await rows("SELECT 1 AS x FROM portico_teardowns WHERE namespace = 'crashy'")).length > 0)
    const second = await gw.request("POST", "/v1/namespace/delete", { token: ownerKey, json: { namespace: "crashy" } })
    expect(second.status, second.text).toBe(409)
    expect(second.body.code).toBe("NAMESPACE_DELETE_IN_PROGRESS")
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThan(0)
    expectRefusal(await refusal(gw, ownerKey, (c) => c.namespaceDelete.deleteNamespace({ payload: { namespace: "crashy" } })), 409, "NAMESPACE_DELETE_IN_PROGRESS")
    // some parts done, some owed: killed
    await waitFor("two parts done", async () => (await rows("SELECT 1 AS x FROM portico_teardown_parts WHERE namespace = 'crashy' AND done_at IS NOT NULL")).length >= 2)
    process.kill(gw.pid, "SIGKILL")
    await first
    const owed = await rows("SELECT part FROM portico_teardown_parts WHERE namespace = 'crashy' AND done_at IS NULL")
    expect(owed.length).toBeGreaterThan(0)
    expect(await leftInRegistry("crashy")).toHaveProperty("namespaces", 1)
    // the name stays taken while the deletion is owed, for the CLI too
    await expect(gw.cli(["namespace", "create", "crashy"])).rejects.toThrow(/NAMESPACE_TEARDOWN_PENDING/)
    // the next start finishes it
    gw = await startGateway({ env, dataDir: gw.dataDir })
    await waitFor("the deletion finished at start", async () => Object.keys(await leftInRegistry("crashy")).length === 0, 60_000)
    await expectGone("crashy", filled)
    for (let i = 0; i < 5; i++) expect(fs.existsSync(path.join(gw.dataDir, "databases", "crashy", `db${i}.db`))).toBe(false)
    // and the name is free again
    expect((await gw.cli(["namespace", "create", "crashy"])).api_key).toMatch(/./)
  }, 240_000)

  it("lets an operator remove a namespace with a reason, audited; reserved names and namespace credentials refused", async () => {
    const operator = Wallet.createRandom()
    await gw.cli(["operator", "add", operator.address])
    const operatorSession = await realmSession(gw, operator)
    const wallet = Wallet.createRandom()
    const ownerKey: string = (await gw.cli(["namespace", "create", "evicted", "--owner", wallet.address])).api_key
    const filled = await fill("evicted", wallet, ownerKey)
    const remove = (token: string, json: unknown) => gw.request("POST", "/v1/operator/namespaces/remove", { token, json })
    // the namespace's own owner key is no operator credential
    const removeTyped = (token: string, namespace: string, reason: string) =>
      refusal(gw, token, (c) => c.namespaceDelete.removeNamespace({ payload: { namespace: NamespaceName.make(namespace), reason } }))
    expectRefusal(await removeTyped(ownerKey, "evicted", "self"), 403, "NOT_AN_OPERATOR")
    expectRefusal(await removeTyped(operatorSession, "lobby", "no"), 403, "FORBIDDEN")
    for (const body of [{ namespace: "evicted" }, { namespace: "evicted", reason: "" }, { namespace: "Bad Name", reason: "x" }]) {
      expect((await remove(operatorSession, body)).status).toBe(400)
    }
    const removed = await remove(operatorSession, { namespace: "evicted", reason: "abuse report 42" })
    expect(removed.body, removed.text).toEqual({ namespace: "evicted", deleted: true, cleanup_pending: false })
    await expectGone("evicted", filled)
    // idempotent, and audited each time
    expect(
      await call(gw, operatorSession, (c) => c.namespaceDelete.removeNamespace({ payload: { namespace: NamespaceName.make("evicted"), reason: "again" } }))
    ).toEqual({ namespace: "evicted", deleted: true, cleanup_pending: false })
    const audit = await gw.request("GET", "/v1/operator/audit?limit=200", { token: operatorSession })
    const removals = (audit.body.entries as Array<{ action: string; target: string; detail: { reason: string } }>).filter(
      (e) => e.action === "namespace.remove" && e.target === "evicted"
    )
    expect(removals.map((e) => e.detail.reason).sort()).toEqual(["abuse report 42", "again"])
    // every endpoint of the group answered through the typed client, its answers and refusals decoded
    expect(notCalled(["namespaceDelete"])).toEqual([])
  }, 180_000)

  // a running app (the real sandbox, as root): its namespace's deletion stops it and frees its host
  if (setup.registry === "sqlite") it("stops a namespace's running Node.js app, removes its directory, and its host answers 404", async () => {
    const ownerKey: string = (await gw.cli(["namespace", "create", "appns"])).api_key
    const app = new FormData()
    app.append("name", "api")
    app.append("skip_install", "true")
    const source = 'require("node:http").createServer((q, r) => r.end("up")).listen(Number(process.env.PORT))'
    app.append("archive", new Blob([tarOf({ "index.js": source })]), "app.tar.gz")
    const created = ok(await form(gw, "/v1/deployments/nodejs/upload", ownerKey, app), 201)
    expect((await onHost(gw.port, created.domain, "/")).status).toBe(200)
    expect(fs.existsSync(path.join(gw.dataDir, "deployments", "appns-api"))).toBe(true)
    expect((await gw.request("POST", "/v1/namespace/delete", { token: ownerKey, json: { namespace: "appns" } })).body).toEqual({
      namespace: "appns",
      deleted: true,
      cleanup_pending: false
    })
    expect((await onHost(gw.port, created.domain, "/")).status).toBe(404)
    expect(fs.existsSync(path.join(gw.dataDir, "deployments", "appns-api"))).toBe(false)
    // nothing listens on the app's port any more
    await expect(fetch(`http://127.0.0.1:${created.port}/`)).rejects.toThrow()
    expect(await leftInRegistry("appns")).toEqual({})
  }, 120_000)

  // last: it stops and replaces the Redis server
  if (setup.cache === "redis") it("answers cleanup_pending when a part fails, and retries it in the background until done", async () => {
    const wallet = Wallet.createRandom()
    const ownerKey: string = (await gw.cli(["namespace", "create", "flaky", "--owner", wallet.address])).api_key
    ok(await gw.request("POST", "/v1/cache/put", { token: ownerKey, json: { dmap: "m", key: "k", value: 1 } }))
    ok(await gw.request("POST", "/v1/db/sqlite/create", { token: ownerKey, json: { database_name: "d" } }), 201)
    // the cache engine goes away (pub/sub's too, on the same Redis): their parts cannot be removed
    const port = redis!.port
    await Effect.runPromise(redis!.stop)
    const deleted = await gw.request("POST", "/v1/namespace/delete", { token: ownerKey, json: { namespace: "flaky" } })
    expect(deleted.body, deleted.text).toEqual({ namespace: "flaky", deleted: false, cleanup_pending: true })
    // owed and recorded: the other parts are done, the name stays taken
    const owed = await rows("SELECT part, attempts, last_error FROM portico_teardown_parts WHERE namespace = 'flaky' AND done_at IS NULL")
    expect(owed.map((r) => r["part"])).toEqual(["cache", "pubsub"])
    expect(String(owed[0]?.["last_error"])).toMatch(/cache/)
    expect(fs.existsSync(path.join(gw.dataDir, "databases", "flaky", "d.db"))).toBe(false)
    expect(await rows("SELECT namespace FROM portico_teardowns WHERE namespace = 'flaky'")).toHaveLength(1)
    // the engine comes back on its address: the background retry finishes the deletion
    const dir = fs.mkdtempSync(path.join(testTmp(), "redis-again-"))
    const again = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", "--maxmemory", "16mb", "--maxmemory-policy", "allkeys-lru"], { stdio: "ignore" })
    try {
      await waitFor("the background retry", async () => Object.keys(await leftInRegistry("flaky")).length === 0, 90_000)
      expect(await gw.cli(["namespace", "create", "flaky"])).toHaveProperty("namespace", "flaky")
    } finally {
      again.kill("SIGKILL")
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)
})

/** A GET with a `Host` of our choosing (fetch will not send one): a deployed app's host. */
const onHost = (port: number, host: string, urlPath: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "GET", path: urlPath, headers: { host }, agent: false }, (res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on("error", reject)
    req.end()
  })

/** A wallet's plain (not device-bound) session in `namespace`: its access token. */
const plainSession = async (gw: Gateway, namespace: string, wallet: HDNodeWallet): Promise<string> => {
  const challenge = ok(await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address, namespace } }))
  const verified = ok(await gw.request("POST", "/v1/auth/verify", { json: { message: challenge.message, signature: await wallet.signMessage(challenge.message) } }))
  return verified.access_token
}

/** A wallet's session in the platform realm (a challenge naming no namespace): how operators sign in. */
const realmSession = async (gw: Gateway, wallet: HDNodeWallet): Promise<string> => {
  const challenge = ok(await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address } }))
  const verified = ok(await gw.request("POST", "/v1/auth/verify", { json: { message: challenge.message, signature: await wallet.signMessage(challenge.message) } }))
  return verified.access_token
}
