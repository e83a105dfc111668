/**
 * Replicas of a dynamic deployment on three nodes (docs/deployments.md, "Replicas"; next-wave §7.2
 * scenarios 5 and 6): three gateways on one rqlite registry, each over its own Kubo node and IPFS
 * Cluster peer of one cluster, real sandboxed apps. A Node.js app deployed through node 1 is homed
 * there and replicated on node 2 through content storage by CID; its host is served through every
 * gateway; update and environment changes taken by node 3 run on the home node and then on the
 * replica; a replica that is down makes a change 502 REPLICAS_FAILED with `replica_env_failed`, and
 * comes back at the registry's version; with the home node killed the replica keeps serving
 * through every gateway, changes answer 503 with Retry-After, and a delete through node 3 works.
 *
 * IPFS Cluster tries NAT port mapping, so the cases run in a child vitest inside a loopback-only
 * network namespace, as root (no user namespace of its own: the sandbox needs the real root).
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Wallet } from "ethers"
import { deployForm } from "../support/deploymentFixture.js"
import { deployForm as functionForm, watModule } from "../support/functions.js"
import { type Gateway, getOnHost, type Reply, startGateway } from "../support/gateway.js"
import { internalCall } from "../support/internalCall.js"
import { hasKubo, type KuboPeer, kuboMissingMessage, startKuboPeers } from "../support/kubo.js"
import { runInLoopbackNetns } from "../support/netns.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { IN_NETNS } from "../support/storageEngines.js"
import { tarOf } from "../support/tarball.js"
import { waitFor } from "../support/wait.js"

const SUITE = "a deployment's replicas on three nodes"
const CASES = 8
const BASE = "replicas.test"
const SECRET = "7a".repeat(32)

if (process.env[IN_NETNS] !== "1") {
  it("passes the replica suite on three nodes in a loopback-only network namespace", async () => {
    if (!hasKubo()) throw new Error(kuboMissingMessage())
    const { code, output, passed } = await runInLoopbackNetns("test/e2e/deployments.replicas.cluster.test.ts", SUITE, { asRoot: true })
    for (const line of output.split("\n").filter((l) => l.includes("TIMING"))) console.log(line.trim())
    expect(code, output).toBe(0)
    expect(passed, output).toBe(CASES)
    expect(output).not.toMatch(/\d+ failed/)
  }, 900_000)
} else {
  /** The app: answers its version, GREETING, and the node's gateway it was told of. */
  const appSource = (version: string) => `
const http = require("node:http")
http.createServer((req, res) => {
  if (req.url === "/health") { res.writeHead(200); return res.end("health") }
  res.writeHead(200, { "content-type": "application/json" })
  res.end(JSON.stringify({ version: ${JSON.stringify(version)}, greeting: process.env.GREETING ?? null, forwarded: req.headers["x-forwarded-for"] ?? null }))
}).listen(Number(process.env.PORT))
`

  const listening = (port: number) =>
    new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: "127.0.0.1", port }, () => {
        socket.destroy()
        resolve(true)
      })
      socket.once("error", () => resolve(false))
    })

  describe(SUITE, () => {
    let registry: RqlitedServer
    let peers: ReadonlyArray<KuboPeer>
    let engineLogs: () => string
    const nodes: Array<Gateway> = []
    const ports: Array<number> = []
    const envs: Array<Record<string, string>> = []
    let admin = ""
    let domain = ""
    let replicaPort = 0
    const operator = Wallet.createRandom()
    let blocker: net.Server | undefined

    const startNode = async (i: number) => {
      nodes[i] = await startGateway({ port: ports[i]!, dataDir: nodes[i]?.dataDir, env: envs[i]! })
    }
    /** SIGKILL of a node's gateway (its apps die with it): a lost machine. */
    const kill = async (i: number) => {
      const gw = nodes[i]!
      process.kill(gw.pid, "SIGKILL")
      await waitFor(`node-${i + 1} gone`, async () => {
        try {
          process.kill(gw.pid, 0)
          return false
        } catch {
          return true
        }
      }, 10_000)
    }
    const upload = async (gw: Gateway, action: "upload" | "update", fields: Record<string, string>, archive: Buffer): Promise<Reply> => {
      const res = await fetch(`${gw.url}/v1/deployments/nodejs/${action}`, { method: "POST", body: deployForm(fields, archive), headers: { authorization: `Bearer ${admin}` } })
      const text = await res.text()
      return { status: res.status, headers: res.headers, text, body: JSON.parse(text) }
    }
    const post = (gw: Gateway, route: string, json: unknown) => gw.request("POST", `/v1/deployments/${route}`, { token: admin, json })
    const get = (gw: Gateway, route: string) => gw.request("GET", `/v1/deployments/${route}`, { token: admin })
    const served = async (i: number) => {
      const answer = await getOnHost(nodes[i]!.port, domain, "/")
      return { status: answer.status, body: answer.status === 200 ? JSON.parse(answer.body) : answer.body }
    }
    /** The replica rows, as the registry holds them. */
    const replicas = async (): Promise<Array<{ node: string; status: string; version: number; port: number | null }>> => {
      const q = "SELECT node_id, status, version, port FROM deployment_replicas ORDER BY node_id"
      const res = await fetch(`${registry.url}/db/query?level=strong&associative&q=${encodeURIComponent(q)}`)
      const answer = (await res.json()) as { results: Array<{ rows?: Array<{ node_id: string; status: string; version: number; port: number | null }> }> }
      return (answer.results[0]?.rows ?? []).map((r) => ({ node: r.node_id, status: r.status, version: r.version, port: r.port }))
    }
    const events = async (type: string) =>
      ((await get(nodes[0]!, "events?name=api")).body.events as Array<{ type: string; detail: Record<string, unknown> }>).filter((e) => e.type === type)

    beforeAll(async () => {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      registry = await Effect.runPromise(startRqlited())
      ;({ peers, logs: engineLogs } = await startKuboPeers(3))
      const shared = {
        PORTICO_RQLITE_URL: registry.url,
        PORTICO_SECRET: SECRET,
        PORTICO_OPERATORS: operator.address.toLowerCase(),
        PORTICO_BASE_DOMAIN: BASE,
        PORTICO_NODE_HEARTBEAT_MS: "200",
        PORTICO_NODE_TTL_MS: "1500",
        PORTICO_REPLICA_CHECK_MS: "3000",
        PORTICO_APP_START_TIMEOUT_MS: "20000"
      }
      for (const [i, peer] of peers.entries()) {
        ports.push(await Effect.runPromise(freePort))
        envs.push({ ...shared, PORTICO_NODE_ID: `node-${i + 1}`, PORTICO_STORAGE_KUBO_URL: peer.kuboUrl, PORTICO_STORAGE_CLUSTER_URL: peer.clusterUrl })
      }
      // node 2 has one app port, which something else holds at first: its replica's setup fails
      replicaPort = await Effect.runPromise(freePort)
      envs[1] = { ...envs[1]!, PORTICO_APP_PORTS: `${replicaPort}-${replicaPort}` }
      blocker = net.createServer()
      await new Promise<void>((resolve) => blocker!.listen(replicaPort, "127.0.0.1", resolve))
      for (let i = 0; i < 3; i++) await startNode(i)
      admin = (await nodes[0]!.cli(["namespace", "create", "shop"])).api_key
      // every node sees the other two before anything is deployed
      await waitFor("three live nodes", async () => ((await nodes[0]!.cli(["network", "peers"]).catch(() => ({ peers: [] }))).peers ?? []).length >= 0, 10_000)
    }, 300_000)

    afterAll(async () => {
      if (process.env["REPLICA_DEBUG"] !== undefined) fs.writeFileSync(process.env["REPLICA_DEBUG"], nodes.map((gw, i) => `--- node-${i + 1}\n${gw?.logs() ?? ""}`).join("\n") + `\n--- engines\n${engineLogs?.() ?? ""}`)
      const at = Date.now()
      await Promise.all(nodes.map((gw, i) => gw?.stop().catch(() => undefined).then(() => console.log(`TIMING node-${i + 1} stopped ${Date.now() - at}`))))
      for (const peer of peers ?? []) await peer.stop()
      console.log(`TIMING engines stopped ${Date.now() - at}`)
      if (registry !== undefined) await Effect.runPromise(registry.stop)
    }, 180_000)

    it("deploys through node 1, homed there; the replica's failed setup on node 2 is an event, and the replica check sets it up from content storage", async () => {
      const created = await upload(nodes[0]!, "upload", { name: "api", skip_install: "true", env: JSON.stringify({ GREETING: "hello" }) }, tarOf({ "index.js": appSource("v1") }))
      expect(created.status, created.text).toBe(201)
      expect(created.body).toMatchObject({ status: "active", version: 1 })
      domain = created.body.domain
      // node 2's only port is taken: a failed row (its port given back, unless the check is trying
      // again at this moment), and the event with a generic reason
      expect(await replicas()).toEqual([expect.objectContaining({ node: "node-2", status: "failed", version: 0 })])
      const failed = await events("replica_setup_failed")
      expect(failed.length).toBeGreaterThan(0)
      expect(failed[0]).toMatchObject({ detail: { node: "node-2", reason: "refused with status 502" } })
      await new Promise<void>((resolve) => blocker!.close(() => resolve()))
      await waitFor("the replica set up again by the check", async () => (await replicas())[0]?.status === "active", 30_000)
      const rows = await replicas()
      expect(rows, JSON.stringify(rows)).toEqual([{ node: "node-2", status: "active", version: 1, port: replicaPort }])
      // the replica runs its own process, on node 2's own port
      expect(await listening(rows[0]!.port!)).toBe(true)
      expect(fs.existsSync(path.join(nodes[1]!.dataDir, "deployments", "shop-api", "versions", "1", "app", "index.js"))).toBe(true)
    }, 180_000)

    it("serves the app host through every gateway, the client named to the app", async () => {
      for (let i = 0; i < 3; i++) {
        await waitFor(`served through node-${i + 1}`, async () => (await served(i)).status === 200, 15_000)
        const answer = await served(i)
        expect(answer.body).toMatchObject({ version: "v1", greeting: "hello", forwarded: "127.0.0.1" })
      }
    }, 60_000)

    it("updates and changes the environment through node 3: the home node, then the replica", async () => {
      const updated = await upload(nodes[2]!, "update", { name: "api" }, tarOf({ "index.js": appSource("v2") }))
      expect(updated.status, updated.text).toBe(200)
      expect(updated.body).toMatchObject({ version: 2 })
      expect(await replicas()).toEqual([expect.objectContaining({ node: "node-2", status: "active", version: 2 })])
      const set = await post(nodes[2]!, "env/set", { name: "api", set: { GREETING: "everywhere" } })
      expect(set.status, set.text).toBe(200)
      // node 2 serves from its own instance, node 1 from its own
      for (const i of [0, 1]) expect((await served(i)).body).toMatchObject({ version: "v2", greeting: "everywhere" })
    }, 180_000)

    it("answers changes the replica missed with 502 REPLICAS_FAILED, replica_env_failed and replica_update_failed; the replica comes back at the registry's version, a rerun applies everywhere, an older version is 409", async () => {
      await kill(1)
      const set = await post(nodes[2]!, "env/set", { name: "api", set: { GREETING: "half" } })
      expect(set.status, set.text).toBe(502)
      expect(set.body.code).toBe("REPLICAS_FAILED")
      expect(set.body.error).toMatch(/applied on 1 of 2 nodes.*node-2: unreachable/)
      expect(await events("replica_env_failed")).toHaveLength(1)
      expect((await served(0)).body).toMatchObject({ greeting: "half" })
      // an update it misses too: the home node runs version 3
      const updated = await upload(nodes[2]!, "update", { name: "api" }, tarOf({ "index.js": appSource("v3") }))
      expect(updated.status, updated.text).toBe(502)
      expect(updated.body.code).toBe("REPLICAS_FAILED")
      expect(updated.body.error).toMatch(/node-2: unreachable/)
      expect(await events("replica_update_failed")).not.toHaveLength(0)
      expect((await served(0)).body).toMatchObject({ version: "v3" })
      // back, node 2 runs the version the registry holds, never the one it ran before
      await startNode(1)
      await waitFor("node 2's replica back at the registry's version", async () => (await replicas()).some((r) => r.node === "node-2" && r.status === "active" && r.version === 3), 60_000)
      // a rerun applies on every replica (the others may not see node 2 back for a moment)
      await waitFor("a rerun applied everywhere", async () => (await post(nodes[2]!, "env/set", { name: "api", set: { GREETING: "whole" } })).status === 200, 30_000)
      for (const i of [0, 1, 2]) expect((await served(i)).body).toMatchObject({ version: "v3", greeting: "whole" })
      // the check set up another replica while node 2 was gone; the wanted count is kept
      await waitFor("one replica again", async () => (await replicas()).length === 1, 30_000)
      // a replica refuses a version older than the one it runs, with the spec's {error} body
      const id = (await get(nodes[0]!, "get?name=api")).body.id as string
      const replicaNode = (await replicas())[0]!.node
      const replicaGateway = nodes[Number(replicaNode.slice("node-".length)) - 1]!
      const older = await internalCall(replicaGateway, replicaNode, "/v1/internal/deployments/replica/update", {
        deployment_id: id, namespace: "shop", name: "api", version: 1, artifact_version: 1, cid: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
      }, SECRET)
      expect(older.status, older.text).toBe(409)
      expect(Object.keys(older.body)).toEqual(["error"])
      // a pair that does not match is 404
      const stranger = await internalCall(replicaGateway, replicaNode, "/v1/internal/deployments/replica/env", { deployment_id: id, namespace: "shop", name: "other", env_version: "1" }, SECRET)
      expect(stranger.status, stranger.text).toBe(404)
    }, 240_000)

    it("keeps serving from the replica through every gateway when the home node dies; changes answer 503 with Retry-After", async () => {
      await kill(0)
      const killedAt = Date.now()
      for (const i of [1, 2]) await waitFor(`served through node-${i + 1} without node 1`, async () => (await served(i)).status === 200, 15_000)
      console.log(`TIMING replica serving after the home node's death ${Date.now() - killedAt}`)
      expect((await served(2)).body).toMatchObject({ version: "v3", greeting: "whole" })
      for (const reply of [await post(nodes[2]!, "env/set", { name: "api", set: { GREETING: "lost" } }), await post(nodes[1]!, "rollback", { name: "api", version: 1 })]) {
        expect(reply.status, reply.text).toBe(503)
        expect(reply.body.code).toBe("HOME_NODE_UNREACHABLE")
        expect(Number(reply.headers.get("retry-after"))).toBeGreaterThan(0)
      }
    }, 120_000)

    it("deletes through node 3 while the home node is gone: the replica stops at once, the home node tears down when it is back", async () => {
      const replicaPort = (await replicas())[0]!.port!
      const deleted = await post(nodes[2]!, "delete", { name: "api" })
      expect(deleted.status, deleted.text).toBe(200)
      expect((await get(nodes[2]!, "get?name=api")).status).toBe(404)
      await waitFor("the replica stopped", async () => !(await listening(replicaPort)), 40_000)
      expect(await replicas()).toEqual([])
      // every gateway's host table drops it within its 5 s refresh
      await waitFor("the host gone through node 2", async () => (await served(1)).status === 404, 15_000)
      await startNode(0)
      await waitFor("node 1's directory removed", async () => !fs.existsSync(path.join(nodes[0]!.dataDir, "deployments", "shop-api")), 60_000)
      for (const i of [1, 2]) expect(fs.existsSync(path.join(nodes[i]!.dataDir, "deployments", "shop-api"))).toBe(false)
    }, 180_000)

    it("runs a function through node 1 while node 2 dies, and node 3's first invoke fetches its module by CID (scenario 10)", async () => {
      // reads its input and writes it back
      const echo = await watModule(`(module
        (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (func (export "_start")
          (i32.store (i32.const 0) (i32.const 64)) (i32.store (i32.const 4) (i32.const 4096))
          (drop (call $read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
          (i32.store (i32.const 16) (i32.const 64)) (i32.store (i32.const 20) (i32.load (i32.const 8)))
          (drop (call $write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24)))))`)
      const deployed = await fetch(`${nodes[0]!.url}/v1/functions`, { method: "POST", headers: { authorization: `Bearer ${admin}` }, body: functionForm({ name: "echo" }, echo) })
      expect(deployed.status, await deployed.clone().text()).toBe(201)
      const invoke = async (gw: Gateway, n: number) => {
        const res = await fetch(`${gw.url}/v1/functions/echo/invoke`, { method: "POST", headers: { authorization: `Bearer ${admin}` }, body: JSON.stringify({ n }) })
        return { status: res.status, text: await res.text() }
      }
      // node 3 never saw the module: it reads it from content storage by its CID
      expect(await invoke(nodes[2]!, 0)).toEqual({ status: 200, text: '{"n":0}' })
      // invokes one after another through node 1, node 2 killed while they run
      const answers: Array<{ status: number; text: string }> = []
      const during = (async () => {
        for (let n = 1; n <= 20; n++) answers.push(await invoke(nodes[0]!, n))
      })()
      await waitFor("invokes under way", async () => answers.length >= 3, 10_000, 10)
      await kill(1)
      await during
      for (const [i, answer] of answers.entries()) expect(answer).toEqual({ status: 200, text: JSON.stringify({ n: i + 1 }) })
      expect(await invoke(nodes[0]!, 99)).toEqual({ status: 200, text: '{"n":99}' })
      await startNode(1)
    }, 120_000)

    it("moves a retired home node's app to its replica: leave counts nothing lost, the app keeps serving from the new home", async () => {
      const created = await upload(nodes[0]!, "upload", { name: "moved", skip_install: "true" }, tarOf({ "index.js": appSource("m1") }))
      expect(created.status, created.text).toBe(201)
      const movedDomain = created.body.domain as string
      await waitFor("its replica active", async () => (await replicas()).some((r) => r.status === "active"), 30_000)
      const replicaNode = (await replicas())[0]!.node
      const challenged = await nodes[2]!.request("POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
      const verified = await nodes[2]!.request("POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await operator.signMessage(challenged.body.message) } })
      // operators see the replica's port on its node, with the replica's status
      const health = await nodes[2]!.request("GET", "/v1/operator/health", { token: verified.body.access_token })
      expect(health.status, health.text).toBe(200)
      const onReplica = (health.body.nodes as Array<{ node: string; apps: Array<{ deployment: string; status: string }> }>).find((n) => n.node === replicaNode)
      expect(onReplica?.apps).toContainEqual(expect.objectContaining({ deployment: "moved", status: "active" }))
      const left = await nodes[2]!.request("POST", "/v1/node/leave", { token: verified.body.access_token, json: { node: "node-1" } })
      expect(left.status, left.text).toBe(200)
      expect(left.body.lost).toEqual({ databases: 0, deployments: 0 })
      const record = (await get(nodes[2]!, "get?name=moved")).body
      expect(record).toMatchObject({ status: "active" })
      // the new home holds no replica row of its own (the check may set one up on node 3)
      expect((await replicas()).filter((r) => r.node === replicaNode)).toEqual([])
      const moved = ((await get(nodes[2]!, "events?name=moved")).body.events as Array<{ type: string; detail: Record<string, unknown> }>).find((e) => e.type === "home_moved")
      expect(moved?.detail).toEqual({ from: "node-1", to: replicaNode })
      for (const i of [1, 2]) {
        await waitFor(`served through node-${i + 1} from the new home`, async () => (await getOnHost(nodes[i]!.port, movedDomain, "/")).status === 200, 15_000)
        expect(JSON.parse((await getOnHost(nodes[i]!.port, movedDomain, "/")).body)).toMatchObject({ version: "m1" })
      }
    }, 120_000)
  })
}
