/**
 * The kill-a-node tests (next-wave §7.2; docs/cluster.md, "Harness and failure tests") on three
 * real nodes (test/support/cluster.ts): each a voter of a three-voter rqlite registry and a
 * gateway, in a network namespace of its own, with one shared Redis. The cases run in a child
 * vitest inside a loopback-only network namespace, as the other `*.cluster.test.ts` files do,
 * so the partitions and the nodes' own addresses touch nothing outside it.
 *
 * A measured time is printed as `TIMING <what> <ms>`.
 */
import { createHash, randomBytes } from "node:crypto"
import { Wallet } from "ethers"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type Cluster, CLUSTER_SECRET, type ClusterNode, pastElection, retryable, startCluster } from "../support/cluster.js"
import { newDevice } from "../support/device.js"
import { type Reply, requestTo } from "../support/gateway.js"
import { runInLoopbackNetns } from "../support/netns.js"
import { isSubscriber, openSubscriber } from "../support/pubsubSocket.js"
import { IN_NETNS } from "../support/storageEngines.js"
import { waitFor } from "../support/wait.js"
import { makeSealer } from "../../src/layers/secrets/Sealer.js"

const SUITE = "three nodes, one lost"
const CASES = 9

if (process.env[IN_NETNS] !== "1") {
  it("passes the failover suite on three nodes in a loopback-only network namespace", async () => {
    const { code, output, passed } = await runInLoopbackNetns("test/e2e/cluster.failover.test.ts", SUITE)
    for (const line of output.split("\n").filter((l) => l.includes("TIMING"))) console.log(line.trim())
    expect(code, output).toBe(0)
    expect(passed, output).toBe(CASES)
    expect(output).not.toMatch(/\d+ failed/)
  }, 600_000)
} else {
  const timing = (what: string, ms: number) => console.log(`TIMING ${what} ${Math.round(ms)}`)

  /** One request that gives up after `ms` (a paused node answers nothing). */
  const send = (node: ClusterNode, method: string, path: string, options: { token?: string; json?: unknown; headers?: Record<string, string>; ms?: number } = {}): Promise<Reply> =>
    requestTo(node.url, method, path, { ...options, ms: options.ms ?? 30_000 })

  describe(SUITE, () => {
    let cluster: Cluster
    let n: ReadonlyArray<ClusterNode>
    let operatorToken: string
    let owner: string
    const operator = Wallet.createRandom()
    const alice = Wallet.createRandom()

    /**
     * `node`'s status as `on` lists it. A node whose registry voter forwards to a paused leader
     * answers within the registry's deadline (10 s), so the wait is longer than that.
     */
    const statusOn = async (on: ClusterNode, node: string) => {
      try {
        const answer = await send(on, "GET", "/v1/network/peers", { token: operatorToken, ms: 15_000 })
        return answer.status === 200 ? (answer.body.peers as Array<{ node: string; status: string }>).find((p) => p.node === node)?.status : `http ${answer.status}`
      } catch (error) {
        return `no answer: ${String(error)}`
      }
    }
    const strongCount = async (node: ClusterNode, sql: string, level = "strong") => {
      const res = await fetch(`${node.rqliteUrl}/db/query?level=${level}&q=${encodeURIComponent(sql)}`, { signal: AbortSignal.timeout(10_000) })
      const answer = (await res.json()) as { results: Array<{ values?: Array<Array<unknown>> }> }
      return answer.results[0]?.values ?? []
    }
    const withLogs = async <A>(run: () => Promise<A>): Promise<A> => {
      try {
        return await run()
      } catch (error) {
        const logs = n.map((node) => node.logs().slice(-4000)).join("\n")
        throw new Error(`${error instanceof Error ? error.message : String(error)}\n${logs}`)
      }
    }
    const allActive = () =>
      waitFor("every node active on every node", async () => {
        for (const on of n) for (const node of n) if ((await statusOn(on, node.id).catch(() => "down")) !== "active") return false
        return true
      }, 60_000, 250)

    beforeAll(async () => {
      cluster = await startCluster({
        env: { PORTICO_OPERATORS: operator.address.toLowerCase(), PORTICO_PUBSUB_REVOCATION_CHECK_MS: "1000", PORTICO_PUBSUB_PUBLISH_TIMEOUT_MS: "1000" }
      })
      n = cluster.nodes
      const challenged = await send(n[0]!, "POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
      const verified = await send(n[0]!, "POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await operator.signMessage(challenged.body.message) } })
      expect(verified.status, verified.text).toBe(200)
      operatorToken = verified.body.access_token
      const cap = await send(n[0]!, "PUT", "/v1/operator/settings/max-namespaces-per-wallet", { token: operatorToken, json: { value: "10000" } })
      expect(cap.status, cap.text).toBe(200)
      const created = await send(n[0]!, "POST", "/v1/namespaces", { token: operatorToken, json: { name: "fleet" } })
      expect(created.status, created.text).toBe(201)
      owner = created.body.api_key
      const added = await send(n[0]!, "POST", "/v1/namespace/members", { token: owner, json: { wallet: alice.address, role: "runtime" } })
      expect(added.status, added.text).toBe(200)
      await allActive()
    }, 300_000)
    afterAll(async () => {
      await cluster?.stop()
    }, 120_000)
    // a case that failed half-way leaves no node down for the next one
    beforeEach(async () => {
      cluster.heal()
      for (const node of n) node.resume()
      await Promise.all(n.map((node) => node.restart()))
      await allActive()
    }, 180_000)

    it("rqlite leader's node killed under namespace creates through the other two: 503 + Retry-After at worst, writes back within 10 s, nothing lost or doubled", () =>
      withLogs(async () => {
        const leader = await cluster.leaderNode()
        const others = n.filter((_, i) => i !== leader)
        const created: Array<string> = []
        const refused: Array<number> = []
        let killedAt = 0
        let firstAfterKill = 0
        let i = 0
        /** Creates one namespace through `via`, retrying its refusals; 409 means an earlier attempt landed. */
        const create = async (via: ClusterNode) => {
          const name = `w-${i++}`
          for (;;) {
            const answer = await send(via, "POST", "/v1/namespaces", { token: operatorToken, json: { name }, ms: 30_000 })
            if (answer.status === 201 || answer.status === 409) {
              if (answer.status === 409) expect(answer.body.code, answer.text).not.toBe("NAMESPACE_TEARDOWN_PENDING")
              created.push(name)
              if (killedAt > 0 && firstAfterKill === 0) firstAfterKill = Date.now()
              return
            }
            expect(retryable(answer), `${answer.status} ${answer.text}`).toBe(true)
            refused.push(answer.status)
          }
        }
        for (let k = 0; k < 4; k++) await create(others[k % 2]!)
        await cluster.nodes[leader]!.kill()
        killedAt = Date.now()
        // two writers, one through each remaining node, until each has six more
        await Promise.all(others.map(async (via) => {
          for (let k = 0; k < 6; k++) await create(via)
        }))
        timing("rqlite-leader-killed-to-next-write", firstAfterKill - killedAt)
        expect(firstAfterKill - killedAt).toBeLessThan(10_000)
        const rows = await strongCount(others[0]!, "SELECT name, COUNT(*) FROM namespaces WHERE name LIKE 'w-%' GROUP BY name")
        expect(rows.map((r) => r[0]).sort()).toEqual([...created].sort())
        expect(rows.every((r) => Number(r[1]) === 1)).toBe(true)
        console.log(`rqlite leader was node-${leader + 1}; ${refused.length} retryable refusals`)
        await cluster.nodes[leader]!.restart()
        await allActive()
      }), 180_000)

    it("a killed node is inactive on the others within the TTL and active again after it restarts", () =>
      withLogs(async () => {
        const node3 = n[2]!
        await node3.kill()
        const killedAt = Date.now()
        await Promise.all(
          [n[0]!, n[1]!].map((on) => waitFor(`node-3 inactive on ${on.id}`, async () => (await statusOn(on, "node-3")) === "inactive", 11_500, 100))
        )
        timing("node-killed-to-inactive-on-both", Date.now() - killedAt)
        const restartedAt = Date.now()
        await node3.restart()
        await Promise.all(
          [n[0]!, n[1]!].map((on) => waitFor(`node-3 active on ${on.id}`, async () => (await statusOn(on, "node-3")) === "active", 30_000, 100))
        )
        timing("node-restarted-to-active", Date.now() - restartedAt)
      }), 180_000)

    it("a privacy delete with node 3 down answers evicted: partial at once, and the bytes are gone through the node asked; with every node up it is true", () =>
      withLogs(async () => {
        const challenged = await send(n[0]!, "POST", "/v1/auth/challenge", { json: { wallet: alice.address, namespace: "fleet" } })
        const verified = await send(n[0]!, "POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await alice.signMessage(challenged.body.message) } })
        expect(verified.status, verified.text).toBe(200)
        const token = verified.body.access_token as string
        const upload = async () => {
          const form = new FormData()
          form.append("file", new Blob([randomBytes(4096)]), "private.bin")
          const res = await fetch(n[0]!.url + "/v1/storage/upload", { method: "POST", body: form, headers: { authorization: `Bearer ${token}` } })
          expect(res.status).toBe(200)
          return ((await res.json()) as { Cid: string }).Cid
        }
        const unpin = (cid: string) => send(n[0]!, "DELETE", `/v1/storage/unpin/${cid}?immediate=true`, { token })
        const everyNodeUp = await upload()
        expect((await unpin(everyNodeUp)).body).toMatchObject({ Cid: everyNodeUp, evicted: "true" })
        const cid = await upload()
        await n[2]!.kill()
        await waitFor("node-3 inactive on node-1", async () => (await statusOn(n[0]!, "node-3")) === "inactive", 11_500, 100)
        const asked = Date.now()
        const unpinned = await unpin(cid)
        timing("privacy-delete-with-a-node-down-answered-in", Date.now() - asked)
        expect([unpinned.status, unpinned.body?.evicted], unpinned.text).toEqual([200, "partial"])
        expect((await send(n[0]!, "GET", `/v1/storage/get/${cid}`, { token })).status).toBe(404)
      }), 120_000)

    it("a node-local database homed on node 2: node 2 killed, a query through node 1 is 503 HOME_NODE_UNREACHABLE + Retry-After, served again after restart", () =>
      withLogs(async () => {
        const [one, two] = [n[0]!, n[1]!]
        const made = await send(two, "POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "ledger" } })
        expect([made.status, made.body?.home_node], made.text).toEqual([201, "node-2"])
        const query = (sql: string, ms?: number) => send(one, "POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "ledger", query: sql }, ...(ms === undefined ? {} : { ms }) })
        expect((await query("CREATE TABLE t (v TEXT)")).status).toBe(200)
        expect((await query("INSERT INTO t VALUES ('kept')")).status).toBe(200)
        await two.kill()
        const at = Date.now()
        const refused = await pastElection(() => query("SELECT v FROM t"))
        timing("home-node-killed-query-refused-in", Date.now() - at)
        expect([refused.status, refused.body?.code], refused.text).toEqual([503, "HOME_NODE_UNREACHABLE"])
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
        await two.restart()
        await waitFor("ledger served through node 1 again", async () => (await query("SELECT v FROM t", 10_000)).status === 200, 60_000, 250)
        expect((await query("SELECT v FROM t")).body.rows).toEqual([["kept"]])
      }), 180_000)

    it("a paused node (the registry's leader, the worst case): callers through the others get a timely answer, not a hang; it is inactive, then active after resume", () =>
      withLogs(async () => {
        const leader = await cluster.leaderNode()
        const [hung, asker] = [n[leader]!, n[(leader + 1) % n.length]!]
        const made = await send(hung, "POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "paused" } })
        expect(made.status, made.text).toBe(201)
        hung.pause()
        try {
          const at = Date.now()
          // the asker's first registry read waits on the hung leader up to the registry's deadline
          await waitFor(`${hung.id} inactive on ${asker.id}`, async () => (await statusOn(asker, hung.id)) === "inactive", 25_000, 100)
          timing("leader-node-paused-to-inactive", Date.now() - at)
          const asked = Date.now()
          const refused = await pastElection(() => send(asker, "POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "paused", query: "SELECT 1" }, ms: 60_000 }))
          timing("paused-home-node-query-answered-in", Date.now() - asked)
          expect([refused.status, refused.body?.code], refused.text).toEqual([503, "HOME_NODE_UNREACHABLE"])
          expect(retryable(refused)).toBe(true)
          // the registry takes writes through the live nodes again
          const written = Date.now()
          await waitFor(`a write through ${asker.id}`, async () => (await send(asker, "POST", "/v1/namespace/keys", { token: owner, json: { profile: "runtime", label: "while-paused" }, ms: 15_000 })).status === 201, 15_000, 200)
          timing("write-after-leader-paused-in", Date.now() - written)
        } finally {
          hung.resume()
        }
        await waitFor(`${hung.id} active on ${asker.id}`, async () => (await statusOn(asker, hung.id)) === "active", 30_000, 100)
        await waitFor("paused served again", async () => (await send(asker, "POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "paused", query: "SELECT 1" }, ms: 10_000 })).status === 200, 30_000, 250)
      }), 180_000)

    it("a device revoked through node 1 has its pub/sub sockets on nodes 2 and 3 closed within 10 s", () =>
      withLogs(async () => {
        const device = await newDevice()
        const c = await send(n[0]!, "POST", "/v1/auth/challenge", { json: { wallet: alice.address, namespace: "fleet", device_id: device.id } })
        const verified = await send(n[0]!, "POST", "/v1/auth/verify", {
          json: { message: c.body.message, signature: await alice.signMessage(c.body.message), device_key: device.jwk, device_signature: await device.sign(c.body.message) }
        })
        expect(verified.status, verified.text).toBe(200)
        const sockets = await Promise.all(
          [n[1]!, n[2]!].map(async (node) => {
            const opened = await openSubscriber(node.url, "topic=private", verified.body.access_token)
            if (!isSubscriber(opened)) throw new Error(`refused on ${node.id}: ${JSON.stringify(opened)}`)
            await opened.waitFor(1, "subscribed")
            return opened
          })
        )
        const revoked = await send(n[0]!, "DELETE", `/v1/namespace/devices/${device.id}`, { token: owner })
        expect(revoked.status, revoked.text).toBe(200)
        const at = Date.now()
        const closed = await Promise.all(sockets.map((s) => s.closed))
        for (const shut of closed) {
          expect([shut.code, shut.reason.startsWith("REVOKED")]).toEqual([4401, true])
          expect(shut.at - at).toBeLessThan(10_000)
        }
        timing("device-revoked-to-last-socket-closed", Math.max(...closed.map((s) => s.at)) - at)
      }), 60_000)

    it("a rolling restart of nodes 1, 2, 3 under steady traffic: only successes and retryable refusals, never a 500", () =>
      withLogs(async () => {
        const restarting = new Set<number>()
        const answers = new Map<string, number>()
        const bad: Array<string> = []
        let running = true
        let k = 0
        const traffic = (async () => {
          while (running) {
            const live = n.filter((_, i) => !restarting.has(i))
            const via = live[k % live.length]!
            const write = k % 2 === 0
            k++
            try {
              const answer = write
                ? await send(via, "POST", "/v1/namespace/keys", { token: owner, json: { profile: "runtime", label: `roll-${k}` }, ms: 30_000 })
                : await send(via, "GET", "/v1/namespace/members", { token: owner, ms: 30_000 })
              answers.set(String(answer.status), (answers.get(String(answer.status)) ?? 0) + 1)
              if (!(answer.status === 200 || answer.status === 201 || retryable(answer))) bad.push(`${via.id} ${answer.status} ${answer.text}`)
            } catch (error) {
              // a node taken out of the rotation while the request was on its way
              if (!restarting.has(via.index)) bad.push(`${via.id}: ${String(error)}`)
            }
          }
        })()
        try {
          for (const [i, node] of n.entries()) {
            restarting.add(i)
            await node.stop()
            await node.restart()
            await allActive()
            restarting.delete(i)
          }
        } finally {
          running = false
          await traffic
        }
        console.log(`rolling restart answers: ${JSON.stringify(Object.fromEntries(answers))}`)
        expect(bad).toEqual([])
        expect((answers.get("201") ?? 0) + (answers.get("200") ?? 0)).toBeGreaterThan(10)
      }), 300_000)

    it("node 3 cut off from nodes 1 and 2 refuses writes through it instead of answering stale successes; after the heal it converges", () =>
      withLogs(async () => {
        const [one, three] = [n[0]!, n[2]!]
        const label = (text: string) => ({ profile: "runtime", label: text })
        cluster.partition(2, 0)
        cluster.partition(2, 1)
        let healed = false
        try {
          // node 3 may hold the leadership a moment longer (its lease); then every write through it fails
          await waitFor("a write through node 3 refused", async () => retryable(await send(three, "POST", "/v1/namespace/keys", { token: owner, json: label("cut-probe"), ms: 40_000 })), 60_000, 200)
          const refusedAt = Date.now()
          const throughThree: Array<number> = []
          while (Date.now() - refusedAt < 5_000) {
            const answer = await send(three, "POST", "/v1/namespace/keys", { token: owner, json: label("cut-off"), ms: 40_000 })
            throughThree.push(answer.status)
            expect(retryable(answer), `${answer.status} ${answer.text}`).toBe(true)
          }
          // the majority still writes
          await waitFor("a write through node 1", async () => (await send(one, "POST", "/v1/namespace/keys", { token: owner, json: label("majority"), ms: 15_000 })).status === 201, 20_000, 200)
          console.log(`through node 3 while cut off: ${throughThree.join(",")}`)
          cluster.heal()
          healed = true
          const at = Date.now()
          await waitFor("a write through node 3 after the heal", async () => (await send(three, "POST", "/v1/namespace/keys", { token: owner, json: label("healed"), ms: 15_000 })).status === 201, 30_000, 200)
          timing("partition-healed-to-write-through-node-3", Date.now() - at)
          // node 3's own copy holds what the majority wrote meanwhile
          await waitFor("node 3's replica has the majority's write", async () => (await strongCount(three, "SELECT COUNT(*) FROM api_keys WHERE label = 'majority'", "none"))[0]?.[0] === 1, 15_000, 200)
          expect((await strongCount(three, "SELECT COUNT(*) FROM api_keys WHERE label = 'cut-off'", "none"))[0]?.[0]).toBe(0)
        } finally {
          if (!healed) cluster.heal()
        }
        await allActive()
      }), 240_000)

    it("refuses a replayed internal call, one replayed to another node, and one addressed to another node: 403 COORDINATION_REFUSED", () =>
      withLogs(async () => {
        // what a node sends another: MAC v2 over the call, addressed to the receiver's node id
        const sealer = makeSealer(Buffer.from(CLUSTER_SECRET, "hex"))
        const signed = (audience: string) => {
          const time = String(Math.floor(Date.now() / 1000))
          const nonce = randomBytes(18).toString("base64url")
          const digest = createHash("sha256").update("{}", "utf8").digest("hex")
          const mac = "v2=" + sealer.hash("coordination-mac-v2", ["POST", "/v1/internal/ping", audience, time, nonce, digest].join("\n"))
          return { "x-portico-coordination-mac": mac, "x-portico-coordination-time": time, "x-portico-coordination-nonce": nonce }
        }
        const ping = (node: ClusterNode, headers: Record<string, string>) => send(node, "POST", "/v1/internal/ping", { headers: { ...headers, "content-type": "application/json" }, json: {} })
        const call = signed("node-2")
        const first = await ping(n[1]!, call)
        expect([first.status, first.body?.node], first.text).toEqual([200, "node-2"])
        const again = await ping(n[1]!, call)
        expect([again.status, again.body?.code, again.body?.error]).toEqual([403, "COORDINATION_REFUSED", "coordination call replayed"])
        const elsewhere = await ping(n[2]!, call)
        expect([elsewhere.status, elsewhere.body?.code]).toEqual([403, "COORDINATION_REFUSED"])
        const misaddressed = await ping(n[0]!, signed("node-3"))
        expect([misaddressed.status, misaddressed.body?.code]).toEqual([403, "COORDINATION_REFUSED"])
      }), 60_000)
  })
}
