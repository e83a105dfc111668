/**
 * The hand-back (src/layers/deployments/serving/NodeHandBack.ts): a connection the app connections
 * read from and that is not an app's goes to node's own HTTP server, whose back-pressure on request
 * bodies must hold. Real node:http servers on loopback (the API stand-in and an app) with the app
 * connections in front, as Gateway.ts puts them, and raw client sockets: the API's handler leaves
 * a streamed body unread for a while, and the client sees how much it could send meanwhile (node's
 * server alone: about 4 MiB of socket buffers; with the hand-back of commit 3e45402: all of it),
 * then the handler reads it and its hash must be the client's. Both ways a connection is handed
 * back: as its first request, and after an app's request on it.
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AppTarget } from "../../../src/layers/deployments/serving/AppHosts.js"
import { makeAppConnections } from "../../../src/layers/deployments/serving/AppConnections.js"

const MiB = 1024 * 1024
const APP_HOST = "app.test"
/** How long the API's handler leaves a body unread. */
const UNREAD_MS = 600

const listen = (server: http.Server) =>
  new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))

describe("node's server behind the app connections keeps its back-pressure on request bodies", () => {
  const app = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => res.end("app"))
  })
  // the API's stand-in: /slow leaves its body unread, then answers with the body's size and hash
  const api = http.createServer((req, res) => {
    if (req.url !== "/slow") {
      req.resume()
      return void req.on("end", () => res.end(`api ${req.url}`))
    }
    req.pause()
    setTimeout(() => {
      const hash = crypto.createHash("sha256")
      let size = 0
      req.on("data", (chunk: Buffer) => {
        size += chunk.length
        hash.update(chunk)
      })
      req.on("end", () => res.end(`${size} ${hash.digest("hex")}`))
      req.resume()
    }, UNREAD_MS)
  })
  const connections = makeAppConnections({
    appOf: (host) => (host === APP_HOST ? ({ id: "d1", name: "app", port: appPort } as unknown as AppTarget) : undefined),
    answerTimeoutMs: 5000
  })
  connections.takeConnections(api)
  let appPort = 0
  let apiPort = 0

  beforeAll(async () => {
    appPort = await listen(app)
    apiPort = await listen(api)
  })
  afterAll(async () => {
    connections.closeAll()
    api.closeAllConnections()
    app.closeAllConnections()
    await Promise.all([new Promise((r) => api.close(r)), new Promise((r) => app.close(r))])
  })

  /** Sends `before` then a POST /slow of `total` random bytes, its head and first MiB in one write; answers read raw. */
  const upload = (before: string, total: number) =>
    new Promise<{ sentWhileUnread: number; answer: string; size: number; hash: string }>((resolve, reject) => {
      const socket = net.connect({ host: "127.0.0.1", port: apiPort })
      const hash = crypto.createHash("sha256")
      let sent = 0
      let sentWhileUnread = -1
      let answer = ""
      const next = () => {
        const chunk = crypto.randomBytes(Math.min(MiB, total - sent))
        hash.update(chunk)
        sent += chunk.length
        return chunk
      }
      socket.on("connect", () => {
        socket.write(Buffer.concat([Buffer.from(`${before}POST /slow HTTP/1.1\r\nHost: api.test\r\nContent-Length: ${total}\r\n\r\n`, "latin1"), next()]))
        const pump = () => {
          while (sent < total) if (!socket.write(next())) return void socket.once("drain", pump)
        }
        pump()
        setTimeout(() => (sentWhileUnread = sent), UNREAD_MS - 100)
      })
      socket.on("data", (chunk: Buffer) => {
        answer += chunk.toString("latin1")
        const last = /\r\n\r\n(\d+) ([0-9a-f]{64})$/.exec(answer)
        if (last === null) return
        socket.destroy()
        resolve({ sentWhileUnread, answer, size: Number(last[1]), hash: last[2] === hash.digest("hex") ? "same" : "different" })
      })
      socket.on("error", reject)
    })

  it.each([
    ["as the connection's first request", ""],
    ["after an app's request on the same connection", `GET /first HTTP/1.1\r\nHost: ${APP_HOST}\r\n\r\n`]
  ])("%s: the client cannot send the body while the handler leaves it unread, and the handler gets it byte-exact", async (_, before) => {
    const total = 128 * MiB
    const { sentWhileUnread, answer, size, hash } = await upload(before, total)
    // socket buffers on both sides, not the body
    expect(sentWhileUnread, `${sentWhileUnread / MiB} MiB sent while the handler read nothing`).toBeGreaterThan(0)
    expect(sentWhileUnread).toBeLessThan(24 * MiB)
    expect(size).toBe(total)
    expect(hash).toBe("same")
    if (before !== "") expect(answer.indexOf("\r\n\r\napp")).toBeGreaterThan(0)
  }, 30_000)

  it("answers pipelined requests handed to node's server in order", async () => {
    const socket = net.connect({ host: "127.0.0.1", port: apiPort })
    let answer = ""
    socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")))
    socket.write(
      "GET /one HTTP/1.1\r\nHost: api.test\r\n\r\n" +
        "POST /two HTTP/1.1\r\nHost: api.test\r\nContent-Length: 3\r\n\r\nabc" +
        `GET /three HTTP/1.1\r\nHost: ${APP_HOST}\r\n\r\n` +
        "GET /four HTTP/1.1\r\nHost: api.test\r\n\r\n"
    )
    const deadline = Date.now() + 5000
    while ((answer.match(/HTTP\/1\.1 200/g) ?? []).length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    socket.destroy()
    // node's server answers every request on a connection it was handed, an app's host too (HostRouting does that in the gateway)
    expect([...answer.matchAll(/\r\n\r\n(api \/[a-z]+)/g)].map((m) => m[1])).toEqual(["api /one", "api /two", "api /three", "api /four"])
  })
})
