/**
 * The network routes and the fan-outs that read the membership, through real gateways (docs/cluster.md
 * "Routes"): node-a and node-b share one rqlite registry and know each other only through it;
 * node-c has a registry of its own (the same root secret) and is known to node-a only once an
 * operator connects it. Every address is on loopback; PORTICO_OVERLAY_CIDRS is loopback only, so an
 * address elsewhere is refused before anything is dialled.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, operatorToken as signInOperator } from "../support/client.js"
import { type Gateway, startGateway } from "../support/gateway.js"
import { freePort, listenOnLoopback } from "../support/process.js"
import { type NtfyStandIn, startNtfyStandIn } from "../support/ntfyStandIn.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { waitFor } from "../support/wait.js"

const fast = { PORTICO_NODE_HEARTBEAT_MS: "200", PORTICO_NODE_TTL_MS: "1500" }

describe("the network routes and the membership's fan-outs", () => {
  let server: RqlitedServer
  let a: Gateway
  let b: Gateway
  let c: Gateway
  let ntfyA: NtfyStandIn
  let ntfyB: NtfyStandIn
  let silent: net.Server
  let silentPort: number
  const held: Array<net.Socket> = []
  let operatorToken: string
  let owner: string
  let aEnv: () => Record<string, string>
  const operator = Wallet.createRandom()

  const connect = (multiaddr: unknown, token = operatorToken) => a.request("POST", "/v1/network/connect", { token, json: { multiaddr } })
  const peersOn = async (gw: Gateway) => {
    const answer = await gw.request("GET", "/v1/network/peers", { token: operatorToken })
    expect(answer.status, answer.text).toBe(200)
    return answer.body.peers as Array<{ node: string; status: string; internal_url: string; connected: boolean; seed: boolean }>
  }

  /** An operator's session on `gw`'s registry. */
  const signIn = (gw: Gateway): Promise<string> => signInOperator(gw, operator)

  beforeAll(async () => {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    server = await Effect.runPromise(startRqlited())
    ;[ntfyA, ntfyB] = await Promise.all([startNtfyStandIn({ tokens: ["tk_a"] }), startNtfyStandIn({ tokens: ["tk_b"] })])
    // accepts connections and never answers: a connect's deadline
    silent = net.createServer((socket) => void held.push(socket))
    silentPort = await listenOnLoopback(silent)
    const shared = {
      ...fast,
      PORTICO_SECRET: "44".repeat(32),
      PORTICO_OPERATORS: operator.address.toLowerCase(),
      PORTICO_OVERLAY_CIDRS: "127.0.0.0/8,::1"
    }
    const registry = { PORTICO_RQLITE_URL: server.url }
    aEnv = () => ({ ...shared, ...registry, PORTICO_NODE_ID: "node-a", PORTICO_PUSH_RELAY_URL: ntfyA.url, PORTICO_PUSH_RELAY_TOKEN: "tk_a" })
    ;[a, b, c] = await Promise.all([
      startGateway({ env: aEnv() }),
      startGateway({
        port: await Effect.runPromise(freePort),
        env: { ...shared, ...registry, PORTICO_NODE_ID: "node-b", PORTICO_PUSH_RELAY_URL: ntfyB.url, PORTICO_PUSH_RELAY_TOKEN: "tk_b" }
      }),
      startGateway({ port: await Effect.runPromise(freePort), env: { ...shared, PORTICO_NODE_ID: "node-c" } })
    ])
    operatorToken = await signIn(a)
    owner = (await a.cli(["namespace", "create", "fanout"])).api_key
    await waitFor("node-b active on node-a", async () => (await peersOn(a)).some((p) => p.node === "node-b" && p.status === "active"), 10_000)
  }, 120_000)
  afterAll(async () => {
    for (const s of held) s.destroy()
    silent?.close()
    await a?.stop()
    await b?.stop()
    await c?.stop()
    await ntfyA?.stop()
    await ntfyB?.stop()
    await Effect.runPromise(server?.stop ?? Effect.void)
  })

  it("answers the status: the registry's voters and leader, the cache and storage engines, the peers that answer", async () => {
    const answer = await a.request("GET", "/v1/network/status", { token: operatorToken })
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body).toMatchObject({
      node: "node-a",
      registry: { engine: "rqlite", ok: true },
      cache: { engine: "memory", ok: true },
      storage: { engine: "embedded" },
      peers: { total: 1, active: 1, reachable: 1 }
    })
    expect(answer.body.registry.voters).toHaveLength(1)
    expect(answer.body.registry.leader).toBe(answer.body.registry.voters[0].id)
    // node-c's registry is its own file: no voters
    const onC = await c.request("GET", "/v1/network/status", { token: await signIn(c) })
    expect([onC.status, onC.body.registry.engine, onC.body.registry.voters, onC.body.registry.leader]).toEqual([200, "sqlite", [], null])
    // the typed client reads the same
    expect((await call(a, operatorToken, (cl) => cl.network.status())).node).toBe("node-a")
  })

  it.each([
    ["not a string", 42, "VALIDATION_FAILED"],
    ["no /p2p/", "/ip4/127.0.0.1/tcp/8080", "VALIDATION_FAILED"],
    ["another protocol", "/ip4/127.0.0.1/udp/8080/p2p/node-b", "VALIDATION_FAILED"],
    ["a port out of range", "/ip4/127.0.0.1/tcp/70000/p2p/node-b", "VALIDATION_FAILED"],
    ["a trailing part", "/ip4/127.0.0.1/tcp/8080/p2p/node-b/http", "VALIDATION_FAILED"],
    ["this node", "/ip4/127.0.0.1/tcp/8080/p2p/node-a", "VALIDATION_FAILED"],
    ["an address outside the overlay (never dialled)", "/ip4/192.0.2.1/tcp/80/p2p/node-b", "VALIDATION_FAILED"],
    ["an IPv6 address outside the overlay (never dialled)", "/ip6/fd00::1/tcp/80/p2p/node-b", "VALIDATION_FAILED"]
  ])("refuses %s with 400", async (_, multiaddr, code) => {
    const answer = await connect(multiaddr)
    expect([answer.status, answer.body.code], answer.text).toEqual([400, code])
  })

  it("refuses a malformed body with 400, a body over 4 KiB with 413, a namespace's key with 403", async () => {
    const raw = await a.request("POST", "/v1/network/connect", { token: operatorToken, body: "{not json", headers: { "content-type": "application/json" } })
    expect(raw.status).toBe(400)
    expect((await a.request("POST", "/v1/network/connect", { token: operatorToken, json: { multiaddr: "/ip4/127.0.0.1/tcp/1/p2p/x", extra: 1 } })).status).toBe(400)
    const big = await connect("/ip4/127.0.0.1/tcp/1/p2p/" + "n".repeat(5000))
    expect([big.status, big.body.code]).toEqual([413, "PAYLOAD_TOO_LARGE"])
    for (const [method, path, json] of [
      ["GET", "/v1/network/status", undefined],
      ["POST", "/v1/network/connect", { multiaddr: `/ip4/127.0.0.1/tcp/${b.port}/p2p/node-b` }],
      ["POST", "/v1/network/disconnect", { peer_id: "node-b" }]
    ] as const) {
      const refused = await a.request(method, path, { token: owner, ...(json === undefined ? {} : { json }) })
      expect([refused.status, refused.body.code], `${path}: ${refused.text}`).toEqual([403, "NOT_AN_OPERATOR"])
    }
  })

  it("answers 502 for a refused dial, another node than the one named, and a port where no Portico node answers", async () => {
    const closed = await Effect.runPromise(freePort)
    for (const multiaddr of [
      `/ip4/127.0.0.1/tcp/${closed}/p2p/node-b`,
      `/ip4/127.0.0.1/tcp/${b.port}/p2p/node-x`,
      `/ip4/127.0.0.1/tcp/${c.port}/p2p/node-b`,
      `/ip4/127.0.0.1/tcp/${new URL(server.url).port}/p2p/node-b`,
      `/ip4/127.0.0.1/tcp/${new URL(ntfyB.url).port}/p2p/node-b`
    ]) {
      const answer = await connect(multiaddr)
      expect([answer.status, answer.body.code], `${multiaddr}: ${answer.text}`).toEqual([502, "PEER_DIAL_FAILED"])
    }
    // nothing refused was kept
    expect((await peersOn(a)).filter((p) => p.connected)).toEqual([])
  })

  it("answers 504 when the address accepts and never answers within 10 s", async () => {
    const started = Date.now()
    const answer = await connect(`/ip4/127.0.0.1/tcp/${silentPort}/p2p/node-b`)
    expect([answer.status, answer.body.code], answer.text).toEqual([504, "PEER_DIAL_TIMEOUT"])
    expect(Date.now() - started).toBeGreaterThanOrEqual(9_500)
  }, 40_000)

  it("connects a node of no shared registry, lists it, reaches it, and forgets it on disconnect (a no-op when not connected)", async () => {
    const noop = await a.request("POST", "/v1/network/disconnect", { token: operatorToken, json: { peer_id: "node-c" } })
    expect([noop.status, noop.body]).toEqual([200, { peer_id: "node-c", disconnected: false }])

    const connected = await connect(`/dns/localhost/tcp/${c.port}/p2p/node-c`)
    expect(connected.status, connected.text).toBe(200)
    expect(connected.body.node).toBe("node-c")
    expect(connected.body.internal_url).toMatch(new RegExp(`^http://(127\\.0\\.0\\.1|\\[::1\\]):${c.port}$`))
    const listed = (await peersOn(a)).find((p) => p.node === "node-c")
    expect(listed).toMatchObject({ status: "unregistered", connected: true, seed: false, internal_url: connected.body.internal_url })
    // kept across a restart of the node that connected it
    await a.stop()
    a = await startGateway({ port: a.port, dataDir: a.dataDir, env: aEnv() })
    expect((await peersOn(a)).find((p) => p.node === "node-c")).toMatchObject({ connected: true, internal_url: connected.body.internal_url })
    // a live peer now: the status pings it
    await waitFor("node-c reachable in the status", async () => {
      const status = await a.request("GET", "/v1/network/status", { token: operatorToken })
      return status.body.peers.reachable === 2
    }, 10_000)

    const gone = await a.request("POST", "/v1/network/disconnect", { token: operatorToken, json: { peer_id: "node-c" } })
    expect([gone.status, gone.body]).toEqual([200, { peer_id: "node-c", disconnected: true }])
    expect((await peersOn(a)).some((p) => p.node === "node-c")).toBe(false)
  })

  it("lists each node's homed namespaces and app ports in the operator health", async () => {
    const created = await b.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "ledger" } })
    expect([created.status, created.body.home_node]).toEqual([201, "node-b"])
    const health = await a.request("GET", "/v1/operator/health", { token: operatorToken })
    expect(health.status, health.text).toBe(200)
    const nodes = health.body.nodes as Array<{ node: string; status: string; self: boolean; namespaces: Array<string>; apps: Array<unknown> }>
    expect(nodes.map((n) => [n.node, n.status, n.self, n.namespaces, n.apps])).toEqual([
      ["node-a", "active", true, [], []],
      ["node-b", "active", false, ["fanout"], []]
    ])
  })

  it("fans a platform relay publish out to a node known only through the registry", async () => {
    expect((await a.request("PUT", "/v1/namespace/push-credentials/relay_push", { token: owner, json: {} })).status).toBe(200)
    const runtime = (await a.request("POST", "/v1/namespace/keys", { token: owner, json: { profile: "runtime", label: "app" } })).body.api_key as string
    const wallet = Wallet.createRandom()
    expect((await a.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: wallet.address, role: "runtime" } })).status).toBe(200)
    const challenge = await a.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address, namespace: "fanout" } })
    const verified = await a.request("POST", "/v1/auth/verify", { json: { message: challenge.body.message, signature: await wallet.signMessage(challenge.body.message) } })
    const session = verified.body.access_token as string
    const userId = (await a.request("GET", "/v1/auth/whoami", { token: session })).body.subject as string
    expect((await a.request("POST", "/v1/push/devices", { token: session, json: { device_id: "web", provider: "relay_push", token: "net-web" } })).status).toBe(200)

    const sent = await a.request("POST", "/v1/push/send", { token: runtime, json: { user_id: userId, title: "Hi", body: "through the registry" } })
    expect(sent.status, sent.text).toBe(200)
    expect(sent.body).toMatchObject({ ok: true, devices_attempted: 1 })
    // node-a's own relay and node-b's, which node-a knows only through the registry
    expect(ntfyA.published.at(-1)).toMatchObject({ topic: "net-web", message: "through the registry", authorization: "Bearer tk_a" })
    await waitFor("node-b's relay published it", async () => ntfyB.published.some((m) => m.topic === "net-web" && m.authorization === "Bearer tk_b"), 10_000)

    // a node with no relay of its own and no seed still has the platform relay: its peers' relays,
    // found through the registry (a relay_push registration and a send are not PUSH_NOT_CONFIGURED)
    const { PORTICO_PUSH_RELAY_URL: _relay, PORTICO_PUSH_RELAY_TOKEN: _token, ...noRelay } = aEnv()
    const d = await startGateway({ port: await Effect.runPromise(freePort), env: { ...noRelay, PORTICO_NODE_ID: "node-d" } })
    try {
      await waitFor("node-a active on node-d", async () => (await peersOn(d)).some((p) => p.node === "node-a" && p.status === "active"), 10_000)
      expect((await d.request("POST", "/v1/push/devices", { token: session, json: { device_id: "web-d", provider: "relay_push", token: "net-d" } })).status).toBe(200)
      const throughD = await d.request("POST", "/v1/push/send", { token: runtime, json: { user_id: userId, title: "Hi", body: "from a node without a relay" } })
      expect(throughD.status, throughD.text).toBe(200)
      expect(throughD.body).toMatchObject({ ok: true })
      await waitFor("a peer's relay published node-d's send", async () => [...ntfyA.published, ...ntfyB.published].some((m) => m.message === "from a node without a relay"), 10_000)
    } finally {
      await d.stop()
    }
  })
})
