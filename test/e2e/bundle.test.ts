/**
 * The gateway as `npm start` runs it: bin/portico.mjs on the esbuild bundle in dist/bundle/
 * (scripts/build.mjs). The other suites run src/ through tsx, so this one walks the parts the
 * bundle lays out differently: the SQLite worker, a process started from its own bundled entry;
 * the chunks imported on first use (the UnixFS importer on the first upload, the OpenAPI document
 * and the docs page; ioredis, for the cache and the shared rate limits on Redis); the version
 * read from package.json; an error's envelope.
 */
import { Effect } from "effect"
import { Wallet } from "ethers"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureDist, repoRoot } from "../support/cli.js"
import { signIn } from "../support/client.js"
import { type Gateway, startGateway } from "../support/gateway.js"
import { startRedis } from "../support/redis.js"

describe("the bundled gateway (npm start)", () => {
  let gw: Gateway
  let owner: string
  const wallet = Wallet.createRandom()
  beforeAll(async () => {
    ensureDist()
    gw = await startGateway({ bundled: true })
    owner = (await gw.cli(["namespace", "create", "bundled", "--owner", wallet.address])).api_key
  }, 180_000)
  afterAll(async () => {
    expect(await gw?.stop()).toBe(0)
  })

  it("runs from dist/bundle/ and reports package.json's version", async () => {
    const status = await gw.request("GET", "/v1/status")
    expect(status.status).toBe(200)
    expect(status.body.version).toBe(JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")).version)
  })

  it("answers node-local SQL from the bundled SQLite worker", async () => {
    const post = (route: string, json: unknown) => gw.request("POST", route, { token: owner, json })
    expect((await post("/v1/db/sqlite/create", { database_name: "b" })).status).toBe(201)
    expect((await post("/v1/db/sqlite/query", { database_name: "b", query: "CREATE TABLE t (v TEXT)" })).status).toBe(200)
    expect((await post("/v1/db/sqlite/query", { database_name: "b", query: "INSERT INTO t VALUES (?)", params: ["x"] })).status).toBe(200)
    const read = await post("/v1/db/sqlite/query", { database_name: "b", query: "SELECT v FROM t" })
    expect(read.status, read.text).toBe(200)
    expect(read.text).toContain('"x"')
  })

  it("stores an upload through the importer loaded on first use, and gives it back", async () => {
    // storage takes a signed-in user's session, not a key
    const token = (await signIn(gw, "bundled", wallet)).access_token
    const form = new FormData()
    form.append("file", new Blob(["bundled bytes"]), "b.txt")
    const res = await fetch(gw.url + "/v1/storage/upload", { method: "POST", body: form, headers: { authorization: `Bearer ${token}` } })
    const text = await res.text()
    expect(res.status, text).toBe(200)
    const cid = (JSON.parse(text) as { Cid: string }).Cid
    const back = await fetch(`${gw.url}/v1/storage/get/${cid}`, { headers: { authorization: `Bearer ${token}` } })
    expect(await back.text()).toBe("bundled bytes")
  })

  it("builds the OpenAPI document and the docs page on first request", async () => {
    const doc = await gw.request("GET", "/v1/openapi.json")
    expect(doc.status).toBe(200)
    expect(doc.body.paths["/v1/db/sqlite/query"]).toBeDefined()
    const page = await fetch(gw.url + "/v1/docs")
    expect(page.status).toBe(200)
    const html = await page.text()
    expect(html.startsWith("<!doctype html>") || html.startsWith("<!DOCTYPE html>"), html.slice(0, 80)).toBe(true)
    expect(html).toContain("/v1/db/sqlite/query")
  })

  it("refuses with the one error envelope", async () => {
    const reply = await gw.request("POST", "/v1/db/sqlite/query", { token: owner, json: { database_name: "b" } })
    expect(reply.status).toBe(400)
    expect(reply.body).toMatchObject({ code: "VALIDATION_FAILED" })
    expect(Object.keys(reply.body).sort()).toEqual(expect.arrayContaining(["code", "error"]))
  })

  it("starts on Redis (cache and shared rate limits load ioredis from their chunk) and keeps a value there", async () => {
    const redis = await Effect.runPromise(startRedis())
    let onRedis: Gateway | undefined
    try {
      onRedis = await startGateway({ bundled: true, env: { PORTICO_REDIS_URL: redis.url, PORTICO_RATE_LIMIT: "true" } })
      const key = (await onRedis.cli(["namespace", "create", "cached"])).api_key
      const put = await onRedis.request("POST", "/v1/cache/put", { token: key, json: { dmap: "m", key: "k", value: "v" } })
      expect(put.status, put.text).toBe(200)
      const got = await onRedis.request("POST", "/v1/cache/get", { token: key, json: { dmap: "m", key: "k" } })
      expect(got.body).toMatchObject({ value: "v" })
    } finally {
      await onRedis?.stop()
      await Effect.runPromise(redis.stop)
    }
  }, 120_000)
})
