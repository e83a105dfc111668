/**
 * The document says each rule the server enforces (issue 19, "What the API document should say"):
 * one assertion per rule, read from the document exactly as a client generator would.
 */
import { OpenApi } from "@effect/platform"
import { describe, expect, it } from "vitest"
import { PorticoApi } from "../../src/api/Api.js"
import { routeEntries } from "../../src/api/gate/RouteIndex.js"
import { withRateLimitCeiling } from "../../src/api/OpenApiDocument.js"

const policyKey = (method: string, path: string) => `${method} ${path}`
/**
 * Routes behind the session gate; storage, which takes a session or a deployed app's workload
 * token through the gate of any credential; and the fetch-capability mint: any credential reaches
 * its service, but only a device-bound session succeeds. The document names the session scheme.
 */
const SESSION_ONLY = [
  ...routeEntries(PorticoApi)
    .filter((e) => e.gate === "session" || e.policy.kind === "session-or-workload" || e.policy.kind === "wallet" || e.policy.kind === "operator")
    .map((e) => policyKey(e.method, e.path)),
  "POST /v1/storage/fetch-caps"
]

const doc = withRateLimitCeiling(OpenApi.fromApi(PorticoApi) as any, { rps: 1000, burst: 2000 }) as any
const schemas = doc.components.schemas
const deref = (node: any): any => (node && typeof node.$ref === "string" ? schemas[node.$ref.replace("#/components/schemas/", "")] : node)
const op = (method: string, path: string) => doc.paths[path][method]
const body = (method: string, path: string) => deref(op(method, path).requestBody.content["application/json"].schema)
const param = (method: string, path: string, name: string) => op(method, path).parameters.find((p: any) => p.name === name)

describe("the OpenAPI document", () => {
  it("gives wallets a pattern and names the EIP-55 checksum rule", () => {
    for (const wallet of [deref(body("post", "/v1/namespace/members").properties.wallet), deref(param("get", "/v1/namespace/devices", "subject").schema)]) {
      expect(wallet.pattern).toBe("^0x[0-9a-fA-F]{40}$")
      expect(wallet.format).toBe("evm-address")
      expect(wallet.description).toContain("EIP-55")
    }
  })

  it("keeps null out of a cache put's value and gives the ttl its grammar", () => {
    const put = body("post", "/v1/cache/put")
    expect(put.properties.value.not).toEqual({ type: "null" })
    expect(new RegExp(put.properties.ttl.pattern).test("1h30m")).toBe(true)
    expect(new RegExp(put.properties.ttl.pattern).test("10y")).toBe(false)
  })

  it("says a key is minted from exactly one of scopes or profile, each scope a known grant", () => {
    const mint = body("post", "/v1/namespace/keys")
    expect(mint.oneOf).toEqual([
      { required: ["scopes"], not: { required: ["profile"] } },
      { required: ["profile"], not: { required: ["scopes"] } }
    ])
    expect(op("post", "/v1/namespace/keys").requestBody.required).toBe(true)
    const grant = deref(mint.properties.scopes.items)
    expect(grant.minLength).toBe(1)
    expect(grant.anyOf[0].enum).toContain("cache")
    const narrowed = new RegExp(grant.anyOf[1].pattern)
    expect(narrowed.test("cache:key=m1/*")).toBe(true)
    expect(narrowed.test("cache:key=nothing")).toBe(false)
    expect(narrowed.test("cache:key=a b/*")).toBe(false)
  })

  it("types the audit query as bounded integers described as integers", () => {
    const limit = param("get", "/v1/audit", "limit")
    expect(limit.schema).toEqual({ type: "integer", minimum: 1, maximum: 200 })
    expect(limit.description).toContain("an integer from 1 to 200")
    expect(limit.description).not.toContain("a string matching")
    expect(param("get", "/v1/audit", "since").schema).toEqual({ type: "integer", minimum: 0, maximum: 999_999_999_999_999 })
    // no integer query parameter anywhere is described as a string
    for (const item of Object.values<any>(doc.paths)) {
      for (const operation of Object.values<any>(item)) {
        for (const p of operation.parameters ?? []) {
          if (p.schema?.type === "integer") expect(p.description ?? "", p.name).not.toContain("a string matching")
        }
      }
    }
  })

  it("gives the fetch-cap id and the device id their exact formats", () => {
    expect(param("delete", "/v1/storage/fetch-caps/{id}", "id").schema.pattern).toBe("^[0-9a-fA-F]{32}$")
    const deviceId = new RegExp(deref(body("post", "/v1/auth/challenge").properties.device_id).pattern)
    expect(deviceId.test("A".repeat(43))).toBe(true)
    expect(deviceId.test("A".repeat(42) + "B")).toBe(false)
  })

  it("bounds the namespace rate limit by the serving gateway's ceiling, and says a null rate takes no burst", () => {
    const set = body("put", "/v1/namespace/rate-limit")
    const rps = set.properties.requests_per_second.anyOf.find((b: any) => b.type === "integer" || b.$ref)
    expect(rps.maximum).toBe(1000)
    expect(set.properties.burst.maximum).toBe(2000)
    expect(set.anyOf[1]).toEqual({ properties: { requests_per_second: { type: "null" } }, not: { required: ["burst"] } })
    const other = withRateLimitCeiling(OpenApi.fromApi(PorticoApi) as any, { rps: 7, burst: 9 }) as any
    expect(other.components.schemas.SetRateLimit.properties.burst.maximum).toBe(9)
  })

  it("marks control characters out of labels and names, and unknown upload parts out of the form", () => {
    expect(new RegExp(body("post", "/v1/auth/verify").properties.device_label.pattern).test("a\u0001")).toBe(false)
    const form = op("post", "/v1/storage/upload").requestBody.content["multipart/form-data"].schema
    expect(form.additionalProperties).toBe(false)
  })

  it("marks session-only routes with the session scheme, a description and x-portico-credential", () => {
    expect(doc.components.securitySchemes.session).toMatchObject({ type: "http", scheme: "bearer" })
    const marked: Array<string> = []
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        const key = policyKey(method.toUpperCase(), path.replace(/\{([^}]+)\}/g, ":$1"))
        expect(["none", "any", "session", "peer"], key).toContain(operation["x-portico-credential"])
        if (operation["x-portico-credential"] !== "session") continue
        marked.push(key)
        expect(operation.security).toEqual([{ session: [] }])
        expect(operation.description).toContain("an API key")
      }
    }
    expect(marked.sort()).toEqual([...SESSION_ONLY].sort())
    expect(marked).toContain("POST /v1/auth/api-key")
    expect(marked).toContain("GET /v1/storage/get/:cid")
  })

  it("gives CIDs their spellings and names the format", () => {
    const cid = deref(body("post", "/v1/storage/pin").properties.cid)
    expect(cid.format).toBe("cid")
    expect(new RegExp(cid.pattern).test("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")).toBe(true)
    expect(new RegExp(cid.pattern).test("Qm" + "1".repeat(44))).toBe(true)
    expect(new RegExp(cid.pattern).test("not a cid")).toBe(false)
  })

  it("describes each WebSocket route as a GET with its query parameters and the 101 answer", () => {
    const sockets = routeEntries(PorticoApi).filter((e) => e.webSocket)
    expect(sockets.map((e) => e.path).sort()).toEqual([
      "/v1/functions/:name/ws",
      "/v1/internal/channel",
      "/v1/internal/webrtc/signal",
      "/v1/proxy/relay",
      "/v1/proxy/tunnel",
      "/v1/pubsub/ws",
      "/v1/webrtc/signal"
    ])
    for (const route of sockets) {
      const documented = route.path.replace(/:(\w+)/g, "{$1}")
      expect(Object.keys(doc.paths[documented])).toEqual(["get"])
      expect(Object.keys(op("get", documented).responses)).toContain("101")
    }
    expect(op("get", "/v1/proxy/tunnel").parameters.map((p: any) => p.name)).toEqual(["host", "port", "jwt"])
    expect(op("get", "/v1/proxy/relay").parameters.map((p: any) => p.name)).toEqual(["host", "port", "circuit"])
    expect(op("get", "/v1/functions/{name}/ws").parameters.map((p: any) => p.name)).toEqual(["name", "jwt"])
    expect(op("get", "/v1/pubsub/ws").parameters.map((p: any) => p.name)).toEqual(["topic", "since", "presence", "member_id", "member_meta", "jwt"])
    expect(op("get", "/v1/webrtc/signal").parameters.map((p: any) => p.name)).toEqual(["room", "jwt"])
    expect(new RegExp(param("get", "/v1/proxy/tunnel", "port").schema.pattern).test("0443")).toBe(false)
    expect(new RegExp(param("get", "/v1/proxy/tunnel", "port").schema.pattern).test("443")).toBe(true)
  })
})
