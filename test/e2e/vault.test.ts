/**
 * The vault through a real gateway on one node (docs/vault.md): `mode: local` said plainly, a push
 * and pull round trip at the envelope cap, through raw HTTP and the typed client, and the refusals
 * a hostile client meets, each with its status, code, hint and (where it may retry) Retry-After.
 * Three nodes, a lost one and a hung one: vault.cluster.test.ts; the rules in detail over real
 * guardian stores: test/layers/vault/Vault.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call } from "../support/client.js"
import { type Gateway, mintKey, type Reply, startGateway } from "../support/gateway.js"
import { newIdentity, pullBody, pushBody } from "../support/vault.js"

const expectRefused = (reply: Reply, status: number, code: string) => {
  expect([reply.status, reply.body?.code], reply.text).toEqual([status, code])
  expect(typeof reply.body.error).toBe("string")
  expect(typeof reply.body.hint).toBe("string")
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
}

describe("the vault on one node", () => {
  let gw: Gateway
  let owner: string
  let runtimeKey: string
  let otherOwner: string
  const now = () => Math.floor(Date.now() / 1000)
  const push = (body: unknown, token = runtimeKey) => gw.request("POST", "/v1/vault/push", { token, json: body })
  const pull = (body: unknown, token = runtimeKey) => gw.request("POST", "/v1/vault/pull", { token, json: body })

  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_VAULT_CLIENT_PULLS_PER_MINUTE: "40" } })
    owner = (await gw.cli(["namespace", "create", "keeps"])).api_key
    runtimeKey = await mintKey(gw, owner, { profile: "runtime", label: "app" })
    otherOwner = (await gw.cli(["namespace", "create", "elsewhere"])).api_key
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("says it is one node holding each envelope whole", async () => {
    const health = await gw.request("GET", "/v1/vault/health", { token: runtimeKey })
    expect(health.body, health.text).toEqual({ status: "ok", mode: "local", guardians: 1, healthy: 1, threshold: 1, quorum: 1 })
    const status = await gw.request("GET", "/v1/vault/status", { token: runtimeKey })
    expect(status.body.mode).toBe("local")
    expect(status.body.guardians).toEqual([{ node: expect.any(String), reachable: true, shares: 0 }])
    // no address of any node is given out
    expect(status.text).not.toMatch(/127\.0\.0\.1|http/)
  })

  it("pushes and pulls an envelope at the cap with an app's runtime key, and through the typed client", async () => {
    const id = newIdentity()
    const envelope = new Uint8Array(512 * 1024).map((_, i) => (i * 31) & 0xff)
    const pushed = await push(pushBody(id, 1, envelope))
    expect(pushed.body, pushed.text).toEqual({
      status: "ok",
      identity: id.identity,
      version: 1,
      mode: "local",
      ack_count: 1,
      total: 1,
      quorum: 1,
      threshold: 1
    })
    const pulled = await pull(pullBody(id))
    expect(pulled.status, pulled.text).toBe(200)
    expect(pulled.body).toMatchObject({ identity: id.identity, version: 1, collected: 1, threshold: 1 })
    expect(Buffer.from(pulled.body.envelope, "base64").equals(envelope)).toBe(true)
    // the typed client: version 2, then pulled
    const second = new Uint8Array(Buffer.from("version two"))
    const answer = await call(gw, runtimeKey, (c) => c.vault.push({ payload: pushBody(id, 2, second) }))
    expect(answer.version).toBe(2)
    // (a signature is honoured once, and a pull's names the second: a second pull signs another second)
    const back = await call(gw, runtimeKey, (c) => c.vault.pull({ payload: pullBody(id, now() - 5) }))
    expect(Buffer.from(back.envelope, "base64").toString()).toBe("version two")
    const status = await gw.request("GET", "/v1/vault/status", { token: owner })
    expect(status.body.guardians[0].shares).toBe(1)
  })

  it("refuses what a hostile client sends, with the spec's statuses and nothing written", async () => {
    const id = newIdentity()
    const other = newIdentity()
    const good = pushBody(id, 1, new Uint8Array(Buffer.from("mine")))
    const cases: ReadonlyArray<readonly [string, () => Promise<Reply>, number, string]> = [
      ["no credential", () => gw.request("POST", "/v1/vault/push", { json: good }), 401, "UNAUTHORIZED"],
      ["an unknown member", () => push({ ...good, extra: 1 }), 400, "VALIDATION_FAILED"],
      ["a version of 0", () => push({ ...good, version: 0 }), 400, "VALIDATION_FAILED"],
      ["an uppercase identity", () => push({ ...good, identity: good.identity.toUpperCase() }), 400, "VALIDATION_FAILED"],
      ["a short signature", () => push({ ...good, signature: good.signature.slice(2) }), 400, "VALIDATION_FAILED"],
      ["an envelope not in base64", () => push({ ...good, envelope: "***" }), 400, "VALIDATION_FAILED"],
      ["an empty envelope", () => push({ ...good, envelope: "" }), 400, "VALIDATION_FAILED"],
      ["an identity not of the key", () => push({ ...good, identity: other.identity }), 400, "VALIDATION_FAILED"],
      ["a small-order key", () => push({ ...good, pubkey: "01" + "00".repeat(31) }), 400, "VALIDATION_FAILED"],
      ["another key's signature", () => push({ ...pushBody(other, 1, new Uint8Array(Buffer.from("mine"))), identity: id.identity, pubkey: id.pubkey }), 401, "SIGNATURE_INVALID"],
      ["the envelope swapped after signing", () => push({ ...good, envelope: Buffer.from("theirs").toString("base64") }), 401, "SIGNATURE_INVALID"],
      ["the version changed after signing", () => push({ ...good, version: 9 }), 401, "SIGNATURE_INVALID"],
      ["an envelope over the cap", () => push(pushBody(id, 1, new Uint8Array(512 * 1024 + 1))), 413, "PAYLOAD_TOO_LARGE"],
      ["a body over the route's cap", () => push({ ...good, envelope: "A".repeat(800 * 1024) }), 413, "PAYLOAD_TOO_LARGE"],
      ["a pull body over 4 KiB", () => pull({ ...pullBody(id), pubkey: "a".repeat(5000) }), 413, "PAYLOAD_TOO_LARGE"],
      ["a stale pull", () => pull(pullBody(id, now() - 600)), 401, "SIGNATURE_INVALID"],
      ["a pull from the future", () => pull(pullBody(id, now() + 600)), 401, "SIGNATURE_INVALID"],
      ["a pull signed by another key", () => pull({ ...pullBody(other), identity: id.identity, pubkey: id.pubkey }), 401, "SIGNATURE_INVALID"],
      ["a pull of an identity never pushed", () => pull(pullBody(id)), 404, "NOT_FOUND"]
    ]
    for (const [what, send, status, code] of cases) {
      const reply = await send()
      expect([reply.status, reply.body?.code], `${what}: ${reply.text}`).toEqual([status, code])
      expectRefused(reply, status, code)
    }
    // a second of its own: pullBody(id) above signed for the current one
    expect((await pull(pullBody(id, now() - 30))).status).toBe(404)
  })

  it("keeps identities to their namespace, versions moving forward, and each pull signature to one use", async () => {
    const id = newIdentity()
    expect((await push(pushBody(id, 3, new Uint8Array(Buffer.from("three"))))).status).toBe(200)
    // another namespace does not see it, and may hold its own under the same identity
    expectRefused(await pull(pullBody(id), otherOwner), 404, "NOT_FOUND")
    expect((await push(pushBody(id, 1, new Uint8Array(Buffer.from("theirs"))), otherOwner)).status).toBe(200)
    const older = await push(pushBody(id, 2, new Uint8Array(Buffer.from("two"))))
    expectRefused(older, 409, "CONFLICT")
    expect(older.body.error).toMatch(/version 2 is not newer than the version 3/)
    // each pull signed for a second of its own (a second ticking between two must not make them one)
    const second = now() - 10
    const once = pullBody(id, second)
    const first = await pull(once)
    expect(Buffer.from(first.body.envelope, "base64").toString()).toBe("three")
    const replayed = await pull(once)
    expectRefused(replayed, 401, "SIGNATURE_INVALID")
    expect(replayed.body.error).toMatch(/used before/)
    // a push captured and sent again is the same push: it changes nothing
    const captured = pushBody(id, 4, new Uint8Array(Buffer.from("four")))
    expect((await push(captured)).status).toBe(200)
    expect((await push(captured)).status).toBe(200)
    expect(Buffer.from((await pull(pullBody(id, second + 1))).body.envelope, "base64").toString()).toBe("four")
  })

  it("limits pulls per client network before the signature is looked at, with Retry-After", async () => {
    const id = newIdentity()
    let limited: Reply | undefined
    for (let i = 0; i < 60 && limited === undefined; i++) {
      const reply = await pull({ ...pullBody(id), signature: "00".repeat(64) })
      if (reply.status === 429) limited = reply
      else expect(reply.status, reply.text).toBe(401)
    }
    expect(limited, "no 429 within 60 pulls").toBeDefined()
    expectRefused(limited!, 429, "RATE_LIMITED")
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThan(0)
  })
})
