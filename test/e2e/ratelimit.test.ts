/**
 * Rate limits through a real gateway process: which routes are charged to a client network, and
 * what a namespace may set as its own limit.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"

const expectError = (reply: Reply, status: number, code?: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(typeof reply.body?.error).toBe("string")
  if (code !== undefined) expect(reply.body?.code, reply.text).toBe(code)
}

/** A well-formed forwarded query, so the refusal is the route's own (no MAC), not a decode error. */
const forwardedQuery = {
  principal: { namespace: "acme", subject: "0x" + "ab".repeat(20), method: "api_key", role: "owner", grants: [] },
  database_name: "db",
  query: "SELECT 1",
  params: []
}

describe("client-network limit and node-to-node routes", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      env: { PORTICO_RATE_LIMIT: "true", PORTICO_RATE_LIMIT_CLIENT_RPS: "1", PORTICO_RATE_LIMIT_CLIENT_BURST: "2" }
    })
  })
  afterAll(async () => {
    await gw?.stop()
  })

  it("never charges an internal route to the caller's network: a peer gateway forwards for many clients", async () => {
    const replies: Array<Reply> = []
    for (let i = 0; i < 8; i++) replies.push(await gw.request("POST", "/v1/internal/sqlite/query", { json: forwardedQuery }))
    // every call gets the route's own refusal (no coordination MAC), none the network's 429
    for (const r of replies) expectError(r, 403, "COORDINATION_REFUSED")
    // and the internal calls left this network's bucket full: an ordinary route still has its
    // whole burst, then is limited
    const ordinary: Array<Reply> = []
    for (let i = 0; i < 5; i++) ordinary.push(await gw.request("GET", "/v1/version"))
    expect(ordinary.slice(0, 2).map((r) => r.status)).toEqual([200, 200])
    const limited = ordinary.find((r) => r.status === 429)
    if (limited === undefined) throw new Error("ordinary route never limited: " + ordinary.map((r) => r.status).join(","))
    expectError(limited, 429, "RATE_LIMITED")
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  })

  it("keeps the body cap on internal routes", async () => {
    const big = "x".repeat(8 * 1024 * 1024)
    const reply = await gw.request("POST", "/v1/internal/sqlite/query", { json: { ...forwardedQuery, query: big } })
    expect(reply.status).toBe(413)
  })
})

describe("a namespace's own limit is capped at the operator's per-namespace default", () => {
  let gw: Gateway
  let key: string
  const env = {
    PORTICO_RATE_LIMIT: "true",
    PORTICO_RATE_LIMIT_CLIENT_RPS: "10000",
    PORTICO_RATE_LIMIT_CLIENT_BURST: "10000",
    PORTICO_RATE_LIMIT_NAMESPACE_RPS: "50",
    PORTICO_RATE_LIMIT_NAMESPACE_BURST: "80"
  }
  beforeAll(async () => {
    gw = await startGateway({ env })
    key = (await gw.cli(["namespace", "create", "capped"])).api_key
  })
  afterAll(async () => {
    await gw?.stop()
  })

  const put = (json: unknown) => gw.request("PUT", "/v1/namespace/rate-limit", { token: key, json })

  it("refuses the owner a limit above the default, naming the ceiling, and keeps the default", async () => {
    const raised = await put({ requests_per_second: 1_000_000, burst: 10_000_000 })
    expectError(raised, 400, "VALIDATION_FAILED")
    expect(raised.body.hint).toContain("50 requests per second")
    expect(raised.body.hint).toContain("burst 80")
    expectError(await put({ requests_per_second: 51 }), 400, "VALIDATION_FAILED")
    expectError(await put({ requests_per_second: 10, burst: 81 }), 400, "VALIDATION_FAILED")
    const view = await gw.request("GET", "/v1/namespace/rate-limit", { token: key })
    expect(view.body).toEqual({ namespace: "capped", requests_per_second: 50, burst: 80, source: "default" })
  })

  it("accepts a limit at or below the default; a derived burst is held to the ceiling", async () => {
    expect((await put({ requests_per_second: 50 })).body).toEqual({
      namespace: "capped",
      requests_per_second: 50,
      // twice the rate would be 100
      burst: 80,
      source: "namespace"
    })
    expect((await put({ requests_per_second: 20 })).body).toMatchObject({ requests_per_second: 20, burst: 40 })
    expect((await put({ requests_per_second: 10, burst: 80 })).body).toMatchObject({ requests_per_second: 10, burst: 80 })
  })

  it("bounds a stored limit by a lower default on another gateway", async () => {
    expect((await put({ requests_per_second: 40, burst: 80 })).status).toBe(200)
    const lower = await startGateway({
      dataDir: gw.dataDir,
      env: { ...env, PORTICO_RATE_LIMIT_NAMESPACE_RPS: "20", PORTICO_RATE_LIMIT_NAMESPACE_BURST: "30" }
    })
    try {
      const view = await lower.request("GET", "/v1/namespace/rate-limit", { token: key })
      expect(view.body).toEqual({ namespace: "capped", requests_per_second: 20, burst: 30, source: "namespace" })
    } finally {
      await lower.stop()
    }
  })
})
