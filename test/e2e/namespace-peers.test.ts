/**
 * A namespace across two gateways (docs/namespaces.md, "Deleting a namespace"; docs/operators.md,
 * "Health and telemetry"): node-a and node-b share one rqlite registry and name each other in
 * PORTICO_PEERS, each with its own embedded cache. A deletion asked of both at once runs once and
 * leaves nothing in either gateway's cache; a peer that cannot be asked (killed, not stopped
 * cleanly) keeps the cache part owed (the name stays pending) until it answers; the operator's telemetry snapshot carries every
 * peer's own snapshot, or says which one did not answer.
 */
import { Effect } from "effect"
import { type HDNodeWallet, Wallet } from "ethers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { waitFor } from "../support/wait.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const ok = (reply: Reply, status = 200) => {
  expect(reply.status, reply.text).toBe(status)
  return reply.body
}

/** A wallet's session in the platform realm (a challenge naming no namespace). */
const realmSession = async (gw: Gateway, wallet: HDNodeWallet): Promise<string> => {
  const challenge = ok(await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address } }))
  return ok(await gw.request("POST", "/v1/auth/verify", { json: { message: challenge.message, signature: await wallet.signMessage(challenge.message) } }))
    .access_token
}

/** The first `event: snapshot` of the telemetry stream, parsed. */
const firstSnapshot = async (gw: Gateway, token: string): Promise<any> => {
  const controller = new AbortController()
  const response = await fetch(`${gw.url}/v1/operator/telemetry/stream?interval=2`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (!/event: snapshot\ndata: [^\n]*\n\n/.test(text)) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  controller.abort()
  return JSON.parse(/event: snapshot\ndata: ([^\n]*)\n\n/.exec(text)![1]!)
}

describe("a namespace across two gateways, each with its own embedded cache", () => {
  let server: RqlitedServer
  let a: Gateway
  let b: Gateway
  let portB: number
  let env: Record<string, string>
  const operator = Wallet.createRandom()
  let operatorSession: string

  const startB = (dataDir?: string) =>
    startGateway({ port: portB, env: { ...env, PORTICO_NODE_ID: "node-b", PORTICO_PEERS: `node-a=${a.url}` }, ...(dataDir === undefined ? {} : { dataDir }) })

  /** Rows of `namespace` in the registry's namespace and deletion tables. */
  const registryRows = async (namespace: string) => {
    const q = async (sql: string) => {
      const res = await fetch(`${server.url}/db/query?level=strong&q=${encodeURIComponent(sql)}`)
      const answer = (await res.json()) as { results: Array<{ values?: Array<Array<unknown>> }> }
      return Number(answer.results[0]?.values?.[0]?.[0] ?? 0)
    }
    const name = namespace.replace(/'/g, "")
    return (
      (await q(`SELECT COUNT(*) FROM namespaces WHERE name = '${name}'`)) +
      (await q(`SELECT COUNT(*) FROM portico_teardowns WHERE namespace = '${name}'`)) +
      (await q(`SELECT COUNT(*) FROM api_keys WHERE namespace = '${name}'`))
    )
  }

  beforeAll(async () => {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    server = await Effect.runPromise(startRqlited())
    const portA = await Effect.runPromise(freePort)
    portB = await Effect.runPromise(freePort)
    env = { PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: "22".repeat(32) }
    a = await startGateway({ port: portA, env: { ...env, PORTICO_NODE_ID: "node-a", PORTICO_PEERS: `node-b=http://127.0.0.1:${portB}` } })
    b = await startB()
    await a.cli(["operator", "add", operator.address])
    operatorSession = await realmSession(a, operator)
  }, 120_000)

  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await Effect.runPromise(server?.stop ?? Effect.void)
  })

  it("the telemetry snapshot carries each peer's own snapshot, or why it is missing", async () => {
    const snapshot = await firstSnapshot(a, operatorSession)
    expect(snapshot).toMatchObject({ node: "node-a", status: "ok" })
    expect(snapshot.peers).toHaveLength(1)
    expect(snapshot.peers[0]).toMatchObject({ node: "node-b", reachable: true, status: "ok", registry_engine: "rqlite" })
    expect(snapshot.peers[0].memory_rss_bytes).toBeGreaterThan(0)
    // a gateway naming a peer that does not run, and one at another node's address
    const dead = await Effect.runPromise(freePort)
    const c = await startGateway({
      env: { ...env, PORTICO_NODE_ID: "node-c", PORTICO_PEERS: `node-a=${a.url},node-gone=http://127.0.0.1:${dead},node-z=${b.url}` }
    })
    try {
      const seen = await firstSnapshot(c, await realmSession(c, operator))
      const byNode = Object.fromEntries(seen.peers.map((p: any) => [p.node, p]))
      expect(byNode["node-a"]).toMatchObject({ reachable: true, node: "node-a" })
      expect(byNode["node-gone"]).toMatchObject({ reachable: false })
      expect(typeof byNode["node-gone"].error).toBe("string")
      // node-b refuses a MAC addressed to node-z: named, not relayed
      expect(byNode["node-z"]).toMatchObject({ reachable: false })
    } finally {
      await c.stop()
    }
    // never a client's route: a call without the cluster's MAC is refused
    for (const path of ["/v1/internal/telemetry", "/v1/internal/operator/snapshot"]) {
      const forged = await fetch(`${b.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
      expect(forged.status).toBe(403)
    }
  }, 90_000)

  it("a deletion asked of both gateways at once runs once and leaves nothing in either cache", async () => {
    const owner = Wallet.createRandom()
    const key: string = (await a.cli(["namespace", "create", "twin", "--owner", owner.address])).api_key
    ok(await a.request("POST", "/v1/cache/put", { token: key, json: { dmap: "m", key: "on-a", value: "a" } }))
    ok(await b.request("POST", "/v1/cache/put", { token: key, json: { dmap: "m", key: "on-b", value: "b" } }))
    // each gateway's cache is its own
    expect((await a.request("POST", "/v1/cache/get", { token: key, json: { dmap: "m", key: "on-b" } })).status).toBe(404)
    const [viaA, viaB] = await Promise.all(
      [a, b].map((gw) => gw.request("POST", "/v1/namespace/delete", { token: key, json: { namespace: "twin" } }))
    )
    const answers = [viaA!, viaB!]
    expect(answers.some((r) => r.status === 200 && r.body.cleanup_pending === false), answers.map((r) => r.text).join(" | ")).toBe(true)
    // the other found it running (409), found its key gone already (401), or found it done (200)
    for (const r of answers) expect([200, 401, 409], r.text).toContain(r.status)
    await waitFor("the deletion of twin", async () => (await registryRows("twin")) === 0, 60_000)
    // created again: neither gateway holds the old entries
    const again: string = (await a.cli(["namespace", "create", "twin", "--owner", owner.address])).api_key
    for (const gw of [a, b]) {
      for (const k of ["on-a", "on-b"]) {
        expect((await gw.request("POST", "/v1/cache/get", { token: again, json: { dmap: "m", key: k } })).status, `${k} on ${gw.url}`).toBe(404)
      }
    }
  }, 90_000)

  it("a peer that cannot be asked keeps the cache part owed, and the name pending, until it answers", async () => {
    const owner = Wallet.createRandom()
    const key: string = (await a.cli(["namespace", "create", "solo", "--owner", owner.address])).api_key
    ok(await b.request("POST", "/v1/cache/put", { token: key, json: { dmap: "m", key: "k", value: 1 } }))
    const dataDirB = b.dataDir
    // killed, not stopped: a node that did not stop cleanly may come back with its cache
    process.kill(b.pid, "SIGKILL")
    await b.stop()
    const deleted = ok(await a.request("POST", "/v1/namespace/delete", { token: key, json: { namespace: "solo" } }))
    expect(deleted).toEqual({ namespace: "solo", deleted: false, cleanup_pending: true })
    const operatorCreate = await a.request("POST", "/v1/namespaces", { token: operatorSession, json: { name: "solo" } })
    expect(operatorCreate.status, operatorCreate.text).toBe(409)
    expect(operatorCreate.body.code).toBe("NAMESPACE_TEARDOWN_PENDING")
    expect(Number(operatorCreate.headers.get("retry-after"))).toBeGreaterThan(0)
    // node-b is back: the background retry asks it and finishes
    b = await startB(dataDirB)
    await waitFor("the owed deletion of solo", async () => (await registryRows("solo")) === 0, 90_000)
    const created = await a.request("POST", "/v1/namespaces", { token: operatorSession, json: { name: "solo" } })
    expect(created.status, created.text).toBe(201)
  }, 180_000)

  it("a backup taken on one gateway holds the databases homed on the other, asked of their home node", async () => {
    const owner = Wallet.createRandom()
    const key: string = (await a.cli(["namespace", "create", "spread", "--owner", owner.address])).api_key
    const dstKey: string = (await a.cli(["namespace", "create", "gathered", "--owner", owner.address])).api_key
    // one database homed on each gateway
    for (const [gw, name] of [[a, "on_a"], [b, "on_b"]] as const) {
      ok(await gw.request("POST", "/v1/db/sqlite/create", { token: key, json: { database_name: name } }), 201)
      ok(await gw.request("POST", "/v1/db/sqlite/query", { token: key, json: { database_name: name, query: "CREATE TABLE t (v TEXT)" } }))
      ok(await gw.request("POST", "/v1/db/sqlite/query", { token: key, json: { database_name: name, query: "INSERT INTO t VALUES (?)", params: [`made on ${name}`] } }))
    }
    const restoreKey = ok(await a.request("GET", "/v1/namespace/restore-key", { token: key })).public_key as string
    const taken = await fetch(`${a.url}/v1/namespace/backup`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ public_key: restoreKey })
    })
    expect(taken.status).toBe(200)
    const archive = Buffer.from(await taken.arrayBuffer())
    const restored = await fetch(`${a.url}/v1/namespace/restore`, {
      method: "POST",
      headers: { authorization: `Bearer ${dstKey}`, "content-type": "application/octet-stream" },
      body: archive
    })
    const answer = JSON.parse(await restored.text())
    expect(restored.status, JSON.stringify(answer)).toBe(200)
    expect(answer.databases).toBe(2)
    for (const name of ["on_a", "on_b"]) {
      const rows = ok(await a.request("POST", "/v1/db/sqlite/query", { token: dstKey, json: { database_name: name, query: "SELECT v FROM t" } }))
      expect(JSON.stringify(rows)).toContain(`made on ${name}`)
    }
    // the copy route answers only a genuine call of the cluster
    const forged = await fetch(`${b.url}/v1/internal/sqlite/copy`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
    expect(forged.status).toBe(403)
  }, 90_000)
})
