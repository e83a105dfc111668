/**
 * Workload tokens over HTTP (spec §4.5, §4.8, §5.6, §5.12) on a real gateway, on both registry
 * engines. The deployment record is written with DeploymentStore and its first token minted with
 * WorkloadTokens in this process, against the gateway's own registry and root secret (the data
 * dir's secret.key), as the deployment runtime does; everything after is HTTP: renew answers
 * `{access_token, expires_in}`, the token stores and reads content, is refused fetch-cap minting
 * (403 FETCH_CAP_DEVICE_REQUIRED), the control plane and the session-only routes; renew refuses an
 * API key, a session's token and a key's exchanged token (403 WORKLOAD_TOKEN_REQUIRED) and an
 * expired token (401); a grant change reaches the app at its renewal; a deleted deployment's
 * token is refused at once (401), and its pub/sub socket is closed within 10 s.
 */
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { Wallet } from "ethers"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PorticoConfig, testSettings } from "../../src/layers/config/PorticoConfig.js"
import { DeploymentStore } from "../../src/layers/deployments/DeploymentStore.js"
import type { DeploymentRecord } from "../../src/layers/deployments/DeploymentRecord.js"
import { registryLayer } from "../../src/layers/registry/registryLayer.js"
import { Sealer } from "../../src/layers/secrets/Sealer.js"
import { KeyRing } from "../../src/layers/tokens/KeyRing.js"
import { WorkloadTokens } from "../../src/layers/workload/WorkloadTokens.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { b64, isSubscriber, openSubscriber, unb64 } from "../support/pubsubSocket.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body?.code, reply.text).toBe(code)
  expect(Object.keys(reply.body ?? {}).every((k) => ["error", "code", "hint"].includes(k)), reply.text).toBe(true)
}

/** The services the deployment runtime uses, over the gateway's registry and root secret. */
const runtimeOf = (dataDir: string, rqliteUrl: string | undefined) => {
  const settings = testSettings(
    dataDir,
    rqliteUrl === undefined ? {} : { registry: { engine: "rqlite", url: rqliteUrl, user: undefined, password: undefined as Redacted.Redacted | undefined } }
  )
  const base = Layer.mergeAll(Sealer.Live, registryLayer(settings)).pipe(Layer.provideMerge(PorticoConfig.layer(settings)))
  const ring = KeyRing.Live.pipe(Layer.provideMerge(base))
  return ManagedRuntime.make(Layer.mergeAll(WorkloadTokens.Live, DeploymentStore.Live).pipe(Layer.provideMerge(ring)))
}

describe.each(["sqlite", "rqlite"] as const)("workload tokens over HTTP, registry on %s", (engine) => {
  let gw: Gateway
  let engineServer: RqlitedServer | undefined
  let runtime: ReturnType<typeof runtimeOf>
  let ownerKey: string
  let sessionToken: string
  let record: DeploymentRecord
  let first: string
  const wallet = Wallet.createRandom()

  const upload = async (token: string, text: string) => {
    const form = new FormData()
    form.append("file", new Blob([new TextEncoder().encode(text)]), "note.txt")
    const res = await fetch(gw.url + "/v1/storage/upload", { method: "POST", body: form, headers: { authorization: `Bearer ${token}` } })
    const body = await res.text()
    return { status: res.status, headers: res.headers, text: body, body: JSON.parse(body) } as Reply
  }
  const renew = (token: string) => gw.request("POST", "/v1/auth/renew", { token })

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway({ env: engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url } })
    ownerKey = (await gw.cli(["namespace", "create", "shop"])).api_key
    const added = await gw.request("POST", "/v1/namespace/members", { token: ownerKey, json: { wallet: wallet.address, role: "developer" } })
    expect(added.status, added.text).toBe(200)
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address, namespace: "shop" } })
    const v = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await wallet.signMessage(c.body.message) } })
    expect(v.status, v.text).toBe(200)
    sessionToken = v.body.access_token

    runtime = runtimeOf(gw.dataDir, engineServer?.url)
    record = await runtime.runPromise(
      Effect.flatMap(DeploymentStore, (s) =>
        s.create({ namespace: "shop", name: "blog", type: "nodejs", domain: "blog-abc123.portico.test", homeNode: "node-a", artifact: "v1" })
      )
    )
    first = (await runtime.runPromise(Effect.flatMap(WorkloadTokens, (t) => t.mint(record)))).token
  }, 120_000)

  afterAll(async () => {
    await runtime?.dispose()
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("renews the token the runtime minted, and the new one is the deployment", async () => {
    const renewed = await renew(first)
    expect(renewed.status, renewed.text).toBe(200)
    expect(Object.keys(renewed.body).sort()).toEqual(["access_token", "expires_in"])
    expect(renewed.body.expires_in).toBe(3600)
    const me = await gw.request("GET", "/v1/auth/whoami", { token: renewed.body.access_token })
    expect(me.status, me.text).toBe(200)
    expect(me.body).toMatchObject({ namespace: "shop", subject: `deployment:${record.id}`, method: "workload", role: "runtime" })
    expect(me.body.grants).toEqual(expect.arrayContaining(["storage", "storage-read", "cache", "invoke"]))
    // the renewed token renews in turn
    expect((await renew(renewed.body.access_token)).status).toBe(200)
  })

  it("stores and reads content, and is refused fetch-cap minting", async () => {
    const token = (await renew(first)).body.access_token
    const up = await upload(token, "written by the app")
    expect(up.status, up.text).toBe(200)
    const got = await fetch(`${gw.url}/v1/storage/get/${up.body.Cid}`, { headers: { authorization: `Bearer ${token}` } })
    expect(got.status).toBe(200)
    expect(await got.text()).toBe("written by the app")
    const status = await gw.request("GET", `/v1/storage/status/${up.body.Cid}`, { token })
    expect(status.status, status.text).toBe(200)
    // the namespace's users see what the app stored: it is the namespace's content
    expect((await fetch(`${gw.url}/v1/storage/get/${up.body.Cid}`, { headers: { authorization: `Bearer ${sessionToken}` } })).status).toBe(200)
    expectError(await gw.request("POST", "/v1/storage/fetch-caps", { token, json: { cid: up.body.Cid, count: 1, ttl_seconds: 3600 } }), 403, "FETCH_CAP_DEVICE_REQUIRED")
    // an API key alone is still refused by storage
    expectError(await upload(ownerKey, "not by a key"), 403, "SESSION_REQUIRED")
  })

  it("is refused the control plane and the session-only routes", async () => {
    const token = (await renew(first)).body.access_token
    expectError(await gw.request("GET", "/v1/namespace/keys", { token }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("POST", "/v1/namespace/keys", { token, json: { profile: "runtime", label: "x" } }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("GET", "/v1/audit", { token }), 403, "CONTROL_PLANE_REQUIRED")
    expectError(await gw.request("POST", "/v1/auth/api-key", { token, json: {} }), 403, "SESSION_REQUIRED")
    expectError(await gw.request("GET", "/v1/auth/sessions", { token }), 403, "SESSION_REQUIRED")
    // nor exchanged for another kind of token
    expectError(await gw.request("POST", "/v1/auth/token", { token }), 400, "BAD_REQUEST")
  })

  it("renew refuses every other credential", async () => {
    expectError(await renew(ownerKey), 403, "WORKLOAD_TOKEN_REQUIRED")
    expectError(await renew(sessionToken), 403, "WORKLOAD_TOKEN_REQUIRED")
    const exchanged = await gw.request("POST", "/v1/auth/token", { token: ownerKey })
    expect(exchanged.status, exchanged.text).toBe(200)
    expectError(await renew(exchanged.body.access_token), 403, "WORKLOAD_TOKEN_REQUIRED")
    expectError(await gw.request("POST", "/v1/auth/renew"), 401, "UNAUTHORIZED")
    expectError(await renew("not.a.token"), 401, "INVALID_TOKEN")
    // a workload token whose hour is over, signed by the gateway's own key ring
    const expired = await runtime.runPromise(
      Effect.flatMap(KeyRing, (ring) =>
        ring.sign({ sub: `deployment:${record.id}`, ns: "shop", role: "runtime", grants: ["storage"], dep: record.id }, -60)
      )
    )
    expectError(await renew(expired), 401, "INVALID_TOKEN")
  })

  it("a grant change reaches the app at its next renewal", async () => {
    const before = (await renew(first)).body.access_token
    await runtime.runPromise(Effect.flatMap(DeploymentStore, (s) => s.setGrants("shop", record.id, ["cache"])))
    // the token in hand keeps what it was minted with
    expect((await upload(before, "still granted")).status).toBe(200)
    const after = (await renew(before)).body.access_token
    expectError(await upload(after, "no longer"), 403, "GRANT_REQUIRED")
    const me = await gw.request("GET", "/v1/auth/whoami", { token: after })
    expect(me.body.grants).toEqual(["cache"])
    await runtime.runPromise(Effect.flatMap(DeploymentStore, (s) => s.setGrants("shop", record.id, ["storage", "cache"])))
    expect((await upload((await renew(after)).body.access_token, "granted again")).status).toBe(200)
  })

  it("a deleted deployment's token stops working at once", async () => {
    const other = await runtime.runPromise(
      Effect.flatMap(DeploymentStore, (s) =>
        s.create({ namespace: "shop", name: "short", type: "nodejs", domain: "short-abc123.portico.test", homeNode: "node-a", artifact: "v1" })
      )
    )
    const token = (await runtime.runPromise(Effect.flatMap(WorkloadTokens, (t) => t.mint(other)))).token
    expect((await gw.request("GET", "/v1/auth/whoami", { token })).status).toBe(200)
    expect(await runtime.runPromise(Effect.flatMap(DeploymentStore, (s) => s.remove("shop", other.id)))).toBe(true)
    expectError(await gw.request("GET", "/v1/auth/whoami", { token }), 401, "INVALID_TOKEN")
    expectError(await renew(token), 401, "INVALID_TOKEN")
    expectError(await upload(token, "too late"), 401, "INVALID_TOKEN")
  })

  it("publishes and subscribes on pub/sub, and its socket closes within 10 s once the deployment is deleted", async () => {
    const app = await runtime.runPromise(
      Effect.flatMap(DeploymentStore, (s) =>
        s.create({ namespace: "shop", name: "live", type: "nodejs", domain: "live-abc123.portico.test", homeNode: "node-a", artifact: "v1" })
      )
    )
    const token = (await runtime.runPromise(Effect.flatMap(WorkloadTokens, (t) => t.mint(app)))).token
    const socket = await openSubscriber(gw.url, "topic=app/events", token, { via: "query" })
    if (!isSubscriber(socket)) throw new Error(`refused: ${JSON.stringify(socket)}`)
    const published = await gw.request("POST", "/v1/pubsub/publish", { token, json: { topic: "app/events", data_base64: b64("from the app") } })
    expect(published.status, published.text).toBe(200)
    expect(unb64((await socket.waitFor(1, "message"))[0]!["data"])).toBe("from the app")
    expect(await runtime.runPromise(Effect.flatMap(DeploymentStore, (s) => s.remove("shop", app.id)))).toBe(true)
    const at = Date.now()
    const closed = await socket.closed
    expect(closed.code).toBe(4401)
    expect(closed.at - at).toBeLessThan(10_000)
  }, 20_000)
})
