/**
 * Route facts live on the endpoints; the index built from them refuses an endpoint whose facts do
 * not hold together, so a route cannot ship without a policy or with the wrong gate.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { PorticoApi } from "../../src/api/Api.js"
import { makeRouteIndex, routeEntries } from "../../src/api/gate/RouteIndex.js"
import { Authentication, OpenGate, SessionAuthentication } from "../../src/api/Gates.js"
import { authenticated, grant, session, sessionOrWorkload } from "../../src/api/Policy.js"
import { RoutePolicy } from "../../src/api/RouteFacts.js"

const apiOf = (group: HttpApiGroup.HttpApiGroup.Any) => HttpApi.make("t").add(group as any)
const ok = HttpApiEndpoint.get("ok", "/ok").addSuccess(Schema.String)

describe("route index", () => {
  const entries = routeEntries(PorticoApi)

  it("holds every endpoint of the API once, each with a policy and a fitting gate", () => {
    let endpoints = 0
    HttpApi.reflect(PorticoApi, { onGroup: () => {}, onEndpoint: () => void endpoints++ })
    expect(entries.length).toBe(endpoints)
    const keys = entries.map((e) => `${e.method} ${e.path}`)
    expect(new Set(keys).size).toBe(keys.length)
  })

  it("refuses an endpoint without a policy", () => {
    const group = HttpApiGroup.make("g").add(ok.middleware(Authentication))
    expect(() => routeEntries(apiOf(group))).toThrow(/GET \/ok: no RoutePolicy annotation/)
  })

  it("refuses an endpoint without a gate, or with two", () => {
    expect(() => routeEntries(apiOf(HttpApiGroup.make("g").add(ok.annotate(RoutePolicy, authenticated))))).toThrow(/0 gates/)
    const two = HttpApiGroup.make("g").add(ok.middleware(Authentication).middleware(OpenGate).annotate(RoutePolicy, authenticated))
    expect(() => routeEntries(apiOf(two))).toThrow(/2 gates/)
  })

  it("refuses a gate that does not fit the policy", () => {
    const sessionOnAny = HttpApiGroup.make("g").add(ok.middleware(Authentication).annotate(RoutePolicy, session("storage")))
    expect(() => routeEntries(apiOf(sessionOnAny))).toThrow(/needs the session gate/)
    const grantOnSession = HttpApiGroup.make("g").add(ok.middleware(SessionAuthentication).annotate(RoutePolicy, grant("cache")))
    expect(() => routeEntries(apiOf(grantOnSession))).toThrow(/needs the authentication gate/)
  })

  it("the gateway's answers come from the index: body facts, lane routes, allowed methods", () => {
    const index = makeRouteIndex(entries)
    expect(index.bodyRoute("POST", "/v1/storage/upload")?.bodyCap).toBe("upload")
    expect(index.bodyRoute("POST", "/v1/storage/upload")?.streamed?.contentType).toBe("multipart/form-data")
    expect(index.bodyRoute("POST", "/v1/rqlite/import")?.bodyCap).toBe("sqlImport")
    expect(index.bodyRoute("POST", "/v1/internal/sqlite/query")).toMatchObject({ bodyCap: "forwarded", streamed: undefined })
    expect(index.bodyRoute("POST", "/v1/cache/put")).toBeUndefined()
    expect(entries.filter((e) => e.lane !== undefined).map((e) => e.lane).sort()).toEqual(
      ["cache.delete", "cache.get", "cache.mget", "cache.put", "db.query", "sql.exec", "sql.query", "whoami"]
    )
    expect(index.allowedMethods("/v1/namespace/members/transfer")).toEqual(["POST", "GET", "HEAD"])
    expect(index.allowedMethods("/v1/namespace/members/0xabc")).toEqual(["DELETE"])
    expect(index.allowedMethods("/nope")).toEqual([])
    expect(index.byRoute("GET", "/v1/storage/get/:cid")?.policy).toEqual(sessionOrWorkload("storage-read"))
  })
})
