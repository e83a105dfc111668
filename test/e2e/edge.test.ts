/**
 * The TLS edge (docs/edge.md) with real processes: two gateways of one cluster (node-a, node-b)
 * on one rqlite registry, each with its own data directory and edge token; in front of each its
 * edge, Caddy with Portico's modules (engines/caddy), configured by `portico edge config`, node-a's
 * on 127.0.0.11 and node-b's on 127.0.0.12, same ports; Pebble as the ACME CA, resolving names
 * through the DNS stand-in.
 *
 * Proves: a verified custom domain gets a certificate Pebble issued on the first handshake, and
 * the site through HTTPS; the challenge of an order node-a's edge started is answered by node-b's
 * edge (the name points there), from the shared store; node-b's edge then serves the same
 * certificate without ordering one; names the platform does not serve get none; the registry
 * holds every value sealed; the edge routes refuse what they must.
 */
import { Effect, Redacted } from "effect"
import * as dnsPacket from "dns-packet"
import * as crypto from "node:crypto"
import * as dgram from "node:dgram"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type * as tls from "node:tls"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { testSettings } from "../../src/layers/config/PorticoConfig.js"
import { makeDeploymentStore } from "../../src/layers/deployments/DeploymentStore.js"
import { storeSiteDirectory } from "../../src/layers/deployments/serving/SiteManifest.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { Sealer } from "../../src/layers/secrets/Sealer.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { Storage } from "../../src/layers/storage/Storage.js"
import { type DnsStandIn, startDnsStandIn } from "../support/dnsStandIn.js"
import { type Edge, edgeMissingMessage, hasEdgeEngines, type Pebble, portFreeOn, startEdge, startPebble } from "../support/edge.js"
import { type Gateway, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"

const BASE = "edge.test"
const SECRET = "5e".repeat(32)
const EDGE_A = "127.0.0.11"
const EDGE_B = "127.0.0.12"
const CUSTOM = "www.shop-example.test"
const PENDING = "pending.shop-example.test"

interface Answer {
  readonly status: number
  readonly body: string
  readonly headers: http.IncomingHttpHeaders
  readonly certificate: tls.PeerCertificate
}

/** An HTTPS request to the edge at `address`, naming `host` (SNI and Host), trusting only `ca`. */
const overTls = (address: string, port: number, host: string, urlPath: string, ca: string, from?: string) =>
  new Promise<Answer>((resolve, reject) => {
    const req = https.request(
      { host: address, port, servername: host, path: urlPath, headers: { host }, ca, agent: false, timeout: 60_000, ...(from === undefined ? {} : { localAddress: from }) },
      (res) => {
        const certificate = (res.socket as tls.TLSSocket).getPeerCertificate()
        let body = ""
        res.on("data", (chunk: Buffer) => (body += chunk.toString()))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, certificate }))
      }
    )
    req.on("timeout", () => req.destroy(new Error("timed out")))
    req.on("error", reject)
    req.end()
  })

const overPlain = (address: string, port: number, host: string, urlPath: string) =>
  new Promise<{ status: number; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    http
      .get({ host: address, port, path: urlPath, headers: { host }, agent: false }, (res) => {
        res.resume()
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }))
      })
      .on("error", reject)
  })

const expectError = (reply: Reply, status: number, code: string) => {
  expect(reply.status, reply.text).toBe(status)
  expect(reply.body?.code, reply.text).toBe(code)
}

describe("the TLS edge: on-demand certificates from Pebble, shared by two nodes' edges", () => {
  let rqlited: RqlitedServer
  let dns: DnsStandIn
  let pebble: Pebble
  let a: Gateway
  let b: Gateway
  let edgeA: Edge
  let edgeB: Edge
  let httpsPort: number
  let httpPort: number
  let issuingRoot: string
  let tokenA: string
  let tokenB: string
  let ownerKey: string
  let acmeDnsPort: number

  const store = (gw: Gateway, token: string | undefined, json: unknown) =>
    gw.request("POST", "/v1/internal/tls-store", { json, ...(token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } }) })
  /** Rows of the shared registry, read from rqlited directly. */
  const registryRows = (sql: string) =>
    new Promise<ReadonlyArray<ReadonlyArray<unknown>>>((resolve, reject) => {
      const req = http.request(`${rqlited.url}/db/query?level=strong`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        let text = ""
        res.on("data", (c: Buffer) => (text += c.toString()))
        res.on("end", () => resolve(JSON.parse(text).results[0].values ?? []))
      })
      req.on("error", reject)
      req.end(JSON.stringify([[sql]]))
    })
  const check = (gw: Gateway, domain: string) => gw.request("GET", `/v1/internal/tls/check?domain=${encodeURIComponent(domain)}`)

  beforeAll(async () => {
    if (!hasEdgeEngines()) throw new Error(edgeMissingMessage())
    if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
    rqlited = await Effect.runPromise(startRqlited())
    dns = await startDnsStandIn()
    httpsPort = await portFreeOn([EDGE_A, EDGE_B])
    httpPort = await portFreeOn([EDGE_A, EDGE_B])
    pebble = await startPebble({ dnsServer: dns.server, httpPort, tlsPort: httpsPort })

    const dataA = fs.mkdtempSync(path.join(testTmp(), "portico-edge-a-"))
    const dataB = fs.mkdtempSync(path.join(testTmp(), "portico-edge-b-"))
    const registry = { engine: "rqlite" as const, url: rqlited.url, user: undefined, password: undefined }
    // the site's files in node-a's blocks: node-a serves its content, node-b's edge only its certificate
    const site = fs.mkdtempSync(path.join(testTmp(), "site-"))
    fs.writeFileSync(path.join(site, "index.html"), "<!doctype html><title>shop over https</title>")
    const env = { PORTICO_BASE_DOMAIN: BASE, PORTICO_SECRET: SECRET, PORTICO_RQLITE_URL: rqlited.url, PORTICO_DNS_SERVERS: dns.server }
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const deployments = makeDeploymentStore(yield* RegistryStore, yield* Sealer)
          const stored = yield* storeSiteDirectory(yield* Storage, "shop", "blog", site)
          yield* deployments.create({ namespace: "shop", name: "blog", type: "static", domain: `blog-abc123.${BASE}`, homeNode: "node-a", artifact: stored.cid, status: "active" })
        }).pipe(Effect.provide(servicesLayer(testSettings(dataA, { baseDomain: BASE, registry, secret: Redacted.make(SECRET) }), { sqliteWorkers: "in-process" })))
      )
    )
    // node-a also answers DNS for the challenge name, delegated to it in the (stand-in) parent zone
    acmeDnsPort = await portFreeOn(["127.0.0.1"])
    a = await startGateway({ dataDir: dataA, env: { ...env, PORTICO_NODE_ID: "node-a", PORTICO_ACME_DNS: `127.0.0.1:${acmeDnsPort}` } })
    dns.delegate(`_acme-challenge.${BASE}`, "127.0.0.1", acmeDnsPort)
    // node-b trusts its edge for who the client is, and limits each client network to a burst of 3
    b = await startGateway({
      dataDir: dataB,
      env: {
        ...env,
        PORTICO_NODE_ID: "node-b",
        PORTICO_TRUSTED_PROXIES: "127.0.0.1",
        PORTICO_RATE_LIMIT: "true",
        PORTICO_RATE_LIMIT_CLIENT_RPS: "1",
        PORTICO_RATE_LIMIT_CLIENT_BURST: "3"
      }
    })
    ownerKey = (await a.cli(["namespace", "create", "shop"])).api_key

    // the custom domain, verified over DNS as a tenant does it; another one added, never verified
    const added = await a.request("POST", "/v1/deployments/domains/add", { token: ownerKey, json: { name: "blog", domain: CUSTOM } })
    expect(added.status, added.text).toBe(200)
    dns.setTxt(`_portico-verify.${CUSTOM}`, [added.body.txt.value])
    const verified = await a.request("POST", "/v1/deployments/domains/verify", { token: ownerKey, json: { name: "blog", domain: CUSTOM } })
    expect(verified.status, verified.text).toBe(200)
    const pending = await a.request("POST", "/v1/deployments/domains/add", { token: ownerKey, json: { name: "blog", domain: PENDING } })
    expect(pending.status, pending.text).toBe(200)
    // where the names point: the custom domain at node-b's edge, so Pebble checks node-b while node-a orders
    dns.setA(CUSTOM, [EDGE_B])
    dns.setA(PENDING, [EDGE_A])
    dns.setA(`ns-shop.${BASE}`, [EDGE_A])
    dns.setA("stranger.example.test", [EDGE_A])

    tokenA = fs.readFileSync(path.join(dataA, "edge.token"), "utf8").trim()
    tokenB = fs.readFileSync(path.join(dataB, "edge.token"), "utf8").trim()
    // node-a's edge holds the wildcard certificate of the base domain (DNS-01), node-b's does not
    const config = async (gw: Gateway, listen: string, wildcard: ReadonlyArray<string> = []) =>
      gw.cli(["edge", "config", ...wildcard, "--gateway", gw.url, "--acme-ca", pebble.directory, "--trusted-roots", pebble.listenerCaFile, "--https-port", String(httpsPort), "--http-port", String(httpPort), "--listen", listen])
    edgeA = await startEdge(await config(a, EDGE_A, ["--wildcard", "--resolvers", dns.server]), { host: EDGE_A, port: httpsPort })
    edgeB = await startEdge(await config(b, EDGE_B), { host: EDGE_B, port: httpsPort })
    issuingRoot = await pebble.issuingRoot()
  }, 180_000)

  afterAll(async () => {
    if (process.env["EDGE_DEBUG"] !== undefined) fs.writeFileSync(process.env["EDGE_DEBUG"], [edgeA?.logs(), edgeB?.logs(), pebble?.logs(), a?.logs()].join("\n=====\n"))
    await edgeA?.stop()
    await edgeB?.stop()
    await pebble?.stop()
    await a?.stop()
    await b?.stop()
    await dns?.close()
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("asks: yes for the platform's hosts, a namespace that exists, a deployment and a verified custom domain; no for the rest", async () => {
    const yes: ReadonlyArray<readonly [string, string]> = [
      [BASE, "platform"],
      [`api.${BASE}`, "platform"],
      [`ns-shop.${BASE}`, "namespace"],
      [`blog-abc123.${BASE}`, "deployment"],
      [CUSTOM, "custom-domain"],
      [`${CUSTOM.toUpperCase()}.`, "custom-domain"]
    ]
    for (const [domain, kind] of yes) {
      const answer = await check(b, domain)
      expect(answer.status, `${domain}: ${answer.text}`).toBe(200)
      expect(answer.body).toEqual({ domain: domain.toLowerCase().replace(/\.$/, ""), allowed: true, kind })
    }
    for (const domain of [PENDING, `ns-nobody.${BASE}`, `www.${BASE}`, `x.ns-shop.${BASE}`, "stranger.example.test", "localhost"]) {
      expectError(await check(b, domain), 404, "NOT_FOUND")
    }
    for (const query of ["domain=a%20b", "domain=", "domain=" + "a".repeat(300), "", "domain=x.test&extra=1"]) {
      expectError(await b.request("GET", `/v1/internal/tls/check?${query}`), 400, "VALIDATION_FAILED")
    }
  })

  it("serves a verified custom domain over HTTPS with a certificate Pebble issued; the challenge was answered by the other node's edge", async () => {
    const answer = await overTls(EDGE_A, httpsPort, CUSTOM, "/", issuingRoot)
    expect(answer.status).toBe(200)
    expect(answer.body).toContain("shop over https")
    expect(answer.certificate.subjectaltname).toContain(`DNS:${CUSTOM}`)
    // Pebble validated at the address the name points to: node-b's edge answered node-a's
    // challenge from the shared store
    expect(dns.questions().some((q) => q.name === CUSTOM && q.type === "A")).toBe(true)
    expect(edgeB.logs()).toMatch(/"served key authentication(?: certificate)?","(?:identifier|server_name)":"www\.shop-example\.test","challenge":"(?:http-01|tls-alpn-01)",[^\n]*"distributed":true/)

    // node-b's edge serves the same certificate, from the shared store, without an order of its own
    const fromB = await overTls(EDGE_B, httpsPort, CUSTOM, "/", issuingRoot)
    expect(fromB.certificate.fingerprint256).toBe(answer.certificate.fingerprint256)
    expect(edgeB.logs()).not.toMatch(/"msg":"certificate obtained successfully","identifier":"www\.shop-example\.test"/)
  }, 120_000)

  it("holds the base domain's wildcard certificate, obtained by DNS-01 through the gateway's records and its DNS answer", async () => {
    // Caddy orders both at its start; a handshake before its certificate is stored gets none
    const served = async (host: string, san: string) => {
      const deadline = Date.now() + 60_000
      for (;;) {
        const answer = await overTls(EDGE_A, httpsPort, host, "/", issuingRoot).catch(() => undefined)
        if (answer?.certificate.subjectaltname?.split(", ").includes(san) === true || Date.now() > deadline) return answer
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
    }
    const answer = await served(`blog-abc123.${BASE}`, `DNS:*.${BASE}`)
    expect(answer?.certificate.subjectaltname).toContain(`DNS:*.${BASE}`)
    expect(answer?.status).toBe(200)
    expect(answer?.body).toContain("shop over https")
    // the base domain's own certificate, obtained the same way (Caddy keeps one per name)
    expect((await served(BASE, `DNS:${BASE}`))?.certificate.subjectaltname).toBe(`DNS:${BASE}`)
    // by DNS-01: Pebble read the TXT record from node-a's DNS answer, through the delegation
    expect(edgeA.logs()).toMatch(/"identifier":"\*\.edge\.test","challenge_type":"dns-01"/)
    expect(pebble.logs()).toMatch(/Value:"edge\.test"\}[^\n]*Wildcard:true/)
    expect(dns.questions().some((q) => q.name === `_acme-challenge.${BASE}` && q.type === "TXT")).toBe(true)
    // the challenges' records are gone once the orders are done
    const deadline = Date.now() + 30_000
    while ((await registryRows("SELECT fqdn, value FROM acme_challenges")).length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    expect(await registryRows("SELECT fqdn, value FROM acme_challenges")).toEqual([])
  }, 90_000)

  it("answers DNS only for challenge names: any other name is refused, so it is no open resolver", async () => {
    const ask = (name: string, type: "TXT" | "A" | "SOA") =>
      new Promise<dnsPacket.DecodedPacket & { readonly rcode?: string }>((resolve, reject) => {
        const socket = dgram.createSocket("udp4")
        const timer = setTimeout(() => {
          socket.close()
          reject(new Error("no answer"))
        }, 3000)
        socket.once("message", (reply) => {
          clearTimeout(timer)
          socket.close()
          resolve(dnsPacket.decode(reply))
        })
        socket.send(dnsPacket.encode({ type: "query", id: 7, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name, class: "IN" }] }), acmeDnsPort, "127.0.0.1")
      })
    for (const name of ["example.com", BASE, `ns-shop.${BASE}`, `_acme-challenge.example.com`]) {
      expect((await ask(name, "A")).rcode, name).toBe("REFUSED")
    }
    const soa = await ask(`_acme-challenge.${BASE}`, "SOA")
    expect(soa.rcode).toBe("NOERROR")
    expect(soa.flags! & dnsPacket.AUTHORITATIVE_ANSWER).toBeTruthy()
    expect(soa.answers?.[0]?.type).toBe("SOA")
    const txt = await ask(`_acme-challenge.${BASE}`, "TXT")
    expect(txt.rcode).toBe("NOERROR")
    expect(txt.answers ?? []).toEqual([])
  })

  it("gets no certificate for a name the platform does not serve, nor for a custom domain still pending", async () => {
    for (const name of [PENDING, "stranger.example.test"]) {
      await expect(overTls(EDGE_A, httpsPort, name, "/", issuingRoot)).rejects.toThrow()
    }
    expect(edgeA.logs()).not.toMatch(/certificate obtained successfully","identifier":"(pending\.shop-example|stranger\.example)/)
  }, 60_000)

  it("proxies the API through the edge on a namespace host, answers /v1/internal/ itself, and redirects plain HTTP", async () => {
    const health = await overTls(EDGE_A, httpsPort, `ns-shop.${BASE}`, "/health", issuingRoot)
    expect(health.status).toBe(200)
    expect(JSON.parse(health.body).status).toBe("ok")
    const internal = await overTls(EDGE_A, httpsPort, `ns-shop.${BASE}`, `/v1/internal/tls/check?domain=${BASE}`, issuingRoot)
    expect(internal.status).toBe(404)
    expect(JSON.parse(internal.body).code).toBe("ROUTE_NOT_FOUND")
    const plain = await overPlain(EDGE_A, httpPort, CUSTOM, "/a/b?c=1")
    expect(plain.status).toBe(308)
    expect(plain.headers.location).toBe(`https://${CUSTOM}:${httpsPort}/a/b?c=1`)
  }, 60_000)

  it("behind its edge a gateway that trusts it limits each client by the address the edge names, not the edge's own", async () => {
    // clients on networks of their own, away from the test's and the edge's own calls (127.0.0.1)
    const health = (from: string) => overTls(EDGE_B, httpsPort, `ns-shop.${BASE}`, "/health", issuingRoot, from)
    // the first asks obtain node-b's certificate for the name; then a burst of 3 per client network
    expect((await health("127.0.5.55")).status).toBe(200)
    let limited: Answer | undefined
    for (let i = 0; i < 10 && limited === undefined; i++) {
      const answer = await health("127.0.5.55")
      if (answer.status === 429) limited = answer
      else expect(answer.status).toBe(200)
    }
    expect(limited?.status).toBe(429)
    expect(JSON.parse(limited?.body ?? "{}").code).toBe("RATE_LIMITED")
    // another client network through the same edge has a bucket of its own
    expect((await health("127.0.6.55")).status).toBe(200)
  }, 60_000)

  it("keeps every stored value sealed in the registry: no key or certificate in the clear", async () => {
    const rows = await registryRows("SELECT key, sealed FROM tls_store")
    const keys = rows.map((row) => String(row[0]))
    expect(keys.some((key) => key.startsWith("certificates/") && key.endsWith(`${CUSTOM}.key`))).toBe(true)
    expect(keys.some((key) => key.startsWith("certificates/") && key.endsWith(`${CUSTOM}.crt`))).toBe(true)
    for (const row of rows) {
      expect(String(row[1])).toMatch(/^v[12]\./)
      expect(String(row[1])).not.toContain("BEGIN")
    }
  })

  it("refuses the store without this node's edge token, and keeps its semantics for the edge", async () => {
    expectError(await store(a, undefined, { op: "load", key: "x" }), 401, "UNAUTHORIZED")
    expectError(await store(a, tokenB, { op: "load", key: "x" }), 401, "UNAUTHORIZED")
    expectError(await store(a, "x".repeat(43), { op: "load", key: "x" }), 401, "UNAUTHORIZED")
    expect(tokenA).not.toBe(tokenB)
    const bad: ReadonlyArray<unknown> = [
      { op: "lod", key: "x" },
      { op: "load" },
      { op: "load", key: "" },
      { op: "load", key: "a b" },
      { op: "load", key: "x".repeat(1025) },
      { op: "load", key: "x", extra: 1 },
      { op: "store", key: "x", value: "not base64!" },
      { op: "lock", key: "x", owner: "short" }
    ]
    for (const body of bad) expectError(await store(a, tokenA, body), 400, "VALIDATION_FAILED")
    expectError(await store(a, tokenA, { op: "store", key: "big", value: Buffer.alloc(1024 * 1024 + 1).toString("base64") }), 413, "PAYLOAD_TOO_LARGE")

    const value = crypto.randomBytes(64).toString("base64")
    expect((await store(a, tokenA, { op: "store", key: "t/dir/one", value })).body).toEqual({ op: "store" })
    expect((await store(a, tokenA, { op: "store", key: "t/dir/sub/two", value })).status).toBe(200)
    // written through node-a, read through node-b: one store for the cluster
    expect((await store(b, tokenB, { op: "load", key: "t/dir/one" })).body).toEqual({ op: "load", value })
    expect((await store(b, tokenB, { op: "list", key: "t/dir" })).body).toEqual({ op: "list", keys: ["t/dir/one", "t/dir/sub"] })
    expect((await store(b, tokenB, { op: "list", key: "t", recursive: true })).body).toEqual({ op: "list", keys: ["t/dir/one", "t/dir/sub/two"] })
    expect((await store(b, tokenB, { op: "stat", key: "t/dir/one" })).body).toMatchObject({ op: "stat", key: "t/dir/one", size: 64, terminal: true })
    expect((await store(b, tokenB, { op: "stat", key: "t/dir" })).body).toMatchObject({ op: "stat", key: "t/dir", terminal: false })
    expect((await store(b, tokenB, { op: "exists", key: "t/dir" })).body).toEqual({ op: "exists", exists: true })
    expect((await store(b, tokenB, { op: "exists", key: "t/di" })).body).toEqual({ op: "exists", exists: false })
    expectError(await store(b, tokenB, { op: "load", key: "t/dir" }), 404, "NOT_FOUND")
    expectError(await store(b, tokenB, { op: "list", key: "t/none" }), 404, "NOT_FOUND")
    expect((await store(b, tokenB, { op: "delete", key: "t/dir" })).status).toBe(200)
    expect((await store(b, tokenB, { op: "exists", key: "t/dir/sub/two" })).body).toEqual({ op: "exists", exists: false })
    expect((await store(b, tokenB, { op: "delete", key: "t/dir" })).status).toBe(200)

    // a lock is one edge's at a time, across nodes; its holder renews it; unlocking hands it on
    expect((await store(a, tokenA, { op: "lock", key: "issue_cert_x", owner: "edge-a-0001" })).status).toBe(200)
    expectError(await store(b, tokenB, { op: "lock", key: "issue_cert_x", owner: "edge-b-0001" }), 409, "CONFLICT")
    expect((await store(a, tokenA, { op: "lock", key: "issue_cert_x", owner: "edge-a-0001" })).status).toBe(200)
    expect((await store(b, tokenB, { op: "unlock", key: "issue_cert_x", owner: "edge-b-0001" })).status).toBe(200)
    expectError(await store(b, tokenB, { op: "lock", key: "issue_cert_x", owner: "edge-b-0001" }), 409, "CONFLICT")
    expect((await store(a, tokenA, { op: "unlock", key: "issue_cert_x", owner: "edge-a-0001" })).status).toBe(200)
    expect((await store(b, tokenB, { op: "lock", key: "issue_cert_x", owner: "edge-b-0001" })).status).toBe(200)
  })

  it("holds DNS-01 records only for the platform's own challenge names, with the edge token", async () => {
    const present = (gw: Gateway, token: string | undefined, json: unknown) =>
      gw.request("POST", "/v1/internal/acme/present", { json, ...(token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } }) })
    expectError(await present(a, undefined, { fqdn: `_acme-challenge.${BASE}.`, value: "abc" }), 401, "UNAUTHORIZED")
    expectError(await present(a, tokenA, { fqdn: `_acme-challenge.${CUSTOM}.`, value: "abc" }), 403, "FORBIDDEN")
    expectError(await present(a, tokenA, { fqdn: `${BASE}.`, value: "abc" }), 403, "FORBIDDEN")
    expectError(await present(a, tokenA, { fqdn: `_acme-challenge.${BASE}.`, value: "a b" }), 400, "VALIDATION_FAILED")
    expect((await present(a, tokenA, { fqdn: `_acme-challenge.${BASE}.`, value: "abc" })).body).toEqual({ present: true })
    const cleaned = await b.request("POST", "/v1/internal/acme/cleanup", { json: { fqdn: `_acme-challenge.${BASE}`, value: "abc" }, headers: { authorization: `Bearer ${tokenB}` } })
    expect(cleaned.body).toEqual({ cleaned: true })
  })
})
