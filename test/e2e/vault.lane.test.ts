/**
 * The vault's routes in the fast lane answer as the HttpApi app does (src/api/lane/VaultLane.ts),
 * and the guardian's share routes take a share as bytes (docs/vault.md, "Guardians"): its order in
 * the envelope header, the coordination MAC over that header and the SHA-256 of the bytes. Two
 * gateways run as one node on one data directory (so one vault store and one nonce ledger), one
 * with the lane and one without (PORTICO_FAST_LANE=false); each call goes to both and the answers
 * must match: status, every header (the date aside), the body byte for byte. A call that must
 * not be honoured twice (a pull's signature, a peer call's nonce) is made afresh for each.
 */
import { createHash, randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { canonicalJson } from "../../src/layers/coordination/Coordination.js"
import { type Gateway, startGateway } from "../support/gateway.js"
import { type RawAnswer, type RawExchange, sendRaw } from "../support/rawExchange.js"
import { coordinationHeaders } from "../support/internalCall.js"
import { newIdentity, pullBody, pushBody, sha256Hex, type VaultIdentity } from "../support/vault.js"

type Exchange = RawExchange
type Answer = RawAnswer
const send = sendRaw

const NODE = `vault-lane-${process.pid}`
const PUT = "/v1/internal/vault/share/put"
const GET = "/v1/internal/vault/share/get"
const ENVELOPE = "x-portico-forward-envelope"
const NAMESPACE = "vaultlane"
const now = () => Math.floor(Date.now() / 1000)
const json = (answer: Answer) => JSON.parse(answer.body.toString("utf8"))

/** A share's order for `id` at `version`, signed by its key over the digest of `envelope`. */
const orderOf = (id: VaultIdentity, version: number, envelope: Uint8Array) => {
  const signed = pushBody(id, version, envelope)
  return { namespace: NAMESPACE, identity: id.identity, version, threshold: 2, digest: sha256Hex(envelope), pubkey: id.pubkey, signature: signed.signature }
}

describe("the vault in the fast lane, and shares as bytes between nodes", () => {
  let lane: Gateway
  let app: Gateway
  let key: string

  /** The same call to both gateways, made afresh for each (`make` gets the gateway); the lane's answer. */
  const both = async (make: (gw: Gateway) => Exchange, what: string): Promise<Answer> => {
    const fromLane = await send(lane.port, make(lane))
    const fromApp = await send(app.port, make(app))
    expect({ ...fromLane, body: fromLane.body.toString("latin1") }, what).toEqual({ ...fromApp, body: fromApp.body.toString("latin1") })
    return fromLane
  }
  const client = (path: string, body: unknown): Exchange => ({
    method: "POST",
    path,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })
  /** A share put as a peer sends it; `alter` changes what is sent after it was signed. */
  const put = (
    gw: Gateway,
    order: unknown,
    share: Uint8Array,
    alter: { headers?: (h: Record<string, string>) => Record<string, string>; body?: Uint8Array } = {}
  ): Exchange => {
    const envelope = typeof order === "string" ? order : canonicalJson(order)
    const signed = `${envelope}\n${createHash("sha256").update(share).digest("hex")}`
    const headers = { ...coordinationHeaders(gw, NODE, PUT, signed), [ENVELOPE]: envelope, "content-type": "application/octet-stream" }
    return { method: "POST", path: PUT, headers: alter.headers?.(headers) ?? headers, body: alter.body ?? share }
  }
  /** A share get as a peer sends it, with the identity's pull signed at `second`. */
  const get = (gw: Gateway, id: VaultIdentity, second: number): Exchange => {
    const body = canonicalJson({ namespace: NAMESPACE, ...pullBody(id, second) })
    return { method: "POST", path: GET, headers: { ...coordinationHeaders(gw, NODE, GET, body), "content-type": "application/json" }, body }
  }
  let seconds = 0
  /** A pull second not used before (each pull signature is honoured once). */
  const second = () => now() - 100 + (seconds++ % 200)

  beforeAll(async () => {
    const env = {
      PORTICO_NODE_ID: NODE,
      PORTICO_VAULT_CLIENT_PUSHES_PER_MINUTE: "100000",
      PORTICO_VAULT_CLIENT_PULLS_PER_MINUTE: "100000",
      PORTICO_VAULT_IDENTITY_PUSHES_PER_HOUR: "100000",
      PORTICO_VAULT_IDENTITY_PULLS_PER_HOUR: "100000"
    }
    lane = await startGateway({ env })
    app = await startGateway({ dataDir: lane.dataDir, env: { ...env, PORTICO_FAST_LANE: "false" } })
    key = (await lane.cli(["namespace", "create", NAMESPACE])).api_key
  }, 90_000)
  afterAll(async () => {
    await lane?.stop()
    await app?.stop()
  })

  it("push and pull: the same answers and refusals through the lane as through the app", async () => {
    const id = newIdentity()
    const other = newIdentity()
    const envelope = new Uint8Array(randomBytes(64 * 1024))
    const pushed = await both(() => client("/v1/vault/push", pushBody(id, 2, envelope)), "a push, then the same push again")
    expect(json(pushed)).toMatchObject({ status: "ok", version: 2, mode: "local" })
    const good = pushBody(id, 3, envelope)
    const statuses: Array<number> = []
    for (const [what, body] of [
      ["an older version", pushBody(id, 1, envelope)],
      ["another key's signature", { ...pushBody(other, 3, envelope), identity: id.identity, pubkey: id.pubkey }],
      ["an unknown member", { ...good, extra: 1 }],
      ["not base64", { ...good, envelope: "***" }],
      ["an identity not of the key", { ...good, identity: other.identity }],
      ["a body that is not JSON", '{"identity":'],
      ["an envelope over the cap", pushBody(id, 4, new Uint8Array(512 * 1024 + 1))]
    ] as const) {
      statuses.push((await both(() => client("/v1/vault/push", body), what)).status)
    }
    expect(statuses).toEqual([409, 401, 400, 400, 400, 400, 413])
    const pulled = await both(() => client("/v1/vault/pull", pullBody(id, second())), "a pull")
    expect(Buffer.from(json(pulled).envelope, "base64").equals(Buffer.from(envelope))).toBe(true)
    for (const [what, make] of [
      ["a stale pull", () => pullBody(id, now() - 600)],
      ["an identity never pushed", () => pullBody(other, second())],
      ["a pull signed by another key", () => ({ ...pullBody(other, second()), identity: id.identity, pubkey: id.pubkey })]
    ] as const) {
      statuses.push((await both(() => client("/v1/vault/pull", make()), what)).status)
    }
    expect(statuses.slice(-3)).toEqual([401, 404, 401])
    // a pull replayed: each gateway refuses its own second use
    const once = pullBody(id, second())
    expect((await send(lane.port, client("/v1/vault/pull", once))).status).toBe(200)
    const again = await both(() => client("/v1/vault/pull", once), "a pull replayed")
    expect([again.status, json(again).error]).toEqual([401, "this pull signature was used before"])
  })

  it("a share put as bytes and got back as bytes, the same through the lane as through the app", async () => {
    const id = newIdentity()
    const envelope = new Uint8Array(randomBytes(4096))
    const share = new Uint8Array([...randomBytes(4096), 7])
    const stored = await both((gw) => put(gw, orderOf(id, 1, envelope), share), "a put, then the same again (a retried push)")
    expect([stored.status, json(stored)]).toEqual([200, { outcome: "stored" }])
    const conflict = await both((gw) => put(gw, orderOf(id, 1, new Uint8Array(randomBytes(10))), share), "the same version of another envelope")
    expect(json(conflict)).toEqual({ outcome: "conflict", version: 1 })
    const found = await both((gw) => get(gw, id, second()), "a get")
    expect(found.status).toBe(200)
    expect(found.headers["content-type"]).toBe("application/octet-stream")
    expect(JSON.parse(found.headers["x-portico-vault-share"]!)).toEqual({ version: 1, threshold: 2, digest: sha256Hex(envelope) })
    expect(found.body.equals(Buffer.from(share))).toBe(true)
    const none = await both((gw) => get(gw, newIdentity(), second()), "a get of an identity not held")
    expect(json(none)).toEqual({ outcome: "none" })
  })

  it("refuses a share put that was tampered with, cut short, oversized or replayed, and writes nothing", async () => {
    const id = newIdentity()
    const envelope = new Uint8Array(randomBytes(4096))
    const share = new Uint8Array([...randomBytes(4096), 9])
    const order = orderOf(id, 5, envelope)
    const refusals: Array<[number, string]> = []
    const refusedBy = async (what: string, make: (gw: Gateway) => Exchange) => {
      const answer = await both(make, what)
      refusals.push([answer.status, answer.status === 413 ? json(answer).code : json(answer).code ?? json(answer).outcome])
      return answer
    }
    await refusedBy("no MAC", (gw) => put(gw, order, share, { headers: ({ "x-portico-coordination-mac": _, ...rest }) => rest }))
    await refusedBy("a MAC of zeros", (gw) => put(gw, order, share, { headers: (h) => ({ ...h, "x-portico-coordination-mac": "v2=" + "0".repeat(64) }) }))
    await refusedBy("one byte of the share changed", (gw) => put(gw, order, share, { body: share.map((b, i) => (i === 100 ? b ^ 1 : b)) }))
    await refusedBy("the share cut short", (gw) => put(gw, order, share, { body: share.subarray(0, share.length - 1) }))
    await refusedBy("the share made longer", (gw) => put(gw, order, share, { body: new Uint8Array([...share, 9]) }))
    await refusedBy("the order changed under the MAC", (gw) => put(gw, order, share, { headers: (h) => ({ ...h, [ENVELOPE]: canonicalJson({ ...order, version: 6 }) }) }))
    await refusedBy("a body over the route's cap", (gw) => put(gw, order, new Uint8Array(800 * 1024).fill(1)))
    expect(refusals).toEqual([
      [403, "COORDINATION_REFUSED"],
      [403, "COORDINATION_REFUSED"],
      [403, "COORDINATION_REFUSED"],
      [403, "COORDINATION_REFUSED"],
      [403, "COORDINATION_REFUSED"],
      [403, "COORDINATION_REFUSED"],
      [413, "PAYLOAD_TOO_LARGE"]
    ])
    // a genuine call whose order or share the guardian refuses: the MAC holds, the client's key does not
    const forged = await both((gw) => put(gw, { ...order, signature: "00".repeat(64) }, share), "a signature that does not verify")
    expect(json(forged).outcome).toBe("refused")
    const large = await both((gw) => put(gw, order, new Uint8Array(600 * 1024).fill(3)), "a share over the largest the vault makes")
    expect(json(large)).toMatchObject({ outcome: "refused", reason: expect.stringMatching(/over the \d+ bytes/) })
    const undecodable = await both((gw) => put(gw, { ...order, version: 0 }, share), "an order that does not decode")
    expect(undecodable.status).toBe(400)
    // nothing of it was written
    expect(json(await both((gw) => get(gw, id, second()), "a get after the refusals"))).toEqual({ outcome: "none" })
    // a call replayed: each gateway takes its own once, and refuses it the second time
    for (const gw of [lane, app]) {
      const exchange = put(gw, orderOf(id, 7, envelope), share)
      expect(json(await send(gw.port, exchange))).toEqual({ outcome: "stored" })
      const replayed = await send(gw.port, exchange)
      expect([replayed.status, json(replayed).code, json(replayed).error]).toEqual([403, "COORDINATION_REFUSED", "coordination call replayed"])
    }
  })
})
