/**
 * Request bodies from hostile clients, through a real gateway process over raw sockets: a request
 * is charged to its client network's rate limit when its headers arrive; body bytes in flight are
 * capped per client network (429) and per process (503), answered before the body is read; a body
 * that trickles or stalls is cut with 408 within the configured bound; and the memory held by
 * bodies abandoned mid-way comes back once their connections close (docs/api.md, "Request bodies
 * and slow clients").
 */
import { readFileSync } from "node:fs"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Gateway, startGateway } from "../support/gateway.js"

const MiB = 1024 * 1024

/** A raw HTTP exchange: what the server sent, and whether it closed the connection. */
interface Raw {
  readonly socket: net.Socket
  /** Resolves with the first answer's head and body once one has come (or "" when the socket closed without one). */
  readonly answer: Promise<string>
  readonly closed: Promise<void>
}

const rawRequest = (port: number, head: string, body: Buffer | undefined, localAddress = "127.0.0.1"): Raw => {
  const socket = net.connect({ port, host: "127.0.0.1", localAddress })
  let received = ""
  let answered = false
  let settle: (text: string) => void = () => undefined
  const answer = new Promise<string>((resolve) => (settle = (text) => {
    answered = true
    resolve(text)
  }))
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
  socket.on("data", (chunk: Buffer) => {
    received += chunk.toString("latin1")
    const end = received.indexOf("\r\n\r\n")
    if (end < 0) return
    const length = /content-length: (\d+)/i.exec(received.slice(0, end))
    if (length !== null && received.length >= end + 4 + Number(length[1])) settle(received)
  })
  // a client still writing when the server closes sees a reset: the answer it read is what counts
  socket.on("error", () => undefined)
  socket.once("close", () => settle(received))
  // the body in 64 KiB writes as the socket takes them, stopping once an answer has come, as a
  // client that reads its answers does
  const writeFrom = (at: number): void => {
    if (body === undefined) return
    let next = at
    while (next < body.length && !answered && !socket.destroyed) {
      const more = socket.write(body.subarray(next, next + 64 * 1024))
      next += 64 * 1024
      if (!more) {
        socket.once("drain", () => writeFrom(next))
        return
      }
    }
  }
  socket.once("connect", () => {
    socket.write(head)
    writeFrom(0)
  })
  return { socket, answer, closed }
}

const statusOf = (text: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)
const headerOf = (text: string, name: string): string | undefined =>
  new RegExp(`^${name}: (.*)$`, "im").exec(text.slice(0, text.indexOf("\r\n\r\n")))?.[1]?.trim()
const envelopeOf = (text: string): Record<string, unknown> => JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))

const expectEnvelope = (text: string, status: number, code: string) => {
  expect(statusOf(text), text.slice(0, 300)).toBe(status)
  const body = envelopeOf(text)
  expect(body["code"]).toBe(code)
  expect(typeof body["error"]).toBe("string")
  expect(Object.keys(body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
}

const rssOf = (pid: number): number => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:")) ?? "VmRSS: 0 kB"
  return Number(/(\d+)/.exec(line)?.[1] ?? 0) * 1024
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const waitFor = async (check: () => boolean, ms: number): Promise<boolean> => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (check()) return true
    await sleep(200)
  }
  return check()
}

/** A verify body of `size` announced bytes, no credential needed to reach the route. */
const verifyHead = (size: number) =>
  `POST /v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`

describe("body bytes in flight are capped per client network and per process", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      env: {
        PORTICO_LOG_REQUESTS: "false",
        PORTICO_BODY_INFLIGHT_NETWORK_BYTES: String(32 * MiB),
        PORTICO_BODY_INFLIGHT_BYTES: String(96 * MiB),
        // long enough that the stalled bodies are held for the whole test
        PORTICO_BODY_RATE_WINDOW_MS: "60000",
        PORTICO_BODY_DEADLINE_MS: "120000"
      }
    })
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("refuses stalled bodies beyond the caps with 429 or 503 and Retry-After, and gives the memory back when they close", async () => {
    // warm the gateway up, then take the resting memory as the baseline
    for (let i = 0; i < 20; i++) await gw.request("GET", "/v1/version")
    await sleep(1000)
    const baseline = rssOf(gw.pid)

    const size = 4 * MiB
    const sent = Buffer.alloc(size - 100 * 1024, 0x20)
    // four client networks (loopback /24s): each may hold 8 bodies of 4 MiB, the process 24
    const networks = ["127.0.1.1", "127.0.2.1", "127.0.3.1", "127.0.4.1"]
    const perNetwork = 25
    const all: Array<{ readonly network: string; readonly raw: Raw }> = []
    let peak = 0
    for (const network of networks) {
      for (let i = 0; i < perNetwork; i++) all.push({ network, raw: rawRequest(gw.port, verifyHead(size), sent, network) })
      // let this network's bodies arrive before the next network's headers
      await sleep(1500)
      peak = Math.max(peak, rssOf(gw.pid))
    }
    await sleep(1500)
    peak = Math.max(peak, rssOf(gw.pid))

    const answered = async (network: string) => {
      const mine = all.filter((a) => a.network === network)
      const texts = await Promise.all(mine.map((a) => Promise.race([a.raw.answer, sleep(50).then(() => "")])))
      return texts.filter((t) => t !== "")
    }
    // the first three networks: 8 bodies held each, the rest refused as over the network's cap
    for (const network of networks.slice(0, 3)) {
      const refused = await answered(network)
      expect(refused.length, network).toBe(perNetwork - 8)
      for (const text of refused) {
        expectEnvelope(text, 429, "RATE_LIMITED")
        expect(Number(headerOf(text, "retry-after"))).toBeGreaterThanOrEqual(1)
        expect(headerOf(text, "connection")).toBe("close")
      }
    }
    // the process holds 96 MiB: the fourth network's bodies are all refused as over its cap
    const busy = await answered(networks[3]!)
    expect(busy.length).toBe(perNetwork)
    for (const text of busy) {
      expectEnvelope(text, 503, "UNAVAILABLE")
      expect(Number(headerOf(text, "retry-after"))).toBeGreaterThanOrEqual(1)
    }
    // what the gateway held stayed near the process cap, not the 390 MB the clients sent
    expect(peak - baseline, `baseline ${baseline}, peak ${peak}`).toBeLessThan(96 * MiB + 80 * MiB)

    // the clients go away: their bodies' memory comes back
    for (const { raw } of all) raw.socket.destroy()
    const closedAt = Date.now()
    const back = await waitFor(() => rssOf(gw.pid) - baseline < 48 * MiB, 60_000)
    if (process.env["BODIES_DEBUG"] !== undefined) console.log({ baseline: baseline / MiB, peak: peak / MiB, now: rssOf(gw.pid) / MiB, backAfterMs: Date.now() - closedAt })
    expect(back, `baseline ${baseline}, peak ${peak}, now ${rssOf(gw.pid)}`).toBe(true)

    // and the room is free again: a new body from a refused network is read and answered
    const after = await gw.request("POST", "/v1/auth/verify", { json: { message: "x", signature: "0x00" } })
    expect(after.status, after.text).toBe(401)
  }, 120_000)
})

describe("a request is charged to its client network when its headers arrive", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({ env: { PORTICO_RATE_LIMIT: "true", PORTICO_RATE_LIMIT_CLIENT_RPS: "1", PORTICO_RATE_LIMIT_CLIENT_BURST: "3" } })
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it.each([
    // the fast lane's route and an app route: one rule for both request paths
    ["/v1/cache/put", "127.0.5.1"],
    ["/v1/auth/verify", "127.0.6.1"]
  ])("refuses %s with 429 before any of the body is sent", async (route, network) => {
    const head = `POST ${route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer pk_nothing\r\nContent-Type: application/json\r\nContent-Length: ${MiB}\r\n\r\n`
    // headers only, then nothing: the body never comes
    const raws = Array.from({ length: 6 }, () => rawRequest(gw.port, head, undefined, network))
    await sleep(1500)
    const texts = await Promise.all(raws.map((r) => Promise.race([r.answer, sleep(50).then(() => "")])))
    const limited = texts.filter((t) => t !== "")
    expect(limited.length).toBe(3)
    for (const text of limited) {
      expectEnvelope(text, 429, "RATE_LIMITED")
      expect(Number(headerOf(text, "retry-after"))).toBeGreaterThanOrEqual(1)
      // the connection is closed after the answer, so the client stops sending
      expect(headerOf(text, "connection")).toBe("close")
    }
    for (const r of raws) r.socket.destroy()
  })
})

describe("slow bodies are cut within the configured bound", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startGateway({
      env: { PORTICO_BODY_MIN_BYTES_PER_SECOND: "1024", PORTICO_BODY_RATE_WINDOW_MS: "1000", PORTICO_BODY_DEADLINE_MS: "3000" }
    })
  }, 60_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("cuts a body trickled one byte at a time with 408 within two windows", async () => {
    const raw = rawRequest(gw.port, verifyHead(1000), Buffer.from("{"))
    const started = Date.now()
    const timer = setInterval(() => raw.socket.writable && raw.socket.write(" "), 500)
    const text = await raw.answer
    clearInterval(timer)
    const took = Date.now() - started
    expectEnvelope(text, 408, "REQUEST_TIMEOUT")
    expect(took).toBeLessThan(2500)
    await raw.closed
    expect(gw.logs()).toMatch(/"status":408/)
  })

  it("cuts a stalled body, and a JSON body that keeps a fair rate but is not there by its deadline", async () => {
    const stalled = rawRequest(gw.port, verifyHead(100_000), Buffer.alloc(90_000, 0x20))
    const startedStalled = Date.now()
    expectEnvelope(await stalled.answer, 408, "REQUEST_TIMEOUT")
    expect(Date.now() - startedStalled).toBeLessThan(3000)

    // 4 KiB a second, well above the minimum rate, for longer than the 3 s deadline
    const steady = rawRequest(gw.port, verifyHead(100_000), Buffer.from("{"))
    const started = Date.now()
    const timer = setInterval(() => steady.socket.writable && steady.socket.write(Buffer.alloc(1024, 0x20)), 250)
    const text = await steady.answer
    clearInterval(timer)
    expectEnvelope(text, 408, "REQUEST_TIMEOUT")
    expect(envelopeOf(text)["error"]).toMatch(/in time/)
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900)
    expect(Date.now() - started).toBeLessThan(4500)
  })

  it("holds a streamed import to the rate only: a steady one outlives the JSON deadline, a stalled one is cut", async () => {
    const key: string = (await gw.cli(["namespace", "create", "slowimport"])).api_key
    const head = (size: number) =>
      `POST /v1/rqlite/import HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`
    // 8 KiB a second for 4.5 s, past the 3 s deadline a JSON body has
    const steps = 18
    const steady = rawRequest(gw.port, head(steps * 2048), undefined)
    const started = Date.now()
    for (let i = 0; i < steps; i++) {
      steady.socket.write(Buffer.alloc(2048, 0x41))
      await sleep(250)
    }
    const text = await steady.answer
    expect(Date.now() - started).toBeGreaterThan(4000)
    // the route's own answer to bytes that are no SQLite file, not a cut
    expect(statusOf(text), text.slice(0, 300)).not.toBe(408)
    expect(statusOf(text)).toBeLessThan(500)
    steady.socket.destroy()

    const stalled = rawRequest(gw.port, head(8 * MiB), Buffer.alloc(64 * 1024, 0x41))
    const stalledAt = Date.now()
    expectEnvelope(await stalled.answer, 408, "REQUEST_TIMEOUT")
    expect(Date.now() - stalledAt).toBeLessThan(3000)
  })

  it("cuts headers that never finish within node's 20 s headers timeout, checked every 2 s", async () => {
    const raw = rawRequest(gw.port, "POST /v1/auth/verify HTTP/1.1\r\nHost: x\r\n", undefined)
    const started = Date.now()
    const timer = setInterval(() => raw.socket.writable && raw.socket.write("X-Slow: 1\r\n"), 1000)
    const text = await raw.answer
    clearInterval(timer)
    expectEnvelope(text, 408, "REQUEST_TIMEOUT")
    expect(Date.now() - started).toBeLessThan(24_000)
  }, 40_000)

  it("leaves a body that arrives in time alone", async () => {
    const reply = await gw.request("POST", "/v1/auth/verify", { json: { message: "x", signature: "0x00" } })
    expect(reply.status, reply.text).toBe(401)
  })
})
