/**
 * Root-secret rotation through real gateways on one rqlite registry (docs/cluster.md, "Root-secret
 * rotation"): an operator rotates on node-a, node-b takes the new generation at once, node-to-node
 * calls work both ways, values sealed before still open and the cluster worker re-seals them,
 * an API key and a session made before still work, an older generation pushed is 409 and a
 * replayed push 403, a node stopped during a rotation catches up when it returns, and a node that
 * joins afterwards gets every generation.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { canonicalJson } from "../../src/layers/coordination/Coordination.js"
import { readLaterRootsSync } from "../../src/layers/secrets/RootFile.js"
import { makeSealer } from "../../src/layers/secrets/Sealer.js"
import { call, operatorToken as signInOperator } from "../support/client.js"
import { type Gateway, startGateway, testTmp } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { waitFor } from "../support/wait.js"

const fast = { PORTICO_NODE_HEARTBEAT_MS: "200", PORTICO_NODE_TTL_MS: "1500" }
const SECRET = "44".repeat(32)

describe("root-secret rotation on an rqlite registry", () => {
  let server: RqlitedServer
  let a: Gateway
  let b: Gateway
  let env: Record<string, string>
  let operatorToken: string
  let owner: string
  const operator = Wallet.createRandom()

  /** One column of the registry, read directly. */
  const registry = async (sql: string): Promise<Array<unknown>> => {
    const res = await fetch(`${server.url}/db/query?level=strong&q=${encodeURIComponent(sql)}`)
    const answer = (await res.json()) as { results: Array<{ values?: Array<Array<unknown>> }> }
    return (answer.results[0]?.values ?? []).map((row) => row[0])
  }
  /** A reencrypt call signed for node-b under the roots in `dataDir` (as Coordination.ts signs). */
  const signedPush = (dataDir: string, payload: unknown) => {
    const sealer = makeSealer([Buffer.from(SECRET, "hex"), ...readLaterRootsSync(dataDir)])
    const body = canonicalJson(payload)
    const time = String(Math.floor(Date.now() / 1000))
    const nonce = randomBytes(18).toString("base64url")
    const pathname = "/v1/internal/secrets/reencrypt"
    const text = ["POST", pathname, "node-b", time, nonce, createHash("sha256").update(body, "utf8").digest("hex")].join("\n")
    const headers = {
      "content-type": "application/json",
      "x-portico-coordination-mac": "v2=" + sealer.hashAt(sealer.generation(), "coordination-mac-v2", text),
      "x-portico-coordination-time": time,
      "x-portico-coordination-nonce": nonce
    }
    return () => fetch(b.url + pathname, { method: "POST", headers, body })
  }
  const rotate = () => a.request("POST", "/v1/operator/rotate-secrets", { token: operatorToken, json: {} })
  const queryOn = (gw: Gateway, database: string, sql: string) =>
    gw.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: database, query: sql } })

  beforeAll(async () => {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    server = await Effect.runPromise(startRqlited())
    env = { ...fast, PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: SECRET, PORTICO_OPERATORS: operator.address.toLowerCase() }
    a = await startGateway({ env: { ...env, PORTICO_NODE_ID: "node-a" } })
    b = await startGateway({ port: await Effect.runPromise(freePort), env: { ...env, PORTICO_NODE_ID: "node-b" } })
    operatorToken = await signInOperator(a, operator)
    owner = (await a.cli(["namespace", "create", "rotating"])).api_key
    // before any rotation: a node-local database on each node, a sealed push credential
    expect((await b.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "on_b" } })).status).toBe(201)
    expect((await a.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "on_a" } })).status).toBe(201)
    expect((await queryOn(a, "on_b", "CREATE TABLE t (v TEXT)")).status).toBe(200)
    expect((await queryOn(b, "on_a", "CREATE TABLE t (v TEXT)")).status).toBe(200)
    expect((await a.request("PUT", "/v1/push/config", { token: owner, json: { legacy_access_token: "before" } })).status).toBe(200)
    expect(await registry("SELECT sealed FROM push_credentials")).toEqual([expect.stringMatching(/^v1\./)])
  }, 90_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await Effect.runPromise(server?.stop ?? Effect.void)
  })

  it("rotates for operators only", async () => {
    const refused = await a.request("POST", "/v1/operator/rotate-secrets", { token: owner, json: {} })
    expect([refused.status, refused.body.code]).toEqual([403, "NOT_AN_OPERATOR"])
    expect(await registry("SELECT COUNT(*) FROM cluster_secrets")).toEqual([0])
  })

  it("rotates on node-a, node-b takes it at once, and calls between them work both ways", async () => {
    const rotated = await rotate()
    expect(rotated.status, rotated.text).toBe(200)
    expect(rotated.body).toEqual({ generation: 1, reached: ["node-b"], unreached: [] })
    for (const gw of [a, b]) expect(readLaterRootsSync(gw.dataDir)).toHaveLength(1)
    expect((fs.statSync(path.join(b.dataDir, "secret.keys")).mode & 0o777).toString(8)).toBe("600")
    expect(await registry("SELECT generation FROM cluster_secrets")).toEqual([1])
    expect((await queryOn(a, "on_b", "INSERT INTO t VALUES ('a to b')")).body).toMatchObject({ rows_affected: 1 })
    expect((await queryOn(b, "on_a", "INSERT INTO t VALUES ('b to a')")).body).toMatchObject({ rows_affected: 1 })
    // the API key and the operator's session made before the rotation, on both nodes
    for (const gw of [a, b]) expect((await gw.request("GET", "/v1/network/peers", { token: operatorToken })).status).toBe(200)
    const audit = await a.request("GET", "/v1/operator/audit", { token: operatorToken })
    expect(audit.body.entries.find((e: { action: string }) => e.action === "secrets.rotate")).toMatchObject({ target: "1" })
  }, 30_000)

  it("opens values sealed before, and the cluster worker re-seals them under the new generation", async () => {
    expect((await b.request("GET", "/v1/push/config", { token: owner })).body.fields.has_legacy_access_token).toBe(true)
    await waitFor(
      "registry values re-sealed under generation 1",
      async () => {
        const values = [...(await registry("SELECT sealed FROM push_credentials")), ...(await registry("SELECT sealed_private FROM signing_keys"))]
        return values.length >= 2 && values.every((v) => String(v).startsWith("v2.1."))
      },
      20_000
    )
    expect((await a.request("GET", "/v1/push/config", { token: owner })).body.fields.has_legacy_access_token).toBe(true)
  }, 30_000)

  it("refuses an older generation pushed (409), takes the same one as a no-op, and refuses a replayed push (403)", async () => {
    const older = await signedPush(a.dataDir, { generation: 0, sealed_root: "v1.x" })()
    expect([older.status, ((await older.json()) as { code: string }).code]).toEqual([409, "CONFLICT"])
    const same = signedPush(a.dataDir, { generation: 1, sealed_root: "v1.x" })
    const first = await same()
    expect([first.status, await first.json()]).toEqual([200, { generation: 1 }])
    const replayed = await same()
    expect([replayed.status, ((await replayed.json()) as { code: string }).code]).toEqual([403, "COORDINATION_REFUSED"])
    // a client's call without the MAC
    expect((await b.request("POST", "/v1/internal/secrets/reencrypt", { json: { generation: 2, sealed_root: "x" } })).status).toBe(403)
  })

  it("brings a node that was stopped during a rotation up to date when it returns", async () => {
    const port = b.port
    await b.stop()
    // through the typed client: the answer is the declared schema
    const rotated = await call(a, operatorToken, (c) => c.operator.rotateSecrets({ payload: {} }))
    // node-b is not reached (the membership may still list it for a moment: then it is unreached)
    expect([rotated.generation, rotated.reached]).toEqual([2, []])
    // re-sealed under generation 2 while node-b is away: it must open them at its start
    await waitFor("signing keys re-sealed under generation 2", async () => (await registry("SELECT sealed_private FROM signing_keys")).every((v) => String(v).startsWith("v2.2.")), 20_000)
    b = await startGateway({ port, dataDir: b.dataDir, env: { ...env, PORTICO_NODE_ID: "node-b" } })
    expect(readLaterRootsSync(b.dataDir)).toHaveLength(2)
    expect((await b.request("GET", "/v1/network/peers", { token: operatorToken })).status).toBe(200)
    expect((await b.request("GET", "/v1/push/config", { token: owner })).body.fields.has_legacy_access_token).toBe(true)
    await waitFor("node-b reachable from node-a", async () => (await queryOn(a, "on_b", "SELECT v FROM t")).status === 200, 10_000)
    expect((await queryOn(a, "on_b", "SELECT v FROM t")).body.rows).toEqual([["a to b"]])
    expect((await queryOn(b, "on_a", "SELECT v FROM t")).body.rows).toEqual([["b to a"]])
    // generation 1 is now older than node-b's
    const older = await signedPush(a.dataDir, { generation: 1, sealed_root: "v1.x" })()
    expect(older.status).toBe(409)
  }, 60_000)

  it("gives a node that joins after rotations every generation: it reads them from the registry as it starts", async () => {
    const invite = (await a.request("POST", "/v1/node/enroll", { token: operatorToken, json: {} })).body.invite as string
    const dataDir = fs.mkdtempSync(path.join(testTmp(), "portico-rotation-join-"))
    const c = await startGateway({ dataDir, args: ["--join", invite], env: { ...fast, PORTICO_NODE_ID: "node-c" } })
    try {
      expect(readLaterRootsSync(dataDir)).toHaveLength(2)
      expect((await c.request("GET", "/v1/push/config", { token: owner })).body.fields.has_legacy_access_token).toBe(true)
      expect((await queryOn(c, "on_b", "SELECT v FROM t")).body.rows).toEqual([["a to b"]])
    } finally {
      await c.stop()
    }
  }, 60_000)
})
