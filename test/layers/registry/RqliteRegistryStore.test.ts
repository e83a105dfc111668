import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Redacted } from "effect"
import type { Scope } from "effect"
import { createServer } from "node:http"
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { migrations } from "../../../src/layers/registry/migrations.js"
import { RqliteRegistryStore } from "../../../src/layers/registry/RqliteRegistryStore.js"
import type { RqliteConfig } from "../../../src/layers/registry/RqliteRegistryStore.js"
import { hasRqlited, rqlited, rqlitedMissingMessage } from "../../support/rqlited.js"
import { registryStoreSuite } from "./RegistryStore.suite.js"

/** Short deadlines so failure paths are quick; a healthy local node answers in milliseconds. */
const testConfig = (url: string, patch?: Partial<RqliteConfig>): RqliteConfig => ({
  url,
  timeout: Duration.seconds(2),
  ...patch
})

/** A local HTTP server for failure paths; `handler` decides what rqlite "answers". */
const localServer = (
  handler: (request: IncomingMessage, response: ServerResponse) => void
): Effect.Effect<{ readonly url: string; readonly requests: () => number }, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ server: Server; url: string; requests: () => number }, Error>((resume) => {
      let count = 0
      const server = createServer((request, response) => {
        count += 1
        handler(request, response)
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({ server, url: `http://127.0.0.1:${port}`, requests: () => count }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ url, requests }) => ({ url, requests })))

if (!hasRqlited()) {
  // CI installs rqlited; a machine without it must say so instead of passing quietly.
  describe("RqliteRegistryStore", () => {
    it("needs the rqlited binary", () => {
      expect.fail(rqlitedMissingMessage())
    })
  })
} else {
  registryStoreSuite("RqliteRegistryStore", {
    provision: Effect.map(rqlited(), (server) => () => RqliteRegistryStore.layer(testConfig(server.url)))
  })

  describe("RqliteRegistryStore specifics", () => {
    it.scopedLive("records migrations in portico_migrations and reports engine `rqlite`", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const store = Context.get(yield* Layer.build(RqliteRegistryStore.layer(testConfig(server.url))), RegistryStore)
        expect(store.engine).toBe("rqlite")
        const rows = yield* store.query({ sql: "SELECT id, name, applied_at FROM portico_migrations ORDER BY id" })
        expect(rows.map((row) => [row["id"], row["name"]])).toEqual(migrations.map((m) => [m.id, m.name]))
        expect(typeof rows[0]?.["applied_at"]).toBe("number")
      })
    )

    it.scopedLive("a stopped server maps to `unavailable` within the retry budget", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const store = Context.get(
          yield* Layer.build(RqliteRegistryStore.layer(testConfig(server.url, { timeout: Duration.millis(500), retries: 2 }))),
          RegistryStore
        )
        yield* server.stop
        const started = Date.now()
        const queryError = yield* Effect.flip(store.query({ sql: "SELECT 1 AS one" }))
        const execError = yield* Effect.flip(store.exec({ sql: "CREATE TABLE IF NOT EXISTS x (y INTEGER)" }))
        const batchError = yield* Effect.flip(store.batch([{ sql: "CREATE TABLE IF NOT EXISTS x (y INTEGER)" }]))
        expect([queryError.reason, execError.reason, batchError.reason]).toEqual(["unavailable", "unavailable", "unavailable"])
        // Connection refused is immediate: three calls, each with 2 jittered backoffs (~0.1 s, ~0.2 s).
        expect(Date.now() - started).toBeLessThan(3_000)
      })
    )

    it.scopedLive("a server that never answers times out as `unavailable`; only reads are retried", () =>
      Effect.gen(function* () {
        // Accepts requests and never responds, like a wedged node.
        const silent = yield* localServer(() => {})
        const store = RqliteRegistryStore.make(testConfig(silent.url, { timeout: Duration.millis(200), retries: 2 }))
        const started = Date.now()
        const execError = yield* Effect.flip(store.exec({ sql: "INSERT INTO t VALUES (1)" }))
        expect(execError.reason).toBe("unavailable")
        // A write that may have reached the leader is not sent twice.
        expect(silent.requests()).toBe(1)
        const queryError = yield* Effect.flip(store.query({ sql: "SELECT 1" }))
        expect(queryError.reason).toBe("unavailable")
        expect(silent.requests()).toBe(1 + 3)
        expect(Date.now() - started).toBeLessThan(3_000)
      })
    )

    it.scopedLive("503 (no leader) is retried, even for writes, then reported `unavailable`", () =>
      Effect.gen(function* () {
        const noLeader = yield* localServer((_request, response) => {
          response.writeHead(503, { "content-type": "text/plain" })
          response.end("leader not found")
        })
        const store = RqliteRegistryStore.make(testConfig(noLeader.url, { retries: 2 }))
        const error = yield* Effect.flip(store.exec({ sql: "INSERT INTO t VALUES (1)" }))
        expect(error.reason).toBe("unavailable")
        expect(error.detail).toContain("leader not found")
        expect(noLeader.requests()).toBe(3)
      })
    )

    it.scopedLive("follows a leader redirect, re-posting the same statements", () =>
      Effect.gen(function* () {
        const server = yield* rqlited()
        const follower = yield* localServer((request, response) => {
          response.writeHead(301, { location: `${server.url}${request.url ?? "/"}` })
          response.end()
        })
        // Migrate through the real node, then talk only to the "follower".
        yield* Layer.build(RqliteRegistryStore.layer(testConfig(server.url)))
        const store = RqliteRegistryStore.make(testConfig(follower.url))
        yield* store.exec({ sql: "INSERT INTO namespaces (name, created_at) VALUES (?, ?)", params: ["via-redirect", 7] })
        expect(yield* store.query({ sql: "SELECT name, created_at FROM namespaces" })).toEqual([
          { name: "via-redirect", created_at: 7 }
        ])
        expect(follower.requests()).toBe(2)
      })
    )

    it.scopedLive("sends basic-auth credentials when configured", () =>
      Effect.gen(function* () {
        let seen: string | undefined
        const recorder = yield* localServer((request, response) => {
          seen = request.headers.authorization
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify({ results: [{ rows_affected: 1, last_insert_id: 9 }] }))
        })
        const store = RqliteRegistryStore.make(testConfig(recorder.url, { user: "portico", password: Redacted.make("s3cret") }))
        expect(yield* store.exec({ sql: "INSERT INTO t VALUES (1)" })).toEqual({ rowsAffected: 1, lastInsertId: 9 })
        expect(seen).toBe(`Basic ${Buffer.from("portico:s3cret").toString("base64")}`)
      })
    )

    it.scopedLive("sends a URL's user and password as basic auth (tenants' rqlite URLs carry them there)", () =>
      Effect.gen(function* () {
        let seen: string | undefined
        const recorder = yield* localServer((request, response) => {
          seen = request.headers.authorization
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify({ results: [{ rows_affected: 1, last_insert_id: 3 }] }))
        })
        const withCredentials = recorder.url.replace("http://", "http://ten%40ant:p%3Ass@")
        const store = RqliteRegistryStore.make(testConfig(withCredentials))
        expect(yield* store.exec({ sql: "INSERT INTO t VALUES (1)" })).toEqual({ rowsAffected: 1, lastInsertId: 3 })
        expect(seen).toBe(`Basic ${Buffer.from("ten@ant:p:ss").toString("base64")}`)
      })
    )

    it.scopedLive("a redirect to an unusable location fails as `unavailable`, not as a crash", () =>
      Effect.gen(function* () {
        for (const location of ["http://", "ftp://127.0.0.1/db/execute"]) {
          const bouncer = yield* localServer((_request, response) => {
            response.writeHead(301, { location })
            response.end()
          })
          const store = RqliteRegistryStore.make(testConfig(bouncer.url, { retries: 0 }))
          const error = yield* Effect.flip(store.exec({ sql: "INSERT INTO t VALUES (1)" }))
          expect(error.reason, location).toBe("unavailable")
          expect(bouncer.requests(), location).toBe(1)
        }
      })
    )

    it.scopedLive("follows a redirect to the other protocol with a pool of its own", () =>
      Effect.gen(function* () {
        // an https leader is not available here; a redirect to https on a plain-http port must
        // still be a transport failure (a TLS handshake the port cannot speak), never a crash
        const plain = yield* localServer((_request, response) => {
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify({ results: [] }))
        })
        const bouncer = yield* localServer((request, response) => {
          response.writeHead(307, { location: `${plain.url.replace("http://", "https://")}${request.url ?? "/"}` })
          response.end()
        })
        const store = RqliteRegistryStore.make(testConfig(bouncer.url, { retries: 0, timeout: Duration.seconds(2) }))
        const error = yield* Effect.flip(store.exec({ sql: "INSERT INTO t VALUES (1)" }))
        expect(error.reason).toBe("unavailable")
        expect(bouncer.requests()).toBe(1)
      })
    )
  })
}
