/**
 * Route facts live on the endpoints; the index built from them refuses an endpoint whose facts do
 * not hold together, so a route cannot ship without a policy or with the wrong gate.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Effect, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { PorticoApi } from "../../src/api/Api.js"
import { makeRouteIndex, routeEntries } from "../../src/api/gate/RouteIndex.js"
import { Authentication, OpenGate, SessionAuthentication } from "../../src/api/Gates.js"
import { authenticated, grant, internal, open, session, sessionOrWorkload } from "../../src/api/Policy.js"
import { RoutePolicy, WebSocketRoute } from "../../src/api/RouteFacts.js"
import { makeUpgrades, type UpgradeHandler } from "../../src/api/Upgrades.js"

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
    // a vault share's bytes, read whole within the push's cap (its MAC covers them)
    expect(index.bodyRoute("POST", "/v1/internal/vault/share/put")).toMatchObject({ bodyCap: "vaultPush", streamed: undefined })
    expect(entries.filter((e) => e.lane !== undefined).map((e) => e.lane).sort()).toEqual([
      "cache.delete",
      "cache.get",
      "cache.mget",
      "cache.put",
      "db.query",
      "internal.sqlite.query",
      "internal.vault.share.get",
      "internal.vault.share.put",
      "sql.exec",
      "sql.query",
      "vault.pull",
      "vault.push",
      "webrtc.turn",
      "whoami"
    ])
    expect(index.allowedMethods("/v1/namespace/members/transfer")).toEqual(["POST", "GET", "HEAD"])
    expect(index.allowedMethods("/v1/namespace/members/0xabc")).toEqual(["DELETE"])
    expect(index.allowedMethods("/nope")).toEqual([])
    expect(index.byRoute("GET", "/v1/storage/get/:cid")?.policy).toEqual(sessionOrWorkload("storage-read"))
  })

  it("finds the WebSocket routes, with their policies and query schemas, by path whatever the method", () => {
    const index = makeRouteIndex(entries)
    expect(entries.filter((e) => e.webSocket).map((e) => e.name).sort()).toEqual(["internal.peerChannel", "internal.webrtcSignal", "invoke.ws", "proxy.relay", "proxy.tunnel", "pubsub.ws", "webrtc.signal"])
    expect(index.webSocketRoute("/v1/functions/chat/ws")).toMatchObject({ name: "invoke.ws", policy: grant("invoke") })
    expect(index.webSocketRoute("/v1/pubsub/ws")).toMatchObject({ policy: grant("pubsub") })
    const tunnel = index.webSocketRoute("/v1/proxy/tunnel")
    expect(tunnel).toMatchObject({ name: "proxy.tunnel", method: "GET", policy: session("proxy"), gate: "session" })
    expect(tunnel?.query).toBeDefined()
    expect(index.webSocketRoute("/v1/proxy/relay")?.gate).toBe("open")
    expect(index.webSocketRoute("/v1/webrtc/signal")).toMatchObject({ policy: sessionOrWorkload("webrtc"), gate: "authentication" })
    expect(index.webSocketRoute("/v1/internal/webrtc/signal")).toMatchObject({ policy: internal, gate: "peer" })
    expect(index.webSocketRoute("/v1/internal/channel")).toMatchObject({ policy: internal, gate: "peer" })
    expect(index.webSocketRoute("/v1/proxy/anon")).toBeUndefined()
    expect(index.webSocketRoute("/v1/proxy/tunnel/x")).toBeUndefined()
  })

  it("refuses a WebSocket route that is not a GET", () => {
    const posted = HttpApiGroup.make("g").add(
      HttpApiEndpoint.post("ok", "/ok").addSuccess(Schema.String).middleware(OpenGate).annotate(RoutePolicy, open).annotate(WebSocketRoute, true)
    )
    expect(() => routeEntries(apiOf(posted))).toThrow(/POST \/ok: a WebSocket route is a GET/)
  })

  it("will not serve upgrades unless every WebSocket route has one handler and every handler a route", () => {
    const index = makeRouteIndex(entries)
    const handler = (route: string): UpgradeHandler => ({ route, handle: async () => {} })
    const upgrades = (handlers: ReadonlyArray<UpgradeHandler>) => () =>
      makeUpgrades({ index, gate: { now: () => ({ _tag: "Admitted", principal: undefined }), run: () => Effect.succeed(undefined) }, handlers, isApiHost: () => true })
    const all = ["proxy.tunnel", "proxy.relay", "pubsub.ws", "invoke.ws", "webrtc.signal", "internal.webrtcSignal", "internal.peerChannel"].map(handler)
    expect(upgrades(all.slice(0, 1))).toThrow(/proxy\.relay has no handler/)
    expect(upgrades(all.slice(0, 2))).toThrow(/pubsub\.ws has no handler/)
    expect(upgrades([...all, handler("proxy.anon")])).toThrow(/proxy\.anon is no WebSocket route/)
    expect(upgrades(all)).not.toThrow()
  })
})
