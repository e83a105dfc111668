import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime, Option, Schema, Stream } from "effect"
import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { FastLane } from "../../src/api/FastLane.js"
import { fastRuntimeLayer, makeRequestListener } from "../../src/api/NodeAdapter.js"

const MAX = 1024

// Node 20 has no Promise.withResolvers
const signal = () => {
  let resolve: () => void = () => {}
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve: () => resolve() }
}

// What the listener reported to its access log: one entry per answer.
const answered: Array<{ readonly method: string | undefined; readonly url: string | undefined; readonly status: number; readonly ms: number }> = []

// What the handlers did, observed from the outside.
const seen = {
  echoRuns: 0,
  slowStarted: signal(),
  slowInterrupted: signal()
}

const Api = HttpApi.make("t").add(
  HttpApiGroup.make("t")
    .add(
      HttpApiEndpoint.post("echo", "/echo")
        .setPayload(Schema.Struct({ name: Schema.String }))
        .addSuccess(Schema.Struct({ name: Schema.String }))
    )
    .add(HttpApiEndpoint.get("boom", "/boom").addSuccess(Schema.String))
    .add(HttpApiEndpoint.get("slow", "/slow").addSuccess(Schema.String))
    .add(HttpApiEndpoint.get("stream", "/stream").addSuccess(Schema.String))
    .add(HttpApiEndpoint.get("cookie", "/cookie").addSuccess(Schema.String))
    .add(
      HttpApiEndpoint.get("addr", "/addr")
        .setUrlParams(Schema.Struct({ q: Schema.optional(Schema.String) }))
        .addSuccess(Schema.Struct({ addr: Schema.String, q: Schema.String, method: Schema.String }))
    )
)

const GroupLive = HttpApiBuilder.group(Api, "t", (h) =>
  h
    .handle("echo", ({ payload }) => Effect.sync(() => {
      seen.echoRuns++
      return { name: payload.name }
    }))
    .handle("boom", () => Effect.die(new Error("secret defect detail")))
    .handle("slow", () =>
      Effect.sync(() => seen.slowStarted.resolve()).pipe(
        Effect.zipRight(Effect.never),
        Effect.onInterrupt(() => Effect.sync(() => seen.slowInterrupted.resolve()))
      ))
    .handle("stream", () =>
      Effect.succeed(
        HttpServerResponse.stream(Stream.make("a", "b", "c").pipe(Stream.encodeText), { contentType: "text/plain" })
      ))
    .handle("cookie", () =>
      Effect.succeed(HttpServerResponse.text("ok").pipe(HttpServerResponse.unsafeSetCookie("sid", "v1", { httpOnly: true }))))
    .handle("addr", ({ urlParams }) =>
      Effect.map(HttpServerRequest.HttpServerRequest, (req) => ({
        addr: Option.getOrElse(req.remoteAddress, () => "none"),
        q: urlParams.q ?? "",
        method: req.method
      }))))

const AppLayer = HttpApiBuilder.api(Api).pipe(
  Layer.provide(GroupLive),
  Layer.provideMerge(Layer.mergeAll(HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer)),
  Layer.merge(NodeHttpServer.layerContext),
  Layer.provide(fastRuntimeLayer)
)

let managed: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<typeof AppLayer>, never>
let server: http.Server
let port = 0

beforeAll(async () => {
  managed = ManagedRuntime.make(AppLayer)
  const app = await managed.runPromise(HttpApiBuilder.httpApp)
  const runtime = await managed.runtime()
  server = http.createServer(
    makeRequestListener(app, runtime, {
      maxBodyBytes: MAX,
      onAnswered: (req, status, ms) => answered.push({ method: req.method, url: req.url, status, ms })
    })
  )
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  port = (server.address() as AddressInfo).port
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await managed.dispose()
})

beforeEach(() => {
  seen.echoRuns = 0
  answered.length = 0
})

/** The access-log entries once `count` have arrived (or what there is after a second). */
const entries = async (count: number) => {
  const until = Date.now() + 1000
  while (answered.length < count && Date.now() < until) await new Promise((r) => setTimeout(r, 10))
  // and nothing more arrives for a while: one entry per request, never two
  await new Promise((r) => setTimeout(r, 50))
  return answered.map(({ method, url, status }) => ({ method, url, status }))
}

interface Reply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

const call = (
  options: { method?: string; path: string; headers?: http.OutgoingHttpHeaders },
  write?: (req: http.ClientRequest) => void
): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, method: options.method ?? "GET", path: options.path, headers: options.headers, agent: false },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }))
        res.on("error", reject)
      }
    )
    // the server may close early on purpose (413); the response is what counts
    req.on("error", (e) => reject(e))
    if (write === undefined) req.end()
    else write(req)
  })

const tooLarge = { error: "request body too large", code: "PAYLOAD_TOO_LARGE", hint: `the limit is ${MAX} bytes` }

describe("NodeAdapter.makeRequestListener", () => {
  it("round-trips JSON through the HttpApi app", async () => {
    const body = JSON.stringify({ name: "ada" })
    const r = await call({ method: "POST", path: "/echo", headers: { "content-type": "application/json" } }, (req) => req.end(body))
    expect(r.status).toBe(200)
    expect(r.headers["content-type"]).toBe("application/json")
    expect(JSON.parse(r.body)).toEqual({ name: "ada" })
    expect(seen.echoRuns).toBe(1)
  })

  it("answers 413 on an announced oversize body before reading it", async () => {
    const r = await call(
      { method: "POST", path: "/echo", headers: { "content-type": "application/json", "content-length": String(MAX * 100) } },
      (req) => req.write("{\"name\":")
    )
    expect(r.status).toBe(413)
    expect(JSON.parse(r.body)).toEqual(tooLarge)
    expect(seen.echoRuns).toBe(0)
  })

  it("cuts off a chunked body that crosses the cap with 413", async () => {
    const r = await call(
      { method: "POST", path: "/echo", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } },
      (req) => {
        req.write("{\"name\":\"")
        let sent = 0
        // bounded: 8 × 512 B is 4× the cap; stops once the answer arrives
        const timer = setInterval(() => {
          if (sent++ >= 8 || req.destroyed) {
            clearInterval(timer)
            return
          }
          req.write("x".repeat(512))
        }, 20)
        req.on("response", () => clearInterval(timer))
        req.on("close", () => clearInterval(timer))
      }
    )
    expect(r.status).toBe(413)
    expect(JSON.parse(r.body)).toEqual(tooLarge)
    expect(seen.echoRuns).toBe(0)
  })

  it("accepts a chunked body under the cap", async () => {
    const r = await call(
      { method: "POST", path: "/echo", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } },
      (req) => {
        req.write("{\"name\":")
        req.end("\"bo\"}")
      }
    )
    expect(r.status).toBe(200)
    expect(JSON.parse(r.body)).toEqual({ name: "bo" })
  })

  it("answers malformed JSON with a 4xx, not a 5xx", async () => {
    const r = await call({ method: "POST", path: "/echo", headers: { "content-type": "application/json" } }, (req) => req.end("{nope"))
    expect(r.status).toBeGreaterThanOrEqual(400)
    expect(r.status).toBeLessThan(500)
    expect(seen.echoRuns).toBe(0)
  })

  it("turns a defect into a generic 500 without the detail", async () => {
    const r = await call({ path: "/boom" })
    expect(r.status).toBe(500)
    expect(JSON.parse(r.body)).toEqual({ error: "internal error", code: "INTERNAL" })
    expect(r.body).not.toContain("secret")
  })

  it("answers HEAD without a body", async () => {
    const r = await call({ method: "HEAD", path: "/addr" })
    expect(r.status).toBe(200)
    expect(r.body).toBe("")
  })

  it("interrupts the handler fiber when the client aborts", async () => {
    const req = http.request({ host: "127.0.0.1", port, path: "/slow", agent: false })
    req.on("error", () => {})
    req.end()
    await seen.slowStarted.promise
    req.destroy()
    const outcome = await Promise.race([
      seen.slowInterrupted.promise.then(() => "interrupted"),
      new Promise<string>((resolve) => setTimeout(() => resolve("still running"), 3000))
    ])
    expect(outcome).toBe("interrupted")
  })

  it("streams a Stream body", async () => {
    const r = await call({ path: "/stream" })
    expect(r.status).toBe(200)
    expect(r.headers["transfer-encoding"]).toBe("chunked")
    expect(r.headers["content-type"]).toBe("text/plain")
    expect(r.body).toBe("abc")
  })

  it("writes set-cookie", async () => {
    const r = await call({ path: "/cookie" })
    expect(r.status).toBe(200)
    expect(r.body).toBe("ok")
    expect(r.headers["set-cookie"]).toEqual(["sid=v1; HttpOnly"])
  })

  it("gives the handler the remote address, method and search params", async () => {
    const r = await call({ path: "/addr?q=hi" })
    expect(r.status).toBe(200)
    expect(JSON.parse(r.body)).toEqual({ addr: "127.0.0.1", q: "hi", method: "GET" })
  })

  it("answers 404 for an unknown route", async () => {
    const r = await call({ path: "/nope" })
    expect(r.status).toBe(404)
  })

  it("refuses a body that is not UTF-8 before the handler sees it", async () => {
    const body = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0xff]), Buffer.from('"}')])
    const r = await call({ method: "POST", path: "/echo", headers: { "content-type": "application/json" } }, (req) => req.end(body))
    expect(r.status).toBe(400)
    expect(seen.echoRuns).toBe(0)
    // a BOM stays in the text (and is no JSON), as Buffer#toString kept it
    const bom = await call({ method: "POST", path: "/echo", headers: { "content-type": "application/json" } }, (req) =>
      req.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"b"}')])))
    expect(bom.status).toBe(400)
  })
})

describe("NodeAdapter access log (onAnswered)", () => {
  it("reports each answered request once, with the status sent", async () => {
    await call({ path: "/addr?q=secret" })
    await call({ path: "/nope" })
    await call({ path: "/boom" })
    await call({ path: "/stream" })
    const ok = JSON.stringify({ name: "ada" })
    await call({ method: "POST", path: "/echo", headers: { "content-type": "application/json" } }, (req) => req.end(ok))
    expect(await entries(5)).toEqual([
      { method: "GET", url: "/addr?q=secret", status: 200 },
      { method: "GET", url: "/nope", status: 404 },
      { method: "GET", url: "/boom", status: 500 },
      { method: "GET", url: "/stream", status: 200 },
      { method: "POST", url: "/echo", status: 200 }
    ])
    expect(answered.every((a) => a.ms >= 0 && a.ms < 5000)).toBe(true)
  })

  it("reports the 413s the listener answers before the app runs", async () => {
    const announced = await call(
      { method: "POST", path: "/echo", headers: { "content-type": "application/json", "content-length": String(MAX * 100) } },
      (req) => req.write("{\"name\":")
    )
    expect(announced.status).toBe(413)
    const chunked = await call(
      { method: "POST", path: "/echo", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } },
      (req) => {
        req.write("{\"name\":\"")
        req.write("x".repeat(MAX + 1))
      }
    )
    expect(chunked.status).toBe(413)
    expect(await entries(2)).toEqual([
      { method: "POST", url: "/echo", status: 413 },
      { method: "POST", url: "/echo", status: 413 }
    ])
  })

  it("reports a client gone before its answer as 499, once", async () => {
    const started = signal()
    seen.slowStarted = started
    const req = http.request({ host: "127.0.0.1", port, path: "/slow", agent: false })
    req.on("error", () => {})
    req.end()
    await started.promise
    req.destroy()
    // and one that leaves halfway through sending its body
    const half = http.request({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "/echo",
      agent: false,
      headers: { "content-type": "application/json", "content-length": "100" }
    })
    half.on("error", () => {})
    half.write("{\"name\":")
    await new Promise((r) => setTimeout(r, 50))
    half.destroy()
    expect(await entries(2)).toEqual([
      { method: "GET", url: "/slow", status: 499 },
      { method: "POST", url: "/echo", status: 499 }
    ])
  })
})

describe("NodeAdapter fast lane", () => {
  // A lane for POST /echo that answers names other than "app" itself, and records whether each
  // answer was given inside a turn and how many requests each turn answered.
  const turns: Array<number> = []
  let inTurn = false
  let answeredOutsideTurn = 0
  let current = 0
  const lane: FastLane = Object.assign(
    (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer | undefined): number | undefined => {
      if (!inTurn) answeredOutsideTurn++
      current++
      const name = (JSON.parse(body?.toString() ?? "{}") as { name?: string }).name
      if (name === "app") return undefined
      const text = JSON.stringify({ lane: name })
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text)
      return 200
    },
    {
      takes: (req: http.IncomingMessage) => req.url === "/echo",
      peerCall: () => false,
      turn: <A>(answerAll: () => A): A => {
        inTurn = true
        current = 0
        try {
          return answerAll()
        } finally {
          inTurn = false
          turns.push(current)
        }
      }
    }
  )
  let laneServer: http.Server
  let lanePort = 0

  beforeAll(async () => {
    const app = await managed.runPromise(HttpApiBuilder.httpApp)
    const runtime = await managed.runtime()
    laneServer = http.createServer(makeRequestListener(app, runtime, { maxBodyBytes: MAX, fastLane: lane }))
    await new Promise<void>((resolve) => laneServer.listen(0, "127.0.0.1", resolve))
    lanePort = (laneServer.address() as AddressInfo).port
  })
  afterAll(async () => {
    laneServer.closeAllConnections()
    await new Promise<void>((resolve) => laneServer.close(() => resolve()))
  })

  it("answers its routes' requests only inside a turn, several to a turn, and the app serves what it declines", async () => {
    const names = Array.from({ length: 20 }, (_, i) => (i % 10 === 3 ? "app" : `n${i}`))
    // one kept-alive connection per request, every request written in the same tick
    const sockets = await Promise.all(
      names.map(
        () =>
          new Promise<net.Socket>((resolve, reject) => {
            const socket = net.connect(lanePort, "127.0.0.1", () => resolve(socket))
            socket.on("error", reject)
          })
      )
    )
    const reply = (socket: net.Socket) =>
      new Promise<string>((resolve) => {
        let text = ""
        const onData = (d: Buffer) => {
          text += d.toString()
          const head = text.indexOf("\r\n\r\n")
          const length = /content-length: (\d+)/i.exec(text)?.[1]
          if (head >= 0 && length !== undefined && text.length >= head + 4 + Number(length)) {
            socket.off("data", onData)
            resolve(text)
          }
        }
        socket.on("data", onData)
      })
    const round = async () => {
      const replies = sockets.map(reply)
      names.forEach((name, i) => {
        const body = JSON.stringify({ name })
        sockets[i]?.write(`POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`)
      })
      const texts = await Promise.all(replies)
      texts.forEach((text, i) => {
        expect(text.startsWith("HTTP/1.1 200 ")).toBe(true)
        expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toEqual(names[i] === "app" ? { name: "app" } : { lane: names[i] })
      })
    }
    try {
      // node reads a new connection's first request on its own; what arrives on open connections
      // in the same moment is read in one poll phase
      await round()
      turns.length = 0
      answeredOutsideTurn = 0
      await round()
      expect(answeredOutsideTurn).toBe(0)
      expect(turns.reduce((a, b) => a + b, 0)).toBe(20)
      // requests that arrived together were answered together
      expect(turns.length).toBeLessThan(10)
    } finally {
      for (const socket of sockets) socket.destroy()
    }
  })

  it("leaves the routes it does not take to the app at once", async () => {
    turns.length = 0
    const reply = await fetch(`http://127.0.0.1:${lanePort}/addr?q=x`)
    expect(reply.status).toBe(200)
    expect(turns).toEqual([])
  })
})
