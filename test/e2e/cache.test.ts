/** The cache over HTTP: exact JSON round trips, TTL, bounds, scan patterns, isolation, narrowing. */
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { hasRedisServer, redisMissingMessage, type RedisServer, startRedis } from "../support/redis.js"
import { type Gateway, type Reply, startGateway } from "../support/gateway.js"

const expectError = (reply: Reply, status: number, code?: string) => {
  expect(reply.status, reply.text).toBe(status)
  if (code !== undefined) expect(reply.body.code).toBe(code)
  expect(Object.keys(reply.body).every((k) => ["error", "code", "hint"].includes(k))).toBe(true)
}

interface EngineOptions {
  readonly maxBytes: number
  /** How much to write to be sure the bound is crossed well past it. */
  readonly fillBytes: number
  /** Redis bounds a whole server: namespaces on it share (and may evict each other's) memory. */
  readonly sharedMemory: boolean
  readonly setup?: () => Promise<Record<string, string>>
  readonly teardown?: () => Promise<void>
}

const cacheSuite = (engine: string, options: EngineOptions) =>
  describe(`cache over HTTP on ${engine}`, () => {
    let gw: Gateway
    let key: string
    let otherKey: string
    const raw = (path: string, body: string, token = key) =>
      gw.request("POST", path, { token, body, headers: { "content-type": "application/json" } })

    beforeAll(async () => {
      const env = options.setup === undefined ? {} : await options.setup()
      gw = await startGateway({ env: { ...env, PORTICO_CACHE_MAX_BYTES: String(options.maxBytes) } })
      const owner = (await gw.cli(["namespace", "create", "cachens"])).api_key
      key = (await gw.request("POST", "/v1/namespace/keys", { token: owner, json: { scopes: ["cache"] } })).body.api_key
      const other = (await gw.cli(["namespace", "create", "othercache"])).api_key
      otherKey = (await gw.request("POST", "/v1/namespace/keys", { token: other, json: { scopes: ["cache"] } })).body.api_key
    })
    afterAll(async () => {
      await gw?.stop()
      await options.teardown?.()
    })

    it("keeps every JSON value's exact text, large integers and long decimals included", async () => {
      // nesting as deep as any body may (128 levels, the value itself one below the body)
      const deep = "[".repeat(127) + "]".repeat(127)
      for (const value of ['12345678901234567890123', '1.000000000000000000001', '"text"', "true", "0", '{"a":[1,null,{"b":false}],"c":"é"}', "[]", "-0.5e-7", deep]) {
        const put = await raw("/v1/cache/put", `{"dmap":"m","key":"k","value":${value}}`)
        expect(put.body, put.text).toEqual({ status: "ok", key: "k", dmap: "m" })
        const got = await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "m", key: "k" } })
        expect(got.text).toBe(`{"key":"k","value":${value},"dmap":"m"}`)
      }
      expectError(await raw("/v1/cache/put", '{"dmap":"m","key":"k","value":null}'), 400)
      expectError(await raw("/v1/cache/put", '{"dmap":"m","key":"k"}'), 400)
      // a lone surrogate has no UTF-8 form (Redis would fold every such name into one): refused
      for (const route of ["/v1/cache/put", "/v1/cache/get", "/v1/cache/delete"]) {
        expectError(await raw(route, '{"dmap":"m","key":"\\ud800","value":1}'.replace(',"value":1', route.endsWith("put") ? ',"value":1' : "")), 400, "VALIDATION_FAILED")
      }
      expectError(await raw("/v1/cache/scan", '{"dmap":"s\\udc00"}'), 400, "VALIDATION_FAILED")
      expectError(await raw("/v1/cache/mget", '{"dmap":"m","keys":["ok","\\ud800"]}'), 400, "VALIDATION_FAILED")
      // a well-formed pair is an ordinary character
      expect((await raw("/v1/cache/put", '{"dmap":"m","key":"\\ud83d\\ude00","value":1}')).status).toBe(200)
      // an empty name says which member and why, in words
      for (const [route, body, member] of [
        ["/v1/cache/get", '{"dmap":"","key":"k"}', "dmap"],
        ["/v1/cache/put", '{"dmap":"m","key":"","value":1}', "key"]
      ] as const) {
        const reply = await raw(route, body)
        expectError(reply, 400, "VALIDATION_FAILED")
        expect(reply.body.error).toBe(`${member}: must not be empty`)
      }
    })

    it("answers misses with 404 NOT_FOUND and mget with null slots in request order", async () => {
      expectError(await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "m", key: "absent" } }), 404, "NOT_FOUND")
      expectError(await gw.request("POST", "/v1/cache/delete", { token: key, json: { dmap: "m", key: "absent" } }), 404, "NOT_FOUND")
      await raw("/v1/cache/put", '{"dmap":"mg","key":"a","value":1}')
      await raw("/v1/cache/put", '{"dmap":"mg","key":"c","value":99999999999999999999}')
      const m = await gw.request("POST", "/v1/cache/mget", { token: key, json: { dmap: "mg", keys: ["c", "b", "a"] } })
      expect(m.text).toBe('{"dmap":"mg","results":[{"key":"c","value":99999999999999999999},{"key":"b","value":null},{"key":"a","value":1}]}')
      const many = Array.from({ length: 1001 }, (_, i) => String(i))
      expectError(await gw.request("POST", "/v1/cache/mget", { token: key, json: { dmap: "mg", keys: many } }), 400)
      const del = await gw.request("POST", "/v1/cache/delete", { token: key, json: { dmap: "mg", key: "a" } })
      expect(del.body).toEqual({ status: "ok", key: "a", dmap: "mg" })
    })

    it("expires entries by ttl and refuses bad ttls without storing anything", async () => {
      await raw("/v1/cache/put", '{"dmap":"t","key":"short","value":1,"ttl":"1s"}')
      await raw("/v1/cache/put", '{"dmap":"t","key":"long","value":2,"ttl":"1h30m"}')
      await raw("/v1/cache/put", '{"dmap":"t","key":"none","value":3,"ttl":"0s"}')
      expect((await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "t", key: "short" } })).status).toBe(200)
      await new Promise((r) => setTimeout(r, 1300))
      expectError(await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "t", key: "short" } }), 404)
      expect((await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "t", key: "long" } })).status).toBe(200)
      expect((await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "t", key: "none" } })).status).toBe(200)
      const scan = await gw.request("POST", "/v1/cache/scan", { token: key, json: { dmap: "t" } })
      expect(scan.body.keys).not.toContain("short")
      for (const ttl of ["-1s", "5", "abc", "87660h1s", "1d", ""]) {
        expectError(await raw("/v1/cache/put", `{"dmap":"t","key":"bad","value":1,"ttl":"${ttl}"}`), 400, "VALIDATION_FAILED")
      }
      expectError(await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "t", key: "bad" } }), 404)
    })

    it("bounds map name + key at 255 bytes counting UTF-8, and entries at 1 MiB", async () => {
      const dmap = "é".repeat(10) // 20 bytes + 2
      const fits = "k".repeat(255 - 22)
      expect((await gw.request("POST", "/v1/cache/put", { token: key, json: { dmap, key: fits, value: 1 } })).status).toBe(200)
      const over = "k".repeat(255 - 21)
      const big = await gw.request("POST", "/v1/cache/put", { token: key, json: { dmap, key: over, value: 1 } })
      expectError(big, 413, "PAYLOAD_TOO_LARGE")
      expect(big.body.error).toContain("255")
      expectError(await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap, key: over } }), 404)
      expectError(await gw.request("POST", "/v1/cache/delete", { token: key, json: { dmap, key: over } }), 404)
      const huge = "x".repeat(1024 * 1024)
      expectError(await gw.request("POST", "/v1/cache/put", { token: key, json: { dmap: "b", key: "huge", value: huge } }), 413, "PAYLOAD_TOO_LARGE")
      expectError(await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "b", key: "huge" } }), 404)
    })

    it("scans with RE2 patterns: invalid is 400, catastrophic ones return promptly, keys never null", async () => {
      for (const k of ["user:1", "user:22", "admin:1"]) await raw("/v1/cache/put", `{"dmap":"s","key":"${k}","value":1}`)
      const users = await gw.request("POST", "/v1/cache/scan", { token: key, json: { dmap: "s", match: "^user:" } })
      expect(users.body).toEqual({ keys: ["user:1", "user:22"], count: 2, dmap: "s" })
      const none = await gw.request("POST", "/v1/cache/scan", { token: key, json: { dmap: "nothing-here" } })
      expect(none.body).toEqual({ keys: [], count: 0, dmap: "nothing-here" })
      expectError(await gw.request("POST", "/v1/cache/scan", { token: key, json: { dmap: "s", match: "(" } }), 400)
      await raw("/v1/cache/put", `{"dmap":"s","key":"${"a".repeat(200)}!","value":1}`)
      const started = Date.now()
      const evil = await gw.request("POST", "/v1/cache/scan", { token: key, json: { dmap: "s", match: "^(a+)+$" } })
      expect(evil.status).toBe(200)
      expect(Date.now() - started).toBeLessThan(2000)
      // a dmap with ':' in it never sees another dmap's keys
      await raw("/v1/cache/put", '{"dmap":"a","key":"b:c","value":1}')
      await raw("/v1/cache/put", '{"dmap":"a:b","key":"c","value":2}')
      expect((await gw.request("POST", "/v1/cache/scan", { token: key, json: { dmap: "a" } })).body.keys).toEqual(["b:c"])
      expect((await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "a:b", key: "c" } })).body.value).toBe(2)
    })

    it("isolates namespaces and honours narrowed grants", async () => {
      await raw("/v1/cache/put", '{"dmap":"iso","key":"k","value":"mine"}')
      expectError(await gw.request("POST", "/v1/cache/get", { token: otherKey, json: { dmap: "iso", key: "k" } }), 404)
      const owner = (await gw.cli(["namespace", "create", "narrowns"])).api_key
      const narrow = (await gw.request("POST", "/v1/namespace/keys", { token: owner, json: { scopes: ["cache:key=sessions/*"] } })).body.api_key
      expect((await gw.request("POST", "/v1/cache/put", { token: narrow, json: { dmap: "sessions", key: "abc", value: 1 } })).status).toBe(200)
      expectError(await gw.request("POST", "/v1/cache/put", { token: narrow, json: { dmap: "other", key: "abc", value: 1 } }), 403)
      expectError(await gw.request("POST", "/v1/cache/mget", { token: narrow, json: { dmap: "other", keys: ["abc"] } }), 403)
      // another map whose name starts with the narrowed one is another map
      expectError(await gw.request("POST", "/v1/cache/put", { token: narrow, json: { dmap: "sessions/admin", key: "x", value: 1 } }), 403, "GRANT_REQUIRED")
      expect((await gw.request("POST", "/v1/cache/put", { token: narrow, json: { dmap: "sessions", key: "a/b", value: 1 } })).status).toBe(200)
      // scan: the narrowed map answers, any other map is refused rather than shown empty
      expect((await gw.request("POST", "/v1/cache/scan", { token: narrow, json: { dmap: "sessions" } })).body.keys).toEqual(["a/b", "abc"])
      expectError(await gw.request("POST", "/v1/cache/scan", { token: narrow, json: { dmap: "other" } }), 403, "GRANT_REQUIRED")
      // a narrowing that reaches nothing, or holds a control character, is not minted
      for (const scope of ["cache:key=sessions", "cache:key=sessions\u0000/*", "cache:key=s\ud800/*"]) {
        expectError(await gw.request("POST", "/v1/namespace/keys", { token: owner, json: { scopes: [scope] } }), 400, "VALIDATION_FAILED")
      }
      const runtime = (await gw.request("POST", "/v1/namespace/keys", { token: owner, json: { profile: "runtime" } })).body.api_key
      expectError(await gw.request("POST", "/v1/cache/get", { token: runtime, json: { dmap: "sessions", key: "abc" } }), 403, "GRANT_REQUIRED")
      expect((await gw.request("GET", "/v1/cache/health", { token: key })).body).toEqual({ status: "ok", service: "cache" })
      expectError(await gw.request("GET", "/v1/cache/health"), 401)
    })

    it("evicts least recently used entries past the namespace's memory bound", async () => {
      await raw("/v1/cache/put", '{"dmap":"keep","key":"k","value":"theirs"}', otherKey)
      const value = JSON.stringify("v".repeat(100 * 1024))
      const count = Math.ceil(options.fillBytes / (100 * 1024))
      for (let i = 0; i < count; i++) await raw("/v1/cache/put", `{"dmap":"lru","key":"k${i}","value":${value}}`)
      // Redis evicts by sampling: most early keys are gone, the newest are all there.
      let early = 0
      for (let i = 0; i < 5; i++) {
        if ((await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "lru", key: `k${i}` } })).status === 200) early++
      }
      expect(early).toBeLessThanOrEqual(options.sharedMemory ? 2 : 0)
      expect((await gw.request("POST", "/v1/cache/get", { token: key, json: { dmap: "lru", key: `k${count - 1}` } })).status).toBe(200)
      if (!options.sharedMemory) {
        // another namespace's entries are not evicted by this one's writes
        expect((await gw.request("POST", "/v1/cache/get", { token: otherKey, json: { dmap: "keep", key: "k" } })).body.value).toBe("theirs")
      }
    })
  })

cacheSuite("the embedded engine", { maxBytes: 4 * 1024 * 1024, fillBytes: 8 * 1024 * 1024, sharedMemory: false })

let redis: RedisServer | undefined
cacheSuite("Redis", {
  maxBytes: 4 * 1024 * 1024,
  fillBytes: 32 * 1024 * 1024,
  sharedMemory: true,
  setup: async () => {
    if (!hasRedisServer()) throw new Error(redisMissingMessage())
    redis = await Effect.runPromise(startRedis({ maxmemory: "8mb" }))
    return { PORTICO_REDIS_URL: redis.url }
  },
  teardown: async () => {
    if (redis !== undefined) await Effect.runPromise(redis.stop)
  }
})

describe("an embedded cache bound smaller than the 1 MiB entry limit", () => {
  it("refuses an entry larger than the whole bound with 413 and keeps the old value", async () => {
    const gw = await startGateway({ env: { PORTICO_CACHE_MAX_BYTES: String(64 * 1024) } })
    try {
      const owner = (await gw.cli(["namespace", "create", "tinycache"])).api_key
      const put = (value: string) => gw.request("POST", "/v1/cache/put", { token: owner, json: { dmap: "m", key: "k", value } })
      expect((await put("old")).status).toBe(200)
      const refused = await put("v".repeat(64 * 1024))
      expectError(refused, 413, "PAYLOAD_TOO_LARGE")
      expect(refused.body.error).toContain("cache bound")
      // before: 200, nothing stored, and the old value gone with it
      expect((await gw.request("POST", "/v1/cache/get", { token: owner, json: { dmap: "m", key: "k" } })).body.value).toBe("old")
      // one that fits is kept
      expect((await put("v".repeat(32 * 1024))).status).toBe(200)
      expect((await gw.request("POST", "/v1/cache/get", { token: owner, json: { dmap: "m", key: "k" } })).body.value).toHaveLength(32 * 1024)
    } finally {
      await gw.stop()
    }
  }, 60_000)
})

describe("the gateway against a Redis that would not evict", () => {
  it("refuses to start and says why", async () => {
    if (!hasRedisServer()) throw new Error(redisMissingMessage())
    const refusing = await Effect.runPromise(startRedis({ policy: "noeviction" }))
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "portico-noevict-"))
    try {
      const run = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts", "serve", "--port", "0", "--data-dir", dataDir], {
        env: { ...process.env, PORTICO_REDIS_URL: refusing.url },
        encoding: "utf8",
        timeout: 60_000
      })
      expect(run.status).toBe(1)
      expect(run.stderr).toContain("RedisCacheRefused")
      expect(run.stderr).toContain("noeviction")
    } finally {
      await Effect.runPromise(refusing.stop)
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 90_000)
})

describe("a namespace with a Redis deployment of its own (PORTICO_REDIS_URLS)", () => {
  it("keeps its memory bound to itself: filling it evicts only its own entries", async () => {
    if (!hasRedisServer()) throw new Error(redisMissingMessage())
    const shared = await Effect.runPromise(startRedis({ maxmemory: "64mb" }))
    const own = await Effect.runPromise(startRedis({ maxmemory: "4mb" }))
    const gw = await startGateway({ env: { PORTICO_REDIS_URL: shared.url, PORTICO_REDIS_URLS: `bigcache=${own.url}` } })
    try {
      const small = (await gw.cli(["namespace", "create", "smallcache"])).api_key
      const big = (await gw.cli(["namespace", "create", "bigcache"])).api_key
      const put = (token: string, key: string, value: string) =>
        gw.request("POST", "/v1/cache/put", { token, json: { dmap: "m", key, value } })
      expect((await put(small, "keep", "mine")).status).toBe(200)
      const filler = "v".repeat(100 * 1024)
      for (let i = 0; i < 120; i++) expect((await put(big, `k${i}`, filler)).status).toBe(200)
      // the big namespace evicted within its own deployment; the other one was never touched
      expect((await gw.request("POST", "/v1/cache/get", { token: small, json: { dmap: "m", key: "keep" } })).body.value).toBe("mine")
      // (Redis samples for LRU: most early entries are gone, a few may stay; the newest stays)
      const early = await gw.request("POST", "/v1/cache/mget", { token: big, json: { dmap: "m", keys: Array.from({ length: 40 }, (_, i) => `k${i}`) } })
      expect(early.body.results.filter((r: { value: unknown }) => r.value !== null).length).toBeLessThan(20)
      expect((await gw.request("POST", "/v1/cache/get", { token: big, json: { dmap: "m", key: "k119" } })).status).toBe(200)
    } finally {
      await gw.stop()
      await Effect.runPromise(shared.stop)
      await Effect.runPromise(own.stop)
    }
  }, 90_000)
})
