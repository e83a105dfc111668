/**
 * The cluster's membership through real gateways on one rqlite registry (docs/cluster.md,
 * "Membership"): gateways that know each other only through the registry (no PORTICO_PEERS) list
 * each other active, reach each other for node-to-node work, see a stopped node go inactive
 * within the TTL and come back when it restarts; a node id is bound to the key of the node that
 * first registered it; the node-to-node ping is refused to clients.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { derivedNodeId, stampHeaders } from "../../src/domain/NodeStamp.js"
import { call } from "../support/client.js"
import { type Gateway, startGateway } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { waitFor } from "../support/wait.js"

/** Heartbeats every 200 ms, inactive after 1.5 s: the test waits seconds, not minutes. */
const fast = { PORTICO_NODE_HEARTBEAT_MS: "200", PORTICO_NODE_TTL_MS: "1500" }

describe("cluster membership on an rqlite registry", () => {
  let server: RqlitedServer
  let a: Gateway
  let b: Gateway
  let env: Record<string, string>
  let operatorToken: string
  let owner: string
  const operator = Wallet.createRandom()

  const peersOn = async (gw: Gateway) => {
    const answer = await gw.request("GET", "/v1/network/peers", { token: operatorToken })
    expect(answer.status, answer.text).toBe(200)
    return answer.body as {
      node: string
      peers: Array<{ node: string; status: string; internal_url: string; public_url: string; self: boolean; seed: boolean; version: string; age_ms: number }>
    }
  }
  const statusOf = async (gw: Gateway, node: string) => (await peersOn(gw)).peers.find((p) => p.node === node)?.status

  beforeAll(async () => {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    server = await Effect.runPromise(startRqlited())
    env = { ...fast, PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: "33".repeat(32), PORTICO_OPERATORS: operator.address.toLowerCase() }
    a = await startGateway({ env: { ...env, PORTICO_NODE_ID: "node-a", PORTICO_PUBLIC_URL: "https://a.example" } })
    b = await startGateway({ port: await Effect.runPromise(freePort), env: { ...env, PORTICO_NODE_ID: "node-b" } })
    const challenged = await a.request("POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
    const verified = await a.request("POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await operator.signMessage(challenged.body.message) } })
    operatorToken = verified.body.access_token
    owner = (await a.cli(["namespace", "create", "members"])).api_key
  }, 90_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await Effect.runPromise(server?.stop ?? Effect.void)
  })

  it("lists every node active on every node, with its internal URL and version, without PORTICO_PEERS", async () => {
    for (const gw of [a, b]) {
      const answer = await peersOn(gw)
      expect(answer.node).toBe(gw === a ? "node-a" : "node-b")
      expect(answer.peers.map((p) => [p.node, p.status, p.self, p.seed])).toEqual([
        ["node-a", "active", gw === a, false],
        ["node-b", "active", gw === b, false]
      ])
      expect(answer.peers.find((p) => p.node === "node-b")?.internal_url).toBe(b.url)
      expect(answer.peers.map((p) => p.public_url)).toEqual(["https://a.example", ""])
      expect(answer.peers.every((p) => p.age_ms >= 0 && p.age_ms <= 1500 && p.version.length > 0)).toBe(true)
    }
    // the typed client reads the same
    expect((await call(a, operatorToken, (c) => c.network.peers())).peers.map((p) => p.node)).toEqual(["node-a", "node-b"])
    // an operator route: a namespace's key is not an operator's
    expect((await a.request("GET", "/v1/network/peers", { token: owner })).status).toBe(403)
    // the node-to-node ping is behind the coordination MAC
    const ping = await a.request("POST", "/v1/internal/ping", { json: {} })
    expect([ping.status, ping.body.code]).toEqual([403, "COORDINATION_REFUSED"])
  })

  it("reaches a node known only through the registry: a node-local database homed on b, queried through a", async () => {
    const created = await b.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "ledger" } })
    expect([created.status, created.body.home_node]).toEqual([201, "node-b"])
    const query = (sql: string) => a.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "ledger", query: sql } })
    expect((await query("CREATE TABLE t (v TEXT)")).status).toBe(200)
    expect((await query("INSERT INTO t VALUES ('through a')")).body).toMatchObject({ rows_affected: 1 })
    expect((await query("SELECT v FROM t")).body.rows).toEqual([["through a"]])
  })

  it("marks a killed node inactive within the TTL, refuses work homed there as unreachable, and takes it back when it restarts", async () => {
    const port = b.port
    process.kill(b.pid, "SIGKILL")
    await b.stop()
    await waitFor("node-b inactive on node-a", async () => (await statusOf(a, "node-b")) === "inactive", 10_000)
    const refused = await a.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "ledger", query: "SELECT 1" } })
    expect(refused.status, refused.text).toBe(503)
    b = await startGateway({ port, dataDir: b.dataDir, env: { ...env, PORTICO_NODE_ID: "node-b" } })
    await waitFor("node-b active again on node-a", async () => (await statusOf(a, "node-b")) === "active", 10_000)
    // node-a's forwarding reads the membership through a cache of up to 2 s: until it sees node-b
    // back, the answer is the retryable 503, never another
    const read = () => a.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "ledger", query: "SELECT v FROM t" } })
    await waitFor("the query through node-a reaches node-b again", async () => {
      const answer = await read()
      expect([200, 503], answer.text).toContain(answer.status)
      return answer.status === 200
    }, 10_000)
    expect((await read()).body.rows).toEqual([["through a"]])
  }, 60_000)

  it("binds a node id to the key of the node that registered it: another data directory cannot start as node-b", async () => {
    await expect(startGateway({ env: { ...env, PORTICO_NODE_ID: "node-b" } })).rejects.toThrow(/node-b is registered with another node's key/)
    // node-b itself is untouched
    expect(await statusOf(a, "node-b")).toBe("active")
  }, 60_000)

  describe("the loopback node routes, stamped with a node's key", () => {
    const keyOf = (privateKey: crypto.KeyObject) => (crypto.createPublicKey(privateKey).export({ format: "jwk" }) as { x: string }).x
    const stamped = (route: string, json: unknown, privateKey: crypto.KeyObject, nodeId: string, at = Date.now()) => {
      const body = JSON.stringify(json)
      const headers = stampHeaders(privateKey, { method: "POST", path: route, query: "", nodeId, body }, at)
      return { body, headers: { ...headers, "content-type": "application/json" } }
    }
    const post = (route: string, request: { body: string; headers: Record<string, string> }) => a.request("POST", route, request)

    it("enrols a key for the id it derives, once; a heartbeat before it is 404, a register after it makes the node active", async () => {
      const { privateKey } = crypto.generateKeyPairSync("ed25519")
      const id = derivedNodeId(keyOf(privateKey))
      expect((await post("/v1/internal/node/heartbeat", stamped("/v1/internal/node/heartbeat", {}, privateKey, id))).status).toBe(404)
      const enrolled = await post("/v1/internal/node/enrol-key", stamped("/v1/internal/node/enrol-key", { public_key: keyOf(privateKey) }, privateKey, id))
      expect([enrolled.status, enrolled.body]).toEqual([200, { node: id, public_key: keyOf(privateKey), enrolled: true }])
      const again = await post("/v1/internal/node/enrol-key", stamped("/v1/internal/node/enrol-key", { public_key: keyOf(privateKey) }, privateKey, id))
      expect([again.status, again.body.enrolled]).toEqual([200, false])
      // enrolled is not alive
      expect(await statusOf(a, id)).toBe("inactive")
      const registered = await post("/v1/internal/node/register", stamped("/v1/internal/node/register", { internal_url: "http://127.0.0.9:9", version: "0.0.1-agent", public_url: "https://agent.example" }, privateKey, id))
      expect([registered.status, registered.body]).toEqual([200, { node: id, status: "active", draining: false }])
      const listed = (await peersOn(a)).peers.find((p) => p.node === id)
      expect([listed?.status, listed?.internal_url, listed?.public_url, listed?.version]).toEqual(["active", "http://127.0.0.9:9", "https://agent.example", "0.0.1-agent"])
      const beat = await post("/v1/internal/node/heartbeat", stamped("/v1/internal/node/heartbeat", {}, privateKey, id))
      expect([beat.status, beat.body.node]).toEqual([200, id])
    })

    it("refuses what is not the node's own word: no stamp, another key, a stale time, a replay, another path's stamp, another node's id", async () => {
      const { privateKey } = crypto.generateKeyPairSync("ed25519")
      const other = crypto.generateKeyPairSync("ed25519").privateKey
      const id = derivedNodeId(keyOf(privateKey))
      const enrol = (signer: crypto.KeyObject, at?: number) => stamped("/v1/internal/node/enrol-key", { public_key: keyOf(privateKey) }, signer, id, at)
      const refusals: Array<[string, Promise<{ status: number; body: { code?: string } }>]> = [
        ["no stamp", a.request("POST", "/v1/internal/node/enrol-key", { json: { public_key: keyOf(privateKey) } })],
        ["signed by another key", post("/v1/internal/node/enrol-key", enrol(other))],
        ["two minutes old", post("/v1/internal/node/enrol-key", enrol(privateKey, Date.now() - 120_000))],
        ["a heartbeat's stamp on enrol-key", post("/v1/internal/node/enrol-key", { ...enrol(privateKey), headers: stamped("/v1/internal/node/heartbeat", { public_key: keyOf(privateKey) }, privateKey, id).headers })]
      ]
      for (const [why, answer] of refusals) {
        const got = await answer
        expect([why, got.status, got.body.code]).toEqual([why, 403, "COORDINATION_REFUSED"])
      }
      const once = enrol(privateKey)
      expect((await post("/v1/internal/node/enrol-key", once)).status).toBe(200)
      expect([(await post("/v1/internal/node/enrol-key", once)).status]).toEqual([403])
      // an id derived from another key, and a named id bound to node-b's key
      const foreign = await post("/v1/internal/node/enrol-key", stamped("/v1/internal/node/enrol-key", { public_key: keyOf(other) }, other, id))
      expect([foreign.status, foreign.body.code]).toEqual([409, "CONFLICT"])
      const nodeB = await post("/v1/internal/node/enrol-key", stamped("/v1/internal/node/enrol-key", { public_key: keyOf(other) }, other, "node-b"))
      expect([nodeB.status, nodeB.body.code]).toEqual([409, "CONFLICT"])
      // node-b's row is not written by a stamp of another key
      const forged = await post("/v1/internal/node/heartbeat", stamped("/v1/internal/node/heartbeat", {}, other, "node-b"))
      expect([forged.status, forged.body.code]).toEqual([403, "COORDINATION_REFUSED"])
      // the node's own key speaks for it
      const bKey = crypto.createPrivateKey(fs.readFileSync(path.join(b.dataDir, "node.key"), "utf8"))
      const own = await post("/v1/internal/node/heartbeat", stamped("/v1/internal/node/heartbeat", {}, bKey, "node-b"))
      expect([own.status, own.body.node]).toEqual([200, "node-b"])
    })
  })

  it("knows at once that a node stopped cleanly", async () => {
    await b.stop()
    expect(await statusOf(a, "node-b")).toBe("stopped")
  })
})
