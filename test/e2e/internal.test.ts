/**
 * Node-to-node routes (`/v1/internal/*`) refuse a call whose coordination headers are missing,
 * malformed or stale, or whose MAC does not hold, before its body is decoded: whatever type the
 * body states (here multipart, which the routes never take), the answer is the 403 envelope,
 * never a 5xx and never a hang.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"

const routes = [
  "/v1/internal/sqlite/query",
  "/v1/internal/sqlite/delete",
  "/v1/internal/sqlite/backup",
  // a deployment's changes on its home node; the update's MAC covers its envelope header, not its streamed body
  "/v1/internal/deployments/update",
  "/v1/internal/deployments/rollback",
  "/v1/internal/deployments/env/set",
  "/v1/internal/deployments/delete",
  // the vault's guardian: its shares are given out only to a peer whose MAC holds
  "/v1/internal/vault/share/put",
  "/v1/internal/vault/share/get"
]

const bodies: ReadonlyArray<readonly [string, string]> = [
  ["empty", ""],
  ["not multipart", "garbage"],
  ["a field", '--xx\r\nContent-Disposition: form-data; name="database_name"\r\n\r\ndb\r\n--xx--\r\n'],
  ["a file", '--xx\r\nContent-Disposition: form-data; name="a"; filename="f.bin"\r\nContent-Type: application/octet-stream\r\n\r\nbytes\r\n--xx--\r\n']
]

const expectRefused = (reply: Reply, what: string) => {
  expect(reply.status, `${what}: ${reply.text}`).toBe(403)
  expect(reply.body?.code, what).toBe("COORDINATION_REFUSED")
  expect(Object.keys(reply.body ?? {}).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
}

describe("internal routes check the coordination MAC before reading the body", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway()
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  const send = (route: string, body: string, headers: Record<string, string>) =>
    gw.request("POST", route, { body, headers: { "content-type": "multipart/form-data; boundary=xx", ...headers } })

  it.each(routes)("%s with a multipart body and no credential is 403", async (route) => {
    for (const [what, body] of bodies) expectRefused(await send(route, body, {}), what)
  })

  it.each(routes)("%s with a multipart body and a MAC that does not hold is 403", async (route) => {
    const now = String(Math.floor(Date.now() / 1000))
    const forged = {
      "x-portico-coordination-mac": "v2=" + "ab".repeat(32),
      "x-portico-coordination-time": now,
      "x-portico-coordination-nonce": "A".repeat(24)
    }
    for (const [what, body] of bodies) expectRefused(await send(route, body, forged), what)
    // malformed or stale headers are refused the same way
    expectRefused(await send(route, "garbage", { ...forged, "x-portico-coordination-time": "soon" }), "bad time")
    expectRefused(await send(route, "garbage", { ...forged, "x-portico-coordination-time": String(Number(now) - 3600) }), "stale")
    expectRefused(await send(route, "garbage", { ...forged, "x-portico-coordination-nonce": "short" }), "bad nonce")
    // and a JSON body with a forged MAC too
    const json = JSON.stringify({ principal: { namespace: "acme", subject: "0x" + "ab".repeat(20), method: "api_key", role: "owner", grants: [] }, database_name: "db" })
    expectRefused(await gw.request("POST", route, { body: json, headers: { "content-type": "application/json", ...forged } }), "json")
  })
})
