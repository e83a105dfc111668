/**
 * Browsers and CORS over HTTP (docs/api.md, "Browsers and CORS"): a namespace admits exact
 * origins; a preflight on the namespace host is answered for them; actual answers carry
 * `Access-Control-Allow-Origin` on the fast lane's routes and the app's alike. Requests are sent
 * with node:http, which lets a test set `Host` and `Origin` as a browser would.
 */
import { Effect } from "effect"
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const BASE = "portico.test"
const APP = "https://app.example"

interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

const send = (port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, agent: false, headers }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }))
    })
    req.on("error", reject)
    req.end(body)
  })

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code).toBe(code)
}

describe.each(["sqlite", "rqlite"] as const)("browsers and CORS, registry on %s", (engine) => {
  let gw: Gateway
  let ownerKey: string
  let runtimeKey: string
  let engineServer: RqlitedServer | undefined
  const nsHost = () => `ns-acme.${BASE}:${gw.port}`
  const preflight = (host: string, origin: string, path = "/v1/cache/get", method = "POST") =>
    send(gw.port, "OPTIONS", path, {
      host,
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": "authorization, content-type"
    })

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway({ env: { PORTICO_BASE_DOMAIN: BASE, ...(engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url }) } })
    ownerKey = (await gw.cli(["namespace", "create", "acme"])).api_key
    await gw.cli(["namespace", "create", "other"])
    runtimeKey = (await gw.request("POST", "/v1/namespace/keys", { token: ownerKey, json: { profile: "runtime" } })).body.api_key
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  it("admits no origin by default; owners and admins set exact origins, anything else is refused", async () => {
    expect((await gw.request("GET", "/v1/namespace/cors", { token: runtimeKey })).body).toEqual({ namespace: "acme", origins: [] })
    const before = await preflight(nsHost(), APP)
    expect(before.status).toBe(204)
    expect(before.headers["access-control-allow-origin"]).toBeUndefined()

    for (const bad of ["*", "https://*.example", "https://app.example/", "ftp://app.example", "https://app.example/path", "null", "app.example", "http://1.2.3.999", "https://app.example:65536"]) {
      expectError(await gw.request("PUT", "/v1/namespace/cors", { token: ownerKey, json: { origins: [bad] } }), 400, "VALIDATION_FAILED")
    }
    const many = Array.from({ length: 33 }, (_, i) => `https://a${i}.example`)
    expectError(await gw.request("PUT", "/v1/namespace/cors", { token: ownerKey, json: { origins: many } }), 400, "VALIDATION_FAILED")
    expectError(await gw.request("PUT", "/v1/namespace/cors", { token: ownerKey, json: {} }), 400, "VALIDATION_FAILED")
    expect((await gw.request("PUT", "/v1/namespace/cors", { token: runtimeKey, json: { origins: [APP] } })).status).toBe(403)

    // stored as a browser sends Origin: lowercase, no default port; the same origin once
    const set = await gw.request("PUT", "/v1/namespace/cors", { token: ownerKey, json: { origins: [APP, "http://localhost:5173", "https://App.Example:443"] } })
    expect(set.status, set.text).toBe(200)
    expect(set.body).toEqual({ namespace: "acme", origins: [APP, "http://localhost:5173"] })
    expect((await gw.request("GET", "/v1/namespace/cors", { token: runtimeKey })).body.origins).toEqual([APP, "http://localhost:5173"])
    const audit = await gw.request("GET", "/v1/audit?action=namespace.cors", { token: ownerKey })
    expect(audit.body.entries[0]).toMatchObject({ action: "namespace.cors", target: "acme" })
  })

  it("answers a preflight on the namespace host for an admitted origin, and grants nothing otherwise", async () => {
    const ok = await preflight(nsHost(), APP)
    expect(ok.status).toBe(204)
    expect(ok.headers["access-control-allow-origin"]).toBe(APP)
    expect(ok.headers["access-control-allow-methods"]).toContain("POST")
    expect(ok.headers["access-control-allow-headers"]).toContain("authorization")
    expect(ok.headers["access-control-allow-headers"]).toContain("content-type")
    expect(ok.headers["access-control-allow-headers"]).toContain("x-portico-fetch-cap")
    expect(ok.headers["access-control-max-age"]).toBe("600")
    expect(ok.headers["access-control-allow-credentials"]).toBeUndefined()
    expect(ok.headers["vary"]).toContain("Origin")

    // another origin, another namespace's host, no namespace host at all: 204 granting nothing
    for (const [host, origin] of [
      [nsHost(), "https://evil.example"],
      [`ns-other.${BASE}`, APP],
      [`ns-nosuch.${BASE}`, APP],
      [`127.0.0.1:${gw.port}`, APP],
      [`ns-acme.elsewhere.example`, APP]
    ] as const) {
      const refused = await preflight(host, origin)
      expect(refused.status, `${host} ${origin}`).toBe(204)
      expect(refused.headers["access-control-allow-origin"]).toBeUndefined()
      expect(refused.headers["access-control-allow-methods"]).toBeUndefined()
    }
    // a preflight for a path with no route is still a sensible answer, never a 5xx
    const unknown = await preflight(nsHost(), APP, "/v1/no/such/route", "GET")
    expect(unknown.status).toBe(204)
    // OPTIONS that is not a preflight is answered as before: the route takes no OPTIONS
    const plain = await send(gw.port, "OPTIONS", "/v1/cache/get", { host: nsHost() })
    expect(plain.status).toBe(405)
    const plainUnknown = await send(gw.port, "OPTIONS", "/v1/nothing", { host: nsHost(), origin: APP })
    expect(plainUnknown.status).toBe(404)
    expect(plainUnknown.headers["access-control-allow-origin"]).toBe(APP)
  })

  it("puts Access-Control-Allow-Origin on answers to an admitted origin: fast-lane routes and app routes, refusals too", async () => {
    const headers = (origin: string, host = `127.0.0.1:${gw.port}`) => ({ host, origin, authorization: `Bearer ${ownerKey}`, "content-type": "application/json" })
    const put = await send(gw.port, "POST", "/v1/cache/put", headers(APP), JSON.stringify({ dmap: "m", key: "k", value: 1 }))
    expect(put.status, put.body).toBe(200)
    // several times: the first may be the app's (origins not yet read on the lane), the rest the lane's
    for (let i = 0; i < 3; i++) {
      for (const [method, path, body] of [
        ["GET", "/v1/auth/whoami", undefined],
        ["POST", "/v1/cache/get", JSON.stringify({ dmap: "m", key: "k" })],
        ["GET", "/v1/namespace/rate-limit", undefined]
      ] as const) {
        const answer = await send(gw.port, method, path, headers(APP), body)
        expect(answer.status, `${path} ${answer.body}`).toBe(200)
        expect(answer.headers["access-control-allow-origin"], path).toBe(APP)
        expect(answer.headers["access-control-expose-headers"]).toContain("retry-after")
        expect(answer.headers["access-control-expose-headers"]).toContain("etag")
        expect(answer.headers["vary"]).toContain("Origin")
        expect(answer.headers["access-control-allow-credentials"]).toBeUndefined()

        const other = await send(gw.port, method, path, headers("https://evil.example"), body)
        expect(other.status).toBe(200)
        expect(other.headers["access-control-allow-origin"]).toBeUndefined()
        expect(other.headers["vary"]).toContain("Origin")
      }
    }
    // without Origin: no CORS headers at all
    const noOrigin = await send(gw.port, "GET", "/v1/auth/whoami", { authorization: `Bearer ${runtimeKey}` })
    expect(noOrigin.headers["access-control-allow-origin"]).toBeUndefined()
    expect(noOrigin.headers["vary"]).toBeUndefined()
    // a refusal with no credential on the namespace host: the page can read the 401
    const refused = await send(gw.port, "GET", "/v1/auth/whoami", { host: nsHost(), origin: APP })
    expect(refused.status).toBe(401)
    expect(refused.headers["access-control-allow-origin"]).toBe(APP)
    // a validation refusal of an app route, credential checked
    const bad = await send(gw.port, "GET", "/v1/namespace/keys?limit=0", { origin: APP, authorization: `Bearer ${ownerKey}` })
    expect(bad.status).toBe(400)
    expect(bad.headers["access-control-allow-origin"]).toBe(APP)
    // clearing the list takes effect on this gateway at once
    expect((await gw.request("PUT", "/v1/namespace/cors", { token: ownerKey, json: { origins: [] } })).status).toBe(200)
    const cleared = await send(gw.port, "GET", "/v1/auth/whoami", headers(APP))
    expect(cleared.headers["access-control-allow-origin"]).toBeUndefined()
    expect((await preflight(nsHost(), APP)).headers["access-control-allow-origin"]).toBeUndefined()
  })
})

describe("preflights and the client-network rate limit", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      env: { PORTICO_BASE_DOMAIN: BASE, PORTICO_RATE_LIMIT: "true", PORTICO_RATE_LIMIT_CLIENT_RPS: "1", PORTICO_RATE_LIMIT_CLIENT_BURST: "5" }
    })
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("charges a preflight to its client network like any request: 429 with Retry-After past the burst", async () => {
    const answers: Array<Answer> = []
    for (let i = 0; i < 8; i++) {
      // a host naming a new namespace each time: each would cost a registry read
      answers.push(
        await send(gw.port, "OPTIONS", "/v1/auth/whoami", { host: `ns-probe${i}.${BASE}`, origin: APP, "access-control-request-method": "GET" })
      )
    }
    expect(answers.slice(0, 5).every((a) => a.status === 204)).toBe(true)
    const limited = answers[answers.length - 1]!
    expect(limited.status).toBe(429)
    expect(JSON.parse(limited.body).code).toBe("RATE_LIMITED")
    expect(Number(limited.headers["retry-after"])).toBeGreaterThanOrEqual(1)
  })
})
