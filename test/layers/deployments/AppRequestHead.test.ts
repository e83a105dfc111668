/**
 * A request head on an app connection (src/layers/deployments/serving/AppRequestHead.ts): what its
 * lines say, and the head rebuilt for the app (hop-by-hop and the client's forwarding headers out,
 * the gateway's in, the client's persistence and the body's framing stated) or for node's server.
 */
import { describe, expect, it } from "vitest"
import { factsOf, headAsRead, headForApp, type RequestHead } from "../../../src/layers/deployments/serving/AppRequestHead.js"

const get = (headers: ReadonlyArray<string>, version: readonly [number, number] = [1, 1]): RequestHead => ({
  major: version[0],
  minor: version[1],
  method: "GET",
  url: "/a?b=1",
  headers
})

const CLIENT = ["203.0.113.7", "http"] as const

describe("an app connection's request head", () => {
  it("reads the routing and framing lines in one pass, names in any case", () => {
    expect(factsOf(["HOST", "a.test", "Connection", "keep-alive", "connection", "X-Secret", "Upgrade", "websocket", "Transfer-Encoding", "chunked"])).toEqual({
      host: "a.test",
      hosts: 1,
      connection: "keep-alive,X-Secret",
      upgradeTo: "websocket",
      chunked: true,
      relayed: false
    })
    expect(factsOf(["Host", "a.test", "host", "b.test"])).toMatchObject({ host: "b.test", hosts: 2 })
    expect(factsOf([])).toMatchObject({ host: undefined, hosts: 0, connection: undefined, chunked: false })
  })

  const cases: ReadonlyArray<readonly [string, RequestHead, boolean, boolean, ReadonlyArray<string>, ReadonlyArray<string>]> = [
    [
      "the client's lines as sent, then the gateway's X-Forwarded-*",
      get(["Host", "a.test", "Accept", "*/*", "X-Custom", "v"]),
      false,
      true,
      ["GET /a?b=1 HTTP/1.1", "Host: a.test", "Accept: */*", "X-Custom: v", "X-Forwarded-For: 203.0.113.7", "X-Forwarded-Proto: http", "X-Forwarded-Host: a.test"],
      []
    ],
    [
      "hop-by-hop lines, those Connection names, and the client's forwarding headers dropped",
      get(["Host", "a.test", "Connection", "X-Secret, keep-alive", "X-Secret", "s", "Keep-Alive", "timeout=5", "TE", "trailers", "Proxy-Authorization", "p", "X-Forwarded-For", "6.6.6.6", "Forwarded", "for=6.6.6.6", "X-Forwarded-Host", "evil.test"]),
      false,
      true,
      ["X-Forwarded-For: 203.0.113.7", "X-Forwarded-Host: a.test"],
      ["X-Secret", "Keep-Alive", "TE:", "Proxy-Authorization", "6.6.6.6", "evil.test", "Connection:"]
    ],
    ["a client that asked to close: Connection: close", get(["Host", "a.test", "Connection", "close"]), false, false, ["Connection: close"], ["keep-alive"]],
    ["HTTP/1.0 kept alive: said so", get(["Host", "a.test", "Connection", "keep-alive"], [1, 0]), false, true, ["GET /a?b=1 HTTP/1.0", "Connection: keep-alive"], ["Connection: close"]],
    ["an upgrade: Connection and Upgrade stated again", get(["Host", "a.test", "Connection", "Upgrade", "Upgrade", "websocket"]), true, true, ["Connection: Upgrade", "Upgrade: websocket"], []],
    ["a chunked body: framed again as chunked", get(["Host", "a.test", "Transfer-Encoding", "chunked"]), false, true, ["Transfer-Encoding: chunked"], []]
  ]

  it.each(cases)("for the app: %s", (_, head, upgrade, keepAlive, present, absent) => {
    const text = headForApp(head, factsOf(head.headers), CLIENT, upgrade, keepAlive)
    expect(text.endsWith("\r\n\r\n")).toBe(true)
    const lines = text.slice(0, -4).split("\r\n")
    for (const line of present) expect(lines).toContain(line)
    for (const part of absent) expect(text).not.toContain(part)
    // one framing, one persistence: never two Connection or Transfer-Encoding lines
    expect(lines.filter((l) => /^connection:/i.test(l)).length).toBeLessThanOrEqual(1)
    expect(lines.filter((l) => /^transfer-encoding:/i.test(l)).length).toBeLessThanOrEqual(1)
  })

  it("for node's server: the head as parsed, every line kept", () => {
    const head = get(["Host", "api.test", "Authorization", "Bearer x", "X-Forwarded-For", "1.2.3.4"])
    expect(headAsRead(head).toString("latin1")).toBe("GET /a?b=1 HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer x\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n")
  })
})
