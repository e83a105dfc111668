/**
 * Joining a node with an invite (docs/cluster.md, "Joining"), through real gateways on one rqlite
 * registry: an operator mints an invite on node a; node b starts with `portico serve --join` on an
 * empty data directory, no root secret and no registry setting, and comes up as one of the
 * cluster's nodes. Refused joins (unknown, expired, spent, another node's, forged) answer 401 or
 * 409 and leave a valid invite unspent.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { decodeInvite, inviteIdOf, type JoinClaim, newSealKey, proofOf, signClaim } from "../../src/domain/NodeJoin.js"
import { call, operatorToken as signInOperator } from "../support/client.js"
import { type Gateway, startGateway, testTmp } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { waitFor } from "../support/wait.js"

const fast = { PORTICO_NODE_HEARTBEAT_MS: "200", PORTICO_NODE_TTL_MS: "1500" }

/** A join request as `portico serve --join` makes it, with parts to spoil. */
const joinBody = (invite: string, nodeId: string, spoil: { iat?: number; proofToken?: string; signer?: crypto.KeyObject } = {}) => {
  const decoded = decodeInvite(invite)
  if (decoded === undefined) throw new Error("not an invite")
  const key = crypto.generateKeyPairSync("ed25519")
  const claim: JoinClaim = {
    invite_id: inviteIdOf(decoded.token),
    node_id: nodeId,
    public_key: (key.publicKey.export({ format: "jwk" }) as { x: string }).x,
    seal_key: newSealKey().public,
    iat: spoil.iat ?? Math.floor(Date.now() / 1000)
  }
  return { ...claim, proof: proofOf(spoil.proofToken ?? decoded.token, claim), signature: signClaim(spoil.signer ?? key.privateKey, claim) }
}

describe("joining a node with an invite", () => {
  let server: RqlitedServer
  let a: Gateway
  let b: Gateway | undefined
  let operatorToken: string
  const operator = Wallet.createRandom()

  const enroll = (json: unknown = {}, token = operatorToken) => a.request("POST", "/v1/node/enroll", { token, json })
  const join = (json: unknown) => a.request("POST", "/v1/internal/join", { json })

  beforeAll(async () => {
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    server = await Effect.runPromise(startRqlited())
    a = await startGateway({
      env: { ...fast, PORTICO_RQLITE_URL: server.url, PORTICO_SECRET: "44".repeat(32), PORTICO_OPERATORS: operator.address.toLowerCase(), PORTICO_NODE_ID: "node-a" }
    })
    operatorToken = await signInOperator(a, operator)
  }, 90_000)
  afterAll(async () => {
    await b?.stop()
    await a?.stop()
    await Effect.runPromise(server?.stop ?? Effect.void)
  })

  it("mints invites for operators only, bounded in life, naming this node's internal URL", async () => {
    const made = await enroll({ expiry_seconds: 600 })
    expect(made.status, made.text).toBe(201)
    expect(made.body.invite).toMatch(/^pjoin_/)
    expect(made.body.node_id).toBeNull()
    expect(made.body.expires_at - Date.now() / 1000).toBeGreaterThan(590)
    expect(decodeInvite(made.body.invite)?.url).toBe(a.url)
    // bound to one node id
    expect((await enroll({ node_id: "node-z" })).body.node_id).toBe("node-z")
    // the typed client names the route
    expect((await call(a, operatorToken, (c) => c.node.enroll({ payload: {} }))).invite).toMatch(/^pjoin_/)
    const owner = (await a.cli(["namespace", "create", "joiners"])).api_key
    for (const [body, token, status, code] of [
      [{}, owner, 403, "NOT_AN_OPERATOR"],
      [{ expiry_seconds: 3601 }, operatorToken, 400, "VALIDATION_FAILED"],
      [{ expiry_seconds: 0 }, operatorToken, 400, "VALIDATION_FAILED"],
      [{ node_id: "../etc" }, operatorToken, 400, "VALIDATION_FAILED"],
      [{ extra: 1 }, operatorToken, 400, "VALIDATION_FAILED"]
    ] as const) {
      const answer = await enroll(body, token)
      expect([answer.status, answer.body.code], JSON.stringify(body)).toEqual([status, code])
    }
  })

  it("refuses unknown, expired, forged, stale and misbound joins, spending nothing", async () => {
    const invite = (await enroll({ node_id: "node-b" })).body.invite as string
    const stranger = "pjoin_" + Buffer.from(JSON.stringify({ u: a.url, t: crypto.randomBytes(32).toString("base64url") })).toString("base64url")
    const otherKey = crypto.generateKeyPairSync("ed25519").privateKey
    for (const [body, status, what] of [
      [joinBody(stranger, "node-b"), 401, "another cluster's invite"],
      [joinBody(invite, "node-b", { proofToken: crypto.randomBytes(32).toString("base64url") }), 401, "a proof made without the token"],
      [joinBody(invite, "node-b", { iat: Math.floor(Date.now() / 1000) - 600 }), 401, "a stale request"],
      [joinBody(invite, "node-b", { signer: otherKey }), 401, "a signature by another key"],
      [joinBody(invite, "node-c"), 409, "an invite bound to another node"],
      [{ ...joinBody(invite, "node-b"), seal_key: "short" }, 400, "a malformed key"]
    ] as const) {
      const answer = await join(body)
      expect(answer.status, `${what}: ${answer.text}`).toBe(status)
      expect(answer.body).toMatchObject({ error: expect.any(String), code: expect.any(String) })
      expect(answer.body).not.toHaveProperty("sealed")
    }
    // an expired invite
    const short = await enroll({ expiry_seconds: 1 })
    await waitFor("the short invite to expire", () => Date.now() > (short.body.expires_at + 1) * 1000 + 100, 5_000)
    expect((await join(joinBody(short.body.invite, "node-x"))).status).toBe(401)
    // the invite that was tried with every spoiled request still admits its node, once
    const good = joinBody(invite, "node-b")
    const admitted = await join(good)
    expect(admitted.status, admitted.text).toBe(200)
    expect(admitted.body).toMatchObject({ node: "node-a", seal_from: expect.any(String), sealed: expect.any(String) })
    // replayed, or spent again under another claim
    expect((await join(good)).status).toBe(401)
    expect((await join(joinBody(invite, "node-b"))).status).toBe(401)
    // the node id is now bound to the key that joined: another key cannot take it
    const taken = await join(joinBody((await enroll({})).body.invite, "node-b"))
    expect([taken.status, taken.body.code]).toEqual([409, "CONFLICT"])
    // an id of the derived form is its key's only, bound or not
    const derived = await join(joinBody((await enroll({})).body.invite, `node-${"0".repeat(32)}`))
    expect([derived.status, derived.body.code, derived.body.error]).toEqual([409, "CONFLICT", "this node id is derived from another node's key"])
  })

  it("starts a node with `serve --join` on an empty data directory: it comes up as one of the cluster's", async () => {
    const invite = (await enroll({})).body.invite as string
    const dataDir = fs.mkdtempSync(path.join(testTmp(), "portico-join-"))
    // no root secret and no registry: both come from the invite
    b = await startGateway({ dataDir, args: ["--join", invite], env: { ...fast, PORTICO_NODE_ID: "node-joined" } })
    expect(b.logs()).toContain("joined the cluster")
    expect(fs.statSync(path.join(dataDir, "secret.key")).mode & 0o777).toBe(0o600)
    expect(fs.statSync(path.join(dataDir, "cluster.json")).mode & 0o777).toBe(0o600)
    expect(Buffer.from(fs.readFileSync(path.join(dataDir, "secret.key"), "utf8").trim(), "base64").toString("hex")).toBe("44".repeat(32))
    await waitFor("the joined node to be active on a", async () => {
      const peers = await a.request("GET", "/v1/network/peers", { token: operatorToken })
      return peers.body.peers.some((p: { node: string; status: string }) => p.node === "node-joined" && p.status === "active")
    }, 10_000)
    // the same registry and root secret: a key minted on a works on b
    const owner = (await a.cli(["namespace", "create", "shared"])).api_key
    const whoami = await b.request("GET", "/v1/auth/whoami", { token: owner })
    expect([whoami.status, whoami.body.namespace], whoami.text).toEqual([200, "shared"])
    // a restart that still says --join does not spend another invite
    await b.stop()
    const again = (await enroll({})).body.invite as string
    b = await startGateway({ dataDir, args: ["--join", again], env: { ...fast, PORTICO_NODE_ID: "node-joined" } })
    expect(b.logs()).toContain("joined before")
    expect((await join(joinBody(again, "node-fresh"))).status).toBe(200)
  })

  it("answers for any node from any node: its status, its log, and its drain", async () => {
    const joined = b!
    // an operator of the registry's list is one on every node (PORTICO_OPERATORS is a's setting only)
    await a.cli(["operator", "add", operator.address.toLowerCase()])
    const get = (p: string, token = operatorToken) => a.request("GET", p, { token })
    const status = await get("/v1/node/status?node=node-joined")
    expect(status.status, status.text).toBe(200)
    expect(status.body).toMatchObject({ node: "node-joined", status: "active", self: false, draining: false, reachable: true, error: null })
    expect(status.body.snapshot).toMatchObject({ node: "node-joined", status: "ok" })
    expect((await get("/v1/node/status")).body).toMatchObject({ node: "node-a", self: true, reachable: true })
    // one node runs the cluster's background work: a, which holds the lease it took first
    expect([(await get("/v1/node/status")).body.runs_cluster_worker, status.body.runs_cluster_worker]).toEqual([true, false])
    // its log, read through a: the lines b wrote
    const logs = await get("/v1/node/logs?node=node-joined&lines=1000")
    expect(logs.status, logs.text).toBe(200)
    expect(logs.body.node).toBe("node-joined")
    expect(logs.body.lines.some((l: string) => l.includes('"msg":"listening"'))).toBe(true)
    expect((await get("/v1/node/logs?node=node-joined&lines=2")).body.lines).toHaveLength(2)
    // the typed client names the routes
    expect((await call(a, operatorToken, (c) => c.node.status({ urlParams: { node: "node-joined" } }))).status).toBe("active")
    const owner = (await a.cli(["namespace", "create", "drained"])).api_key
    for (const [p, status, code] of [
      ["/v1/node/status?node=node-nowhere", 404, "NOT_FOUND"],
      ["/v1/node/logs?node=node-nowhere", 404, "NOT_FOUND"],
      ["/v1/node/logs?lines=0", 400, "VALIDATION_FAILED"],
      ["/v1/node/logs?lines=1001", 400, "VALIDATION_FAILED"],
      // integers are plain decimal digits, and a query member the route does not take is refused
      ["/v1/node/logs?lines=1e1", 400, "VALIDATION_FAILED"],
      ["/v1/node/logs?lines=0x5", 400, "VALIDATION_FAILED"],
      ["/v1/node/logs?x=1", 400, "VALIDATION_FAILED"],
      ["/v1/node/status?x=1", 400, "VALIDATION_FAILED"],
      ["/v1/operator/audit?limit=1e1", 400, "VALIDATION_FAILED"],
      ["/v1/operator/audit?after=0x10", 400, "VALIDATION_FAILED"],
      ["/v1/operator/audit?x=1", 400, "VALIDATION_FAILED"],
      ["/v1/operator/telemetry/stream?interval=2e0", 400, "VALIDATION_FAILED"],
      ["/v1/operator/telemetry/stream?x=1", 400, "VALIDATION_FAILED"],
      ["/v1/node/status?node=..%2Fx", 400, "VALIDATION_FAILED"]
    ] as const) {
      const answer = await get(p)
      expect([answer.status, answer.body.code], p).toEqual([status, code])
    }
    expect((await get("/v1/node/status", owner)).status).toBe(403)
    // drain b through a: b answers its health with 503 and takes no new database; a lists it draining
    const drain = await a.request("POST", "/v1/node/command", { token: operatorToken, json: { node: "node-joined", command: "drain" } })
    expect([drain.status, drain.body], drain.text).toEqual([200, { node: "node-joined", command: "drain", draining: true }])
    await waitFor("b to know it is draining", async () => (await joined.request("GET", "/health")).status === 503, 10_000)
    expect((await joined.request("GET", "/v1/health")).body.status).toBe("draining")
    const refused = await joined.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "late" } })
    expect([refused.status, refused.body.code], refused.text).toEqual([503, "UNAVAILABLE"])
    expect(refused.headers.get("retry-after")).not.toBeNull()
    expect((await a.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "late" } })).status).toBe(201)
    expect((await get("/v1/network/peers")).body.peers.find((p: { node: string }) => p.node === "node-joined").draining).toBe(true)
    // undrain through b itself: known there at once
    const undrain = await joined.request("POST", "/v1/node/command", { token: operatorToken, json: { node: "node-joined", command: "undrain" } })
    expect(undrain.status, undrain.text).toBe(200)
    expect((await joined.request("GET", "/health")).status).toBe(200)
    for (const body of [{ node: "node-nowhere", command: "drain" }, { node: "node-joined", command: "reboot" }, { command: "drain" }]) {
      const answer = await a.request("POST", "/v1/node/command", { token: operatorToken, json: body })
      expect(answer.status, JSON.stringify(body)).toBe(body.node === "node-nowhere" ? 404 : 400)
    }
  })

  it("retires a node through another, moving its databases without losing a write; a node that does not answer leaves only by force", async () => {
    const leaving = b!
    const owner = (await a.cli(["namespace", "create", "movers"])).api_key
    const created = await leaving.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "ledger" } })
    expect([created.status, created.body.home_node], created.text).toEqual([201, "node-joined"])
    const query = (gw: Gateway, sql: string) => gw.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "ledger", query: sql } })
    expect((await query(leaving, "CREATE TABLE t (v INTEGER)")).status).toBe(200)
    for (let i = 0; i < 20; i++) expect((await query(a, `INSERT INTO t VALUES (${i})`)).status).toBe(200)
    const leave = (json: unknown, gw: Gateway = a) => gw.request("POST", "/v1/node/leave", { token: operatorToken, json })
    // a node leaves through another
    expect([(await leave({ node: "node-joined" }, leaving)).status]).toEqual([409])
    // writes keep coming through both gateways while it leaves: each is a 200 or a retryable 503
    let leaveDone = false
    const statuses: Array<number> = []
    const writer = (async () => {
      for (let i = 100; !leaveDone || i < 110; i++) {
        const answer = await query(i % 2 === 0 ? a : leaving, `INSERT INTO t VALUES (${i})`)
        statuses.push(answer.status)
        if (answer.status === 503) expect(answer.headers.get("retry-after"), answer.text).not.toBeNull()
      }
    })()
    const left = await leave({ node: "node-joined" })
    leaveDone = true
    await writer
    expect(left.status, left.text).toBe(200)
    expect(left.body).toEqual({ node: "node-joined", retired: true, moved: [{ namespace: "movers", database: "ledger", to: "node-a" }], lost: { databases: 0, deployments: 0 } })
    expect(statuses.every((s) => s === 200 || s === 503), statuses.join(",")).toBe(true)
    // every acknowledged row is there, on its new home, through either gateway
    const acknowledged = 20 + statuses.filter((s) => s === 200).length
    expect((await query(a, "SELECT COUNT(*) FROM t")).body.rows).toEqual([[acknowledged]])
    expect((await query(leaving, "INSERT INTO t VALUES (20)")).status).toBe(200)
    expect((await query(a, "SELECT COUNT(*) FROM t")).body.rows).toEqual([[acknowledged + 1]])
    // the file is on a now: its size is known there
    const listed = await a.request("GET", "/v1/db/sqlite/list", { token: owner })
    expect(listed.body.databases.find((d: { name: string }) => d.name === "ledger").size_bytes).toBeGreaterThan(0)
    const peer = (await a.request("GET", "/v1/network/peers", { token: operatorToken })).body.peers.find((p: { node: string }) => p.node === "node-joined")
    expect(peer.status).toBe("retired")
    await waitFor("the retired node to say so", () => leaving.logs().includes("left the cluster"), 10_000)
    expect((await leave({ node: "node-joined" })).status).toBe(404)
    // its key no longer starts it
    await leaving.stop()
    b = undefined
    await expect(startGateway({ dataDir: leaving.dataDir, env: { ...fast, PORTICO_NODE_ID: "node-joined" } })).rejects.toThrow(/left the cluster/)

    // a node that does not answer: its database cannot move, so only force retires it
    const dataDir = fs.mkdtempSync(path.join(testTmp(), "portico-join-"))
    const c = await startGateway({ dataDir, args: ["--join", (await enroll({})).body.invite], env: { ...fast, PORTICO_NODE_ID: "node-c" } })
    expect((await c.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "stranded" } })).status).toBe(201)
    process.kill(c.pid, "SIGKILL")
    await waitFor("c to be inactive", async () => {
      const peers = await a.request("GET", "/v1/network/peers", { token: operatorToken })
      return peers.body.peers.some((p: { node: string; status: string }) => p.node === "node-c" && p.status === "inactive")
    }, 15_000)
    const refused = await leave({ node: "node-c" })
    expect([refused.status, refused.body.code], refused.text).toEqual([409, "CONFLICT"])
    expect(refused.body.error).toContain("1 database")
    const forced = await leave({ node: "node-c", force: true })
    expect([forced.status, forced.body.lost], forced.text).toEqual([200, { databases: 1, deployments: 0 }])
    for (const [body, status] of [[{ node: "node-c" }, 404], [{ node: "node-nowhere" }, 404], [{ node: "node-a", force: "yes" }, 400], [{}, 400]] as const) {
      expect((await leave(body)).status, JSON.stringify(body)).toBe(status)
    }
  })

  it("refuses to join a data directory that holds a root secret of its own, and a garbled invite", async () => {
    const dataDir = fs.mkdtempSync(path.join(testTmp(), "portico-join-"))
    fs.writeFileSync(path.join(dataDir, "secret.key"), crypto.randomBytes(32).toString("base64"))
    const invite = (await enroll({})).body.invite as string
    await expect(startGateway({ dataDir, args: ["--join", invite] })).rejects.toThrow(/holds a root secret of its own/)
    await expect(startGateway({ args: ["--join", "pjoin_garbage"] })).rejects.toThrow(/--join takes an invite/)
    // the invite was not spent by the refused start
    expect((await join(joinBody(invite, "node-late"))).status).toBe(200)
  })
})

describe("node invites on an embedded registry", () => {
  it("are refused: no other node can share a registry kept in one node's data directory", async () => {
    const operator = Wallet.createRandom()
    const gw = await startGateway({ env: { PORTICO_OPERATORS: operator.address.toLowerCase() } })
    try {
      const answer = await gw.request("POST", "/v1/node/enroll", { token: await signInOperator(gw, operator), json: {} })
      expect([answer.status, answer.body.code]).toEqual([409, "CONFLICT"])
      expect(answer.body.hint).toContain("PORTICO_RQLITE_URL")
    } finally {
      await gw.stop()
    }
  })
})
