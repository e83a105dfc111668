/** Every route has exactly one policy and every policy names a route. */
import { HttpApi } from "@effect/platform"
import { describe, expect, it } from "vitest"
import { PorticoApi } from "../../src/api/Api.js"
import { policyKey, routePolicies } from "../../src/api/RoutePolicy.js"

const apiRoutes = (): Array<string> => {
  const out: Array<string> = []
  HttpApi.reflect(PorticoApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => out.push(policyKey(endpoint.method, endpoint.path))
  })
  return out
}

describe("route policy table", () => {
  it("covers every route of the API", () => {
    const missing = apiRoutes().filter((r) => routePolicies[r] === undefined)
    expect(missing).toEqual([])
  })
  it("names no route that does not exist", () => {
    const routes = new Set(apiRoutes())
    const stale = Object.keys(routePolicies).filter((k) => !routes.has(k))
    expect(stale).toEqual([])
  })
  it("has no route declared twice", () => {
    const routes = apiRoutes()
    expect(new Set(routes).size).toBe(routes.length)
  })
})
