/**
 * The guarded egress client (spec §4.6) against real local servers: every spelling of a loopback
 * literal and every name that resolves to loopback is refused before a byte is sent, the operator's
 * allow-list lets a loopback server through, redirects are not followed, and a silent server
 * times out. Servers bind 127.0.0.1; nothing leaves the machine.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Either, Layer } from "effect"
import type { Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { createServer as createHttpsServer } from "node:https"
import * as os from "node:os"
import * as dns from "node:dns"
import { parseCidrs } from "../../../src/domain/AddressRanges.js"
import { PorticoConfig } from "../../../src/layers/config/PorticoConfig.js"
import { GuardedFetch, makeGuardedFetch, type Resolver } from "../../../src/layers/egress/GuardedFetch.js"
import { testCa } from "../../support/testCa.js"

interface Local {
  readonly port: number
  readonly hits: () => number
}

const localServer = (handler: (request: IncomingMessage, response: ServerResponse) => void): Effect.Effect<Local, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ server: ReturnType<typeof createServer>; port: number; hits: () => number }>((resume) => {
      let count = 0
      const server = createServer((request, response) => {
        count += 1
        handler(request, response)
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        resume(Effect.succeed({ server, port: typeof address === "object" && address !== null ? address.port : 0, hits: () => count }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ port, hits }) => ({ port, hits })))

const ok = (_request: IncomingMessage, response: ServerResponse) => {
  response.writeHead(200, { "content-type": "text/plain" })
  response.end("hello")
}

const loopbackAllowed = Either.getOrThrow(parseCidrs("127.0.0.0/8"))

/** The machine's own names that really resolve to a loopback address (localhost at least). */
const loopbackNames = async (): Promise<Array<string>> => {
  const names = ["localhost", os.hostname()]
  const found: Array<string> = []
  for (const name of names) {
    const answers = await dns.promises.lookup(name, { all: true }).catch(() => [])
    if (answers.length > 0 && answers.every((a) => a.address.startsWith("127.") || a.address === "::1")) found.push(name)
  }
  return found
}

describe("GuardedFetch", () => {
  it.scoped("refuses a loopback server in every spelling of its address, and sends it nothing", () =>
    Effect.gen(function* () {
      const server = yield* localServer(ok)
      const client = makeGuardedFetch()
      const p = server.port
      const spellings = [
        `http://127.0.0.1:${p}/`,
        `http://2130706433:${p}/`,
        `http://0177.0.0.1:${p}/`,
        `http://0x7f.0.0.1:${p}/`,
        `http://0x7f000001:${p}/`,
        `http://017700000001:${p}/`,
        `http://127.1:${p}/`,
        `http://[::ffff:127.0.0.1]:${p}/`,
        `http://[::ffff:7f00:1]:${p}/`,
        `http://[0:0:0:0:0:ffff:127.0.0.1]:${p}/`,
        `http://[::1]:${p}/`,
        `http://0.0.0.0:${p}/`,
        `http://0:${p}/`
      ]
      for (const url of spellings) {
        const error = yield* Effect.flip(client.request({ url }))
        expect([url, error.reason]).toEqual([url, "refused"])
      }
      expect(server.hits()).toBe(0)
    })
  )

  it.scoped("refuses names that resolve to loopback, through the platform's own resolver", () =>
    Effect.gen(function* () {
      const server = yield* localServer(ok)
      const client = makeGuardedFetch()
      const names = yield* Effect.promise(loopbackNames)
      expect(names).toContain("localhost")
      for (const name of names) {
        const error = yield* Effect.flip(client.request({ url: `http://${name}:${server.port}/` }))
        expect([name, error.reason]).toEqual([name, "refused"])
        expect(error.detail).toContain("127.0.0.1")
      }
      expect(server.hits()).toBe(0)
    })
  )

  it.scoped("the allow-list lets a loopback server through, by literal and by name", () =>
    Effect.gen(function* () {
      const server = yield* localServer((request, response) => {
        let body = ""
        request.on("data", (chunk) => (body += chunk))
        request.on("end", () => {
          response.writeHead(201, { "x-seen": `${request.method} ${request.url} ${request.headers["title"]} ${body}` })
          response.end("accepted")
        })
      })
      const client = makeGuardedFetch({ allow: loopbackAllowed })
      for (const host of ["127.0.0.1", "localhost", "2130706433"]) {
        const answer = yield* client.request({ url: `http://${host}:${server.port}/topic`, method: "POST", headers: { title: "hi" }, body: "payload" })
        expect(answer.status).toBe(201)
        expect(answer.headers["x-seen"]).toBe("POST /topic hi payload")
        expect(Buffer.from(answer.body).toString()).toBe("accepted")
      }
      // the allow-list is for its ranges only
      const other = makeGuardedFetch({ allow: Either.getOrThrow(parseCidrs("10.0.0.0/8")) })
      expect((yield* Effect.flip(other.request({ url: `http://127.0.0.1:${server.port}/` }))).reason).toBe("refused")
      expect(server.hits()).toBe(3)
    })
  )

  it.scoped("https: a TLS server reached by name through the allow-list, its certificate checked", () =>
    Effect.gen(function* () {
      const ca = testCa()
      const server = yield* Effect.acquireRelease(
        Effect.async<ReturnType<typeof createHttpsServer>>((resume) => {
          const tlsServer = createHttpsServer({ cert: ca.certPem, key: ca.keyPem }, (_request, response) => response.end("over tls"))
          tlsServer.listen(0, "127.0.0.1", () => resume(Effect.succeed(tlsServer)))
        }),
        (tlsServer) => Effect.async<void>((resume) => {
          tlsServer.closeAllConnections()
          tlsServer.close(() => resume(Effect.void))
        })
      )
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const trusted = makeGuardedFetch({ allow: loopbackAllowed, ca: ca.caPem })
      for (const host of ["localhost", "127.0.0.1"]) {
        const answer = yield* trusted.request({ url: `https://${host}:${port}/` })
        expect(Buffer.from(answer.body).toString()).toBe("over tls")
      }
      // without the test CA the certificate is not trusted; without the allow-list nothing is dialled
      expect((yield* Effect.flip(makeGuardedFetch({ allow: loopbackAllowed }).request({ url: `https://localhost:${port}/` }))).reason).toBe("transport")
      expect((yield* Effect.flip(makeGuardedFetch({ ca: ca.caPem }).request({ url: `https://localhost:${port}/` }))).reason).toBe("refused")
    })
  )

  it.scoped("a redirect is handed back, never followed", () =>
    Effect.gen(function* () {
      const target = yield* localServer(ok)
      const bouncer = yield* localServer((_request, response) => {
        response.writeHead(302, { location: `http://127.0.0.1:${target.port}/` })
        response.end()
      })
      const client = makeGuardedFetch({ allow: loopbackAllowed })
      const answer = yield* client.request({ url: `http://127.0.0.1:${bouncer.port}/` })
      expect(answer.status).toBe(302)
      expect(bouncer.hits()).toBe(1)
      expect(target.hits()).toBe(0)
    })
  )

  it.scoped("a server that does not answer times out; an answer over the cap is refused", () =>
    Effect.gen(function* () {
      const silent = yield* localServer(() => {})
      const client = makeGuardedFetch({ allow: loopbackAllowed, maxResponseBytes: 1000 })
      const started = Date.now()
      const error = yield* Effect.flip(client.request({ url: `http://127.0.0.1:${silent.port}/`, timeoutMs: 300 }))
      expect(error.reason).toBe("timeout")
      expect(Date.now() - started).toBeLessThan(2_000)
      const big = yield* localServer((_request, response) => response.end("x".repeat(5000)))
      expect((yield* Effect.flip(client.request({ url: `http://127.0.0.1:${big.port}/` }))).reason).toBe("too_large")
    })
  )

  it.scoped("a DNS answer that changes after the stored-time check is judged again at the dial", () =>
    Effect.gen(function* () {
      const server = yield* localServer(ok)
      // A rebinding name: public for the check, loopback when the socket resolves it. No DNS
      // server can be run where getaddrinfo would ask it, so the resolver is given here.
      let calls = 0
      const rebinding: Resolver = async () => (calls++ === 0 ? [{ address: "93.184.215.14", family: 4 }] : [{ address: "127.0.0.1", family: 4 }])
      const client = makeGuardedFetch({ resolve: rebinding })
      yield* client.resolvesPublicly("rebind.example")
      const error = yield* Effect.flip(client.request({ url: `http://rebind.example:${server.port}/` }))
      expect(error.reason).toBe("refused")
      expect(calls).toBe(2)
      expect(server.hits()).toBe(0)
      // mixed answers: the socket is only ever given the permitted ones
      const mixed: Resolver = async () => [{ address: "10.0.0.1", family: 4 }, { address: "127.0.0.1", family: 4 }]
      const allowLoopback = makeGuardedFetch({ resolve: mixed, allow: loopbackAllowed })
      expect((yield* allowLoopback.request({ url: `http://mixed.example:${server.port}/` })).status).toBe(200)
      expect((yield* Effect.flip(allowLoopback.resolvesPublicly("mixed.example"))).reason).toBe("refused")
    })
  )

  it.effect("resolvesPublicly: literals in any spelling, loopback names and unresolvable names are refused", () =>
    Effect.gen(function* () {
      const client = makeGuardedFetch()
      for (const host of ["127.0.0.1", "2130706433", "0177.0.0.1", "0x7f000001", "[::1]", "::1", "[::ffff:127.0.0.1]", "localhost", "10.0.0.8", "169.254.169.254"]) {
        expect([host, (yield* Effect.flip(client.resolvesPublicly(host))).reason]).toEqual([host, "refused"])
      }
      expect((yield* Effect.flip(client.resolvesPublicly("no-such-host.invalid"))).reason).toBe("unresolvable")
      for (const host of ["", "a b", "host:80", "[::1]:443", "user@host", "host/path"]) {
        expect([host, (yield* Effect.flip(client.resolvesPublicly(host))).reason]).toEqual([host, "invalid_url"])
      }
      yield* client.resolvesPublicly("8.8.8.8")
      yield* client.resolvesPublicly("[2606:4700:4700::1111]")
    })
  )

  it.effect("refuses schemes other than http and https, and what is not a URL", () =>
    Effect.gen(function* () {
      const client = makeGuardedFetch()
      for (const url of ["ftp://example.com/", "file:///etc/passwd", "not a url"]) {
        expect((yield* Effect.flip(client.request({ url }))).reason).toBe("invalid_url")
      }
    })
  )

  it.scoped("the Test layer reaches loopback stand-ins and refuses the rest", () =>
    Effect.gen(function* () {
      const server = yield* localServer(ok)
      const client = Context.get(yield* Layer.build(GuardedFetch.Test), GuardedFetch)
      expect((yield* client.request({ url: `http://127.0.0.1:${server.port}/` })).status).toBe(200)
      expect((yield* Effect.flip(client.request({ url: `http://169.254.169.254:${server.port}/` }))).reason).toBe("refused")
    })
  )

  it.scoped("the Live layer takes PORTICO_EGRESS_ALLOW_CIDRS; a malformed list stops the start", () =>
    Effect.gen(function* () {
      const server = yield* localServer(ok)
      const build = (env: Record<string, string>) =>
        Layer.build(GuardedFetch.Live.pipe(Layer.provide(PorticoConfig.fromEnv({ dataDir: "/tmp/portico-egress-test" })))).pipe(
          Effect.map((context) => Context.get(context, GuardedFetch)),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries({ PORTICO_NODE_ID: "n1", ...env })), { pathDelim: "_" }))
        )
      const closed = yield* build({})
      expect((yield* Effect.flip(closed.request({ url: `http://127.0.0.1:${server.port}/` }))).reason).toBe("refused")
      const open = yield* build({ PORTICO_EGRESS_ALLOW_CIDRS: "127.0.0.1/32" })
      expect((yield* open.request({ url: `http://127.0.0.1:${server.port}/` })).status).toBe(200)
      const refused = yield* Effect.flip(build({ PORTICO_EGRESS_ALLOW_CIDRS: "127.0.0.1/40" }))
      expect(String(refused)).toContain("EGRESS_ALLOW_CIDRS")
    })
  )
})
