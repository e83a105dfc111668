/**
 * Content storage across three nodes, one lost (next-wave §7.2 scenario 9; docs/cluster.md,
 * "Harness and failure tests"): three gateways on one rqlite registry, each over its own Kubo
 * node and IPFS Cluster peer of one cluster. A file uploaded through node 1 is pinned on every
 * peer; with node 3 killed (its gateway, its Kubo and its cluster peer) it is still served through
 * nodes 1 and 2, and a privacy delete answers `evicted: partial`. IPFS Cluster tries NAT port
 * mapping, so the cases run in a child vitest inside a loopback-only network namespace.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, startGateway } from "../support/gateway.js"
import { hasKubo, type KuboPeer, kuboMissingMessage, startKuboPeers } from "../support/kubo.js"
import { runInLoopbackNetns } from "../support/netns.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { IN_NETNS } from "../support/storageEngines.js"
import { waitFor } from "../support/wait.js"

const SUITE = "content on three nodes, one lost"
const CASES = 1

if (process.env[IN_NETNS] !== "1") {
  it("passes the replicated storage suite in a loopback-only network namespace", async () => {
    if (!hasKubo()) throw new Error(kuboMissingMessage())
    const { code, output, passed } = await runInLoopbackNetns("test/e2e/storage.replicas.cluster.test.ts", SUITE)
    expect(code, output).toBe(0)
    expect(passed, output).toBe(CASES)
    expect(output).not.toMatch(/\d+ failed/)
  }, 600_000)
} else {
  describe(SUITE, () => {
    let registry: RqlitedServer
    let peers: ReadonlyArray<KuboPeer>
    let engineLogs: () => string
    const nodes: Array<Gateway> = []
    const alice = Wallet.createRandom()
    const operator = Wallet.createRandom()

    beforeAll(async () => {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      registry = await Effect.runPromise(startRqlited())
      ;({ peers, logs: engineLogs } = await startKuboPeers(3))
      const shared = {
        PORTICO_RQLITE_URL: registry.url,
        PORTICO_SECRET: "9e".repeat(32),
        PORTICO_OPERATORS: operator.address.toLowerCase(),
        PORTICO_NODE_HEARTBEAT_MS: "200",
        PORTICO_NODE_TTL_MS: "1500"
      }
      for (const [i, peer] of peers.entries()) {
        nodes.push(
          await startGateway({
            port: await Effect.runPromise(freePort),
            env: { ...shared, PORTICO_NODE_ID: `node-${i + 1}`, PORTICO_STORAGE_KUBO_URL: peer.kuboUrl, PORTICO_STORAGE_CLUSTER_URL: peer.clusterUrl }
          })
        )
      }
    }, 240_000)
    const killed = new Set<Gateway>()
    afterAll(async () => {
      await Promise.all(nodes.filter((gw) => !killed.has(gw)).map((gw) => gw.stop()))
      await Promise.all((peers ?? []).map((peer) => peer.stop()))
      await Effect.runPromise(registry?.stop ?? Effect.void)
    }, 120_000)

    const withLogs = async <A>(run: () => Promise<A>): Promise<A> => {
      try {
        return await run()
      } catch (error) {
        throw new Error(`${error instanceof Error ? error.message : String(error)}\n${nodes.map((gw) => gw.logs().slice(-3000)).join("\n")}\n${engineLogs().slice(-4000)}`)
      }
    }

    it("serves a file through the live nodes after one holder is lost, and a privacy delete then answers partial", () =>
      withLogs(async () => {
        const [n1, n2, n3] = nodes as [Gateway, Gateway, Gateway]
        const owner = (await n1.cli(["namespace", "create", "vault"])).api_key as string
        expect((await n1.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: alice.address, role: "runtime" } })).status).toBe(200)
        const signIn = async (gw: Gateway) => {
          const challenged = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: alice.address, namespace: "vault" } })
          const verified = await gw.request("POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await alice.signMessage(challenged.body.message) } })
          expect(verified.status, verified.text).toBe(200)
          return verified.body.access_token as string
        }
        const token = await signIn(n1)
        const upload = async (bytes: Uint8Array) => {
          const form = new FormData()
          form.append("file", new Blob([bytes]), "ledger.bin")
          const res = await fetch(n1.url + "/v1/storage/upload", { method: "POST", body: form, headers: { authorization: `Bearer ${token}` } })
          const text = await res.text()
          expect(res.status, text).toBe(200)
          return (JSON.parse(text) as { Cid: string }).Cid
        }
        const bytes = randomBytes(300 * 1024)
        const cid = await upload(bytes)
        // pinned on every peer: each node's own Kubo holds the blocks
        await waitFor("the file pinned on all three peers", async () => {
          const status = await n1.request("GET", `/v1/storage/status/${cid}`, { token })
          return status.status === 200 && status.body.Status === "pinned" && status.body.Peers.length === 3
        }, 60_000, 250)
        for (const peer of peers) expect(await peer.hasBlock(cid)).toBe(true)

        // node 3 lost: its gateway, its Kubo and its cluster peer
        process.kill(n3.pid, "SIGKILL")
        await n3.stop()
        killed.add(n3)
        await peers[2]!.kill()
        for (const gw of [n1, n2]) {
          const res = await fetch(`${gw.url}/v1/storage/get/${cid}`, { headers: { authorization: `Bearer ${gw === n1 ? token : await signIn(n2)}` } })
          expect(res.status).toBe(200)
          expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true)
        }

        // a privacy delete while node 3 is down: what answers is removed, node 3 cannot confirm
        await waitFor("node-3 inactive on node-1", async () => {
          const peersOn = await n1.request("GET", "/v1/network/peers", { token: await operatorSession(n1) })
          return (peersOn.body.peers as Array<{ node: string; status: string }>).find((p) => p.node === "node-3")?.status === "inactive"
        }, 15_000, 200)
        const unpinned = await n1.request("DELETE", `/v1/storage/unpin/${cid}?immediate=true`, { token })
        expect([unpinned.status, unpinned.body?.evicted], unpinned.text).toEqual([200, "partial"])
        expect((await n1.request("GET", `/v1/storage/get/${cid}`, { token })).status).toBe(404)
      }), 300_000)

    let operatorToken: string | undefined
    const operatorSession = async (gw: Gateway) => {
      if (operatorToken !== undefined) return operatorToken
      const challenged = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
      const verified = await gw.request("POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await operator.signMessage(challenged.body.message) } })
      operatorToken = verified.body.access_token as string
      return operatorToken
    }
  })
}
