/**
 * `POST /v1/proxy/anon` on a real gateway through a real SOCKS5 server (microsocks, test/support/
 * socksServer.ts), on both registry engines (docs/proxy.md). The destination is a local HTTP
 * server on a loopback address of its own, port 80, named `dest.portico-test`: a name only the
 * SOCKS server resolves, so the gateway (which refuses loopback) reaches it only through the
 * upstream, and the SOCKS server's log shows the name, not an address, arrived.
 *
 * Covered: GET and POST with bodies and headers, headers stripped and refused, an upstream failure
 * as 200 with `error` (unknown name, nothing listening, a body streaming forever over its cap, a
 * destination that never answers), every private-destination spelling 400, bad input 400/413,
 * API keys and app keys refused, no upstream and the upstream down 503; HTTPS to a destination
 * whose certificate (from the test CA, trusted through NODE_EXTRA_CA_CERTS) names it, and a TLS
 * failure as 200 with `error` when the name does not match.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { call, expectRefusal, notCalled, refusal } from "../support/client.js"
import { type Gateway, mintKey, type Reply, startGateway } from "../support/gateway.js"
import { freePort } from "../support/process.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { type SocksServer, startSocksServer } from "../support/socksServer.js"
import { testCa } from "../support/testCa.js"

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body.code, reply.text).toBe(code)
  expect(typeof reply.body.error).toBe("string")
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
}

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

/** The destination: echoes what it got at /echo, streams forever at /forever, never answers at /silent. */
const startDestination = async (address: string) => {
  const seen: Array<Seen> = []
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body })
      if (req.url === "/forever") {
        res.writeHead(200, { "content-type": "application/octet-stream" })
        const chunk = Buffer.alloc(16 * 1024, 7)
        const pump = () => {
          while (res.write(chunk)) if (res.destroyed) return
          res.once("drain", pump)
        }
        res.on("close", () => res.removeAllListeners("drain"))
        return pump()
      }
      if (req.url === "/silent") return
      // switches protocols though the request asked for no upgrade
      if (req.url === "/switch") {
        res.writeHead(101, { upgrade: "websocket", connection: "upgrade" })
        return res.end()
      }
      res.setHeader("set-cookie", ["a=1; Path=/", "b=2, with comma"])
      res.setHeader("x-echo", "yes")
      // a header the destination's Connection names is hop-by-hop: dropped from the answer
      res.setHeader("connection", "close, x-hop")
      res.setHeader("x-hop", "one connection only")
      res.writeHead(201, { "content-type": "application/json" })
      res.end(JSON.stringify({ method: req.method, url: req.url, body }))
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(80, address, () => resolve())
  })
  return { seen, close: () => new Promise<void>((r) => server.close(() => r())) }
}

/** A certificate for `name` from the test CA (test/support/testCa.ts), and its key. */
const certFor = (name: string): { cert: string; key: string } => {
  const ca = testCa()
  const dir = fs.mkdtempSync(path.join(ca.dir, "leaf-"))
  const run = (args: ReadonlyArray<string>) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] })
  run(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "leaf.key"])
  run(["req", "-new", "-key", "leaf.key", "-subj", `/CN=${name}`, "-out", "leaf.csr"])
  fs.writeFileSync(path.join(dir, "leaf.ext"), `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:${name}\n`)
  run(["x509", "-req", "-in", "leaf.csr", "-CA", path.join(ca.dir, "ca.pem"), "-CAkey", path.join(ca.dir, "ca.key"), "-CAcreateserial", "-days", "1", "-sha256", "-extfile", "leaf.ext", "-out", "leaf.pem"])
  return { cert: fs.readFileSync(path.join(dir, "leaf.pem"), "utf8"), key: fs.readFileSync(path.join(dir, "leaf.key"), "utf8") }
}

const startHttpsDestination = async (address: string) => {
  const server = https.createServer(certFor("dest.portico-test"), (req, res) => {
    req.resume()
    req.on("end", () => res.end(`secure ${req.method} ${req.url} ${req.headers.host}`))
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(443, address, () => resolve())
  })
  return { close: () => new Promise<void>((r) => server.close(() => r())) }
}

describe.each(["sqlite", "rqlite"] as const)("POST /v1/proxy/anon, registry on %s", (engine) => {
  let gw: Gateway
  let noUpstream: Gateway
  let upstreamDown: Gateway
  let socks: SocksServer
  let destination: Awaited<ReturnType<typeof startDestination>>
  let secure: Awaited<ReturnType<typeof startHttpsDestination>>
  let engineServer: RqlitedServer | undefined
  let session: string
  let owner: string
  let runtimeKey: string
  // a loopback address of this run's own, so port 80 is free on it
  const address = `127.${80 + Math.floor(Math.random() * 40)}.${Math.floor(Math.random() * 250) + 1}.${Math.floor(Math.random() * 250) + 1}`
  const alice = Wallet.createRandom()

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      engineServer = await Effect.runPromise(startRqlited())
    }
    const engineEnv: Record<string, string> = engineServer === undefined ? {} : { PORTICO_RQLITE_URL: engineServer.url }
    destination = await startDestination(address)
    secure = await startHttpsDestination(address)
    // nothing.portico-test has an address where nothing listens; wrong.portico-test reaches the
    // HTTPS destination, whose certificate names dest.portico-test only
    socks = await startSocksServer({ hosts: { "dest.portico-test": address, "wrong.portico-test": address, "nothing.portico-test": "127.0.0.1" } })
    const limits = { PORTICO_PROXY_ANON_MAX_RESPONSE_BYTES: "65536", PORTICO_PROXY_ANON_TIMEOUT_MS: "3000", PORTICO_PROXY_ANON_MAX_REQUEST_BYTES: "4096", PORTICO_PROXY_ANON_PER_USER: "2" }
    gw = await startGateway({ env: { ...engineEnv, ...limits, PORTICO_PROXY_SOCKS_URL: socks.url, NODE_EXTRA_CA_CERTS: testCa().caFile } })
    noUpstream = await startGateway({ dataDir: gw.dataDir, env: engineEnv })
    const dead = await Effect.runPromise(freePort)
    upstreamDown = await startGateway({ dataDir: gw.dataDir, env: { ...engineEnv, PORTICO_PROXY_SOCKS_URL: `socks5h://127.0.0.1:${dead}` } })
    owner = (await gw.cli(["namespace", "create", "shop"])).api_key
    runtimeKey = await mintKey(gw, owner, { profile: "runtime", label: "app" })
    const added = await gw.request("POST", "/v1/namespace/members", { token: owner, json: { wallet: alice.address, role: "runtime" } })
    expect(added.status, added.text).toBe(200)
    const c = await gw.request("POST", "/v1/auth/challenge", { json: { wallet: alice.address, namespace: "shop" } })
    expect(c.status, c.text).toBe(200)
    const verified = await gw.request("POST", "/v1/auth/verify", { json: { message: c.body.message, signature: await alice.signMessage(c.body.message) } })
    expect(verified.status, verified.text).toBe(200)
    session = verified.body.access_token
  }, 120_000)
  afterAll(async () => {
    await upstreamDown?.stop()
    await noUpstream?.stop()
    await gw?.stop()
    await socks?.stop()
    await destination?.close()
    await secure?.close()
    if (engineServer !== undefined) await Effect.runPromise(engineServer.stop)
  })

  const anon = (json: unknown, via = gw, token = session) => via.request("POST", "/v1/proxy/anon", { token, json })

  it("makes a GET through the SOCKS server, the name (not an address) sent to it", async () => {
    const before = socks.connections().length
    const reply = await anon({ method: "GET", url: "http://dest.portico-test/echo?x=1", headers: { Accept: "application/json", "X-Trace": "t1" } })
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body.status_code).toBe(201)
    expect(JSON.parse(Buffer.from(reply.body.body, "base64").toString("utf8"))).toEqual({ method: "GET", url: "/echo?x=1", body: "" })
    expect(reply.body.headers["x-echo"]).toBe("yes")
    expect(reply.body.headers["set-cookie"]).toBe("a=1; Path=/\nb=2, with comma")
    expect(reply.body.headers["connection"]).toBeUndefined()
    expect(reply.body.headers["x-hop"]).toBeUndefined()
    const seen = destination.seen[destination.seen.length - 1] as Seen
    expect(seen.headers["host"]).toBe("dest.portico-test")
    expect(seen.headers["x-trace"]).toBe("t1")
    expect(seen.headers["authorization"]).toBeUndefined()
    await new Promise((r) => setTimeout(r, 100))
    expect(socks.connections().slice(before)).toEqual([{ host: "dest.portico-test", port: 80 }])
  })

  it("makes a POST with a base64 body, hop-by-hop and gateway-set headers dropped", async () => {
    const body = Buffer.from("hello \u0000 binary \u00ff").toString("base64")
    const reply = await anon({
      method: "POST",
      url: "http://dest.portico-test/echo",
      headers: { "content-type": "text/plain", Connection: "x-drop-me", "X-Drop-Me": "1", "Transfer-Encoding": "chunked", Host: "evil.example", "Content-Length": "1", "Proxy-Authorization": "Basic x", Upgrade: "h2c" },
      body
    })
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body.status_code).toBe(201)
    const echoed = JSON.parse(Buffer.from(reply.body.body, "base64").toString("utf8"))
    expect(echoed.method).toBe("POST")
    const seen = destination.seen[destination.seen.length - 1] as Seen
    expect(Buffer.from(seen.body, "utf8").equals(Buffer.from("hello \u0000 binary \u00ff"))).toBe(true)
    expect(seen.headers["host"]).toBe("dest.portico-test")
    expect(seen.headers["content-length"]).toBe(String(Buffer.from(body, "base64").length))
    for (const dropped of ["x-drop-me", "transfer-encoding", "proxy-authorization", "upgrade"]) expect(seen.headers[dropped], dropped).toBeUndefined()
    expect(seen.headers["content-type"]).toBe("text/plain")
  })

  it("speaks TLS over the stream for https, the certificate checked against the name", async () => {
    const reply = await anon({ method: "GET", url: "https://dest.portico-test/secret?q=1" })
    expect(reply.status, reply.text).toBe(200)
    expect(reply.body.status_code, reply.text).toBe(200)
    expect(Buffer.from(reply.body.body, "base64").toString("utf8")).toBe("secure GET /secret?q=1 dest.portico-test")
    const wrong = await anon({ method: "GET", url: "https://wrong.portico-test/" })
    expect(wrong.status, wrong.text).toBe(200)
    expect(wrong.body.error, wrong.text).toMatch(/TLS/)
  })

  it("answers 200 with error when the request fails past the upstream", async () => {
    for (const url of ["http://unknown.portico-test/", "http://nothing.portico-test/"]) {
      const reply = await anon({ method: "GET", url })
      expect(reply.status, reply.text).toBe(200)
      expect(typeof reply.body.error, reply.text).toBe("string")
      expect(reply.body.status_code).toBeUndefined()
    }
  })

  it("stops reading a body that streams forever at its cap, and times out a silent destination", async () => {
    const forever = await anon({ method: "GET", url: "http://dest.portico-test/forever" })
    expect(forever.status, forever.text).toBe(200)
    expect(forever.body.error).toMatch(/65536-byte cap/)
    const started = Date.now()
    const silent = await anon({ method: "GET", url: "http://dest.portico-test/silent" })
    expect(silent.status, silent.text).toBe(200)
    expect(silent.body.error).toMatch(/timed out/)
    expect(Date.now() - started).toBeLessThan(8_000)
  })

  it("answers a 101 to a request that asked for no upgrade at once as a failure, not at the timeout", async () => {
    const started = Date.now()
    const switched = await anon({ method: "GET", url: "http://dest.portico-test/switch" })
    expect(switched.status, switched.text).toBe(200)
    expect(switched.body.error, switched.text).toMatch(/101/)
    expect(switched.body.status_code).toBeUndefined()
    // the suite's anon timeout is 3 s: the answer did not wait for it
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it("holds at most 2 requests in flight per user here (429 with Retry-After)", async () => {
    const held = [anon({ method: "GET", url: "http://dest.portico-test/silent" }), anon({ method: "GET", url: "http://dest.portico-test/silent" })]
    await new Promise((r) => setTimeout(r, 500))
    const third = await anon({ method: "GET", url: "http://dest.portico-test/echo" })
    expectError(third, 429, "RATE_LIMITED")
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0)
    for (const reply of await Promise.all(held)) expect(reply.body.error).toMatch(/timed out/)
    const after = await anon({ method: "GET", url: "http://dest.portico-test/echo" })
    expect(after.body.status_code, after.text).toBe(201)
  })

  it("refuses every private destination spelling with 400 RELAY_DESTINATION_NOT_ALLOWED, never dialling", async () => {
    const before = socks.connections().length
    for (const host of [
      "127.0.0.1",
      "2130706433",
      "0177.0.0.1",
      "0x7f000001",
      "127.1",
      "[::1]",
      "[::ffff:127.0.0.1]",
      "localhost",
      "app.localhost",
      "10.0.0.1",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "224.0.0.1",
      "0.0.0.0",
      "[fe80::1]",
      "[fd00::1]"
    ]) {
      expectError(await anon({ method: "GET", url: `http://${host}/` }), 400, "RELAY_DESTINATION_NOT_ALLOWED")
    }
    expectError(await anon({ method: "GET", url: "http://dest.portico-test:8080/" }), 400, "RELAY_DESTINATION_NOT_ALLOWED")
    expect(socks.connections().length).toBe(before)
  })

  it("refuses malformed requests with 400 and an oversized body with 413", async () => {
    for (const json of [
      { method: "GET", url: "not a url" },
      { method: "GET", url: "/relative" },
      { method: "GET", url: "ftp://dest.portico-test/" },
      { method: "GET", url: "http://user:pw@dest.portico-test/" },
      { method: "CONNECT", url: "http://dest.portico-test/" },
      { method: "GET" },
      { method: "GET", url: "http://dest.portico-test/", headers: { "X-A": "v\r\nX-Injected: 1" } },
      { method: "GET", url: "http://dest.portico-test/", headers: { "X-A\r\nX-B": "v" } },
      { method: "GET", url: "http://dest.portico-test/", headers: { "X-A": "v\nw" } },
      { method: "GET", url: "http://dest.portico-test/", headers: { "Bad Name": "v" } },
      // one name in two spellings: refused, not one of the two values dropped
      { method: "GET", url: "http://dest.portico-test/", headers: { "X-A": "1", "x-a": "2" } },
      { method: "POST", url: "http://dest.portico-test/", body: "not base64!" },
      { method: "GET", url: "http://dest.portico-test/", extra: true }
    ]) {
      const reply = await anon(json)
      expect(reply.status, `${JSON.stringify(json)}: ${reply.text}`).toBe(400)
    }
    const big = Buffer.alloc(4097, 1).toString("base64")
    expectError(await anon({ method: "POST", url: "http://dest.portico-test/echo", body: big }), 413, "PAYLOAD_TOO_LARGE")
  })

  it("refuses an API key and an app-runtime key: a wallet session is needed", async () => {
    expectError(await anon({ method: "GET", url: "http://dest.portico-test/echo" }, gw, runtimeKey), 403, "SESSION_REQUIRED")
    expectError(await anon({ method: "GET", url: "http://dest.portico-test/echo" }, gw, owner), 403, "SESSION_REQUIRED")
    const none = await gw.request("POST", "/v1/proxy/anon", { json: { method: "GET", url: "http://dest.portico-test/echo" } })
    expect(none.status).toBe(401)
  })

  it("answers 503 RELAY_UNAVAILABLE with no upstream configured and with the upstream down, never dialling directly", async () => {
    const before = destination.seen.length
    expectError(await anon({ method: "GET", url: "http://dest.portico-test/echo" }, noUpstream), 503, "RELAY_UNAVAILABLE")
    expectError(await anon({ method: "GET", url: "http://dest.portico-test/echo" }, upstreamDown), 503, "RELAY_UNAVAILABLE")
    expect(destination.seen.length).toBe(before)
  })

  it("is reached by the typed client: anon answered and refused as declared, the socket routes refused without an upgrade", async () => {
    const answered = await call(gw, session, (c) => c.proxy.anon({ payload: { method: "GET", url: "http://dest.portico-test/echo" } }))
    expect("status_code" in answered ? answered.status_code : answered.error).toBe(201)
    const failed = await call(gw, session, (c) => c.proxy.anon({ payload: { method: "GET", url: "http://unknown.portico-test/" } }))
    expect("error" in failed).toBe(true)
    expectRefusal(await refusal(gw, session, (c) => c.proxy.anon({ payload: { method: "GET", url: "http://0x7f000001/" } })), 400, "RELAY_DESTINATION_NOT_ALLOWED")
    expectRefusal(await refusal(noUpstream, session, (c) => c.proxy.anon({ payload: { method: "GET", url: "http://dest.portico-test/" } })), 503, "RELAY_UNAVAILABLE")
    expectRefusal(await refusal(gw, runtimeKey, (c) => c.proxy.anon({ payload: { method: "GET", url: "http://dest.portico-test/" } })), 403, "SESSION_REQUIRED")
    expectRefusal(await refusal(gw, session, (c) => c.proxy.tunnel({ urlParams: { host: "dest.portico-test" } })), 400, "BAD_REQUEST")
    expectRefusal(await refusal(gw, undefined, (c) => c.proxy.relay({ urlParams: {} })), 400, "BAD_REQUEST")
    expect(notCalled(["proxy"])).toEqual([])
  })
})
