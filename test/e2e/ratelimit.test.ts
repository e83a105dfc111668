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
