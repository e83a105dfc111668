/**
 * `GET /v1/operator/health` through a real gateway, on both registry engines (spec §4.9: its
 * detail is "latencies, errors, hosted namespaces and ports"; docs/operators.md, "Health and
 * telemetry"): the hosted namespaces in pages (limit, cursor, next_cursor, refused bounds), the
 * gateway's own listening port, the node's app port range, and the app ports of the deployment
 * records homed on this node (written here against the gateway's registry, as the deployment
 * runtime suite does; a static site and another node's app hold none here).
 */
import { Context, Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { Wallet } from "ethers"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PorticoConfig, testSettings } from "../../src/layers/config/PorticoConfig.js"
import { makeDeploymentStore } from "../../src/layers/deployments/DeploymentStore.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { registryLayer } from "../../src/layers/registry/registryLayer.js"
import { Sealer } from "../../src/layers/secrets/Sealer.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body?.code, reply.text).toBe(code)
}

/** The registry and sealer of the gateway's data dir, in this process. */
const registryOf = (dataDir: string, rqliteUrl: string | undefined) => {
  const settings = testSettings(
    dataDir,
    rqliteUrl === undefined ? {} : { registry: { engine: "rqlite", url: rqliteUrl, user: undefined, password: undefined as Redacted.Redacted | undefined } }
  )
  return ManagedRuntime.make(Layer.mergeAll(Sealer.Live, registryLayer(settings)).pipe(Layer.provideMerge(PorticoConfig.layer(settings))))
}

describe.each(["sqlite", "rqlite"] as const)("operator health, registry on %s", (engine) => {
  let gw: Gateway
  let engineServer: RqlitedServer | undefined
  let registry: ReturnType<typeof registryOf> | undefined
  let token: string
  // no app runs here, so the range only has to be this gateway's and the store's alike
  const first = 10200 + Math.floor(Math.random() * 9000)
  const last = first + 19

  const health = (query = "") => gw.request("GET", `/v1/operator/health${query}`, { token })

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    // a bootstrap operator (PORTICO_OPERATORS): the list the gateway reads without the registry
    const operator = Wallet.createRandom()
    gw = await startGateway({
      env: {
        PORTICO_APP_PORTS: `${first}-${last}`,
        PORTICO_OPERATORS: operator.address.toLowerCase(),
        ...(engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url })
      }
    })
    for (const name of ["gamma", "alpha", "beta"]) await gw.cli(["namespace", "create", name])
    const challenged = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: operator.address } })
    const verified = await gw.request("POST", "/v1/auth/verify", {
      json: { message: challenged.body.message, signature: await operator.signMessage(challenged.body.message) }
    })
    token = verified.body.access_token

    // two app records homed here (their ports kept while failed or stopped), a static site, and
    // an app of another node: only the first two are this node's ports
    const nodeId = fs.readFileSync(path.join(gw.dataDir, "node-id"), "utf8").trim()
    registry = registryOf(gw.dataDir, engineServer?.url)
    const store = await registry.runPromise(
      Effect.map(Effect.context<RegistryStore | Sealer>(), (c) =>
        makeDeploymentStore(Context.get(c, RegistryStore), Context.get(c, Sealer), { ports: { first, last } })
      )
    )
    const record = (namespace: string, name: string, type: "nodejs" | "static", homeNode: string, status: "failed" | "stopped" | "active") =>
      Effect.runPromise(store.create({ namespace, name, type, domain: `${name}-${namespace}.portico.test`, homeNode, artifact: "versions/1", status }))
    await record("alpha", "api", "nodejs", nodeId, "failed")
    await record("beta", "worker", "nodejs", nodeId, "stopped")
    await record("beta", "site", "static", nodeId, "active")
    await record("gamma", "elsewhere", "nodejs", "another-node", "stopped")
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
    await registry?.dispose()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("keeps the checks and the count, and lists the hosted namespaces by name", async () => {
    const reply = await health()
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body).toMatchObject({ status: "ok", namespaces: 3, registry_engine: engine, next_cursor: null })
    expect(reply.body.checks.registry.ok).toBe(true)
    expect(typeof reply.body.checks.registry.latency_ms).toBe("number")
    expect(reply.body.hosted_namespaces.map((n: any) => n.name)).toEqual(["alpha", "beta", "gamma"])
    const alpha = reply.body.hosted_namespaces[0]
    expect(alpha).toEqual({ name: "alpha", owner: null, created_at: expect.any(Number) })
    expect(Math.abs(alpha.created_at - Date.now() / 1000)).toBeLessThan(600)
  })

  it("pages the hosted namespaces as every list is paged", async () => {
    const page1 = await health("?limit=2")
    expect(page1.body.hosted_namespaces.map((n: any) => n.name)).toEqual(["alpha", "beta"])
    expect(typeof page1.body.next_cursor).toBe("string")
    // the count is the registry's, whatever the page
    expect(page1.body.namespaces).toBe(3)
    const page2 = await health(`?limit=2&cursor=${encodeURIComponent(page1.body.next_cursor)}`)
    expect(page2.status, page2.text).toBe(200)
    expect(page2.body.hosted_namespaces.map((n: any) => n.name)).toEqual(["gamma"])
    expect(page2.body.next_cursor).toBeNull()
    for (const query of ["?limit=0", "?limit=1001", "?limit=x", "?cursor=", "?cursor=%21%21", "?page=2"]) {
      expectError(await health(query), 400, "VALIDATION_FAILED")
    }
  })

  it("names the ports this node holds: the gateway's own, and the apps homed here", async () => {
    const reply = await health("?limit=1")
    expect(reply.body.ports).toEqual({
      gateway: { host: expect.any(String), port: gw.port },
      app_range: { first, last },
      apps: [
        { port: first, namespace: "alpha", deployment: "api", deployment_id: expect.any(String), status: "failed" },
        { port: first + 1, namespace: "beta", deployment: "worker", deployment_id: expect.any(String), status: "stopped" }
      ]
    })
  })

  it("is the operators' alone", async () => {
    const key = (await gw.cli(["namespace", "create", "delta"])).api_key
    expectError(await gw.request("GET", "/v1/operator/health", { token: key }), 403, "NOT_AN_OPERATOR")
    expectError(await gw.request("GET", "/v1/operator/health"), 401, "UNAUTHORIZED")
  })

  // last: the registry goes away. An operator's session is read from the registry, so the route
  // answers 503 before any report; what the report gives without the registry is shown on
  // stand-ins (test/layers/operators/OperatorHealth.test.ts).
  if (engine === "rqlite") it("answers 503 UNAVAILABLE when the registry cannot be read", async () => {
    await Effect.runPromise(engineServer!.stop)
    engineServer = undefined
    expectError(await health(), 503, "UNAVAILABLE")
  }, 60_000)
})
