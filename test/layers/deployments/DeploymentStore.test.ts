/**
 * The deployment tables (spec §2.7, §3.4, §4.8) on both registry engines, the embedded SQLite
 * file and a real rqlited: create with its refusals (taken name 409, taken domain, a full port
 * range), ports unique per node and race-free, versions on update and rollback, the environment
 * sealed to namespace and id with a compare-and-swap and a strictly increasing stamp, grants never
 * the control plane, events, custom domains, and delete removing every row.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Either, Layer, Option, TestClock, TestServices } from "effect"
import type { Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { defaultDeploymentGrants, stampText } from "../../../src/layers/deployments/DeploymentRecord.js"
import { makeDeploymentStore, type NewDeployment } from "../../../src/layers/deployments/DeploymentStore.js"
import { RegistryStore, type RegistryStoreService, type StoreError } from "../../../src/layers/registry/RegistryStore.js"
import { RqliteRegistryStore } from "../../../src/layers/registry/RqliteRegistryStore.js"
import { registryDbPath, SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"
import { hasRqlited, rqlited, rqlitedMissingMessage } from "../../support/rqlited.js"

type Provision = Effect.Effect<Layer.Layer<RegistryStore, StoreError>, unknown, Scope.Scope>

const sqlite: Provision = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-deployments-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (dir) => SqliteRegistryStore.layer({ filename: registryDbPath(dir) })
)

const rqlite: Provision = Effect.map(rqlited(), (server) => RqliteRegistryStore.layer({ url: server.url, timeout: Duration.seconds(5) }))

const sealer = makeSealer(new Uint8Array(32).fill(3))
const start = Date.UTC(2026, 10, 28, 9, 0)

const fixture = (provision: Provision, ports = { first: 10200, last: 19999 }, perNamespace?: number) =>
  Effect.gen(function* () {
    const layer = yield* TestServices.provideLive(provision)
    const store = Context.get(yield* TestServices.provideLive(Layer.build(layer)), RegistryStore)
    yield* TestClock.setTime(start)
    return { store, deployments: makeDeploymentStore(store, sealer, { ports, eventsKept: 5, perNamespace }) }
  })

const app = (name: string, patch: Partial<NewDeployment> = {}): NewDeployment => ({
  namespace: "shop",
  name,
  type: "nodejs",
  domain: `${name}-abc123.portico.test`,
  homeNode: "node-a",
  artifact: `bafy-${name}-1`,
  ...patch
})

const codeOf = <A>(result: Either.Either<A, { readonly _tag: string }>) =>
  Either.isLeft(result) && result.left._tag === "Refused" ? (result.left as unknown as { code: string }).code : Either.isLeft(result) ? result.left._tag : "ok"

const rawRows = (store: RegistryStoreService, sql: string) => store.query({ sql })

const deploymentStoreSuite = (engine: string, provision: Provision) =>
  describe(`DeploymentStore on ${engine}`, () => {
    it.scoped("create: version 1, defaults, the first version row and event; a taken name is DEPLOYMENT_EXISTS and writes nothing", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog", { env: { GREETING: "hi" } }))
        expect(blog).toMatchObject({
          namespace: "shop", name: "blog", type: "nodejs", status: "deploying", version: 1, domain: "blog-abc123.portico.test",
          homeNode: "node-a", port: 10200, artifact: "bafy-blog-1", contentCid: undefined, healthPath: "/health",
          limits: { memoryBytes: 512 * 1024 * 1024, cpuMillis: 1000, pids: 256, restartPolicy: "on-failure" },
          grants: defaultDeploymentGrants, createdAt: start / 1000
        })
        expect(blog.id).toMatch(/^d[0-9a-f]{24}$/)
        expect(blog.envVersion).toBe(BigInt(start) * 1_000_000n)
        expect(blog.updatedAt).toBe(blog.envVersion)
        expect(yield* deployments.versions("shop", blog.id)).toEqual([
          { version: 1, artifact: "bafy-blog-1", source: "upload", rollbackFrom: undefined, createdAt: start / 1000 }
        ])
        expect((yield* deployments.events("shop", blog.id, { limit: 10, after: undefined })).items.map((e) => e.type)).toEqual(["created"])

        const site = yield* deployments.create(app("site", { type: "static", domain: "site.portico.test", artifact: "bafysite" }))
        expect(site).toMatchObject({ port: undefined, contentCid: "bafysite", healthPath: undefined })

        const again = yield* Effect.either(deployments.create(app("blog", { domain: "other.portico.test" })))
        expect(codeOf(again)).toBe("DEPLOYMENT_EXISTS")
        // the same name in another namespace is another deployment
        expect((yield* deployments.create(app("blog", { namespace: "other", domain: "b2.portico.test" }))).port).toBe(10201)
        expect((yield* rawRows(store, "SELECT id FROM deployments")).length).toBe(3)
        expect((yield* rawRows(store, "SELECT * FROM deployment_versions")).length).toBe(3)

        expect(yield* deployments.get("shop", "blog")).toEqual(Option.some(blog))
        expect(yield* deployments.byId("other", blog.id)).toEqual(Option.none())
        expect(yield* deployments.byHost("blog-abc123.portico.test")).toEqual(Option.some(blog))
        const listed = yield* deployments.list("shop", { limit: 1, after: undefined })
        expect(listed.items.map((d) => d.name)).toEqual(["blog"])
        const rest = yield* deployments.list("shop", { limit: 1, after: listed.next })
        expect(rest.items.map((d) => d.name)).toEqual(["site"])
      })
    )

    it.scoped("a namespace holds at most perNamespace deployments, counted in the create's own statement; others are not held back", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(provision, undefined, 3)
        const made = yield* Effect.all(["a", "b", "c", "d", "e"].map((name) => Effect.either(deployments.create(app(name)))), { concurrency: "unbounded" })
        expect(made.filter(Either.isRight)).toHaveLength(3)
        const refused = made.filter(Either.isLeft).map((e) => e.left as unknown as { code: string; reason: string })
        expect(refused.map((r) => r.code)).toEqual(["VALIDATION_FAILED", "VALIDATION_FAILED"])
        expect(refused[0]?.reason).toBe("namespace shop holds 3 deployments, the most one namespace may")
        expect((yield* rawRows(store, "SELECT id FROM deployments WHERE namespace = 'shop'")).length).toBe(3)
        // the count is per namespace; a deleted one makes room
        expect(codeOf(yield* Effect.either(deployments.create(app("a", { namespace: "other", domain: "a.other.test" }))))).toBe("ok")
        const first = made.find(Either.isRight)
        if (first === undefined || Either.isLeft(first)) throw new Error("no deployment made")
        yield* deployments.remove("shop", first.right.id)
        expect(codeOf(yield* Effect.either(deployments.create(app("f"))))).toBe("ok")
      })
    )

    it.scoped("domains are unique across deployments and verified custom domains; a pending claim takes none", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog"))
        expect(codeOf(yield* Effect.either(deployments.create(app("shop2", { domain: blog.domain }))))).toBe("CONFLICT")
        yield* deployments.addDomain("shop", blog.id, "www.example.com")
        yield* deployments.addDomain("shop", blog.id, "pending.example.com")
        expect(yield* deployments.markDomainVerified("shop", blog.id, "www.example.com")).toBe("verified")
        expect(codeOf(yield* Effect.either(deployments.create(app("shop3", { domain: "www.example.com" }))))).toBe("CONFLICT")
        expect(codeOf(yield* Effect.either(deployments.create(app("shop4", { domain: "pending.example.com" }))))).toBe("ok")
        const other = yield* deployments.create(app("other"))
        expect(codeOf(yield* Effect.either(deployments.addDomain("shop", other.id, "www.example.com")))).toBe("CONFLICT")
        expect(codeOf(yield* Effect.either(deployments.addDomain("shop", other.id, blog.domain)))).toBe("CONFLICT")
        expect(codeOf(yield* Effect.either(deployments.addDomain("elsewhere", other.id, "x.example.com")))).toBe("NOT_FOUND")
      })
    )

    it.scoped("ports: lowest free of the range, unique per node, reused after delete, 503 when the range is full; concurrent creates never share one", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(provision, { first: 10200, last: 10203 })
        const a = yield* deployments.create(app("a"))
        const b = yield* deployments.create(app("b"))
        const onB = yield* deployments.create(app("c", { homeNode: "node-b" }))
        expect([a.port, b.port, onB.port]).toEqual([10200, 10201, 10200])
        expect(yield* deployments.remove("shop", a.id)).toBe(true)
        expect((yield* deployments.create(app("d"))).port).toBe(10200)
        yield* deployments.create(app("e"))
        yield* deployments.create(app("f"))
        const full = yield* Effect.either(deployments.create(app("g")))
        expect(codeOf(full)).toBe("UNAVAILABLE")
        // a static site needs no port, so the full range does not refuse it
        expect((yield* deployments.create(app("h", { type: "static" }))).port).toBeUndefined()

        // many at once on another node: every one gets its own port, the overflow is refused
        const results = yield* Effect.forEach(
          ["p1", "p2", "p3", "p4", "p5", "p6"],
          (name) => Effect.either(deployments.create(app(name, { homeNode: "node-c", domain: `${name}.portico.test` }))),
          { concurrency: "unbounded" }
        )
        const ports = results.flatMap((r) => (Either.isRight(r) ? [r.right.port] : []))
        expect(ports.length).toBe(4)
        expect(new Set(ports).size).toBe(4)
        expect(results.filter((r) => codeOf(r) === "UNAVAILABLE").length).toBe(2)
        const rows = yield* rawRows(store, "SELECT home_node, port, COUNT(*) AS n FROM deployments WHERE port IS NOT NULL GROUP BY home_node, port HAVING n > 1")
        expect(rows).toEqual([])
      })
    )

    it.scoped("concurrent creates of one name: one wins, the rest are DEPLOYMENT_EXISTS", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(provision)
        const results = yield* Effect.forEach(
          [1, 2, 3, 4, 5],
          (n) => Effect.either(deployments.create(app("same", { domain: `same-${n}.portico.test` }))),
          { concurrency: "unbounded" }
        )
        expect(results.filter(Either.isRight).length).toBe(1)
        expect(results.filter((r) => codeOf(r) === "DEPLOYMENT_EXISTS").length).toBe(4)
        expect((yield* rawRows(store, "SELECT * FROM deployment_versions")).length).toBe(1)
      })
    )

    it.scoped("update and rollback: +1 each, a rollback is a new version pointing at the old artifact; a stale expected version is CONFLICT", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog"))
        yield* TestClock.adjust(Duration.seconds(10))
        const v2 = yield* deployments.addVersion("shop", blog.id, 1, "bafy-blog-2")
        expect(v2).toMatchObject({ version: 2, artifact: "bafy-blog-2" })
        expect(v2.updatedAt > blog.updatedAt).toBe(true)
        expect(codeOf(yield* Effect.either(deployments.addVersion("shop", blog.id, 1, "bafy-late")))).toBe("CONFLICT")
        const v3 = yield* deployments.rollback("shop", blog.id, 2, 1)
        expect(v3).toMatchObject({ version: 3, artifact: "bafy-blog-1" })
        expect(codeOf(yield* Effect.either(deployments.rollback("shop", blog.id, 3, 9)))).toBe("NOT_FOUND")
        expect(codeOf(yield* Effect.either(deployments.addVersion("other", blog.id, 3, "x")))).toBe("NOT_FOUND")
        expect(yield* deployments.versions("shop", blog.id)).toEqual([
          { version: 1, artifact: "bafy-blog-1", source: "upload", rollbackFrom: undefined, createdAt: start / 1000 },
          { version: 2, artifact: "bafy-blog-2", source: "update", rollbackFrom: undefined, createdAt: start / 1000 + 10 },
          { version: 3, artifact: "bafy-blog-1", source: "rollback", rollbackFrom: 1, createdAt: start / 1000 + 10 }
        ])
        const events = yield* deployments.events("shop", blog.id, { limit: 10, after: undefined })
        expect(events.items.map((e) => [e.type, e.version])).toEqual([["rolled_back", 3], ["updated", 2], ["created", 1]])
        expect(events.items[0]?.detail).toEqual({ from_version: 1 })
        // an update may change the health path, in the same write; without one it stays, and a rollback keeps it
        const api = yield* deployments.create(app("api", { healthPath: "/health" }))
        expect((yield* deployments.addVersion("shop", api.id, 1, "bafy-api-2")).healthPath).toBe("/health")
        expect((yield* deployments.addVersion("shop", api.id, 2, "bafy-api-3", "/ready")).healthPath).toBe("/ready")
        expect(codeOf(yield* Effect.either(deployments.addVersion("shop", api.id, 2, "bafy-late", "/late")))).toBe("CONFLICT")
        expect((yield* deployments.rollback("shop", api.id, 3, 1)).healthPath).toBe("/ready")
        // a static site's content CID follows its versions
        const site = yield* deployments.create(app("site", { type: "static", domain: "s.portico.test", artifact: "bafyA" }))
        expect((yield* deployments.addVersion("shop", site.id, 1, "bafyB")).contentCid).toBe("bafyB")
      })
    )

    it.scoped("environment: sealed to namespace and id, compare-and-swap on the stored value, stamp strictly increasing with a still clock", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog", { env: { API_KEY: "s3cret-value" } }))
        const raw = JSON.stringify(yield* rawRows(store, "SELECT * FROM deployments"))
        expect(raw).not.toContain("s3cret-value")
        expect(raw).not.toContain("API_KEY")

        const first = yield* deployments.environment("shop", blog.id)
        expect(first.env).toEqual({ API_KEY: "s3cret-value" })
        expect(first.version).toBe(blog.envVersion)
        // the clock does not move: each stamp is still one past the last
        const s1 = yield* deployments.writeEnvironment("shop", blog.id, first, { API_KEY: "s3cret-value", MODE: "prod" }, ["MODE"])
        expect(s1).toBe(blog.updatedAt + 1n)
        const second = yield* deployments.environment("shop", blog.id)
        expect(second).toMatchObject({ env: { API_KEY: "s3cret-value", MODE: "prod" }, version: s1 })
        // the same expected value again: the row moved, 409, nothing written
        const lost = yield* Effect.either(deployments.writeEnvironment("shop", blog.id, first, {}, ["API_KEY"]))
        expect(codeOf(lost)).toBe("ENV_CHANGED")
        expect((yield* deployments.environment("shop", blog.id)).env).toEqual({ API_KEY: "s3cret-value", MODE: "prod" })
        const s2 = yield* deployments.writeEnvironment("shop", blog.id, second, {}, ["API_KEY", "MODE"])
        expect(s2).toBe(s1 + 1n)
        const record = Option.getOrThrow(yield* deployments.byId("shop", blog.id))
        expect(record.envVersion).toBe(s2)
        expect(record.updatedAt).toBe(s2)
        // a clock that went back still gives a later stamp
        yield* TestClock.setTime(start - 60_000)
        const s3 = yield* deployments.writeEnvironment("shop", blog.id, yield* deployments.environment("shop", blog.id), { A: "1" }, ["A"])
        expect(s3).toBe(s2 + 1n)
        // the stamp is stored as fixed-width text, read back whole past 2^53
        const rows = yield* rawRows(store, "SELECT env_version, updated_at FROM deployments")
        expect(rows[0]).toEqual({ env_version: stampText(s3), updated_at: stampText(s3) })
        const events = yield* deployments.events("shop", blog.id, { limit: 2, after: undefined })
        expect(events.items.map((e) => e.detail)).toEqual([{ names: "A" }, { names: "API_KEY,MODE" }])

        // moved to another deployment or namespace, it does not open
        const other = yield* deployments.create(app("other"))
        yield* store.exec({ sql: "UPDATE deployments SET env_sealed = (SELECT env_sealed FROM deployments WHERE id = ?) WHERE id = ?", params: [blog.id, other.id] })
        expect(codeOf(yield* Effect.either(deployments.environment("shop", other.id)))).toBe("StoreError")
        expect(codeOf(yield* Effect.either(deployments.environment("else", blog.id)))).toBe("NOT_FOUND")
      })
    )

    it.scoped("grants: the runtime profile by default, data plane only when set", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog"))
        expect(yield* deployments.setGrants("shop", blog.id, ["storage", "cache:key=sessions/*", "storage"])).toEqual(["storage", "cache:key=sessions/*"])
        for (const refused of ["admin", "db:write", "secrets:write", "namespace-write", "operator", "nonsense"]) {
          expect(codeOf(yield* Effect.either(deployments.setGrants("shop", blog.id, ["storage", refused])))).toBe("VALIDATION_FAILED")
        }
        expect(codeOf(yield* Effect.either(deployments.create(app("x", { grants: ["admin"] }))))).toBe("VALIDATION_FAILED")
        expect(Option.getOrThrow(yield* deployments.byId("shop", blog.id)).grants).toEqual(["storage", "cache:key=sessions/*"])
      })
    )

    it.scoped("status changes and events: newest first in pages, only the newest kept, none for a refused write", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog"))
        expect(yield* deployments.setStatus("shop", blog.id, "active")).toBe(true)
        expect(yield* deployments.setStatus("other", blog.id, "failed")).toBe(false)
        yield* deployments.addEvent(blog.id, "restarted", { reason: "exited 1", restarts: 1 })
        yield* deployments.addEvent(blog.id, "restarted", { reason: "exited 1", restarts: 2 })
        yield* deployments.addEvent(blog.id, "health_check_failed", { status: 500 })
        yield* deployments.setStatus("shop", blog.id, "failed", { reason: "restart policy gave up" })
        yield* deployments.addEvent("d-none", "restarted")
        const first = yield* deployments.events("shop", blog.id, { limit: 3, after: undefined })
        expect(first.items.map((e) => e.type)).toEqual(["status_changed", "health_check_failed", "restarted"])
        expect(first.items[0]?.detail).toEqual({ reason: "restart policy gave up", status: "failed" })
        const next = yield* deployments.events("shop", blog.id, { limit: 3, after: first.next })
        // five kept: the sixth, `created`, is trimmed
        expect(next.items.map((e) => e.type)).toEqual(["restarted", "status_changed"])
        expect(next.items[0]?.detail).toEqual({ reason: "exited 1", restarts: 1 })
        expect(next.next).toBeUndefined()
        expect((yield* deployments.events("other", blog.id, { limit: 3, after: undefined })).items).toEqual([])
        expect(Option.getOrThrow(yield* deployments.byId("shop", blog.id)).status).toBe("failed")
      })
    )

    it.scoped("custom domains: token, verify, served by host once verified, removed", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog"))
        const added = yield* deployments.addDomain("shop", blog.id, "www.example.com")
        expect(added.token).toMatch(/^portico-verify-[A-Za-z0-9_-]{22}$/)
        expect(yield* deployments.byHost("www.example.com")).toEqual(Option.none())
        expect(yield* deployments.markDomainVerified("other", blog.id, "www.example.com")).toBe("absent")
        yield* TestClock.adjust(Duration.seconds(5))
        expect(yield* deployments.markDomainVerified("shop", blog.id, "www.example.com")).toBe("verified")
        expect(yield* deployments.markDomainVerified("shop", blog.id, "www.example.com")).toBe("verified")
        expect((yield* deployments.byHost("www.example.com")).pipe(Option.map((d) => d.id))).toEqual(Option.some(blog.id))
        expect(yield* deployments.domains("shop", blog.id)).toEqual([{ ...added, verifiedAt: start / 1000 + 5 }])
        expect(yield* deployments.removeDomain("other", blog.id, "www.example.com")).toBe(false)
        expect(yield* deployments.removeDomain("shop", blog.id, "www.example.com")).toBe(true)
        expect(yield* deployments.domains("shop", blog.id)).toEqual([])
      })
    )

    it.scoped("delete removes the record, versions, events and domains, and frees name, domain and port", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(provision)
        const blog = yield* deployments.create(app("blog"))
        yield* deployments.addVersion("shop", blog.id, 1, "bafy-2")
        yield* deployments.addDomain("shop", blog.id, "www.example.com")
        expect(yield* deployments.remove("other", blog.id)).toBe(false)
        expect(yield* deployments.remove("shop", blog.id)).toBe(true)
        expect(yield* deployments.remove("shop", blog.id)).toBe(false)
        for (const table of ["deployments", "deployment_versions", "deployment_events", "deployment_domains"]) {
          expect(yield* rawRows(store, `SELECT * FROM ${table}`)).toEqual([])
        }
        const again = yield* deployments.create(app("blog"))
        expect(again.port).toBe(10200)
        expect(again.id).not.toBe(blog.id)
        yield* deployments.addDomain("shop", again.id, "www.example.com")
      })
    )
  })

deploymentStoreSuite("sqlite", sqlite)

if (hasRqlited()) deploymentStoreSuite("rqlite", rqlite)
else
  describe("DeploymentStore on rqlite", () => {
    it("needs the rqlited binary", () => {
      expect.fail(rqlitedMissingMessage())
    })
  })
