/**
 * Which requests the fast lane answers itself and which it leaves to the HttpApi app, over the
 * real services on a temp data dir. That its answers are the app's is test/e2e/fastlane.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, type Exit, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import type * as http from "node:http"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { type FastLane, makeFastLane } from "../../src/api/FastLane.js"
import { Authenticator } from "../../src/layers/auth/Authenticator.js"
import { type PorticoSettings, testSettings } from "../../src/layers/config/PorticoConfig.js"
import { ApiKeys } from "../../src/layers/keys/ApiKeys.js"
import { CorsOrigins } from "../../src/layers/namespaces/CorsOrigins.js"
import { Namespaces } from "../../src/layers/namespaces/Namespaces.js"
import { RateLimiter } from "../../src/layers/ratelimit/RateLimiter.js"
import { RegistryStore } from "../../src/layers/registry/RegistryStore.js"
import { ClusterSql, type ClusterSqlService } from "../../src/layers/sql/ClusterSql.js"
import { LocalDatabases } from "../../src/layers/sql/LocalDatabases.js"
import { servicesLayer } from "../../src/layers/Services.js"
import { refuse } from "../../src/layers/Refused.js"
import { GateLive } from "../../src/api/gate/Gate.js"
import { RequestMeta } from "../../src/api/RequestMeta.js"

interface Written {
  status: number
  headers: Record<string, unknown>
  body: string
}

/** What the lane reads of node's request and writes to its response, nothing more. */
const exchange = (method: string, url: string, token: string | undefined) => {
  const req = {
    method,
    url,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    socket: { remoteAddress: "127.0.0.1" }
  } as unknown as http.IncomingMessage
  // the listener charges the client network at the headers, before the lane (src/api/BodyGuard.ts)
  RequestMeta.markClientCharged(req)
  const written: Written = { status: 0, headers: {}, body: "" }
  const res = {
    destroyed: false,
    socket: { destroyed: false },
    writeHead: (status: number, headers: Record<string, unknown>) => {
      written.status = status
      written.headers = headers
    },
    end: (text: string) => {
      written.body = text
    }
  } as unknown as http.ServerResponse
  return { req, res, written }
}

const call = (lane: FastLane, method: string, url: string, token: string | undefined, body?: string) => {
  const { req, res, written } = exchange(method, url, token)
  const status = lane(req, res, body === undefined ? undefined : Buffer.from(body))
  return { status, written }
}

/** The gateway's services as Services.ts wires them, with the SQLite workers in this process. */
const laneServices = (settings: PorticoSettings) => servicesLayer(settings, { sqliteWorkers: "in-process" })

const withGateway = <A, E>(
  patch: Partial<PorticoSettings>,
  use: (lane: FastLane, keys: { owner: string; cache: string; runtime: string; revoke: (key: string) => Effect.Effect<void, unknown> }) => Effect.Effect<A, E, any>,
  /** A stand-in cluster SQL service, or none at all (no SQL services in the gateway). */
  sql?: ClusterSqlService | "none"
) =>
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-lane-"))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
    )
    const context = yield* Layer.build(laneServices(testSettings(dir, patch)))
    return yield* Effect.gen(function* () {
      const created = yield* Effect.flatMap(Namespaces, (ns) => ns.create("lane", undefined, "test"))
      const store = yield* RegistryStore
      const apiKeys = yield* ApiKeys
      const mint = (scopes: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const minted = yield* apiKeys.prepare({ namespace: "lane", role: "custom", scopes, label: "t", expiresAt: undefined, createdBy: "test" })
          yield* store.exec(minted.statement)
          return minted.apiKey
        })
      const keys = {
        owner: created.ownerKey.apiKey,
        cache: yield* mint(["cache"]),
        runtime: yield* mint(["invoke"]),
        revoke: (key: string) => store.exec(apiKeys.revokeStatement("lane", key.slice("portico_".length, "portico_".length + 20), Date.now()))
      }
      const lane = yield* (sql === undefined
        ? makeFastLane
        : sql === "none"
          ? Effect.mapInputContext(makeFastLane, Context.omit(ClusterSql, LocalDatabases))
          : Effect.provideService(makeFastLane, ClusterSql, sql)
      ).pipe(Effect.provide(GateLive))
      return yield* use(lane, keys)
    }).pipe(Effect.provide(context))
  })

describe("the fast lane", () => {
  it.scopedLive("answers whoami for an API key and a token it verified before, and leaves the rest to the app", () =>
    withGateway({}, (lane, keys) =>
      Effect.gen(function* () {
        const whoami = call(lane, "GET", "/v1/auth/whoami", keys.owner)
        expect(whoami.status).toBe(200)
        expect(JSON.parse(whoami.written.body)).toMatchObject({ namespace: "lane", method: "api_key", role: "owner" })
        expect(whoami.written.headers).toEqual({ "content-type": "application/json", "content-length": Buffer.byteLength(whoami.written.body) })

        // a token is verified by the app the first time (a signature check is not done on the spot)
        const authenticator = yield* Authenticator
        const apiKeys = yield* ApiKeys
        const record = yield* apiKeys.authenticate(keys.owner)
        const token = yield* authenticator.exchange(record.pipe((o) => (o._tag === "Some" ? o.value : expect.fail("key"))))
        expect(call(lane, "GET", "/v1/auth/whoami", token).status).toBeUndefined()
        yield* authenticator.authenticate(token)
        expect(call(lane, "GET", "/v1/auth/whoami", token).status).toBe(200)

        for (const [url, token] of [
          ["/v1/auth/whoami", undefined],
          ["/v1/auth/whoami", keys.owner.slice(0, -1) + (keys.owner.endsWith("A") ? "B" : "A")],
          ["/v1/auth/whoami?x=1", keys.owner],
          ["/v1/auth/whoami/", keys.owner],
          ["/v1/auth/jwks", keys.owner]
        ] as const) {
          expect(call(lane, "GET", url, token).status, `${url} ${token}`).toBeUndefined()
        }
        expect(call(lane, "HEAD", "/v1/auth/whoami", keys.owner).status).toBeUndefined()
      })
    )
  )

  it.scopedLive("answers the embedded cache's routes, misses and refusals of its rules included", () =>
    withGateway({}, (lane, keys) =>
      Effect.sync(() => {
        const put = call(lane, "POST", "/v1/cache/put", keys.cache, '{"dmap":"m","key":"k","value":[1,12345678901234567890]}')
        expect(put).toMatchObject({ status: 200, written: { body: '{"status":"ok","key":"k","dmap":"m"}' } })
        expect(call(lane, "POST", "/v1/cache/get", keys.cache, '{"dmap":"m","key":"k"}').written.body).toBe(
          '{"key":"k","value":[1,12345678901234567890],"dmap":"m"}'
        )
        expect(call(lane, "POST", "/v1/cache/mget", keys.cache, '{"dmap":"m","keys":["k","x"]}').written.body).toBe(
          '{"dmap":"m","results":[{"key":"k","value":[1,12345678901234567890]},{"key":"x","value":null}]}'
        )
        expect(call(lane, "POST", "/v1/cache/get", keys.cache, '{"dmap":"m","key":"x"}')).toMatchObject({ status: 404 })
        expect(call(lane, "POST", "/v1/cache/put", keys.cache, '{"dmap":"m","key":"k","value":1,"ttl":"soon"}')).toMatchObject({ status: 400 })
        expect(call(lane, "POST", "/v1/cache/delete", keys.cache, '{"dmap":"m","key":"k"}')).toMatchObject({ status: 200 })
        expect(call(lane, "POST", "/v1/cache/delete", keys.cache, '{"dmap":"m","key":"k"}')).toMatchObject({ status: 404 })

        // what the app must answer: bodies that do not decode, a policy refusal, a route it lacks
        for (const [url, token, body] of [
          ["/v1/cache/put", keys.cache, '{"dmap":"m","key":"k","value":null}'],
          ["/v1/cache/put", keys.cache, '{"dmap":"m","key":"k","value":1,"value":2}'],
          ["/v1/cache/put", keys.cache, '{"dmap":"m","key":"k","value":1,"other":1}'],
          ["/v1/cache/put", keys.cache, "not json"],
          ["/v1/cache/put", keys.runtime, '{"dmap":"m","key":"k","value":1}'],
          ["/v1/cache/scan", keys.cache, '{"dmap":"m"}']
        ] as const) {
          expect(call(lane, "POST", url, token, body).status, body).toBeUndefined()
        }
      })
    )
  )

  it.scopedLive("leaves a revoked key to the app at its next request", () =>
    withGateway({}, (lane, keys) =>
      Effect.gen(function* () {
        for (let i = 0; i < 3; i++) expect(call(lane, "GET", "/v1/auth/whoami", keys.cache).status).toBe(200)
        yield* keys.revoke(keys.cache)
        expect(call(lane, "GET", "/v1/auth/whoami", keys.cache).status).toBeUndefined()
      })
    )
  )

  // the client network is charged by the listener when the headers arrive (src/api/BodyGuard.ts),
  // for both request paths: the lane charges the namespace only
  it.scopedLive("charges the namespace's rate limit only once its limit is known, then refuses with 429", () =>
    withGateway(
      { rateLimit: { enabled: true, perClientNetwork: { rps: 1, burst: 1 }, perNamespace: { rps: 1, burst: 2 }, perWallet: { rps: 1, burst: 1 } } },
      (lane, keys) =>
        Effect.gen(function* () {
          // the namespace's own limit has not been read yet: nothing is charged, the app reads it
          for (let i = 0; i < 5; i++) expect(call(lane, "GET", "/v1/auth/whoami", keys.owner).status).toBeUndefined()
          yield* Effect.flatMap(RateLimiter, (limiter) => limiter.limitOf("lane"))
          expect(call(lane, "GET", "/v1/auth/whoami", keys.owner).status).toBe(200)
          expect(call(lane, "GET", "/v1/auth/whoami", keys.owner).status).toBe(200)
          const limited = call(lane, "GET", "/v1/auth/whoami", keys.owner)
          expect(limited.status).toBe(429)
          expect(limited.written.headers["retry-after"]).toBe("1")
          expect(JSON.parse(limited.written.body)).toEqual({ error: "too many requests from this namespace", code: "RATE_LIMITED", hint: "retry after 1 s" })
        })
    )
  )

  describe("cluster SQL statements", () => {
    // The service itself is the real one in test/e2e (databases, fastlane); here a stand-in
    // that answers after a pause shows what the lane does with an answer that comes later.
    const seen: Array<string> = []
    const later = <A>(effect: Effect.Effect<A, ReturnType<typeof refuse>>) => Effect.zipRight(Effect.sleep("20 millis"), effect)
    const statement = (kind: string) => (_caller: unknown, sql: string, args: ReadonlyArray<unknown>) => {
      seen.push(`${kind} ${sql} ${JSON.stringify(args, (_, v: unknown) => (typeof v === "bigint" ? `${v}n` : v))}`)
      if (sql === "SELECT 1") return later(Effect.succeed('{"columns":["1"],"rows":[[1]],"count":1}'))
      if (sql === "busy") return later(Effect.fail(refuse("UNAVAILABLE", "the SQL store is unavailable", "retry shortly", 7)))
      if (sql === "bug") return later(Effect.die(new Error("a defect")))
      return later(Effect.fail(refuse("SQL_ERROR", "no such table: x")))
    }
    const stand = {
      statementNow: (caller: unknown, sql: string, args: ReadonlyArray<unknown>, expect: "read" | "write", done: (exit: Exit.Exit<string, unknown>) => void) =>
        Effect.runCallback(statement(expect === "read" ? "query" : "exec")(caller, sql, args), { onExit: done })
    } as unknown as ClusterSqlService

    /** Calls the lane as the adapter does, and waits for the answer it gives later. */
    const callLater = (lane: FastLane, url: string, token: string, body: string) =>
      Effect.async<{ readonly returned: number | "later" | undefined; readonly answered: number; readonly written: Written }>((resume) => {
        const { req, res, written } = exchange("POST", url, token)
        let returned: number | "later" | undefined
        returned = lane(req, res, Buffer.from(body), {
          laneAnswered: (answered) => {
            // nothing was written before the answer came
            resume(Effect.succeed({ returned, answered, written: { ...written } }))
          }
        })
        expect(written.status).toBe(0)
        if (returned !== "later") resume(Effect.succeed({ returned, answered: 0, written }))
      })

    it.scopedLive("answers query and exec when the store has, with the app's answer, refusal or 500", () =>
      withGateway(
        {},
        (lane, keys) =>
          Effect.gen(function* () {
            const ok = yield* callLater(lane, "/v1/rqlite/query", keys.owner, '{"sql":"SELECT 1","args":[1,"a",null,true,9223372036854775807]}')
            expect(ok).toEqual({
              returned: "later",
              answered: 200,
              written: {
                status: 200,
                headers: { "content-type": "application/json", "content-length": 40 },
                body: '{"columns":["1"],"rows":[[1]],"count":1}'
              }
            })
            expect(seen).toEqual(['query SELECT 1 [1,"a",null,true,"9223372036854775807n"]'])

            const busy = yield* callLater(lane, "/v1/rqlite/exec", keys.owner, '{"sql":"busy"}')
            expect(busy.answered).toBe(503)
            expect(busy.written.headers["retry-after"]).toBe("7")
            expect(JSON.parse(busy.written.body)).toEqual({ error: "the SQL store is unavailable", code: "UNAVAILABLE", hint: "retry shortly" })

            const failed = yield* callLater(lane, "/v1/rqlite/query", keys.owner, '{"sql":"SELECT * FROM x"}')
            expect(failed.written).toMatchObject({ status: 400, body: '{"error":"no such table: x","code":"SQL_ERROR"}' })
            expect(failed.written.headers["retry-after"]).toBeUndefined()

            const defect = yield* callLater(lane, "/v1/rqlite/query", keys.owner, '{"sql":"bug"}')
            expect(defect.written).toMatchObject({ status: 500, body: '{"error":"internal error","code":"INTERNAL"}' })

            // left to the app: a caller without the grant, a body the schema refuses, a query string
            seen.length = 0
            for (const [url, token, body] of [
              ["/v1/rqlite/query", keys.cache, '{"sql":"SELECT 1"}'],
              ["/v1/rqlite/query", keys.owner, '{"sql":"SELECT 1","extra":1}'],
              ["/v1/rqlite/query", keys.owner, '{"sql":"SELECT 1","args":[18446744073709551616]}'],
              ["/v1/rqlite/query", keys.owner, '{"sql":"SELECT 1","sql":"SELECT 2"}'],
              ["/v1/rqlite/query?x=1", keys.owner, '{"sql":"SELECT 1"}']
            ] as const) {
              expect((yield* callLater(lane, url, token, body)).returned, `${url} ${body}`).toBeUndefined()
            }
            expect(seen).toEqual([])
          }),
        stand
      )
    )

    // the real services: the embedded cluster SQL store and a node-local database, on the SQLite
    // worker's code run in this process (no worker process starts under this test)
    it.scopedLive("answers cluster SQL and node-local statements from the real services, wide integers exact", () =>
      withGateway({}, (lane, keys) =>
        Effect.gen(function* () {
          const exec = yield* callLater(lane, "/v1/rqlite/exec", keys.owner, '{"sql":"CREATE TABLE lane_t (id INTEGER PRIMARY KEY, v TEXT)"}')
          expect(exec.written.status, exec.written.body).toBe(200)
          const insert = yield* callLater(lane, "/v1/rqlite/exec", keys.owner, '{"sql":"INSERT INTO lane_t (id, v) VALUES (?, ?)","args":[9223372036854775807,"max"]}')
          expect(JSON.parse(insert.written.body)).toMatchObject({ rows_affected: 1 })
          const read = yield* callLater(lane, "/v1/rqlite/query", keys.owner, '{"sql":"SELECT id, v FROM lane_t"}')
          expect(read).toMatchObject({ returned: "later", answered: 200 })
          expect(read.written.body).toContain("[[9223372036854775807,\"max\"]]")
          const missing = yield* callLater(lane, "/v1/rqlite/query", keys.owner, '{"sql":"SELECT * FROM nowhere"}')
          expect(missing.written).toMatchObject({ status: 400 })
          expect(JSON.parse(missing.written.body)).toMatchObject({ code: "SQL_ERROR" })

          const owner = yield* Effect.flatMap(Authenticator, (a) => a.authenticate(keys.owner))
          yield* Effect.flatMap(LocalDatabases, (local) => local.create(owner, "lanedb"))
          const query = (sql: string) => JSON.stringify({ database_name: "lanedb", query: sql })
          expect((yield* callLater(lane, "/v1/db/sqlite/query", keys.owner, query("CREATE TABLE t (n INTEGER)"))).answered).toBe(200)
          expect((yield* callLater(lane, "/v1/db/sqlite/query", keys.owner, query("INSERT INTO t (n) VALUES (41), (1)"))).answered).toBe(200)
          const sum = yield* callLater(lane, "/v1/db/sqlite/query", keys.owner, query("SELECT sum(n) AS s FROM t"))
          expect(sum).toMatchObject({ returned: "later", answered: 200 })
          expect(JSON.parse(sum.written.body)).toMatchObject({ rows: [[42]] })
        })
      )
    )

    it.scopedLive("leaves the SQL routes to the app when the gateway has no SQL service", () =>
      withGateway(
        {},
        (lane, keys) => Effect.sync(() => expect(call(lane, "POST", "/v1/rqlite/query", keys.owner, '{"sql":"SELECT 1"}').status).toBeUndefined()),
        "none"
      )
    )
  })

  it.scopedLive("answers a browser's request with the CORS headers of the caller's namespace, once its origins are known", () =>
    withGateway({}, (lane, keys) =>
      Effect.gen(function* () {
        const origins = yield* CorsOrigins
        yield* origins.set("lane", ["https://app.example"], "test")
        const browser = (origin: string) => {
          const { req, res, written } = exchange("GET", "/v1/auth/whoami", keys.owner)
          ;(req.headers as Record<string, string>)["origin"] = origin
          const set: Record<string, string> = {}
          ;(res as unknown as { setHeader: (n: string, v: string) => void }).setHeader = (n, v) => {
            set[n] = v
          }
          return { status: lane(req, res, undefined), written, set }
        }
        // not read yet on this gateway: the app answers (and reads them)
        expect(browser("https://app.example").status).toBeUndefined()
        yield* origins.get("lane")
        const allowed = browser("https://app.example")
        expect(allowed.status).toBe(200)
        expect(allowed.set).toMatchObject({ "access-control-allow-origin": "https://app.example", vary: "Origin" })
        expect(allowed.set["access-control-expose-headers"]).toContain("retry-after")
        const other = browser("https://evil.example")
        expect(other.status).toBe(200)
        expect(other.set).toEqual({ vary: "Origin" })
        // without Origin nothing is added
        expect(call(lane, "GET", "/v1/auth/whoami", keys.owner).status).toBe(200)
      })
    )
  )
})
