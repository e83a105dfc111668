/**
 * `GET /v1/proxy/relay` on a real gateway through a real SOCKS5 server (microsocks), on both
 * registry engines (docs/proxy.md "Relay"): anonymous, pinned to `ns-<namespace>.<base domain>` of
 * an existing namespace, port 443, 4 open streams per client address. The namespace host's ingress
 * is stood in for by a TCP forwarder on port 443 of a loopback address of the test's own (TLS
 * termination left out), which only the SOCKS server resolves the namespace host to, and which
 * forwards to the gateway; the relayed storage fetch (`/v1/storage/relayed/{cid}` with a fetch
 * capability) is made through it.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import type * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WebSocket } from "ws"
import { newDevice } from "../support/device.js"
import { type Gateway, startGateway } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { type SocksServer, startSocksServer } from "../support/socksServer.js"

interface Opened {
  readonly ws: WebSocket
  readonly received: () => Buffer
  readonly closed: Promise<{ code: number; reason: string }>
}
type Answer = Opened | { status: number; headers: http.IncomingHttpHeaders; body: any }

const openRelay = (gw: Gateway, query: string) =>
  new Promise<Answer>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/v1/proxy/relay?${query}`)
    const chunks: Array<Buffer> = []
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on("close", (code, reason) => r({ code, reason: reason.toString() })))
    ws.on("message", (data: Buffer) => chunks.push(data))
    ws.on("open", () => resolve({ ws, received: () => Buffer.concat(chunks), closed }))
    ws.on("unexpected-response", (_req, res) => {
      let text = ""
      res.on("data", (c: Buffer) => (text += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === "" ? undefined : JSON.parse(text) }))
    })
    ws.on("error", reject)
  })

const isOpen = (x: Answer): x is Opened => "ws" in x

const expectRefused = (answer: Answer, status: number, code: string) => {
  expect(isOpen(answer), "the handshake was accepted").toBe(false)
  if (isOpen(answer)) return
  expect(answer.status, JSON.stringify(answer.body)).toBe(status)
  expect(answer.body.code).toBe(code)
}

/** A TCP forwarder on `address`:443 to the gateway: the namespace host's ingress, without TLS. */
const startIngress = async (address: string, to: () => number) => {
  const server = net.createServer((client) => {
    const upstream = net.connect(to(), "127.0.0.1")
    client.pipe(upstream).pipe(client)
    client.on("error", () => upstream.destroy())
    upstream.on("error", () => client.destroy())
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(443, address, () => resolve())
  })
  return { close: () => new Promise<void>((r) => server.close(() => r())) }
}

const base = "portico-test.example"

describe.each(["sqlite", "rqlite"] as const)("GET /v1/proxy/relay, registry on %s", (engine) => {
  let gw: Gateway
  let socks: SocksServer
  let ingress: Awaited<ReturnType<typeof startIngress>>
  let engineServer: RqlitedServer | undefined
  const address = `127.${160 + Math.floor(Math.random() * 40)}.${Math.floor(Math.random() * 250) + 1}.${Math.floor(Math.random() * 250) + 1}`
  const owner = Wallet.createRandom()
  const sockets: Array<WebSocket> = []

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    const engineEnv: Record<string, string> = engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url }
    ingress = await startIngress(address, () => gw.port)
    socks = await startSocksServer({ hosts: { [`ns-shop.${base}`]: address, [`ns-ghost.${base}`]: address } })
    gw = await startGateway({ env: { ...engineEnv, PORTICO_BASE_DOMAIN: base, PORTICO_PROXY_SOCKS_URL: socks.url } })
    await gw.cli(["namespace", "create", "shop", "--owner", owner.address])
  }, 120_000)
  afterAll(async () => {
    for (const ws of sockets) ws.terminate()
    await gw?.stop()
    await socks?.stop()
    await ingress?.close()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  const relay = async (query: string) => {
    const answer = await openRelay(gw, query)
    if (isOpen(answer)) sockets.push(answer.ws)
    return answer
  }

  const exchange = async (query: string, request: string) => {
    const opened = await relay(query)
    if (!isOpen(opened)) throw new Error(`refused: ${JSON.stringify(opened)}`)
    opened.ws.send(Buffer.from(request), { binary: true })
    await opened.closed
    return opened.received().toString("utf8")
  }

  it("carries an exchange with a namespace's host, anonymously, the name sent to the SOCKS server", async () => {
    const before = socks.connections().length
    const answer = await exchange(`host=ns-shop.${base}&port=443&circuit=session`, `GET /v1/health HTTP/1.1\r\nHost: ns-shop.${base}\r\nConnection: close\r\n\r\n`)
    expect(answer).toMatch(/^HTTP\/1\.1 200 /)
    expect(socks.connections().slice(before)).toEqual([{ host: `ns-shop.${base}`, port: 443 }])
  })

  it("reaches the relayed storage fetch with a fetch capability", async () => {
    const device = await newDevice()
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: owner.address, namespace: "shop", device_id: device.id } })
    expect(c.status, c.text).toBe(200)
    const verified = await gw.request("POST", "/v1/auth/verify", {
      json: { message: c.body.message, signature: await owner.signMessage(c.body.message), device_key: device.jwk, device_signature: await device.sign(c.body.message) }
    })
    expect(verified.status, verified.text).toBe(200)
    const token = verified.body.access_token as string
    const form = new FormData()
    form.append("file", new Blob([new TextEncoder().encode("relayed bytes")]), "relayed.txt")
    const uploaded = await fetch(`${gw.url}/v1/storage/upload`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form })
    expect(uploaded.status).toBe(200)
    const { Cid } = (await uploaded.json()) as { Cid: string }
    const minted = await gw.request("POST", "/v1/storage/fetch-caps", { token, json: { cid: Cid, count: 1, ttl_seconds: 3600 } })
    expect(minted.status, minted.text).toBe(200)
    const cap = minted.body.caps[0].token as string
    const answer = await exchange(
      `host=ns-shop.${base}`,
      `GET /v1/storage/relayed/${Cid} HTTP/1.1\r\nHost: ns-shop.${base}\r\nX-Portico-Fetch-Cap: ${cap}\r\nConnection: close\r\n\r\n`
    )
    expect(answer).toMatch(/^HTTP\/1\.1 200 /)
    expect(answer.endsWith("\r\n\r\nrelayed bytes")).toBe(true)
  })

  it("refuses hosts that are not an existing namespace's, other ports and bad input", async () => {
    const before = socks.connections().length
    for (const query of [
      "host=example.com",
      "host=127.0.0.1",
      `host=ns-ghost.${base}`,
      `host=shop.${base}`,
      `host=ns-shop.${base}.evil.example`,
      `host=x.ns-shop.${base}`,
      `host=ns-shop.${base}&port=80`
    ]) {
      expectRefused(await relay(query), 400, "RELAY_DESTINATION_NOT_ALLOWED")
    }
    for (const query of [
      "",
      `host=ns-shop.${base}&port=abc`,
      `host=ns-shop.${base}&circuit=other`,
      // read as strictly as every route's query: other spellings of 443, an empty port, unknown members
      `host=ns-shop.${base}&port=0443`,
      `host=ns-shop.${base}&port=`,
      `host=ns-shop.${base}&colour=blue`
    ]) {
      expectRefused(await relay(query), 400, "VALIDATION_FAILED")
    }
    expect(socks.connections().length).toBe(before)
  })

  it("holds at most 4 open relay streams per client address (429 with Retry-After)", async () => {
    const held: Array<Opened> = []
    for (let i = 0; i < 4; i++) {
      const opened = await relay(`host=ns-shop.${base}`)
      if (!isOpen(opened)) throw new Error(`refused: ${JSON.stringify(opened)}`)
      held.push(opened)
    }
    const fifth = await relay(`host=ns-shop.${base}`)
    expectRefused(fifth, 429, "RATE_LIMITED")
    if (!isOpen(fifth)) expect(Number(fifth.headers["retry-after"])).toBeGreaterThan(0)
    held[0]!.ws.close()
    await held[0]!.closed
    await new Promise((r) => setTimeout(r, 200))
    const again = await relay(`host=ns-shop.${base}`)
    expect(isOpen(again)).toBe(true)
    for (const h of [...held.slice(1), again]) {
      if (!isOpen(h)) continue
      h.ws.close()
      await h.closed
    }
    await new Promise((r) => setTimeout(r, 200))
  })

  it("ends the stream on a text frame", async () => {
    const opened = await relay(`host=ns-shop.${base}`)
    if (!isOpen(opened)) throw new Error(`refused: ${JSON.stringify(opened)}`)
    opened.ws.send("text")
    expect((await opened.closed).code).toBe(1003)
  })
})
