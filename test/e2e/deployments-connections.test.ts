/**
 * The app connections (docs/deployments.md, "Serving", "The fast path"): a client connection whose
 * first request is a dynamic app's is paired with its own connection to the app, every request on
 * it still parsed. Raw sockets here, since node's client neither pipelines nor switches hosts on
 * one connection: pipelined requests, bodies by length and chunked (in pieces), HEAD, Expect, a
 * host switch mid-connection (handed to node's server), a head the parser refuses, the client's
 * close, and a WebSocket after plain requests. A real gateway on both registry engines, the app
 * a plain node:http server that records what it received.
 */
import Database from "better-sqlite3"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { makeParser } from "../../src/layers/deployments/serving/Llhttp.js"
import { type Gateway, getOnHost, testTmp } from "../support/gateway.js"
import { type DeploymentFixture, deploymentFixture, startSeededGateway } from "../support/deploymentFixture.js"
import { waitFor } from "../support/wait.js"
import { acceptEchoSocket } from "../support/webSocket.js"

const BASE = "apps.test"
const NODE = "connections-node"

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

interface Answer {
  readonly status: number
  readonly headers: Record<string, string>
  body: string
}

/** Reads answers off a raw connection with node's own response parser (HEAD's answers have no body). */
const reader = (socket: net.Socket, headRequests: ReadonlySet<number> = new Set()) => {
  const answers: Array<Answer> = []
  let current: Answer | undefined
  let closed = false
  let raw = ""
  const parser = makeParser("response", {
    onHeadersComplete: (_ma, _mi, headers, _m, _u, status) => {
      const named: Record<string, string> = {}
      for (let i = 0; i + 1 < (headers ?? []).length; i += 2) named[(headers as Array<string>)[i]!.toLowerCase()] = (headers as Array<string>)[i + 1]!
      current = { status: status ?? 0, headers: named, body: "" }
      // interim answers (100) are counted too: the test sees everything the client would
      return headRequests.has(answers.filter((a) => a.status >= 200).length) && (status ?? 0) >= 200 ? 1 : 0
    },
    onBody: (chunk) => {
      if (current !== undefined) current.body += chunk.toString("latin1")
    },
    onMessageComplete: () => {
      if (current !== undefined) answers.push(current)
      current = undefined
    }
  })
  socket.on("data", (chunk: Buffer) => {
    raw += chunk.toString("latin1")
    parser.execute(chunk)
  })
  socket.on("close", () => {
    parser.finish()
    closed = true
  })
  return {
    answers,
    raw: () => raw,
    closed: () => closed,
    /** Waits until `n` answers arrived (or the connection closed). */
    until: async (n: number, ms = 5000) => {
      const deadline = Date.now() + ms
      while (answers.length < n && !closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
      return answers
    },
    untilClosed: async (ms = 5000) => {
      const deadline = Date.now() + ms
      while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
      return closed
    }
  }
}

/** The proxy the gateway trusts for who the client is (PORTICO_TRUSTED_PROXIES): connect from it to be one. */
const PROXY = "127.0.0.2"

const connect = (port: number, from?: string) =>
  new Promise<net.Socket>((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port, ...(from === undefined ? {} : { localAddress: from }) }, () => resolve(socket))
    socket.once("error", reject)
  })

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A masked client text frame (RFC 6455 §5.2), short payloads only. */
const textFrame = (text: string) => {
  const payload = Buffer.from(text)
  const mask = crypto.randomBytes(4)
  const masked = Buffer.from(payload.map((b, i) => b ^ (mask[i % 4] as number)))
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked])
}

const MiB = 1024 * 1024

/** Resolves once the socket can take more, or is gone (then no 'drain' would ever come). */
const drained = (socket: net.Socket) =>
  new Promise<void>((resolve) => {
    const done = () => {
      socket.off("drain", done)
      socket.off("close", done)
      resolve()
    }
    socket.once("drain", done)
    socket.once("close", done)
  })

/** Writes `bytes` in pieces of `size`, each once the last was taken: the rest of a body arrives in reads of its own. */
const writeInPieces = async (socket: net.Socket, bytes: Buffer, size: number, gapMs = 0) => {
  for (let at = 0; at < bytes.length && !socket.destroyed; at += size) {
    if (!socket.write(bytes.subarray(at, at + size))) await drained(socket)
    if (gapMs > 0) await pause(gapMs)
  }
}

/** The gateway's resident memory, KiB. */
const rssKb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0)

/** A SQLite file of `rows` random blobs of `size` bytes each, built here, to import and read back. */
const blobDatabase = (rows: number, size: number) => {
  const file = path.join(fs.mkdtempSync(path.join(testTmp(), "portico-connections-db-")), "blobs.db")
  const db = new Database(file)
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
  const blobs = Array.from({ length: rows }, () => crypto.randomBytes(size))
  const insert = db.prepare("INSERT INTO t (id, b) VALUES (?, ?)")
  blobs.forEach((b, i) => insert.run(i, b))
  db.close()
  return { bytes: fs.readFileSync(file), blobs }
}

/** What the app's `/flood` sends, as an answer's body or after a 101: more than the gateway may hold. */
const FLOOD = 128 * MiB
/** The byte at offset `i` of a flood, so the client can check every byte it gets. */
const floodPiece = Buffer.from(Array.from({ length: MiB }, (_, i) => (i * 7 + 3) & 0xff))

/** Bytes the app's floods have handed to their sockets so far. */
let flooded = 0

/** Writes `total` bytes of the flood, each MiB once the socket took the last: the app's own back-pressure. */
const flood = async (out: NodeJS.WritableStream & { destroyed?: boolean }, total: number) => {
  for (let sent = 0; sent < total && out.destroyed !== true; sent += MiB) {
    flooded += MiB
    if (!out.write(floodPiece)) await new Promise((r) => out.once("drain", r).once("close", r))
  }
}

const startApp = (port: number, seen: Array<Seen>) =>
  new Promise<http.Server>((resolve, reject) => {
    const server = http.createServer((req, res) => {
      if (req.url === "/flood") {
        res.writeHead(200, { "content-type": "application/octet-stream", "content-length": FLOOD })
        void flood(res, FLOOD).then(() => res.end())
        return
      }
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8")
        seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body })
        const answer = JSON.stringify({ url: req.url, body, xff: req.headers["x-forwarded-for"] ?? null })
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
        res.end(answer)
      })
    })
    server.on("upgrade", (req, socket) => {
      if (req.url !== "/flood") return acceptEchoSocket(req, socket)
      socket.on("error", () => socket.destroy())
      // node's server sockets allow half-open: close when the gateway ends its side
      socket.on("end", () => socket.destroy())
      socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: flood\r\nConnection: Upgrade\r\n\r\n")
      void flood(socket, FLOOD)
    })
    // short, so a test sees the app close an idle connection the client keeps
    server.keepAliveTimeout = 300
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () => resolve(server))
  })

describe.each(["sqlite", "rqlite"] as const)("app connections through host routing, registry on %s", (engine) => {
  let gw: Gateway
  let fixture: DeploymentFixture | undefined
  let app: http.Server | undefined
  const seen: Array<Seen> = []
  let host = ""
  let owner = ""

  beforeAll(async () => {
    const f = (fixture = await deploymentFixture(engine, { baseDomain: BASE, nodeId: NODE }))
    const record = await f.inRegistry((deployments) =>
      deployments.create({ namespace: "shop", name: "api", type: "nodejs", domain: `api-qrs345.${BASE}`, homeNode: NODE, artifact: "v1", status: "active" })
    )
    host = record.domain
    app = await startApp(record.port as number, seen)
    gw = await startSeededGateway(f, [record], { PORTICO_TRUSTED_PROXIES: PROXY })
    await waitFor("the app served on its host", async () => (await getOnHost(gw.port, host, "/ready")).status === 200, 20_000)
    owner = (await gw.cli(["namespace", "create", "conns"])).api_key
  }, 60_000)

  afterAll(async () => {
    await gw?.stop()
    app?.closeAllConnections()
    await new Promise((r) => (app === undefined ? r(undefined) : app.close(r)))
    await fixture?.stop()
  })

  beforeEach(() => {
    seen.length = 0
  })

  it("behind a trusted proxy, passes the client and scheme it names, on the fast path and the request-level proxy alike", async () => {
    const socket = await connect(gw.port, PROXY)
    const read = reader(socket, new Set())
    socket.write(
      `GET /p1 HTTP/1.1\r\nHost: ${host}\r\nX-Forwarded-For: 6.6.6.6, 198.51.100.7\r\nX-Forwarded-Proto: https\r\n\r\n` +
        `GET /p2 HTTP/1.1\r\nHost: ${host}\r\n\r\n`
    )
    await read.until(2)
    socket.destroy()
    // a connection that began with the API's host goes through node's server and the request-level proxy
    const other = await connect(gw.port, PROXY)
    const readOther = reader(other, new Set())
    other.write(
      `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n` +
        `GET /p3 HTTP/1.1\r\nHost: ${host}\r\nX-Forwarded-For: 203.0.113.4\r\nX-Forwarded-Proto: https\r\n\r\n`
    )
    await readOther.until(2)
    other.destroy()
    const byUrl = new Map(seen.map((s) => [s.url, s.headers]))
    expect(byUrl.get("/p1")?.["x-forwarded-for"]).toBe("198.51.100.7")
    expect(byUrl.get("/p1")?.["x-forwarded-proto"]).toBe("https")
    // the proxy's own request: it is the client
    expect(byUrl.get("/p2")?.["x-forwarded-for"]).toBe(PROXY)
    expect(byUrl.get("/p2")?.["x-forwarded-proto"]).toBe("http")
    expect(byUrl.get("/p3")?.["x-forwarded-for"]).toBe("203.0.113.4")
    expect(byUrl.get("/p3")?.["x-forwarded-proto"]).toBe("https")
  })

  it("answers pipelined requests in order, bodies by length and chunked, HEAD, each with the gateway's X-Forwarded-*", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket, new Set([3]))
    socket.write(
      `GET /a HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `POST /b HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 5\r\n\r\nhello` +
        `POST /c HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n` +
        `HEAD /d HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET /e HTTP/1.1\r\nHost: ${host}\r\nX-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\nConnection: x-hop\r\nX-Hop: leak\r\n\r\n`
    )
    const answers = await read.until(5)
    socket.destroy()
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200])
    expect(answers.map((a) => (a.body === "" ? null : JSON.parse(a.body).url))).toEqual(["/a", "/b", "/c", null, "/e"])
    expect(JSON.parse(answers[1]!.body).body).toBe("hello")
    expect(JSON.parse(answers[2]!.body).body).toBe("abcdefg")
    expect(seen.map((s) => s.url)).toEqual(["/a", "/b", "/c", "/d", "/e"])
    for (const s of seen) {
      expect(s.headers["x-forwarded-for"]).toBe("127.0.0.1")
      expect(s.headers["x-forwarded-host"]).toBe(host)
      expect(s.headers["x-forwarded-proto"]).toBe("http")
      expect(s.headers["forwarded"]).toBeUndefined()
      expect(s.headers["x-hop"]).toBeUndefined()
    }
    expect(seen[2]!.headers["transfer-encoding"]).toBe("chunked")
    expect(seen[1]!.headers["content-length"]).toBe("5")
  })

  it("streams a chunked body that arrives in pieces", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(`POST /pieces HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n`)
    await pause(40)
    socket.write("6\r\nsecond")
    await pause(40)
    socket.write("\r\n5\r\nthird\r\n0\r\n\r\n")
    const answers = await read.until(1)
    socket.destroy()
    expect(answers[0]?.status).toBe(200)
    expect(JSON.parse(answers[0]!.body).body).toBe("firstsecondthird")
  })

  it("hands a request for another host to the API's server after the app's answers, and the app's host after it is still served", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(
      `GET /before HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n` +
        `GET /nothing HTTP/1.1\r\nHost: nothing-here.${BASE}\r\n\r\n` +
        `GET /after HTTP/1.1\r\nHost: ${host}\r\n\r\n`
    )
    const answers = await read.until(4)
    socket.destroy()
    expect(answers.map((a) => a.status)).toEqual([200, 200, 404, 200])
    expect(JSON.parse(answers[0]!.body).url).toBe("/before")
    expect(JSON.parse(answers[1]!.body).status).toBeDefined()
    expect(JSON.parse(answers[2]!.body).code).toBe("NOT_FOUND")
    expect(JSON.parse(answers[3]!.body).url).toBe("/after")
    expect(seen.map((s) => s.url)).toEqual(["/before", "/after"])
  })

  it("refuses a head the parser refuses (Content-Length beside Transfer-Encoding) with 400 after the answers owed, and the app never sees it", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(
      `GET /fine HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `POST /smuggle HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /hidden HTTP/1.1\r\nHost: ${host}\r\n\r\n`
    )
    const answers = await read.until(2)
    expect(await read.untilClosed()).toBe(true)
    expect(answers.map((a) => a.status)).toEqual([200, 400])
    expect(JSON.parse(answers[1]!.body).code).toBe("BAD_REQUEST")
    expect(seen.map((s) => s.url)).toEqual(["/fine"])
  })

  it("refuses a request with two Host headers with 400 and closes, whichever host comes first, as a first request, after an app's and as an upgrade; the app never sees it", async () => {
    const twice = [
      [host, `nothing-here.${BASE}`],
      [`nothing-here.${BASE}`, host],
      ["localhost", host],
      [host, "localhost"],
      [host, host]
    ]
    for (const [first, second] of twice) {
      const socket = await connect(gw.port)
      const read = reader(socket)
      socket.write(`GET /twice HTTP/1.1\r\nHost: ${first}\r\nHost: ${second}\r\n\r\n`)
      expect(await read.untilClosed(), `${first}, ${second}`).toBe(true)
      expect(read.answers.map((a) => [a.status, JSON.parse(a.body).code]), `${first}, ${second}`).toEqual([[400, "BAD_REQUEST"]])
    }
    // after an app's request on the same connection: the app's answer, then the refusal
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(`GET /first HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /twice HTTP/1.1\r\nHost: ${host}\r\nHost: localhost\r\n\r\n`)
    expect(await read.untilClosed()).toBe(true)
    expect(read.answers.map((a) => a.status)).toEqual([200, 400])
    // an upgrade, to the app or to an API host
    for (const [first, second] of [[host, "localhost"], ["localhost", host]]) {
      const ws = await connect(gw.port)
      const wsRead = reader(ws)
      ws.write(
        `GET /socket HTTP/1.1\r\nHost: ${first}\r\nHost: ${second}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${crypto.randomBytes(16).toString("base64")}\r\n\r\n`
      )
      expect(await wsRead.untilClosed(), `upgrade ${first}, ${second}`).toBe(true)
      expect(wsRead.answers.map((a) => [a.status, JSON.parse(a.body).code]), `upgrade ${first}, ${second}`).toEqual([[400, "BAD_REQUEST"]])
    }
    expect(seen.map((s) => s.url)).toEqual(["/first"])
  })

  it("refuses an API request or WebSocket handshake with two Authorization headers with 400, whichever credential comes first", async () => {
    const bogus = "Bearer portico_key_not-a-key"
    for (const [first, second] of [[`Bearer ${owner}`, bogus], [bogus, `Bearer ${owner}`], [`Bearer ${owner}`, `Bearer ${owner}`]]) {
      // the fast lane's whoami and a route the app answers
      for (const path of ["/v1/auth/whoami", "/v1/namespace/keys"]) {
        const socket = await connect(gw.port)
        const read = reader(socket)
        socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${first}\r\nAuthorization: ${second}\r\nConnection: close\r\n\r\n`)
        expect(await read.untilClosed(), `${path}: ${first}, ${second}`).toBe(true)
        expect(read.answers.map((a) => [a.status, JSON.parse(a.body).code]), `${path}: ${first}, ${second}`).toEqual([[400, "BAD_REQUEST"]])
      }
      const ws = await connect(gw.port)
      const wsRead = reader(ws)
      ws.write(
        `GET /v1/pubsub/ws?topic=t HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${first}\r\nAuthorization: ${second}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${crypto.randomBytes(16).toString("base64")}\r\n\r\n`
      )
      expect(await wsRead.untilClosed(), `upgrade ${first}, ${second}`).toBe(true)
      expect(wsRead.answers.map((a) => [a.status, JSON.parse(a.body).code]), `upgrade ${first}, ${second}`).toEqual([[400, "BAD_REQUEST"]])
    }
    // one is taken as before
    expect((await gw.request("GET", "/v1/auth/whoami", { token: owner })).status).toBe(200)
  })

  it("answers CONNECT 405 METHOD_NOT_ALLOWED and closes, on the app's host (first or after an app's request) and on an API host, never dropping it unanswered", async () => {
    const cases = [
      `CONNECT ${host}:80 HTTP/1.1\r\nHost: ${host}:80\r\n\r\n`,
      `GET /first HTTP/1.1\r\nHost: ${host}\r\n\r\nCONNECT ${host}:443 HTTP/1.1\r\nHost: ${host}:443\r\n\r\n`,
      `CONNECT localhost:80 HTTP/1.1\r\nHost: localhost:80\r\n\r\n`,
      `CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`
    ]
    for (const request of cases) {
      const socket = await connect(gw.port)
      const read = reader(socket)
      socket.write(request)
      expect(await read.untilClosed(), request).toBe(true)
      const last = read.answers[read.answers.length - 1]
      expect([last?.status, last === undefined ? undefined : JSON.parse(last.body).code], request).toEqual([405, "METHOD_NOT_ALLOWED"])
    }
    expect(seen.map((s) => s.url)).toEqual(["/first"])
  })

  it("passes Expect: 100-continue to the app, whose 100 invites the body", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(`POST /expect HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n`)
    const deadline = Date.now() + 5000
    while (!read.raw().includes("100 Continue") && Date.now() < deadline) await pause(10)
    expect(read.raw()).toContain("HTTP/1.1 100 Continue")
    socket.write("body")
    const answers = await read.until(2)
    socket.destroy()
    expect(answers.map((a) => a.status)).toEqual([100, 200])
    expect(JSON.parse(answers[1]!.body).body).toBe("body")
  })

  it("closes the connection after the answer when the client asked (Connection: close, HTTP/1.0)", async () => {
    for (const request of [`GET /close HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, `GET /old HTTP/1.0\r\nHost: ${host}\r\n\r\n`]) {
      const socket = await connect(gw.port)
      const read = reader(socket)
      socket.write(request)
      expect(await read.untilClosed()).toBe(true)
      expect(read.answers.map((a) => a.status)).toEqual([200])
    }
  })

  it("keeps the client's connection when the app closes its idle one, and opens a new one for the next request", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(`GET /one HTTP/1.1\r\nHost: ${host}\r\n\r\n`)
    await read.until(1)
    await pause(800)
    expect(read.closed()).toBe(false)
    socket.write(`GET /two HTTP/1.1\r\nHost: ${host}\r\n\r\n`)
    const answers = await read.until(2)
    socket.destroy()
    expect(answers.map((a) => a.status)).toEqual([200, 200])
    expect(seen.map((s) => s.url)).toEqual(["/one", "/two"])
  })

  it("carries a WebSocket opened after plain requests on the same connection", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(`GET /plain HTTP/1.1\r\nHost: ${host}\r\n\r\n`)
    await read.until(1)
    socket.write(
      `GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${crypto.randomBytes(16).toString("base64")}\r\n\r\n`
    )
    const deadline = Date.now() + 5000
    while (!read.raw().includes("101 Switching Protocols") && Date.now() < deadline) await pause(10)
    expect(read.raw()).toContain("101 Switching Protocols")
    socket.write(textFrame("hello"))
    while (!read.raw().includes("echo:hello") && Date.now() < deadline) await pause(10)
    socket.destroy()
    expect(read.raw()).toContain("echo:hello")
    expect(seen.map((s) => s.url)).toEqual(["/plain"])
  })
  it.each([
    ["an answer's body", `GET /flood HTTP/1.1`, "\r\n\r\n"],
    ["the bytes after a 101", `GET /flood HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: flood`, "101 Switching Protocols"]
  ] as const)("keeps the app's back-pressure on %s: 128 MiB the client does not read never sits in the gateway's memory, and arrives whole once read", async (_, request, headEnd) => {
    const socket = await connect(gw.port)
    socket.pause()
    const before = rssKb(gw.pid)
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssKb(gw.pid))), 20)
    flooded = 0
    socket.write(`${request.replace("GET /flood HTTP/1.1", `GET /flood HTTP/1.1\r\nHost: ${host}`)}\r\n\r\n`)
    // the client reads nothing for a while: the app must be held back, not the gateway filled
    await pause(1500)
    const [held, sentWhileHeld] = [peak, flooded]
    let head = Buffer.alloc(0)
    let body = 0
    let wrong = 0
    await new Promise<void>((resolve) => {
      const take = (chunk: Buffer) => {
        if (body === 0 && head.indexOf("\r\n\r\n") < 0) {
          head = Buffer.concat([head, chunk])
          const end = head.indexOf("\r\n\r\n")
          if (end < 0) return
          chunk = head.subarray(end + 4)
        }
        for (let i = 0; i < chunk.length; i++) if (chunk[i] !== floodPiece[(body + i) % MiB]) wrong++
        body += chunk.length
        if (body >= FLOOD) resolve()
      }
      socket.on("data", take)
      socket.on("close", () => resolve())
      socket.resume()
    })
    clearInterval(sampler)
    socket.destroy()
    expect(head.toString("latin1")).toContain(headEnd === "\r\n\r\n" ? "200 OK" : headEnd)
    expect([body, wrong]).toEqual([FLOOD, 0])
    // what the three sockets' kernel buffers hold, no more: the gateway stopped reading the app
    expect(sentWhileHeld, `the app sent ${sentWhileHeld / MiB} MiB while the client did not read`).toBeLessThan(32 * MiB)
    expect(held - before, `the gateway grew by ${Math.round((held - before) / 1024)} MiB while the client did not read`).toBeLessThan(48 * 1024)
  }, 60_000)

  // The hand-back (NodeHandBack.ts): a connection that is not an app's goes to node's server with
  // what was read of it, and node's server must still stop reading a body its handler has not taken.
  const importHead = (length: number) =>
    `POST /v1/rqlite/import HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${owner}\r\n` +
    `Content-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\n`
  const appFirst = () => `GET /first HTTP/1.1\r\nHost: ${host}\r\n\r\n`

  it.each([
    ["as the connection's first request", false],
    ["after an app's request on the same connection", true]
  ] as const)("keeps node's back-pressure on an API request's body %s: a 300 MiB chunked import, refused at its 256 MiB cap, never sits in the gateway's memory", async (_, afterApp) => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    const total = 300 * MiB
    const before = rssKb(gw.pid)
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssKb(gw.pid))), 20)
    // chunked, as a client streaming what it does not know the size of: 1 MiB chunks, the first in the head's write
    const chunk = Buffer.concat([Buffer.from(`${MiB.toString(16)}\r\n`), Buffer.alloc(MiB, 7), Buffer.from("\r\n")])
    const head = importHead(0).replace("Content-Length: 0", "Transfer-Encoding: chunked")
    socket.write(Buffer.concat([Buffer.from((afterApp ? appFirst() : "") + head, "latin1"), chunk]))
    for (let sent = MiB; sent < total && !read.closed() && read.answers.length < (afterApp ? 2 : 1); sent += MiB) {
      if (!socket.write(chunk)) await drained(socket)
    }
    if (!read.closed() && read.answers.length < (afterApp ? 2 : 1)) socket.write("0\r\n\r\n")
    const answers = await read.until(afterApp ? 2 : 1, 60_000)
    clearInterval(sampler)
    socket.destroy()
    expect(answers.map((a) => a.status)).toEqual(afterApp ? [200, 413] : [413])
    expect(JSON.parse(answers.at(-1)!.body).code).toBe("PAYLOAD_TOO_LARGE")
    // node's server reads no further than its handler takes (3e45402's hand-back: +272 MiB as a first request)
    expect(peak - before, `the gateway grew by ${Math.round((peak - before) / 1024)} MiB`).toBeLessThan(128 * 1024)
  }, 90_000)

  it.each([
    ["as the connection's first request", false],
    ["after an app's request on the same connection", true]
  ] as const)("gives an API request byte-exact %s when its head and part of its body come in one read and the rest after", async (_, afterApp) => {
    const { bytes, blobs } = blobDatabase(24, 40 * 1024)
    const socket = await connect(gw.port)
    const read = reader(socket)
    socket.write(Buffer.concat([Buffer.from((afterApp ? appFirst() : "") + importHead(bytes.length), "latin1"), bytes.subarray(0, 256 * 1024)]))
    await pause(20)
    await writeInPieces(socket, bytes.subarray(256 * 1024), 48 * 1024, 2)
    const answers = await read.until(afterApp ? 2 : 1, 20_000)
    socket.destroy()
    expect(answers.map((a) => a.status), answers.map((a) => a.body).join(" ")).toEqual(afterApp ? [200, 200] : [200])
    for (let from = 0; from < blobs.length; from += 4) {
      const r = await gw.request("POST", "/v1/rqlite/query", { token: owner, json: { sql: `SELECT id, hex(b) FROM t WHERE id >= ${from} AND id < ${from + 4} ORDER BY id` } })
      expect(r.status, r.text).toBe(200)
      expect(r.body.rows).toEqual(blobs.slice(from, from + 4).map((b, i) => [from + i, b.toString("hex").toUpperCase()]))
    }
  }, 60_000)

  it("answers pipelined API requests on one connection in order, a body among them", async () => {
    const socket = await connect(gw.port)
    const read = reader(socket)
    const query = JSON.stringify({ sql: "SELECT 40 + 2" })
    socket.write(
      "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n" +
        `POST /v1/rqlite/query HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${owner}\r\nContent-Type: application/json\r\nContent-Length: ${query.length}\r\n\r\n${query}` +
        `GET /nothing HTTP/1.1\r\nHost: nothing-here.${BASE}\r\n\r\n` +
        "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    )
    const answers = await read.until(4)
    socket.destroy()
    expect(answers.map((a) => a.status)).toEqual([200, 200, 404, 200])
    expect(JSON.parse(answers[1]!.body).rows).toEqual([[42]])
    expect(seen).toEqual([])
  })
})
