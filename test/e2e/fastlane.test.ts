/**
 * The fast lane answers as the HttpApi app does. Two gateways share one registry, one with the
 * lane (the default) and one without (PORTICO_FAST_LANE=false); every request below goes to both,
 * in the same order, and the two answers must match: status, every header (the date aside), and
 * the body byte for byte. Each gateway has its own embedded cache, and both see the same writes, so
 * their state stays the same. Which requests the lane itself takes is test/api/FastLane.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, startGateway } from "../support/gateway.js"
import { type RawExchange, sendRaw } from "../support/rawExchange.js"
import { coordinationHeaders } from "../support/internalCall.js"

type Exchange = RawExchange

interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: string
}

/** One request over a fresh connection, the body sent as given (no client-side JSON encoding), its answer's body as text. */
const send = async (port: number, exchange: Exchange): Promise<Answer> => {
  const answer = await sendRaw(port, exchange)
  return { ...answer, body: answer.body.toString("latin1") }
}

/** Both gateways run as one node (they share a data directory, so its key): a peer's calls are addressed to it. */
const NODE = `lane-node-${process.pid}`

describe("the fast lane answers as the HttpApi app does", () => {
  let lane: Gateway
  let app: Gateway
  let owner: string
  let cacheKey: string
  let narrowKey: string
  let runtimeKey: string
  let token: string

  const post = (path: string, token: string | undefined, body: string | Buffer, extra: Record<string, string> = {}): Exchange => ({
    method: "POST",
    path,
    headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), "content-type": "application/json", ...extra },
    body
  })
  const get = (path: string, token: string | undefined, extra: Record<string, string> = {}): Exchange => ({
    method: "GET",
    path,
    headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...extra }
  })

  /** Sends to both gateways and checks the answers are the same; returns the lane's. */
  const both = async (exchange: Exchange): Promise<Answer> => {
    const fromLane = await send(lane.port, exchange)
    const fromApp = await send(app.port, exchange)
    expect(fromLane, `${exchange.method} ${exchange.path} ${String(exchange.body ?? "")}`).toEqual(fromApp)
    return fromLane
  }

  beforeAll(async () => {
    lane = await startGateway({ env: { PORTICO_NODE_ID: NODE, PORTICO_RATE_LIMIT: "true", PORTICO_RATE_LIMIT_CLIENT_BURST: "100000" } })
    app = await startGateway({
      dataDir: lane.dataDir,
      env: { PORTICO_NODE_ID: NODE, PORTICO_FAST_LANE: "false", PORTICO_RATE_LIMIT: "true", PORTICO_RATE_LIMIT_CLIENT_BURST: "100000" }
    })
    owner = (await lane.cli(["namespace", "create", "lanens"])).api_key
    const mint = async (body: unknown) => (await lane.request("POST", "/v1/namespace/keys", { token: owner, json: body })).body.api_key as string
    cacheKey = await mint({ scopes: ["cache"], label: "cache" })
    narrowKey = await mint({ scopes: ["cache:key=m1/*"], label: "narrow" })
    runtimeKey = await mint({ scopes: ["invoke"], label: "no cache" })
    token = (await lane.request("POST", "/v1/auth/token", { token: owner })).body.access_token
    expect(typeof token).toBe("string")
  }, 90_000)
  afterAll(async () => {
    await lane?.stop()
    await app?.stop()
  })

  it("whoami: keys, tokens and every credential refusal", async () => {
    for (const credential of [owner, cacheKey, narrowKey, runtimeKey, token, token]) {
      expect((await both(get("/v1/auth/whoami", credential))).status).toBe(200)
    }
    const unknown = owner.slice(0, -4) + (owner.endsWith("AAAA") ? "BBBB" : "AAAA")
    for (const exchange of [
      get("/v1/auth/whoami", undefined),
      get("/v1/auth/whoami", unknown),
      get("/v1/auth/whoami", "portico_nonsense"),
      get("/v1/auth/whoami", token.slice(0, -3) + "abc"),
      get("/v1/auth/whoami", undefined, { authorization: "Basic abc" }),
      get("/v1/auth/whoami?x=1", owner),
      get("/v1/auth/whoami/", owner),
      { method: "HEAD", path: "/v1/auth/whoami", headers: { authorization: `Bearer ${owner}` } },
      { method: "POST", path: "/v1/auth/whoami", headers: { authorization: `Bearer ${owner}` } },
      { ...get("/v1/auth/whoami", owner), body: "\xff\xfe not json" },
      // a browser's request: the CORS answer for an origin the namespace has not admitted
      get("/v1/auth/whoami", owner, { origin: "https://app.example" }),
      get("/v1/auth/whoami", undefined, { origin: "https://app.example" })
    ]) {
      await both(exchange)
    }
  })

  it("cache put, get, delete and mget: answers, misses and every refusal", async () => {
    const big = "x".repeat(1024 * 1024)
    const exchanges: ReadonlyArray<Exchange> = [
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"k","value":{"a":[1,null,{"b":false}],"n":12345678901234567890123}}'),
      post("/v1/cache/get", cacheKey, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"t","value":"soon","ttl":"1h30m"}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"t","value":"x","ttl":"90"}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"t","value":"x","ttl":"-1s"}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"k","value":null}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"k","value":1,"extra":true}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"k","value":1,"value":2}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"k","va\\u006cue":7}'),
      post("/v1/cache/get", cacheKey, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/put", cacheKey, `{"dmap":"m","key":"${"k".repeat(300)}","value":1}`),
      post("/v1/cache/put", cacheKey, `{"dmap":"m","key":"big","value":"${big}"}`),
      post("/v1/cache/put", cacheKey, '{"dmap":"","key":"k","value":1}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"\\ud800","value":1}'),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"k","value":1'),
      post("/v1/cache/put", cacheKey, ""),
      post("/v1/cache/put", cacheKey, "[]"),
      post("/v1/cache/put", cacheKey, Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d])),
      post("/v1/cache/put", cacheKey, '{"dmap":"m","key":"form","value":1}', { "content-type": "application/x-www-form-urlencoded" }),
      post("/v1/cache/put?x=1", cacheKey, '{"dmap":"m","key":"k","value":1}'),
      post("/v1/cache/put", undefined, '{"dmap":"m","key":"k","value":1}'),
      post("/v1/cache/put", runtimeKey, '{"dmap":"m","key":"k","value":1}'),
      post("/v1/cache/put", narrowKey, '{"dmap":"m1","key":"ok","value":"narrow"}'),
      post("/v1/cache/put", narrowKey, '{"dmap":"m2","key":"no","value":1}'),
      post("/v1/cache/get", narrowKey, '{"dmap":"m1","key":"ok"}'),
      post("/v1/cache/get", narrowKey, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/get", cacheKey, '{"dmap":"m","key":"absent"}'),
      post("/v1/cache/get", cacheKey, `{"dmap":"m","key":"${"k".repeat(300)}"}`),
      post("/v1/cache/get", cacheKey, '{"dmap":"m","key":"form"}'),
      post("/v1/cache/get", token, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/mget", cacheKey, '{"dmap":"m","keys":["k","absent","t","k"]}'),
      post("/v1/cache/mget", cacheKey, '{"dmap":"m","keys":[]}'),
      post("/v1/cache/mget", cacheKey, JSON.stringify({ dmap: "m", keys: Array.from({ length: 1001 }, (_, i) => `k${i}`) })),
      post("/v1/cache/mget", narrowKey, '{"dmap":"m1","keys":["ok","nope"]}'),
      post("/v1/cache/mget", narrowKey, '{"dmap":"m","keys":["k"]}'),
      post("/v1/cache/delete", cacheKey, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/delete", cacheKey, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/get", cacheKey, '{"dmap":"m","key":"k"}'),
      post("/v1/cache/delete", narrowKey, '{"dmap":"m2","key":"no"}'),
      post("/v1/cache/scan", cacheKey, '{"dmap":"m"}')
    ]
    const statuses = []
    for (const exchange of exchanges) statuses.push((await both(exchange)).status)
    // the table reaches every kind of answer the routes give
    expect(new Set(statuses)).toEqual(new Set([200, 400, 401, 403, 404, 413]))
  })

  it("cluster SQL query and exec: rows, counts, wide integers, blobs and every refusal", async () => {
    // both gateways run every statement on the same store, one after the other: the writes below
    // answer the same whichever runs them first
    const created = await lane.request("POST", "/v1/rqlite/create-table", {
      token: owner,
      json: { schema: "CREATE TABLE lane_t (id INTEGER PRIMARY KEY, v TEXT, b BLOB)" }
    })
    expect(created.status, created.text).toBe(200)
    const statement = (sql: string, args?: ReadonlyArray<unknown>) => JSON.stringify(args === undefined ? { sql } : { sql, args })
    const exchanges: ReadonlyArray<Exchange> = [
      post("/v1/rqlite/exec", owner, statement("INSERT OR REPLACE INTO lane_t (id, v) VALUES (?, ?)", [1, "one"])),
      post("/v1/rqlite/exec", owner, '{"sql":"INSERT OR REPLACE INTO lane_t (id, v, b) VALUES (?, ?, X\u002700FF\u0027)","args":[9223372036854775807,"max"]}'),
      post("/v1/rqlite/exec", token, statement("UPDATE lane_t SET v = ? WHERE id = 1", ["uno"])),
      post("/v1/rqlite/query", owner, statement("SELECT id, v, b FROM lane_t ORDER BY id")),
      post("/v1/rqlite/query", token, '{"sql":"SELECT v FROM lane_t WHERE id = ?","args":[9223372036854775807]}'),
      post("/v1/rqlite/query", owner, statement("SELECT ? AS t, ? AS f, ? AS n, ? AS x", [true, false, null, 1.5])),
      post("/v1/rqlite/query", owner, statement("SELECT id FROM lane_t WHERE id = ?", [-1])),
      post("/v1/rqlite/query", owner, '{"sql":"SELECT 1","args":[18446744073709551616]}'),
      post("/v1/rqlite/query", owner, statement("SELECT * FROM portico_keys")),
      post("/v1/rqlite/query", owner, statement("ATTACH DATABASE 'x' AS y")),
      post("/v1/rqlite/query", owner, statement("SELECT 1; SELECT 2")),
      post("/v1/rqlite/query", owner, statement("SELECT * FROM lane_missing")),
      post("/v1/rqlite/query", owner, statement("DELETE FROM lane_t")),
      post("/v1/rqlite/exec", owner, statement("SELECT 1")),
      post("/v1/rqlite/exec", owner, statement("INSERT INTO lane_t (id) VALUES (1)")),
      post("/v1/rqlite/query", owner, '{"sql":"SELECT 1","args":[{"a":1}]}'),
      post("/v1/rqlite/query", owner, '{"sql":"SELECT 1","extra":true}'),
      post("/v1/rqlite/query", owner, '{"sql":"SELECT 1","sql":"SELECT 2"}'),
      post("/v1/rqlite/query", owner, '{"sql":"SELECT \ud800"}'),
      post("/v1/rqlite/query", owner, '{"sql":'),
      post("/v1/rqlite/query", owner, ""),
      post("/v1/rqlite/query?x=1", owner, statement("SELECT 1")),
      post("/v1/rqlite/query", undefined, statement("SELECT 1")),
      post("/v1/rqlite/query", cacheKey, statement("SELECT 1")),
      post("/v1/rqlite/exec", runtimeKey, statement("DELETE FROM lane_t"))
    ]
    const statuses = []
    for (const exchange of exchanges) statuses.push((await both(exchange)).status)
    expect(new Set(statuses)).toEqual(new Set([200, 400, 401, 403]))
  })

  it("node-local database query: rows, counts, wide integers, booleans and every refusal", async () => {
    const created = await lane.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "lanedb" } })
    expect(created.status, created.text).toBe(201)
    const query = (sql: string, params?: ReadonlyArray<unknown>, database_name = "lanedb") =>
      JSON.stringify(params === undefined ? { database_name, query: sql } : { database_name, query: sql, params })
    const exchanges: ReadonlyArray<Exchange> = [
      post("/v1/db/sqlite/query", owner, query("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT, b BLOB)")),
      post("/v1/db/sqlite/query", owner, query("INSERT OR REPLACE INTO t (id, v, b) VALUES (?, ?, X'00FF')", [1, "one"])),
      post("/v1/db/sqlite/query", owner, '{"database_name":"lanedb","query":"INSERT OR REPLACE INTO t (id, v) VALUES (?, ?)","params":[9223372036854775807,"max"]}'),
      post("/v1/db/sqlite/query", token, query("SELECT id, v, b FROM t ORDER BY id")),
      post("/v1/db/sqlite/query", owner, query("SELECT ? AS t, ? AS f, ? AS n, ? AS x", [true, false, null, 1.5])),
      post("/v1/db/sqlite/query", owner, query("SELECT * FROM missing")),
      post("/v1/db/sqlite/query", owner, query("ATTACH DATABASE 'x' AS y")),
      post("/v1/db/sqlite/query", owner, query("SELECT 1; SELECT 2")),
      post("/v1/db/sqlite/query", owner, query("SELECT 1", [], "nosuchdb")),
      post("/v1/db/sqlite/query", owner, '{"database_name":"lanedb","query":"SELECT 1","extra":true}'),
      post("/v1/db/sqlite/query", owner, '{"database_name":"lanedb","query":'),
      post("/v1/db/sqlite/query", owner, ""),
      post("/v1/db/sqlite/query", undefined, query("SELECT 1")),
      post("/v1/db/sqlite/query", cacheKey, query("SELECT 1")),
      post("/v1/db/sqlite/query", runtimeKey, query("SELECT 1"))
    ]
    const statuses = []
    for (const exchange of exchanges) statuses.push((await both(exchange)).status)
    expect(new Set(statuses)).toEqual(new Set([200, 400, 401, 403, 404]))
  })

  it("a node-local query forwarded by a peer: rows, refusals of the statement and of the payload, and every coordination refusal", async () => {
    const created = await lane.request("POST", "/v1/db/sqlite/create", { token: owner, json: { database_name: "peerdb" } })
    expect(created.status, created.text).toBe(201)
    const route = "/v1/internal/sqlite/query"
    const principal = { namespace: "lanens", subject: "0xabc", method: "api_key", role: "owner", grants: [] }
    const payload = (query: string, params: ReadonlyArray<unknown> = [], database_name = "peerdb") => JSON.stringify({ database_name, params, principal, query })
    /** A call signed afresh for each gateway (they share one nonce ledger), `alter` applied to its headers. */
    const peerCall = async (body: string, alter: (headers: Record<string, string>) => Record<string, string> = (h) => h) => {
      const exchange = (gw: Gateway): Exchange => post(route, undefined, body, alter(coordinationHeaders(gw, NODE, route, body)))
      const fromLane = await send(lane.port, exchange(lane))
      const fromApp = await send(app.port, exchange(app))
      expect(fromLane, body).toEqual(fromApp)
      return fromLane
    }
    const statuses: Array<number> = []
    for (const body of [
      payload("CREATE TABLE IF NOT EXISTS p (id INTEGER PRIMARY KEY, v TEXT)"),
      payload("INSERT OR REPLACE INTO p (id, v) VALUES (?, ?)", [1, "one"]),
      payload("SELECT id, v FROM p WHERE id = ?", [1]),
      payload("SELECT ? AS t, ? AS f", [true, false]),
      payload("SELECT * FROM missing"),
      payload("ATTACH DATABASE 'x' AS y"),
      payload("SELECT 1", [], "nosuchdb"),
      JSON.stringify({ database_name: "peerdb", params: [], principal, query: "SELECT 1", extra: 1 }),
      JSON.stringify({ database_name: "peerdb", params: [], query: "SELECT 1" }),
      '{"database_name":'
    ]) {
      statuses.push((await peerCall(body)).status)
    }
    const select = payload("SELECT v FROM p WHERE id = 1")
    const refusals = [
      await peerCall(select, ({ "x-portico-coordination-mac": _, ...rest }) => rest),
      await peerCall(select, (h) => ({ ...h, "x-portico-coordination-mac": "v2=" + "0".repeat(64) })),
      await peerCall(select, (h) => ({ ...h, "x-portico-coordination-mac": h["x-portico-coordination-mac"]!.replace("v2=", "v1=") })),
      await peerCall(select, (h) => ({ ...h, "x-portico-coordination-time": String(Math.floor(Date.now() / 1000) - 600) })),
      await peerCall(select, ({ "x-portico-coordination-nonce": _, ...rest }) => rest),
      // the MAC covers the body: another statement under the select's MAC
      await peerCall(payload("DELETE FROM p"), (h) => ({ ...h, ...coordinationHeaders(lane, NODE, route, select), "x-portico-coordination-nonce": h["x-portico-coordination-nonce"]! }))
    ]
    for (const refused of refusals) expect([refused.status, JSON.parse(refused.body).code]).toEqual([403, "COORDINATION_REFUSED"])
    // a call replayed: each gateway takes its own once, and refuses it the second time
    const replayed = async (gw: Gateway) => {
      const exchange = post(route, undefined, select, coordinationHeaders(gw, NODE, route, select))
      const first = await send(gw.port, exchange)
      return [first, await send(gw.port, exchange)] as const
    }
    const [laneFirst, laneAgain] = await replayed(lane)
    const [appFirst, appAgain] = await replayed(app)
    expect(laneFirst).toEqual(appFirst)
    expect(laneAgain).toEqual(appAgain)
    expect([laneFirst.status, laneFirst.body]).toEqual([200, appFirst.body])
    expect(JSON.parse(laneAgain.body).error).toMatch(/replayed/)
    expect(new Set(statuses)).toEqual(new Set([200, 400, 403, 404]))
    // what the peer's calls wrote is there for the tenant
    const read = await lane.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "peerdb", query: "SELECT v FROM p" } })
    expect(read.body).toEqual({ columns: ["v"], rows: [["one"]] })
  })

  it("a key revoked through either gateway is refused by the other at its very next request", async () => {
    const mint = async () => (await lane.request("POST", "/v1/namespace/keys", { token: owner, json: { scopes: ["cache"] } })).body
    for (const [revoker, other] of [
      [app, lane],
      [lane, app]
    ] as const) {
      const minted = await mint()
      const check = get("/v1/auth/whoami", minted.api_key)
      for (let i = 0; i < 3; i++) expect((await both(check)).status).toBe(200)
      const revoked = await revoker.request("DELETE", `/v1/namespace/keys/${minted.id}`, { token: owner })
      expect(revoked.status, revoked.text).toBe(200)
      expect((await send(other.port, check)).status).toBe(401)
      expect((await both(check)).status).toBe(401)
    }
  })

  it("rate limits: the namespace's bucket refuses with the same 429 and Retry-After", async () => {
    // a namespace neither gateway has seen: each reads its limit afresh and starts with a full bucket
    const rateOwner = (await lane.cli(["namespace", "create", "ratens"])).api_key
    const limit = await lane.request("PUT", "/v1/namespace/rate-limit", { token: rateOwner, json: { requests_per_second: 1, burst: 3 } })
    expect(limit.status, limit.text).toBe(200)
    const check = get("/v1/auth/whoami", rateOwner)
    // one gateway after the other: a stall between the two answers of one pair must not refill
    // one bucket and not the other
    const run = async (gateway: Gateway) => {
      const answers: Array<Answer> = []
      for (let i = 0; i < 6; i++) answers.push(await send(gateway.port, check))
      return answers
    }
    const fromLane = await run(lane)
    const fromApp = await run(app)
    // (the PUT was charged to the default limit; the new one's bucket holds at most its burst)
    expect(fromLane.slice(0, 3).map((a) => a.status)).toEqual([200, 200, 200])
    expect(fromApp.slice(0, 3).map((a) => a.status)).toEqual([200, 200, 200])
    const refusedByLane = fromLane.find((a) => a.status === 429)
    const refusedByApp = fromApp.find((a) => a.status === 429)
    expect(refusedByLane).toBeDefined()
    expect(refusedByLane).toEqual(refusedByApp)
    expect(refusedByLane?.headers["retry-after"]).toBe("1")
  })
})
