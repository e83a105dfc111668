/**
 * The vault on three real nodes (docs/vault.md; test/support/cluster.ts: each node a gateway and a
 * voter of a three-voter rqlite registry in a network namespace of its own): 2-of-3 sharing with
 * every node's guardian in its own store, a push and a node killed and the pull still answered,
 * a push refused without its quorum, a node hung (SIGSTOP) during a push, a pull signature
 * replayed through another gateway, and another namespace that cannot see an identity. Runs in a
 * child vitest inside a loopback-only network namespace, as the other `*.cluster.test.ts` files do.
 */
import { Wallet } from "ethers"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type Cluster, type ClusterNode, pastElection, startCluster } from "../support/cluster.js"
import { type Reply, requestTo } from "../support/gateway.js"
import { runInLoopbackNetns } from "../support/netns.js"
import { IN_NETNS } from "../support/storageEngines.js"
import { newIdentity, pullBody, pushBody } from "../support/vault.js"
import { waitFor } from "../support/wait.js"

const SUITE = "the vault on three nodes"
const CASES = 5

if (process.env[IN_NETNS] !== "1") {
  it("passes the vault suite on three nodes in a loopback-only network namespace", async () => {
    const { code, output, passed } = await runInLoopbackNetns("test/e2e/vault.cluster.test.ts", SUITE)
    expect(code, output).toBe(0)
    expect(passed, output).toBe(CASES)
    expect(output).not.toMatch(/\d+ failed/)
  }, 600_000)
} else {
  /** One request that gives up after `ms` (a paused node answers nothing). */
  const send = (node: ClusterNode, method: string, path: string, options: { token?: string; json?: unknown; ms?: number } = {}): Promise<Reply> =>
    requestTo(node.url, method, path, { ...options, ms: options.ms ?? 30_000 })
  /** The registry electing a leader: its credential store's 503, not the vault's own. */
  const electing = (reply: Reply) => reply.status === 503 && /credential store/.test(reply.text)
  const bytes = (text: string) => new Uint8Array(Buffer.from(text))
  const envelopeOf = (reply: Reply) => {
    expect(reply.status, reply.text).toBe(200)
    return Buffer.from(String(reply.body.envelope), "base64").toString()
  }
  /** A pull signed for a second not used before by this identity (each signature is honoured once). */
  let second = 0
  const freshPull = (id: ReturnType<typeof newIdentity>) => {
    second = Math.max(second + 1, Math.floor(Date.now() / 1000) - 60)
    return pullBody(id, second)
  }

  describe(SUITE, () => {
    let cluster: Cluster
    let n: ReadonlyArray<ClusterNode>
    let operatorToken: string
    let owner: string
    let otherOwner: string
    const operator = Wallet.createRandom()

    const push = (node: ClusterNode, body: unknown, token = owner) => send(node, "POST", "/v1/vault/push", { token, json: body })
    const pull = (node: ClusterNode, body: unknown, token = owner) => send(node, "POST", "/v1/vault/pull", { token, json: body })
    const healthOn = async (node: ClusterNode) => (await send(node, "GET", "/v1/vault/health", { token: owner, ms: 15_000 })).body
    const withLogs = async <A>(run: () => Promise<A>): Promise<A> => {
      try {
        return await run()
      } catch (error) {
        const logs = n.map((node) => node.logs().slice(-3000)).join("\n")
        if (process.env["VAULT_DEBUG"] !== undefined) (await import("node:fs")).appendFileSync(process.env["VAULT_DEBUG"], n.map((node) => node.logs()).join("\n=====\n"))
        throw new Error(`${error instanceof Error ? error.message : String(error)}\n${logs}`)
      }
    }
    const allHealthy = () =>
      waitFor("every guardian live on every node", async () => {
        for (const node of n) if ((await healthOn(node).catch(() => undefined))?.healthy !== 3) return false
        return true
      }, 60_000, 250)

    beforeAll(async () => {
      cluster = await startCluster({ env: { PORTICO_OPERATORS: operator.address.toLowerCase(), PORTICO_VAULT_GUARDIAN_TIMEOUT_MS: "2000" } })
      n = cluster.nodes
      const challenged = await send(n[0]!, "POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
      const verified = await send(n[0]!, "POST", "/v1/auth/verify", { json: { message: challenged.body.message, signature: await operator.signMessage(challenged.body.message) } })
      expect(verified.status, verified.text).toBe(200)
      operatorToken = verified.body.access_token
      const cap = await send(n[0]!, "PUT", "/v1/operator/settings/max-namespaces-per-wallet", { token: operatorToken, json: { value: 10000 } })
      expect(cap.status, cap.text).toBe(200)
      for (const [name, set] of [["vaulted", (k: string) => (owner = k)], ["strangers", (k: string) => (otherOwner = k)]] as const) {
        const created = await send(n[0]!, "POST", "/v1/namespaces", { token: operatorToken, json: { name } })
        expect(created.status, created.text).toBe(201)
        set(created.body.api_key)
      }
      await allHealthy()
    }, 300_000)
    afterAll(async () => {
      await cluster?.stop()
    }, 120_000)
    // a case that failed half-way leaves no node down for the next one
    beforeEach(async () => {
      for (const node of n) node.resume()
      await Promise.all(n.map((node) => node.restart()))
      await allHealthy()
    }, 180_000)

    it("shares 2-of-3 across the nodes' own stores, and every gateway says so", () =>
      withLogs(async () => {
        for (const node of n) {
          expect(await healthOn(node)).toEqual({ status: "ok", mode: "shared", guardians: 3, healthy: 3, threshold: 2, quorum: 3 })
        }
        const id = newIdentity()
        const pushed = await push(n[0]!, pushBody(id, 1, bytes("three-way")))
        expect(pushed.body, pushed.text).toMatchObject({ status: "ok", mode: "shared", ack_count: 3, total: 3, quorum: 3, threshold: 2 })
        const status = await send(n[1]!, "GET", "/v1/vault/status", { token: owner })
        expect(status.body.guardians.map((g: { node: string }) => g.node)).toEqual(n.map((node) => node.id).sort())
        for (const g of status.body.guardians) expect(g).toMatchObject({ reachable: true, shares: 1 })
        // each gateway gives it back, combining its own share with another node's
        for (const node of n) expect(envelopeOf(await pull(node, freshPull(id)))).toBe("three-way")
      }))

    it("answers a pull with a node killed, and refuses a push without its quorum until the node is back", () =>
      withLogs(async () => {
        const id = newIdentity()
        expect((await push(n[0]!, pushBody(id, 1, bytes("before the loss")))).status).toBe(200)
        await n[2]!.kill()
        // the registry may be electing a leader (the lost node may have held it): a retryable 503 meanwhile
        const pulled = await pastElection(() => pull(n[1]!, freshPull(id)), electing)
        expect(pulled.status, pulled.text).toBe(200)
        expect(envelopeOf(pulled)).toBe("before the loss")
        expect(pulled.body.collected).toBe(2)
        const refused = await pastElection(() => push(n[0]!, pushBody(id, 2, bytes("while one is lost"))), electing)
        expect([refused.status, refused.body?.code], refused.text).toEqual([503, "UNAVAILABLE"])
        expect(refused.headers.get("retry-after")).toBe("5")
        expect(refused.body.error).toMatch(/a push needs 3/)
        await waitFor("the lost node inactive", async () => (await healthOn(n[0]!))?.healthy === 2, 30_000, 250)
        expect(await healthOn(n[0]!)).toMatchObject({ status: "degraded", healthy: 2 })
        await n[2]!.restart()
        await allHealthy()
        // the refused push may have reached the two live nodes (its hint says so): the next is version 3
        const after = await push(n[0]!, pushBody(id, 3, bytes("after the return")))
        expect(after.status, after.text).toBe(200)
        expect(envelopeOf(await pull(n[2]!, freshPull(id)))).toBe("after the return")
      }))

    it("keeps a push made while a node hung from coming back stale: the newest version that holds is the answer", () =>
      withLogs(async () => {
        const id = newIdentity()
        expect((await push(n[0]!, pushBody(id, 1, bytes("one")))).status).toBe(200)
        n[2]!.pause()
        // the hung node is still a member: the push reaches two guardians and is refused as a whole
        const partial = await push(n[0]!, pushBody(id, 2, bytes("two")))
        expect([partial.status, partial.body?.code], partial.text).toEqual([503, "UNAVAILABLE"])
        expect(partial.body.hint).toMatch(/idempotent/)
        n[2]!.resume()
        await allHealthy()
        // node 3 holds version 1, the others version 2: version 1's share is not enough on its own
        const pulled = await pull(n[2]!, freshPull(id))
        expect(pulled.status, pulled.text).toBe(200)
        expect(pulled.body.version).toBe(2)
        expect(envelopeOf(pulled)).toBe("two")
        // the same push again is the retry the hint names: now on all three
        const retried = await push(n[2]!, pushBody(id, 2, bytes("two")))
        expect(retried.body, retried.text).toMatchObject({ status: "ok", ack_count: 3 })
        // and version 1 is refused everywhere
        const stale = await push(n[1]!, pushBody(id, 1, bytes("one")))
        expect([stale.status, stale.body?.code], stale.text).toEqual([409, "CONFLICT"])
      }))

    it("refuses a pull signature replayed through another gateway, and a tampered push on every node", () =>
      withLogs(async () => {
        const id = newIdentity()
        expect((await push(n[1]!, pushBody(id, 1, bytes("once")))).status).toBe(200)
        const signed = freshPull(id)
        expect((await pull(n[0]!, signed)).status).toBe(200)
        for (const node of n) {
          const replayed = await pull(node, signed)
          expect([replayed.status, replayed.body?.code], replayed.text).toEqual([401, "SIGNATURE_INVALID"])
        }
        const tampered = { ...pushBody(id, 2, bytes("mine")), envelope: Buffer.from("theirs").toString("base64") }
        for (const node of n) expect((await push(node, tampered)).status).toBe(401)
        expect(envelopeOf(await pull(n[2]!, freshPull(id)))).toBe("once")
      }))

    it("keeps an identity to its namespace on every node", () =>
      withLogs(async () => {
        const id = newIdentity()
        expect((await push(n[0]!, pushBody(id, 1, bytes("ours")))).status).toBe(200)
        for (const node of n) {
          const theirs = await pull(node, freshPull(id), otherOwner)
          expect([theirs.status, theirs.body?.code], theirs.text).toEqual([404, "NOT_FOUND"])
        }
        const status = await send(n[2]!, "GET", "/v1/vault/status", { token: otherOwner })
        for (const g of status.body.guardians) expect(g.shares).toBe(0)
      }))
  })
}
