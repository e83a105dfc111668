/**
 * Serving deployed apps on their hosts (spec §2.7, §4.8; docs/deployments.md "Serving") through a
 * real gateway, on both registry engines. The records are written with DeploymentStore and the
 * site's files stored through the storage service, against the gateway's own data dir and
 * registry, before it starts (the upload route is not built yet). The dynamic app is a plain
 * node:http server with a WebSocket echo, on the port its record was given.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { storeSiteDirectory } from "../../src/layers/deployments/serving/SiteManifest.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { Storage } from "../../src/layers/storage/Storage.js"
import { type Gateway, testTmp } from "../support/gateway.js"
import { waitFor } from "../support/wait.js"
import { type DeploymentFixture, deploymentFixture, startSeededGateway } from "../support/deploymentFixture.js"
import { acceptEchoSocket, openWebSocket } from "../support/webSocket.js"

const BASE = "apps.test"
const NODE = "serving-node"

interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
}

/** A request to the gateway with a `Host` of our choosing (fetch will not send one). */
const ask = (port: number, host: string, method: string, urlPath: string, options: { body?: Buffer | string; headers?: Record<string, string> } = {}) =>
  new Promise<Answer>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path: urlPath, headers: { host, ...options.headers } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end(options.body)
  })

const json = (a: Answer) => JSON.parse(a.body.toString("utf8"))

/** The test app: echoes requests (method, path, forwarded headers, body length), streams, and WebSocket echo. */
const startApp = (port: number) =>
  new Promise<http.Server>((resolve, reject) => {
    const server = http.createServer((req, res) => {
      if (req.url === "/stream") {
        // three chunks a little apart: the client sees them come as the app writes them
        res.writeHead(200, { "content-type": "text/plain" })
        let n = 0
        const tick = setInterval(() => {
          res.write(`chunk${n}\n`)
          if (++n === 3) {
            clearInterval(tick)
            res.end()
          }
        }, 30)
        return
      }
      let bytes = 0
      req.on("data", (c: Buffer) => (bytes += c.length))
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json", "x-app": "yes", "set-cookie": ["a=1", "b=2"] })
        res.end(JSON.stringify({
          method: req.method,
          url: req.url,
          bytes,
          host: req.headers.host,
          xff: req.headers["x-forwarded-for"],
          proto: req.headers["x-forwarded-proto"],
          xhost: req.headers["x-forwarded-host"],
          secret: req.headers["x-secret-hop"] ?? null
        }))
      })
    })
    server.on("upgrade", (req, socket) => acceptEchoSocket(req, socket))
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () => resolve(server))
  })

describe.each(["sqlite", "rqlite"] as const)("serving deployed apps on their hosts, registry on %s", (engine) => {
  let gw: Gateway
  let fixture: DeploymentFixture | undefined
  let app: http.Server | undefined
  const hosts = { site: "", dynamic: "", down: "", stopped: "" }

  beforeAll(async () => {
    const f = (fixture = await deploymentFixture(engine, { baseDomain: BASE, nodeId: NODE }))
    // a site: nested files, a directory with its own index, types by extension
    const site = fs.mkdtempSync(path.join(testTmp(), "site-"))
    fs.mkdirSync(path.join(site, "docs"), { recursive: true })
    fs.mkdirSync(path.join(site, "assets"), { recursive: true })
    fs.writeFileSync(path.join(site, "index.html"), "<!doctype html><title>home</title>")
    fs.writeFileSync(path.join(site, "docs", "index.html"), "<p>docs</p>")
    fs.writeFileSync(path.join(site, "assets", "app.js"), "console.log('hi')")
    fs.writeFileSync(path.join(site, "assets", "style.css"), "body{}")
    fs.writeFileSync(path.join(site, "logo.svg"), "<svg/>")
    fs.writeFileSync(path.join(site, "data.bin"), Buffer.alloc(100_000, 7))
    // paths that name members of an object's prototype are files like any other
    fs.writeFileSync(path.join(site, "__proto__"), "a file named __proto__")
    const seeded = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const stored = yield* storeSiteDirectory(yield* Storage, "shop", "blog", site)
          return stored.cid
        }).pipe(Effect.provide(servicesLayer(f.settings, { sqliteWorkers: "in-process" })))
      )
    ).then((cid) =>
      f.inRegistry((deployments) =>
        Effect.gen(function* () {
          const blog = yield* deployments.create({ namespace: "shop", name: "blog", type: "static", domain: `blog-abc123.${BASE}`, homeNode: NODE, artifact: cid, status: "active" })
          const api = yield* deployments.create({ namespace: "shop", name: "api", type: "nodejs", domain: `api-def456.${BASE}`, homeNode: NODE, artifact: "v1", status: "active" })
          const down = yield* deployments.create({ namespace: "shop", name: "down", type: "nodejs", domain: `down-ghi789.${BASE}`, homeNode: NODE, artifact: "v1", status: "active" })
          const stopped = yield* deployments.create({ namespace: "shop", name: "paused", type: "go", domain: `paused-jkl012.${BASE}`, homeNode: NODE, artifact: "v1", status: "stopped" })
          return { blog, api, down, stopped }
        })
      )
    )
    hosts.site = seeded.blog.domain
    hosts.dynamic = seeded.api.domain
    hosts.down = seeded.down.domain
    hosts.stopped = seeded.stopped.domain
    app = await startApp(seeded.api.port as number)
    const gateway = (gw = await startSeededGateway(f, [seeded.api, seeded.down]))
    await waitFor("the app served on its host", async () => (await ask(gateway.port, hosts.dynamic, "GET", "/")).status !== 503, 20_000)
  }, 60_000)

  afterAll(async () => {
    await gw?.stop()
    app?.closeAllConnections()
    await new Promise((r) => (app === undefined ? r(undefined) : app.close(r)))
    await fixture?.stop()
  })

  describe("a static site from content storage", () => {
    it("serves the index, nested files, a directory's index.html, with types and the cache header", async () => {
      const index = await ask(gw.port, hosts.site, "GET", "/")
      expect(index.status).toBe(200)
      expect(index.body.toString()).toContain("<title>home</title>")
      expect(index.headers["content-type"]).toBe("text/html; charset=utf-8")
      expect(index.headers["cache-control"]).toBe("public, max-age=3600")
      expect(index.headers["etag"]).toMatch(/^"b[a-z2-7]+"$/)
      const js = await ask(gw.port, `${hosts.site}:443`, "GET", "/assets/app.js")
      expect([js.status, js.headers["content-type"], js.body.toString()]).toEqual([200, "text/javascript; charset=utf-8", "console.log('hi')"])
      const css = await ask(gw.port, hosts.site.toUpperCase(), "GET", "/assets/style.css?v=2")
      expect([css.status, css.headers["content-type"]]).toEqual([200, "text/css; charset=utf-8"])
      const svg = await ask(gw.port, hosts.site, "GET", "/logo.svg")
      expect(svg.headers["content-type"]).toBe("image/svg+xml")
      const docs = await ask(gw.port, hosts.site, "GET", "/docs")
      expect([docs.status, docs.body.toString()]).toEqual([200, "<p>docs</p>"])
      const big = await ask(gw.port, hosts.site, "GET", "/data.bin")
      expect([big.status, big.body.length, big.headers["content-type"]]).toEqual([200, 100_000, "application/octet-stream"])
    })

    it("answers unknown routes with /index.html (a single-page app's routes)", async () => {
      const spa = await ask(gw.port, hosts.site, "GET", "/users/42/settings")
      expect(spa.status).toBe(200)
      expect(spa.body.toString()).toContain("<title>home</title>")
      expect(spa.headers["content-type"]).toBe("text/html; charset=utf-8")
      const climbing = await ask(gw.port, hosts.site, "GET", "/%2e%2e/%2e%2e/etc/passwd")
      expect(climbing.body.toString()).toContain("<title>home</title>")
    })

    it("takes a path naming an object's member for a path: the fallback when no such file, the file when there is one", async () => {
      for (const member of ["/constructor", "/toString", "/hasOwnProperty", "/__defineGetter__"]) {
        const answer = await ask(gw.port, hosts.site, "GET", member)
        expect([member, answer.status, answer.headers["content-type"]]).toEqual([member, 200, "text/html; charset=utf-8"])
        expect(answer.body.toString()).toContain("<title>home</title>")
      }
      const proto = await ask(gw.port, hosts.site, "GET", "/__proto__")
      expect([proto.status, proto.body.toString(), proto.headers["content-length"]]).toEqual([200, "a file named __proto__", "22"])
    })

    it("answers HEAD, a byte range, 304 on a matching ETag, and 405 for other methods", async () => {
      const head = await ask(gw.port, hosts.site, "HEAD", "/data.bin")
      expect([head.status, head.headers["content-length"], head.body.length]).toEqual([200, "100000", 0])
      const range = await ask(gw.port, hosts.site, "GET", "/data.bin", { headers: { range: "bytes=10-19" } })
      expect([range.status, range.body.length, range.headers["content-range"]]).toEqual([206, 10, "bytes 10-19/100000"])
      const etag = head.headers["etag"] as string
      const again = await ask(gw.port, hosts.site, "GET", "/data.bin", { headers: { "if-none-match": etag } })
      expect(again.status).toBe(304)
      const post = await ask(gw.port, hosts.site, "POST", "/", { body: "x" })
      expect([post.status, json(post).code, post.headers["allow"]]).toEqual([405, "METHOD_NOT_ALLOWED", "GET, HEAD"])
    })
  })

  describe("a dynamic app through the proxy", () => {
    it("forwards method, path, query and body, sets X-Forwarded-*, drops hop-by-hop headers, keeps repeated headers", async () => {
      const body = Buffer.alloc(3 * 1024 * 1024, 1)
      const answer = await ask(gw.port, hosts.dynamic, "POST", "/echo?x=1", {
        body,
        headers: { "x-forwarded-for": "6.6.6.6", connection: "x-secret-hop", "x-secret-hop": "leak" }
      })
      expect(answer.status).toBe(200)
      expect(answer.headers["x-app"]).toBe("yes")
      expect(answer.headers["set-cookie"]).toEqual(["a=1", "b=2"])
      expect(json(answer)).toEqual({
        method: "POST",
        url: "/echo?x=1",
        bytes: body.length,
        host: hosts.dynamic,
        xff: "127.0.0.1",
        proto: "http",
        xhost: hosts.dynamic,
        secret: null
      })
    })

    it("streams the answer as the app writes it", async () => {
      const arrivals: Array<number> = []
      const text = await new Promise<string>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port: gw.port, path: "/stream", headers: { host: hosts.dynamic } }, (res) => {
          let all = ""
          res.on("data", (c: Buffer) => {
            arrivals.push(performance.now())
            all += c.toString()
          })
          res.on("end", () => resolve(all))
        })
        req.on("error", reject)
        req.end()
      })
      expect(text).toBe("chunk0\nchunk1\nchunk2\n")
      expect(arrivals.length).toBeGreaterThanOrEqual(2)
    })

    it("carries a WebSocket both ways", async () => {
      const ws = await openWebSocket(gw.port, hosts.dynamic, "/ws")
      ws.send("hello")
      expect(await ws.next()).toBe("echo:hello")
      ws.send("again")
      expect(await ws.next()).toBe("echo:again")
      ws.close()
    })

    it("answers 502 APP_UNREACHABLE when the app does not listen, 503 when it is not running", async () => {
      const down = await ask(gw.port, hosts.down, "GET", "/")
      expect([down.status, json(down).code]).toEqual([502, "APP_UNREACHABLE"])
      const downWs = await openWebSocket(gw.port, hosts.down, "/ws").catch((e: { status?: number }) => e.status)
      expect(downWs).toBe(502)
      const stopped = await ask(gw.port, hosts.stopped, "GET", "/")
      expect([stopped.status, json(stopped).code, stopped.headers["retry-after"]]).toEqual([503, "UNAVAILABLE", "5"])
    })
  })

  describe("hosts that are not an app's", () => {
    it("answers 404 for an unknown host under the base domain", async () => {
      const unknown = await ask(gw.port, `nothing-here.${BASE}`, "GET", "/")
      expect([unknown.status, json(unknown).code]).toEqual([404, "NOT_FOUND"])
      const ws = await openWebSocket(gw.port, `nothing-here.${BASE}`, "/").catch((e: { status?: number }) => e.status)
      expect(ws).toBe(404)
    })

    it("leaves the API on its own hosts", async () => {
      for (const host of ["127.0.0.1", "localhost", BASE, `api.${BASE}`, `ns-shop.${BASE}`, "gateway.example.com"]) {
        const health = await ask(gw.port, host, "GET", "/v1/health")
        expect(health.status, host).toBe(200)
        expect(json(health).status, host).toBeDefined()
      }
      // the API's own refusal, not a site's fallback
      const missing = await ask(gw.port, `api.${BASE}`, "GET", "/index.html")
      expect(missing.status).toBe(404)
      expect(json(missing).code).not.toBe("NOT_FOUND")
      // an upgrade on an API host is answered as a request (there are no WebSocket routes on the API yet)
      const apiWs = await openWebSocket(gw.port, "localhost", "/v1/health").catch((e: { status?: number }) => e.status)
      expect(apiWs).toBe(200)
    })
  })
})
