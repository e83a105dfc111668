/**
 * The requests in the operator's telemetry snapshot (docs/operators.md, "Health and telemetry";
 * src/layers/operators/RequestStats.ts), through a real gateway: requests made here move this
 * node's counts of answers, of 4xx and of 5xx by exactly what was sent, and the latency figures
 * cover them. Each snapshot is decoded with the route's own schema (NodeSnapshot).
 */
import { Schema } from "effect"
import { Wallet } from "ethers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { NodeSnapshot } from "../../src/api/groups/OperatorGroup.js"
import { operatorToken } from "../support/client.js"
import { type Gateway, startGateway } from "../support/gateway.js"

const decode = Schema.decodeUnknownSync(NodeSnapshot)

/** The stream's first snapshot, decoded: this node's figures. */
const snapshot = async (gw: Gateway, token: string) => {
  const controller = new AbortController()
  const response = await fetch(`${gw.url}/v1/operator/telemetry/stream?interval=2`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (!/event: snapshot\ndata: [^\n]*\n\n/.test(text)) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  controller.abort()
  const figures = decode(JSON.parse(/event: snapshot\ndata: ([^\n]*)\n\n/.exec(text)![1]!)).requests
  if (figures === undefined) throw new Error("the snapshot has no requests")
  return figures
}

describe("requests in the operator's telemetry", () => {
  let gw: Gateway
  let token: string
  let key: string

  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_RATE_LIMIT: "false" } })
    const operator = Wallet.createRandom()
    await gw.cli(["operator", "add", operator.address])
    token = await operatorToken(gw, operator)
    key = (await gw.cli(["namespace", "create", "counted"])).api_key
  }, 60_000)

  afterAll(async () => {
    await gw?.stop()
  })

  it("counts every answer, its 4xx and 5xx, by exactly what was sent, and times them", async () => {
    const before = await snapshot(gw, token)
    expect(before.answered).toBeGreaterThan(0)
    expect(before.latency.window_seconds).toBe(10)

    // 12 answered 200 (six through the fast lane: whoami), 5 answered 401 (a key that is no key),
    // 3 answered 404 (no such route), 4 answered 503 (push with no credential stored)
    const sent: Array<Promise<number>> = []
    for (let i = 0; i < 6; i++) sent.push(gw.request("GET", "/v1/auth/whoami", { token: key }).then((r) => r.status))
    for (let i = 0; i < 6; i++) sent.push(gw.request("GET", "/v1/namespace/keys", { token: key }).then((r) => r.status))
    for (let i = 0; i < 5; i++) sent.push(gw.request("GET", "/v1/auth/whoami", { token: "portico_key_nothing_here" }).then((r) => r.status))
    for (let i = 0; i < 3; i++) sent.push(gw.request("GET", "/v1/no/such/route").then((r) => r.status))
    for (let i = 0; i < 4; i++) sent.push(gw.request("POST", "/v1/push/send", { token: key, json: { user_id: "u", title: "t", body: "b" } }).then((r) => r.status))
    const statuses = await Promise.all(sent)
    expect(statuses.filter((s) => s === 200)).toHaveLength(12)
    expect(statuses.filter((s) => s >= 400 && s < 500)).toHaveLength(8)
    expect(statuses.filter((s) => s >= 500)).toHaveLength(4)

    const after = await snapshot(gw, token)
    // the first snapshot's stream and this one's are answers too (200): counted when they end or open
    const streams = after.answered - before.answered - statuses.length
    expect(streams).toBeGreaterThanOrEqual(0)
    expect(streams).toBeLessThanOrEqual(2)
    expect(after.errors_4xx - before.errors_4xx).toBe(8)
    expect(after.errors_5xx - before.errors_5xx).toBe(4)
    // the latency window holds at least what was just sent, each answer timed
    expect(after.latency.answered).toBeGreaterThanOrEqual(statuses.length)
    expect(after.latency.p50_ms).toBeGreaterThan(0)
    expect(after.latency.p99_ms).toBeGreaterThanOrEqual(after.latency.p50_ms!)
    // a local answer takes far less than the 10 s the buckets reach
    expect(after.latency.p99_ms).toBeLessThan(10_000)
  })

  it("the health route and the stream are operators' only: the figures are no one else's", async () => {
    const refused = await fetch(`${gw.url}/v1/operator/telemetry/stream?interval=2`, { headers: { authorization: `Bearer ${key}` } })
    expect(refused.status).toBe(403)
    expect(((await refused.json()) as { code: string }).code).toBe("NOT_AN_OPERATOR")
  })
})
