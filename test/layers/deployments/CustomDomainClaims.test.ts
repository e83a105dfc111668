/**
 * Custom domain claims (docs/deployments.md, "Custom domains") in the deployment store, on both
 * registry engines (the embedded SQLite file and a real rqlited): pending claims of several
 * namespaces on one domain, each with its own token, blocking no one; the first verify owns the
 * domain and the others are then refused; a pending claim lapses after 7 days; the namespace's cap
 * on pending claims; a race of verifies with one winner, and the registry's unique index behind
 * it; the host table seeing each verified host once; migration 14 keeping the rows it found.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Context, Duration, Effect, Either, Layer, Option, TestClock, TestServices } from "effect"
import type { Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { PENDING_CLAIM_SECONDS } from "../../../src/domain/CustomDomainRules.js"
import { makeDeploymentStore, type NewDeployment } from "../../../src/layers/deployments/DeploymentStore.js"
import { makeAppHosts } from "../../../src/layers/deployments/serving/AppHosts.js"
import { migrations } from "../../../src/layers/registry/migrations.js"
import { RegistryStore, type RegistryStoreService, type StoreError } from "../../../src/layers/registry/RegistryStore.js"
import { RqliteRegistryStore } from "../../../src/layers/registry/RqliteRegistryStore.js"
import { registryDbPath, SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { makeSealer } from "../../../src/layers/secrets/Sealer.js"
import { hasRqlited, rqlited, rqlitedMissingMessage } from "../../support/rqlited.js"

/** A registry on one engine, and how to reach it again before migration 14 (for the upgrade case). */
interface Engine {
  readonly layer: Effect.Effect<Layer.Layer<RegistryStore, StoreError>, unknown, Scope.Scope>
  /** A registry at migration 13 holding `rows` of the old deployment_domains, and the layer that upgrades it. */
  readonly before14: (rows: ReadonlyArray<OldRow>) => Effect.Effect<Layer.Layer<RegistryStore, StoreError>, unknown, Scope.Scope>
}

type OldRow = readonly [domain: string, deploymentId: string, token: string, createdAt: number, verifiedAt: number | null]

const upTo13 = migrations.filter((m) => m.id <= 13)
const insertOld = "INSERT INTO deployment_domains (domain, deployment_id, token, created_at, verified_at) VALUES (?, ?, ?, ?, ?)"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-claims-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const sqlite: Engine = {
  layer: Effect.map(tempDir, (dir) => SqliteRegistryStore.layer({ filename: registryDbPath(dir) })),
  before14: (rows) =>
    Effect.map(tempDir, (dir) => {
      const filename = registryDbPath(dir)
      const db = new Database(filename)
      for (const m of upTo13) for (const statement of m.statements) db.exec(statement)
      // the Migrator's own table, as it makes it, holding 1-13
      db.exec(`CREATE TABLE effect_sql_migrations (migration_id integer PRIMARY KEY NOT NULL,
        created_at datetime NOT NULL DEFAULT current_timestamp, name VARCHAR(255) NOT NULL)`)
      for (const m of upTo13) db.prepare("INSERT INTO effect_sql_migrations (migration_id, name) VALUES (?, ?)").run(m.id, m.name)
      for (const row of rows) db.prepare(insertOld).run(...row)
      db.close()
      return SqliteRegistryStore.layer({ filename })
    })
}

const rqlite: Engine = {
  layer: Effect.map(rqlited(), (server) => RqliteRegistryStore.layer({ url: server.url, timeout: Duration.seconds(5) })),
  before14: (rows) =>
    Effect.gen(function* () {
      const server = yield* rqlited()
      const config = { url: server.url, timeout: Duration.seconds(5) }
      const raw = RqliteRegistryStore.make(config)
      yield* raw.exec({ sql: "CREATE TABLE portico_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)" })
      for (const m of upTo13) {
        yield* raw.batch([
          { sql: "INSERT INTO portico_migrations (id, name, applied_at) VALUES (?, ?, 0)", params: [m.id, m.name] },
          ...m.statements.map((sql) => ({ sql }))
        ])
      }
      yield* raw.batch(rows.map((row) => ({ sql: insertOld, params: [...row] })))
      return RqliteRegistryStore.layer(config)
    })
}

const sealer = makeSealer(new Uint8Array(32).fill(3))
const start = Date.UTC(2026, 10, 28, 9, 0)

const build = (layer: Layer.Layer<RegistryStore, StoreError>) =>
  Effect.map(TestServices.provideLive(Layer.build(layer)), (context) => Context.get(context, RegistryStore))

const fixture = (engine: Engine) =>
  Effect.gen(function* () {
    const store = yield* build(yield* TestServices.provideLive(engine.layer))
    yield* TestClock.setTime(start)
    return { store, deployments: makeDeploymentStore(store, sealer) }
  })

const app = (namespace: string, name: string): NewDeployment => ({
  namespace,
  name,
  type: "static",
  domain: `${name}-${namespace}.portico.test`,
  homeNode: "node-a",
  artifact: `bafy-${name}`
})

const refusal = <A>(result: Either.Either<A, { readonly _tag: string }>) => {
  if (Either.isRight(result)) return { code: "ok", reason: "" }
  const e = result.left as unknown as { _tag: string; code?: string; reason?: string }
  return { code: e._tag === "Refused" ? (e.code ?? "") : e._tag, reason: e.reason ?? "" }
}

const rawRows = (store: RegistryStoreService, sql: string, params: ReadonlyArray<string | number> = []) => store.query({ sql, params })

const claimSuite = (name: string, engine: Engine) =>
  describe(`custom domain claims on ${name}`, () => {
    it.scoped("pending claims of two namespaces on one domain, each with its own token; neither blocks the other nor a new deployment", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(engine)
        const a = yield* deployments.create(app("acme", "site"))
        const b = yield* deployments.create(app("mallory", "squat"))
        const b2 = yield* deployments.create(app("mallory", "squat2"))
        const squatted = yield* deployments.addDomain("mallory", b.id, "www.acme.com")
        // several deployments of one namespace too
        yield* deployments.addDomain("mallory", b2.id, "www.acme.com")
        const claimed = yield* deployments.addDomain("acme", a.id, "www.acme.com")
        expect(claimed.token).not.toBe(squatted.token)
        expect((yield* deployments.domains("acme", a.id)).map((d) => d.token)).toEqual([claimed.token])
        expect((yield* deployments.domains("mallory", b.id)).map((d) => d.token)).toEqual([squatted.token])
        // the same deployment twice is still refused
        expect(refusal(yield* Effect.either(deployments.addDomain("acme", a.id, "www.acme.com"))).code).toBe("CONFLICT")
        // not served while pending, and a pending claim takes no deployment's own domain
        expect(yield* deployments.byHost("www.acme.com")).toEqual(Option.none())
        yield* deployments.addDomain("mallory", b.id, "later-acme.portico.test")
        expect((yield* deployments.create({ ...app("acme", "later"), domain: "later-acme.portico.test" })).domain).toBe("later-acme.portico.test")
        expect(yield* deployments.markDomainVerified("mallory", b.id, "later-acme.portico.test")).toBe("taken")
      })
    )

    it.scoped("the first verify owns the domain: other claims are then taken, a new add is CONFLICT naming no one; free again after its remove", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(engine)
        const a = yield* deployments.create(app("acme", "site"))
        const b = yield* deployments.create(app("mallory", "squat"))
        const c = yield* deployments.create(app("third", "late"))
        yield* deployments.addDomain("mallory", b.id, "www.acme.com")
        yield* deployments.addDomain("acme", a.id, "www.acme.com")
        expect(yield* deployments.domainServedByOther(a.id, "www.acme.com")).toBe(false)
        expect(yield* deployments.markDomainVerified("acme", a.id, "www.acme.com")).toBe("verified")
        expect(yield* deployments.markDomainVerified("acme", a.id, "www.acme.com")).toBe("verified")
        expect(yield* deployments.markDomainVerified("mallory", b.id, "www.acme.com")).toBe("taken")
        expect(yield* deployments.domainServedByOther(b.id, "www.acme.com")).toBe(true)
        expect(yield* deployments.domainServedByOther(a.id, "www.acme.com")).toBe(false)
        const refused = refusal(yield* Effect.either(deployments.addDomain("third", c.id, "www.acme.com")))
        expect(refused.code).toBe("CONFLICT")
        expect(refused.reason).toContain("in use")
        expect(refused.reason).not.toMatch(/acme(?!\.com)|site/)
        expect((yield* deployments.byHost("www.acme.com")).pipe(Option.map((d) => d.id))).toEqual(Option.some(a.id))
        // B's claim stays pending (it lapses in time); once A lets go, B can verify
        expect((yield* deployments.domains("mallory", b.id)).map((d) => d.verifiedAt)).toEqual([undefined])
        expect(yield* deployments.removeDomain("acme", a.id, "www.acme.com")).toBe(true)
        expect(yield* deployments.markDomainVerified("mallory", b.id, "www.acme.com")).toBe("verified")
        expect(yield* deployments.markDomainVerified("nobody", b.id, "www.acme.com")).toBe("absent")
      })
    )

    it.scoped("a pending claim lapses after 7 days: not listed, verified or removed, and the next add deletes it; a verified one stays", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(engine)
        const a = yield* deployments.create(app("acme", "site"))
        const b = yield* deployments.create(app("mallory", "squat"))
        const old = yield* deployments.addDomain("acme", a.id, "old.acme.com")
        yield* deployments.addDomain("mallory", b.id, "www.acme.com")
        yield* deployments.addDomain("acme", a.id, "kept.acme.com")
        yield* deployments.markDomainVerified("acme", a.id, "kept.acme.com")
        yield* TestClock.adjust(Duration.seconds(PENDING_CLAIM_SECONDS))
        expect((yield* deployments.domains("acme", a.id)).map((d) => d.domain)).toEqual(["kept.acme.com", "old.acme.com"])
        yield* TestClock.adjust(Duration.seconds(1))
        expect((yield* deployments.domains("acme", a.id)).map((d) => d.domain)).toEqual(["kept.acme.com"])
        expect(yield* deployments.markDomainVerified("acme", a.id, "old.acme.com")).toBe("absent")
        expect(yield* deployments.removeDomain("acme", a.id, "old.acme.com")).toBe(false)
        expect((yield* rawRows(store, "SELECT domain FROM deployment_domains ORDER BY domain")).length).toBe(3)
        // the add deletes every lapsed claim of the registry, so the same deployment claims again with a new token
        const again = yield* deployments.addDomain("acme", a.id, "old.acme.com")
        expect(again.token).not.toBe(old.token)
        expect(yield* rawRows(store, "SELECT domain, deployment_id FROM deployment_domains ORDER BY domain")).toEqual([
          { domain: "kept.acme.com", deployment_id: a.id },
          { domain: "old.acme.com", deployment_id: a.id }
        ])
        expect((yield* deployments.byHost("kept.acme.com")).pipe(Option.map((d) => d.id))).toEqual(Option.some(a.id))
      })
    )

    it.scoped("a namespace holds at most its cap of pending claims across its deployments; verified and lapsed ones do not count", () =>
      Effect.gen(function* () {
        const { deployments } = yield* fixture(engine)
        const a1 = yield* deployments.create(app("acme", "one"))
        const a2 = yield* deployments.create(app("acme", "two"))
        const other = yield* deployments.create(app("zoo", "other"))
        yield* deployments.addDomain("acme", a1.id, "a.acme.com", 3)
        yield* deployments.addDomain("acme", a1.id, "b.acme.com", 3)
        yield* deployments.addDomain("acme", a2.id, "c.acme.com", 3)
        const over = refusal(yield* Effect.either(deployments.addDomain("acme", a2.id, "d.acme.com", 3)))
        expect(over).toEqual({ code: "VALIDATION_FAILED", reason: "domain: a namespace holds at most 3 unverified custom domains" })
        // another namespace is not touched by acme's count
        yield* deployments.addDomain("zoo", other.id, "d.acme.com", 3)
        yield* deployments.markDomainVerified("acme", a1.id, "a.acme.com")
        yield* deployments.addDomain("acme", a2.id, "d.acme.com", 3)
        expect(refusal(yield* Effect.either(deployments.addDomain("acme", a2.id, "e.acme.com", 3))).code).toBe("VALIDATION_FAILED")
        yield* TestClock.adjust(Duration.seconds(PENDING_CLAIM_SECONDS + 1))
        yield* deployments.addDomain("acme", a2.id, "e.acme.com", 3)
        expect((yield* deployments.domains("acme", a1.id)).map((d) => d.domain)).toEqual(["a.acme.com"])
      })
    )

    it.scoped("verifies racing for one domain: exactly one wins, and the registry's index refuses a second verified row", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(engine)
        const claimants = yield* Effect.forEach(["n1", "n2", "n3", "n4", "n5", "n6"], (namespace) =>
          Effect.tap(deployments.create(app(namespace, "site")), (d) => deployments.addDomain(namespace, d.id, "race.example.com"))
        )
        const outcomes = yield* Effect.all(
          claimants.map((d) => deployments.markDomainVerified(d.namespace, d.id, "race.example.com")),
          { concurrency: "unbounded" }
        )
        expect([...outcomes].sort()).toEqual(["taken", "taken", "taken", "taken", "taken", "verified"])
        const verified = yield* rawRows(store, "SELECT deployment_id FROM deployment_domains WHERE domain = ? AND verified_at IS NOT NULL", ["race.example.com"])
        expect(verified).toEqual([{ deployment_id: claimants[outcomes.indexOf("verified")]?.id }])
        // past every predicate: a plain UPDATE of another claim is the index's to refuse
        const loser = claimants.find((d) => d.id !== verified[0]?.["deployment_id"])?.id ?? ""
        const raw = yield* Effect.either(
          store.exec({ sql: "UPDATE deployment_domains SET verified_at = 1 WHERE domain = ? AND deployment_id = ?", params: ["race.example.com", loser] })
        )
        expect(Either.isLeft(raw) && raw.left.reason).toBe("constraint")
      })
    )

    it.scoped("the host table sees a verified host once, never a pending claim, and never a custom row over a deployment's own domain", () =>
      Effect.gen(function* () {
        const { store, deployments } = yield* fixture(engine)
        const a = yield* deployments.create(app("acme", "site"))
        const b = yield* deployments.create(app("mallory", "squat"))
        yield* deployments.addDomain("mallory", b.id, "www.acme.com")
        yield* deployments.addDomain("acme", a.id, "www.acme.com")
        yield* deployments.addDomain("mallory", b.id, "pending.acme.com")
        yield* deployments.markDomainVerified("acme", a.id, "www.acme.com")
        // a row no rule of the store would write: a verified claim on another deployment's own host
        yield* store.exec({
          sql: "INSERT INTO deployment_domains (domain, deployment_id, token, created_at, verified_at) VALUES (?, ?, 't', 1, 1)",
          params: [a.domain, b.id]
        })
        const hosts = yield* makeAppHosts(store, "portico.test")
        yield* hosts.refresh
        const routeOf = (host: string) => {
          const route = hosts.service.route(host)
          return route.kind === "app" ? route.app.id : route.kind
        }
        expect(routeOf("www.acme.com")).toBe(a.id)
        expect(routeOf("pending.acme.com")).toBe("api")
        expect(routeOf(a.domain)).toBe(a.id)
      })
    )

    it.scoped("the host table's routes are those of its last read: a host verified since is routed from the next read on, whatever hosts were asked before", () =>
      Effect.gen(function* () {
        const { deployments, store } = yield* fixture(engine)
        const a = yield* deployments.create(app("acme", "site"))
        yield* deployments.addDomain("acme", a.id, "shop.acme.com")
        const hosts = yield* makeAppHosts(store, "portico.test")
        yield* hosts.refresh
        const routeOf = (host: string | undefined) => {
          const route = hosts.service.route(host)
          return route.kind === "app" ? route.app.id : route.kind
        }
        // more distinct hosts than the routes kept: none of them changes an answer
        for (let i = 0; i < 5000; i++) expect(routeOf(`h${i}.portico.test`)).toBe("unknown")
        expect([routeOf("shop.acme.com"), routeOf("SHOP.acme.com:443"), routeOf(a.domain), routeOf(undefined)]).toEqual(["api", "api", a.id, "api"])
        yield* deployments.markDomainVerified("acme", a.id, "shop.acme.com")
        // the table is the one read before the verify until the next read
        expect(routeOf("shop.acme.com")).toBe("api")
        yield* hosts.refresh
        expect([routeOf("shop.acme.com"), routeOf("SHOP.acme.com:443"), routeOf(`${a.domain}.`)]).toEqual([a.id, a.id, a.id])
      })
    )

    it.scoped("migration 14 keeps every row of the old table, verified and pending, and takes a second claim on a domain", () =>
      Effect.gen(function* () {
        const rows: ReadonlyArray<OldRow> = [
          ["pending.example.com", "d-b", "portico-verify-b", 150, null],
          ["www.example.com", "d-a", "portico-verify-a", 100, 200]
        ]
        const store = yield* build(yield* TestServices.provideLive(engine.before14(rows)))
        expect(yield* store.migrations).toContain("custom_domain_claims")
        expect(yield* rawRows(store, "SELECT domain, deployment_id, token, created_at, verified_at FROM deployment_domains ORDER BY domain")).toEqual(
          rows.map(([domain, deployment_id, token, created_at, verified_at]) => ({ domain, deployment_id, token, created_at, verified_at }))
        )
        yield* store.exec({ sql: insertOld, params: ["www.example.com", "d-c", "portico-verify-c", 300, null] })
        const second = yield* Effect.either(
          store.exec({ sql: "UPDATE deployment_domains SET verified_at = 301 WHERE deployment_id = ?", params: ["d-c"] })
        )
        expect(Either.isLeft(second) && second.left.reason).toBe("constraint")
      })
    )
  })

claimSuite("sqlite", sqlite)

if (hasRqlited()) claimSuite("rqlite", rqlite)
else
  describe("custom domain claims on rqlite", () => {
    it("needs the rqlited binary", () => {
      expect.fail(rqlitedMissingMessage())
    })
  })
