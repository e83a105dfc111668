/**
 * `GET /v1/proxy/tunnel` on a real gateway through a real SOCKS5 server (microsocks), on both
 * registry engines (docs/proxy.md "Tunnels"). The destination is a local HTTP server on port 80 of
 * a loopback address of its own, named `dest.portico-test`, which only the SOCKS server resolves.
 *
 * Covered: a tunnel carrying a real HTTP exchange (credential by header and by ?jwt=), the name
 * arriving at the SOCKS server; a text frame closing it; refusals answered to the handshake (bad
 * or private destinations 400, an unreachable one 502, no or a dead upstream 503, an API key 403);
 * the idle and lifetime limits and the per-user count (429 with Retry-After) with short settings;
 * a logged-out session's tunnel and a revoked device's (revoked through another gateway) closed
 * within 10 s.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WebSocket } from "ws"
import { type Gateway, mintKey, startGateway } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { newDevice } from "../support/device.js"
import { type SocksServer, startSocksServer } from "../support/socksServer.js"

interface Opened {
  readonly ws: WebSocket
  readonly received: () => Buffer
  readonly closed: Promise<{ code: number; reason: string; at: number }>
}

/** Opens a tunnel: the socket once open, or the handshake's HTTP answer (status, headers, body). */
const openTunnel = (gw: Gateway, query: string, token: string | undefined, via: "header" | "query" = "header") =>
  new Promise<Opened | { status: number; headers: http.IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const url = `ws://127.0.0.1:${gw.port}/v1/proxy/tunnel?${query}${via === "query" && token !== undefined ? `&jwt=${token}` : ""}`
    const ws = new WebSocket(url, { headers: via === "header" && token !== undefined ? { authorization: `Bearer ${token}` } : {} })
    const chunks: Array<Buffer> = []
    const closed = new Promise<{ code: number; reason: string; at: number }>((r) => ws.on("close", (code, reason) => r({ code, reason: reason.toString(), at: Date.now() })))
    ws.on("message", (data: Buffer) => chunks.push(data))
    ws.on("open", () => resolve({ ws, received: () => Buffer.concat(chunks), closed }))
    ws.on("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === "" ? undefined : JSON.parse(text) }))
    })
    ws.on("error", (e) => reject(e))
  })

const isOpen = (x: Awaited<ReturnType<typeof openTunnel>>): x is Opened => "ws" in x

const expectRefused = (answer: Awaited<ReturnType<typeof openTunnel>>, status: number, code: string) => {
  expect(isOpen(answer), "the handshake was accepted").toBe(false)
  if (isOpen(answer)) return
  expect(answer.status, JSON.stringify(answer.body)).toBe(status)
  expect(answer.body.code).toBe(code)
  expect(typeof answer.body.error).toBe("string")
}

const startDestination = async (address: string) => {
  const server = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/plain", connection: "close" })
      // /big answers 1 MiB, over the short gateway's 64 KiB tunnel cap
      res.end(req.url === "/big" ? Buffer.alloc(1024 * 1024, 97) : `hello through the tunnel: ${req.method} ${req.url}`)
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(80, address, () => resolve())
  })
  return { close: () => new Promise<void>((r) => server.close(() => r())) }
}

describe.each(["sqlite", "rqlite"] as const)("GET /v1/proxy/tunnel, registry on %s", (engine) => {
  let gw: Gateway
  let short: Gateway
  let noUpstream: Gateway
  let upstreamDown: Gateway
  let socks: SocksServer
  let destination: Awaited<ReturnType<typeof startDestination>>
  let engineServer: RqlitedServer | undefined
  let owner: string
  let runtimeKey: string
  const address = `127.${120 + Math.floor(Math.random() * 40)}.${Math.floor(Math.random() * 250) + 1}.${Math.floor(Math.random() * 250) + 1}`
  const alice = Wallet.createRandom()
  const bob = Wallet.createRandom()
  const tunnels: Array<WebSocket> = []

  const signIn = async (wallet: { readonly address: string; readonly signMessage: (m: string) => Promise<string> }): Promise<string> => {
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: wallet.address, namespace: "shop" } })
    expect(c.status, c.text).toBe(200)
    const verified = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await wallet.signMessage(c.body.message) } })
    expect(verified.status, verified.text).toBe(200)
    return verified.body.access_token
  }

  const open = async (via: Gateway, query: string, token: string | undefined, how: "header" | "query" = "header") => {
    const answer = await openTunnel(via, query, token, how)
    if (isOpen(answer)) tunnels.push(answer.ws)
    return answer
  }

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    const engineEnv: Record<string, string> = engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url }
    destination = await startDestination(address)
    socks = await startSocksServer({ hosts: { "dest.portico-test": address } })
    gw = await startGateway({ env: { ...engineEnv, PORTICO_PROXY_SOCKS_URL: socks.url, PORTICO_PROXY_REVOCATION_CHECK_MS: "1000" } })
    short = await startGateway({
      dataDir: gw.dataDir,
      env: {
        ...engineEnv,
        PORTICO_PROXY_SOCKS_URL: socks.url,
        PORTICO_PROXY_TUNNEL_IDLE_SECONDS: "1",
        PORTICO_PROXY_TUNNEL_LIFETIME_SECONDS: "3",
        PORTICO_PROXY_TUNNELS_PER_USER: "2",
        PORTICO_PROXY_TUNNELS_PER_NODE: "3",
        PORTICO_PROXY_TUNNEL_MAX_BYTES: "65536"
      }
    })
    noUpstream = await startGateway({ dataDir: gw.dataDir, env: engineEnv })
    const dead = await Effect.runPromise(freePort)
    upstreamDown = await startGateway({ dataDir: gw.dataDir, env: { ...engineEnv, PORTICO_PROXY_SOCKS_URL: `socks5h://127.0.0.1:${dead}` } })
    owner = (await gw.cli(["namespace", "create", "shop"])).api_key
    runtimeKey = await mintKey(gw, owner, { profile: "runtime", label: "app" })
    for (const w of [alice, bob]) {
      const added = await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: w.address, role: "runtime" } })
      expect(added.status, added.text).toBe(200)
    }
  }, 120_000)
  afterAll(async () => {
    for (const ws of tunnels) ws.terminate()
    await Promise.all([upstreamDown?.stop(), noUpstream?.stop(), short?.stop()])
    await gw?.stop()
    await socks?.stop()
    await destination?.close()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  const request = Buffer.from("GET /through HTTP/1.1\r\nHost: dest.portico-test\r\nConnection: close\r\n\r\n")

  it("carries a real HTTP exchange as binary frames, the name sent to the SOCKS server", async () => {
    const session = await signIn(alice)
    for (const how of ["header", "query"] as const) {
      const before = socks.connections().length
      const tunnel = await open(gw, "host=dest.portico-test&port=80", session, how)
      if (!isOpen(tunnel)) throw new Error(`refused: ${JSON.stringify(tunnel)}`)
      tunnel.ws.send(request, { binary: true })
      const closed = await tunnel.closed
      const text = tunnel.received().toString("utf8")
      expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
      expect(text).toContain("hello through the tunnel: GET /through")
      expect(closed.code).toBe(1000)
      expect(socks.connections().slice(before)).toEqual([{ host: "dest.portico-test", port: 80 }])
    }
    // the access log has the handshakes, without their query (the ?jwt= credential)
    expect(gw.logs()).toContain('"route":"/v1/proxy/tunnel","status":101')
    expect(gw.logs()).not.toContain(session)
  })

  it("closes the tunnel on a text frame (1003)", async () => {
    const tunnel = await open(gw, "host=dest.portico-test&port=80", await signIn(alice))
    if (!isOpen(tunnel)) throw new Error(`refused: ${JSON.stringify(tunnel)}`)
    tunnel.ws.send("GET / HTTP/1.1\r\n\r\n")
    expect((await tunnel.closed).code).toBe(1003)
  })

  it("answers refusals to the handshake: 400, 502, 503, 403, 401", async () => {
    const session = await signIn(alice)
    for (const query of ["host=127.0.0.1&port=80", "host=2130706433", "host=0x7f000001", "host=localhost", "host=%5B%3A%3A1%5D", "host=10.0.0.1", "host=dest.portico-test&port=8080"]) {
      expectRefused(await open(gw, query, session), 400, "RELAY_DESTINATION_NOT_ALLOWED")
    }
    for (const query of ["", "port=443", "host=dest.portico-test&port=abc", "host=bad%20host"]) {
      expectRefused(await open(gw, query, session), 400, "VALIDATION_FAILED")
    }
    expectRefused(await open(gw, "host=unknown.portico-test&port=80", session), 502, "RELAY_DESTINATION_UNREACHABLE")
    expectRefused(await open(noUpstream, "host=dest.portico-test&port=80", session), 503, "RELAY_UNAVAILABLE")
    expectRefused(await open(upstreamDown, "host=dest.portico-test&port=80", session), 503, "RELAY_UNAVAILABLE")
    expectRefused(await open(gw, "host=dest.portico-test&port=80", runtimeKey), 403, "SESSION_REQUIRED")
    expectRefused(await open(gw, "host=dest.portico-test&port=80", undefined), 401, "UNAUTHORIZED")
    // a plain GET on the path is told it is a WebSocket
    const plain = await gw.request("GET", "/v1/proxy/tunnel?host=dest.portico-test", { token: session })
    expect(plain.status, plain.text).toBe(400)
  })

  it("reads the handshake's query as strictly as every route's: other spellings of a port, an empty port, unknown and repeated members are 400", async () => {
    const session = await signIn(alice)
    const before = socks.connections().length
    for (const query of [
      "host=dest.portico-test&port=0443",
      "host=dest.portico-test&port=080",
      "host=dest.portico-test&port=",
      "host=dest.portico-test&port=80&colour=blue",
      "host=dest.portico-test&host=dest.portico-test&port=80"
    ]) {
      for (const how of ["header", "query"] as const) expectRefused(await open(gw, query, session, how), 400, "VALIDATION_FAILED")
    }
    // the credential is judged first, as on every route: no credential is 401 whatever the query
    expectRefused(await open(gw, "host=dest.portico-test&port=0443", undefined), 401, "UNAUTHORIZED")
    expect(socks.connections().length).toBe(before)
  })

  it("closes an idle tunnel and one past its lifetime", async () => {
    const session = await signIn(alice)
    const idle = await open(short, "host=dest.portico-test&port=80", session)
    if (!isOpen(idle)) throw new Error(`refused: ${JSON.stringify(idle)}`)
    const openedAt = Date.now()
    const idleClosed = await idle.closed
    expect(idleClosed.reason).toMatch(/idle/)
    expect(idleClosed.at - openedAt).toBeLessThan(2_500)

    const busy = await open(short, "host=dest.portico-test&port=80", session)
    if (!isOpen(busy)) throw new Error(`refused: ${JSON.stringify(busy)}`)
    const busyAt = Date.now()
    // a header line every 300 ms keeps it from idling; the destination waits for the blank line
    busy.ws.send(Buffer.from("GET /slow HTTP/1.1\r\n"), { binary: true })
    const keep = setInterval(() => busy.ws.readyState === WebSocket.OPEN && busy.ws.send(Buffer.from("X-Keep: 1\r\n"), { binary: true }), 300)
    const busyClosed = await busy.closed
    clearInterval(keep)
    expect(busyClosed.reason).toMatch(/lifetime/)
    expect(busyClosed.at - busyAt).toBeGreaterThan(2_500)
    expect(busyClosed.at - busyAt).toBeLessThan(4_500)
  })

  it("caps open tunnels per user (429 with Retry-After) and frees a slot on close", async () => {
    const session = await signIn(alice)
    const first = await open(short, "host=dest.portico-test&port=80", session)
    const second = await open(short, "host=dest.portico-test&port=80", session)
    if (!isOpen(first) || !isOpen(second)) throw new Error("refused")
    const third = await open(short, "host=dest.portico-test&port=80", session)
    expectRefused(third, 429, "RATE_LIMITED")
    if (!isOpen(third)) expect(Number(third.headers["retry-after"])).toBeGreaterThan(0)
    first.ws.close()
    await first.closed
    await new Promise((r) => setTimeout(r, 200))
    const again = await open(short, "host=dest.portico-test&port=80", session)
    expect(isOpen(again)).toBe(true)
    // the node's cap (3 here): another user's first tunnel fills it, their second is refused
    const bobs = await signIn(bob)
    const bobFirst = await open(short, "host=dest.portico-test&port=80", bobs)
    expect(isOpen(bobFirst)).toBe(true)
    const bobSecond = await open(short, "host=dest.portico-test&port=80", bobs)
    expectRefused(bobSecond, 429, "RATE_LIMITED")
    if (!isOpen(bobSecond)) expect(bobSecond.body.error).toMatch(/gateway/)
    for (const t of [second, again, bobFirst]) {
      if (!isOpen(t)) continue
      t.ws.close()
      await t.closed
    }
  })

  it("closes a tunnel past its byte cap (1009), never carrying more than the cap", async () => {
    const tunnel = await open(short, "host=dest.portico-test&port=80", await signIn(alice))
    if (!isOpen(tunnel)) throw new Error(`refused: ${JSON.stringify(tunnel)}`)
    tunnel.ws.send(Buffer.from("GET /big HTTP/1.1\r\nHost: dest.portico-test\r\nConnection: close\r\n\r\n"), { binary: true })
    const closed = await tunnel.closed
    expect(closed.code).toBe(1009)
    expect(tunnel.received().length).toBeLessThanOrEqual(65536)
  })

  it("closes a logged-out session's tunnel within 10 s", async () => {
    const session = await signIn(alice)
    const tunnel = await open(gw, "host=dest.portico-test&port=80", session)
    if (!isOpen(tunnel)) throw new Error(`refused: ${JSON.stringify(tunnel)}`)
    tunnel.ws.send(Buffer.from("GET /held HTTP/1.1\r\n"), { binary: true })
    const loggedOut = await gw.request("POST", "/v1/auth/logout", { token: session, json: {} })
    expect(loggedOut.status, loggedOut.text).toBe(200)
    const at = Date.now()
    const closed = await tunnel.closed
    expect(closed.code).toBe(1008)
    expect(closed.at - at).toBeLessThan(10_000)
  }, 20_000)

  it("closes a revoked device's tunnel within 10 s, the device revoked through another gateway", async () => {
    const device = await newDevice()
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: alice.address, namespace: "shop", device_id: device.id } })
    expect(c.status, c.text).toBe(200)
    const verified = await gw.request("POST", "/v1/auth/verify", {
      json: { message: c.body.message, signature: await alice.signMessage(c.body.message), device_key: device.jwk, device_signature: await device.sign(c.body.message) }
    })
    expect(verified.status, verified.text).toBe(200)
    const tunnel = await open(gw, "host=dest.portico-test&port=80", verified.body.access_token)
    if (!isOpen(tunnel)) throw new Error(`refused: ${JSON.stringify(tunnel)}`)
    // the revocation is written through another gateway of the same registry
    const revoked = await noUpstream.request("DELETE", `/v1/namespace/devices/${device.id}`, { token: owner })
    expect(revoked.status, revoked.text).toBe(200)
    const at = Date.now()
    const closed = await tunnel.closed
    expect(closed.code).toBe(1008)
    expect(closed.at - at).toBeLessThan(10_000)
  }, 20_000)

  it("outlives clients that reset mid-handshake", async () => {
    const session = await signIn(alice)
    for (let i = 0; i < 20; i++) {
      const socket = net.connect(gw.port, "127.0.0.1")
      await new Promise<void>((r) => socket.once("connect", () => r()))
      socket.write(
        `GET /v1/proxy/tunnel?host=dest.portico-test&port=80 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${session}\r\n\r\n`
      )
      await new Promise((r) => setTimeout(r, i % 5))
      socket.resetAndDestroy()
    }
    await new Promise((r) => setTimeout(r, 500))
    const health = await gw.request("GET", "/v1/health")
    expect(health.status).toBe(200)
    // every slot the reset handshakes took is free again: the user's cap (24) still admits a tunnel
    const tunnel = await open(gw, "host=dest.portico-test&port=80", session)
    expect(isOpen(tunnel)).toBe(true)
    if (isOpen(tunnel)) tunnel.ws.close()
  })
})
