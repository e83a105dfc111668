import { describe, expect, it } from "vitest"
import { caddyConfig, type EdgeSettings } from "../../../src/edge/CaddyConfig.js"

const base: EdgeSettings = {
  gateway: "http://127.0.0.1:6001",
  dataDir: "/var/lib/portico/",
  baseDomain: "Example.COM",
  acmeDirectory: "https://acme.test/dir",
  httpsPort: 443,
  httpPort: 80
}

/** Reads a path of object members out of the configuration. */
const at = (value: unknown, ...path: ReadonlyArray<string | number>): any =>
  path.reduce<any>((v, k) => (v === undefined ? undefined : v[k]), value)

describe("the edge's Caddy configuration", () => {
  it("asks the gateway before ordering, stores through it with the node's token, and answers /v1/internal/ itself", () => {
    const config = caddyConfig(base)
    expect(at(config, "admin")).toEqual({ disabled: true, config: { persist: false } })
    expect(at(config, "storage")).toEqual({ module: "portico", endpoint: "http://127.0.0.1:6001", token_file: "/var/lib/portico/edge.token" })
    expect(at(config, "apps", "tls", "automation", "on_demand", "permission")).toEqual({ module: "http", endpoint: "http://127.0.0.1:6001/v1/internal/tls/check" })
    expect(at(config, "apps", "tls", "automation", "policies")).toEqual([{ on_demand: true, issuers: [{ module: "acme", ca: "https://acme.test/dir" }] }])
    const routes = at(config, "apps", "http", "servers", "edge", "routes")
    expect(routes[0].match).toEqual([{ path: ["/v1/internal", "/v1/internal/*"] }])
    expect(routes[0].handle[0]).toMatchObject({ handler: "static_response", status_code: 404 })
    expect(JSON.parse(routes[0].handle[0].body)).toMatchObject({ code: "ROUTE_NOT_FOUND" })
    expect(routes[1].handle).toEqual([{ handler: "reverse_proxy", upstreams: [{ dial: "127.0.0.1:6001" }] }])
    expect(at(config, "apps", "http", "servers", "plain", "routes", 0, "handle", 0, "headers", "Location")).toEqual(["https://{http.request.host}{http.request.uri}"])
    expect(at(config, "apps", "pki")).toBeUndefined()
  })

  it("with the wildcard, automates the base domain and *.<base> by DNS-01 through the gateway", () => {
    const config = caddyConfig({ ...base, wildcard: true, resolvers: ["192.0.2.53:53"], httpsPort: 8443, listenHost: "192.0.2.10" })
    expect(at(config, "apps", "tls", "certificates", "automate")).toEqual(["example.com", "*.example.com"])
    const [wildcard, onDemand] = at(config, "apps", "tls", "automation", "policies")
    expect(wildcard.subjects).toEqual(["example.com", "*.example.com"])
    expect(wildcard.issuers[0].challenges).toEqual({
      bind_host: "192.0.2.10",
      dns: { provider: { name: "portico", endpoint: "http://127.0.0.1:6001", token_file: "/var/lib/portico/edge.token" }, resolvers: ["192.0.2.53:53"] }
    })
    expect(onDemand.on_demand).toBe(true)
    expect(at(config, "apps", "http", "servers", "edge", "listen")).toEqual(["192.0.2.10:8443"])
    expect(at(config, "apps", "http", "servers", "plain", "routes", 0, "handle", 0, "headers", "Location")).toEqual(["https://{http.request.host}:8443{http.request.uri}"])
  })

  it("with the internal CA, issues from Caddy's own CA and never installs it into the machine's trust store", () => {
    const config = caddyConfig({ ...base, internalCa: true })
    expect(at(config, "apps", "tls", "automation", "policies")).toEqual([{ on_demand: true, issuers: [{ module: "internal" }] }])
    expect(at(config, "apps", "pki")).toEqual({ certificate_authorities: { local: { install_trust: false } } })
  })
})
