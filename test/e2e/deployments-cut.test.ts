/**
 * Uploads cut by the client (docs/deployments.md, "The deployments service": nothing half written)
 * through a real gateway on both registry engines: a client sends the multipart head and part of
 * the archive, or the whole body, then destroys its socket before the answer. A Node.js app cut
 * during its archive leaves no record, directory or port; a static site cut during its archive
 * or while its files are stored leaves no record, staging directory or content reference, and the
 * namespace's storage usage is what it was. After each, the same name uploads (201) and the list
 * shows no leftover. Runs as root (the app runs in the sandbox).
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PorticoConfig, testSettings } from "../../src/layers/config/PorticoConfig.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { registryLayer } from "../../src/layers/registry/registryLayer.js"
import { ContentIndex } from "../../src/layers/storage/ContentIndex.js"
import { type Gateway, getOnHost, type Reply, startGateway, testTmp } from "../support/gateway.js"
import { hasRqlited, type RqlitedServer, rqlitedMissingMessage, startRqlited } from "../support/rqlited.js"
import { waitFor } from "../support/wait.js"
import { tarOf } from "../support/tarball.js"

const BASE = "cut.test"

const appTar = (version: string) =>
  tarOf({
    "index.js": `require("node:http").createServer((req, res) => res.end(${JSON.stringify(version)})).listen(Number(process.env.PORT))\n`,
    // 1 MiB that does not compress: a body cut halfway is cut inside the archive
    "blob.bin": randomBytes(1024 * 1024)
  })
const siteTar = (files: number, tag: string) =>
  tarOf(Object.fromEntries(Array.from({ length: files }, (_, i) => [`page${i}.html`, `<p>${tag} ${i} ${randomBytes(8).toString("hex")}</p>`])))

/** The multipart body fetch would send, and where its archive's bytes begin. */
const formBytes = async (fields: Record<string, string>, archive: Buffer) => {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  form.append("archive", new Blob([archive]), "archive.tar.gz")
  const request = new Request("http://cut.test/", { method: "POST", body: form })
  const bytes = Buffer.from(await request.arrayBuffer())
  return { bytes, contentType: request.headers.get("content-type") ?? "", archiveAt: bytes.indexOf(archive.subarray(0, 64)) }
}

describe.each(["sqlite", "rqlite"] as const)("uploads cut by the client, registry on %s", (engine) => {
  let gw: Gateway
  let rqlited: RqlitedServer | undefined
  let admin: string
  let registry: ManagedRuntime.ManagedRuntime<RegistryStore | ContentIndex, unknown>

  const get = (route: string) => gw.request("GET", `/v1/deployments/${route}`, { token: admin })
  const names = async () => ((await get("list")).body.deployments as Array<{ name: string }>).map((d) => d.name)
  const upload = async (type: string, fields: Record<string, string>, archive: Buffer): Promise<Reply> => {
    const { bytes, contentType } = await formBytes(fields, archive)
    const res = await fetch(`${gw.url}/v1/deployments/${type}/upload`, { method: "POST", body: bytes, headers: { authorization: `Bearer ${admin}`, "content-type": contentType } })
    const text = await res.text()
    return { status: res.status, headers: res.headers, text, body: JSON.parse(text) }
  }
  /**
   * Sends the head of an upload (`upTo` bytes of its body, all of it by default) with the whole
   * body's Content-Length, waits until `ready` holds, then destroys the socket: a client gone.
   */
  const cutUpload = async (type: string, fields: Record<string, string>, archive: Buffer, upTo: "half the archive" | "all", ready: () => Promise<boolean> | boolean) => {
    const { bytes, contentType, archiveAt } = await formBytes(fields, archive)
    const sent = upTo === "all" ? bytes.length : archiveAt + Math.floor(archive.length / 2)
    let answered: number | undefined
    const req = http.request({
      host: "127.0.0.1",
      port: gw.port,
      method: "POST",
      path: `/v1/deployments/${type}/upload`,
      headers: { authorization: `Bearer ${admin}`, "content-type": contentType, "content-length": bytes.length }
    }, (res) => (answered = res.statusCode))
    req.on("error", () => {})
    req.write(bytes.subarray(0, sent))
    await waitFor(`the upload of ${fields["name"]} under way`, ready, 30_000, 5)
    req.destroy()
    // the cut came before any answer
    expect(answered).toBeUndefined()
  }
  const refsOf = (name: string) =>
    registry.runPromise(
      Effect.map(
        Effect.flatMap(RegistryStore, (r) => r.query({ sql: "SELECT COUNT(*) AS n FROM content_refs WHERE namespace = 'shop' AND kind = 'deployment' AND ref = ?", params: [name] })),
        (rows) => Number(rows[0]?.["n"])
      )
    )
  const usage = () => registry.runPromise(Effect.flatMap(ContentIndex, (index) => index.usage("shop")))
  const stagingLeft = () => (fs.existsSync(path.join(gw.dataDir, "deploy-staging")) ? fs.readdirSync(path.join(gw.dataDir, "deploy-staging")) : [])

  beforeAll(async () => {
    if (engine === "rqlite") {
      if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
      rqlited = await Effect.runPromise(startRqlited())
    }
    gw = await startGateway({
      env: {
        PORTICO_BASE_DOMAIN: BASE,
        PORTICO_NODE_ID: `cut-${engine}-${process.pid}`,
        PORTICO_APP_START_TIMEOUT_MS: "8000",
        ...(rqlited === undefined ? {} : { PORTICO_RQLITE_URL: rqlited.url })
      }
    })
    admin = (await gw.cli(["namespace", "create", "shop"])).api_key
    const settings = testSettings(gw.dataDir, rqlited === undefined ? {} : { registry: { engine: "rqlite", url: rqlited.url, user: undefined, password: undefined } })
    registry = ManagedRuntime.make(ContentIndex.Live.pipe(Layer.provideMerge(registryLayer(settings)), Layer.provide(PorticoConfig.layer(settings))))
  }, 120_000)

  afterAll(async () => {
    await registry?.dispose()
    await gw?.stop()
    if (rqlited !== undefined) await Effect.runPromise(rqlited.stop)
  })

  it("a Node.js app cut during its archive leaves no record, directory or port; the name then uploads (201)", async () => {
    const dir = path.join(gw.dataDir, "deployments", "shop-app")
    let port = 0
    await cutUpload("nodejs", { name: "app", skip_install: "true" }, appTar("v1"), "half the archive", async () => {
      const found = await get("get?name=app")
      if (found.status !== 200) return false
      // the record holds the name and its port; the archive is being unpacked into its directory
      expect(found.body.status).toBe("deploying")
      port = found.body.port
      return fs.existsSync(path.join(dir, "versions/1")) && fs.readdirSync(path.join(dir, "versions/1")).some((f) => f.startsWith(".app.partial-"))
    })
    await waitFor("the cut upload undone", async () => (await get("get?name=app")).status === 404 && !fs.existsSync(dir), 30_000, 50)
    expect(await names()).not.toContain("app")
    const again = await upload("nodejs", { name: "app", skip_install: "true" }, appTar("v2"))
    expect(again.status, again.text).toBe(201)
    // the port the cut upload held is free again: the lowest free one is taken
    expect(again.body).toMatchObject({ name: "app", status: "active", version: 1, port })
    expect((await getOnHost(gw.port, again.body.domain, "/")).body).toBe("v2")
    expect(await names()).toEqual(["app"])
    expect((await gw.request("POST", "/v1/deployments/delete", { token: admin, json: { name: "app" } })).status).toBe(200)
  }, 90_000)

  it("a static site cut during its archive stores nothing and leaves no staging; the name then uploads (201)", async () => {
    const before = await usage()
    await cutUpload("static", { name: "half" }, tarOf({ "index.html": "<p>half</p>", "big.bin": randomBytes(1024 * 1024) }), "half the archive", () =>
      stagingLeft().some((d) => fs.readdirSync(path.join(gw.dataDir, "deploy-staging", d)).length > 0)
    )
    await waitFor("the staging directory removed", () => stagingLeft().length === 0, 30_000, 50)
    expect((await get("get?name=half")).status).toBe(404)
    expect(await refsOf("half")).toBe(0)
    expect(await usage()).toBe(before)
    const again = await upload("static", { name: "half" }, tarOf({ "index.html": "<p>whole</p>" }))
    expect(again.status, again.text).toBe(201)
    expect((await getOnHost(gw.port, again.body.domain, "/")).body).toBe("<p>whole</p>")
    expect(await names()).toEqual(["half"])
    expect((await gw.request("POST", "/v1/deployments/delete", { token: admin, json: { name: "half" } })).status).toBe(200)
  }, 60_000)

  it("a static site cut while its files are stored gives their references back: usage as before; the name then uploads (201)", async () => {
    const before = await usage()
    await cutUpload("static", { name: "many" }, siteTar(1500, "cut"), "all", async () => (await refsOf("many")) > 0)
    await waitFor("the stored references released", async () => (await refsOf("many")) === 0, 30_000, 50)
    expect((await get("get?name=many")).status).toBe(404)
    expect(await names()).not.toContain("many")
    expect(await usage()).toBe(before)
    expect(stagingLeft()).toEqual([])
    const again = await upload("static", { name: "many" }, tarOf({ "index.html": "<p>many</p>" }))
    expect(again.status, again.text).toBe(201)
    expect(await names()).toEqual(["many"])
    expect(await refsOf("many")).toBe(2)
  }, 90_000)
})
