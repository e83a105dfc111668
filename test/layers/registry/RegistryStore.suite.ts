/**
 * The RegistryStore contract, run unchanged against every engine: what services may rely on
 * (typed rows, rowsAffected for conditional writes, atomic batches, error reasons, migrations).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Either, Layer } from "effect"
import type { Scope } from "effect"
import { type KeysetSpec, type KeyValues, type Page, pageStatement, readPage } from "../../../src/layers/registry/Keyset.js"
import { migrations } from "../../../src/layers/registry/migrations.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import type { RegistryStoreService, StoreError } from "../../../src/layers/registry/RegistryStore.js"

/** Makes layers over one store: every layer it returns sees the same data. */
export type StoreFactory = () => Layer.Layer<RegistryStore, StoreError>

export interface EngineHarness {
  /** Provisions an empty store (a temp file, a fresh server) that lives as long as the scope. */
  readonly provision: Effect.Effect<StoreFactory, unknown, Scope.Scope>
}

const build = (layer: Layer.Layer<RegistryStore, StoreError>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, RegistryStore))

const registryTables = ["api_keys", "audit", "members", "namespaces", "signing_keys"]
const migrationNames = migrations.map((migration) => migration.name)

const failureOf = <A>(effect: Effect.Effect<A, StoreError>) =>
  Effect.flatMap(Effect.either(effect), (result) =>
    Either.isLeft(result) ? Effect.succeed(result.left) : Effect.dieMessage(`expected a StoreError, got ${JSON.stringify(result.right)}`)
  )

const tableNames = (store: RegistryStoreService) =>
  Effect.map(
    store.query({ sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name" }),
    (rows) => rows.map((row) => row["name"])
  )

export const registryStoreSuite = (name: string, harness: EngineHarness): void => {
  describe(name, () => {
    describe("migrations", () => {
      it.scopedLive("applies every migration once and records it in order", () =>
        Effect.gen(function* () {
          const make = yield* harness.provision
          const store = yield* build(make())
          expect(yield* store.migrations).toEqual(migrationNames)
          expect(yield* tableNames(store)).toEqual(expect.arrayContaining(registryTables))
        })
      )

      it.scopedLive("building the layer again on the same store changes nothing", () =>
        Effect.gen(function* () {
          const make = yield* harness.provision
          const first = yield* build(make())
          yield* first.exec({
            sql: "INSERT INTO namespaces (name, owner, created_at) VALUES (?, ?, ?)",
            params: ["kept", "0xabc", 1]
          })
          const second = yield* build(make())
          expect(yield* second.migrations).toEqual(migrationNames)
          expect(yield* second.query({ sql: "SELECT name, owner FROM namespaces" })).toEqual([
            { name: "kept", owner: "0xabc" }
          ])
        })
      )

      it.scopedLive("concurrent builds on one empty store all succeed and apply each migration once", () =>
        Effect.gen(function* () {
          const make = yield* harness.provision
          const stores = yield* Effect.all([build(make()), build(make()), build(make()), build(make())], {
            concurrency: "unbounded"
          })
          for (const store of stores) {
            expect(yield* store.migrations).toEqual(migrationNames)
          }
        })
      )
    })

    // Statement-level checks share one store; each test works on tables of its own.
    layer(Layer.unwrapScoped(Effect.map(harness.provision, (make) => make())), { excludeTestServices: true })(
      "statements",
      (it) => {
        it.effect("query returns strings, integers, reals and nulls as typed values", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE typed (id INTEGER PRIMARY KEY, name TEXT, n INTEGER, r REAL, gone TEXT)" })
            yield* store.exec({
              sql: "INSERT INTO typed (name, n, r, gone) VALUES (?, ?, ?, ?)",
              params: ["alice", 42, 1.5, null]
            })
            const rows = yield* store.query({ sql: "SELECT id, name, n, r, gone FROM typed WHERE name = ?", params: ["alice"] })
            expect(rows).toEqual([{ id: 1, name: "alice", n: 42, r: 1.5, gone: null }])
            const row = rows[0]
            expect(typeof row?.["n"]).toBe("number")
            expect(typeof row?.["name"]).toBe("string")
            expect(yield* store.query({ sql: "SELECT id FROM typed WHERE name = ?", params: ["bob"] })).toEqual([])
          })
        )

        it.effect("exec reports rowsAffected and lastInsertId", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL)" })
            const first = yield* store.exec({ sql: "INSERT INTO events (kind) VALUES (?)", params: ["a"] })
            const second = yield* store.exec({ sql: "INSERT INTO events (kind) VALUES (?)", params: ["a"] })
            expect(first).toEqual({ rowsAffected: 1, lastInsertId: 1 })
            expect(second).toEqual({ rowsAffected: 1, lastInsertId: 2 })
            const updated = yield* store.exec({ sql: "UPDATE events SET kind = ? WHERE kind = ?", params: ["b", "a"] })
            expect(updated.rowsAffected).toBe(2)
            const none = yield* store.exec({ sql: "DELETE FROM events WHERE kind = ?", params: ["zzz"] })
            expect(none.rowsAffected).toBe(0)
          })
        )

        it.effect("a conditional update on a stale version affects 0 rows", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE docs (id TEXT PRIMARY KEY, body TEXT NOT NULL, version INTEGER NOT NULL)" })
            yield* store.exec({ sql: "INSERT INTO docs (id, body, version) VALUES (?, ?, ?)", params: ["d1", "v1", 1] })
            const update = (body: string) =>
              store.exec({
                sql: "UPDATE docs SET body = ?, version = version + 1 WHERE id = ? AND version = ?",
                params: [body, "d1", 1]
              })
            expect((yield* update("winner")).rowsAffected).toBe(1)
            expect((yield* update("loser")).rowsAffected).toBe(0)
            expect(yield* store.query({ sql: "SELECT body, version FROM docs WHERE id = ?", params: ["d1"] })).toEqual([
              { body: "winner", version: 2 }
            ])
          })
        )

        it.effect("INSERT ... ON CONFLICT DO NOTHING reports 0 rows for an existing key", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE owners (name TEXT PRIMARY KEY, owner TEXT NOT NULL)" })
            const insert = (owner: string) =>
              store.exec({
                sql: "INSERT INTO owners (name, owner) VALUES (?, ?) ON CONFLICT DO NOTHING",
                params: ["acme", owner]
              })
            expect((yield* insert("first")).rowsAffected).toBe(1)
            expect((yield* insert("second")).rowsAffected).toBe(0)
            expect(yield* store.query({ sql: "SELECT owner FROM owners" })).toEqual([{ owner: "first" }])
          })
        )

        it.effect("a batch applies all statements and reports each result", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE ledger (id INTEGER PRIMARY KEY, label TEXT UNIQUE NOT NULL)" })
            const results = yield* store.batch([
              { sql: "INSERT INTO ledger (label) VALUES (?)", params: ["a"] },
              { sql: "INSERT INTO ledger (label) VALUES (?)", params: ["b"] },
              { sql: "UPDATE ledger SET label = label || '!' WHERE label IN (?, ?)", params: ["a", "b"] }
            ])
            expect(results.map((r) => r.rowsAffected)).toEqual([1, 1, 2])
            expect(results.slice(0, 2).map((r) => r.lastInsertId)).toEqual([1, 2])
            expect(yield* store.query({ sql: "SELECT label FROM ledger ORDER BY id" })).toEqual([
              { label: "a!" },
              { label: "b!" }
            ])
            expect(yield* store.batch([])).toEqual([])
          })
        )

        it.effect("a batch failing in the middle leaves nothing applied and reports `constraint`", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE accounts (name TEXT PRIMARY KEY, balance INTEGER NOT NULL)" })
            yield* store.exec({ sql: "INSERT INTO accounts (name, balance) VALUES (?, ?)", params: ["existing", 10] })
            const error = yield* failureOf(
              store.batch([
                { sql: "INSERT INTO accounts (name, balance) VALUES (?, ?)", params: ["new", 1] },
                { sql: "UPDATE accounts SET balance = balance + 5 WHERE name = ?", params: ["existing"] },
                { sql: "INSERT INTO accounts (name, balance) VALUES (?, ?)", params: ["existing", 2] },
                { sql: "INSERT INTO accounts (name, balance) VALUES (?, ?)", params: ["after", 3] }
              ])
            )
            expect(error.reason).toBe("constraint")
            expect(yield* store.query({ sql: "SELECT name, balance FROM accounts ORDER BY name" })).toEqual([
              { name: "existing", balance: 10 }
            ])
          })
        )

        it.effect("writes running concurrently with a failing batch are neither lost nor swept into it", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE crowd (id INTEGER PRIMARY KEY, who TEXT NOT NULL)" })
            // Long enough (past the scheduler's 2048-op yield) that a batch letting other fibers in
            // mid-transaction would roll their writes back with it.
            const doomed = [
              ...Array.from({ length: 2500 }, (_, i) => ({ sql: "INSERT INTO crowd (id, who) VALUES (?, ?)", params: [10_000 + i, "batch"] })),
              { sql: "INSERT INTO crowd (id, who) VALUES (?, ?)", params: [10_000, "duplicate"] }
            ]
            const singles = Array.from({ length: 50 }, (_, i) =>
              store.exec({ sql: "INSERT INTO crowd (id, who) VALUES (?, ?)", params: [i + 1, "single"] })
            )
            const [batchResult] = yield* Effect.all([Effect.either(store.batch(doomed)), Effect.all(singles, { concurrency: "unbounded" })], {
              concurrency: "unbounded"
            })
            expect(Either.isLeft(batchResult) && batchResult.left.reason).toBe("constraint")
            expect(yield* store.query({ sql: "SELECT who, COUNT(*) AS n FROM crowd GROUP BY who" })).toEqual([
              { who: "single", n: 50 }
            ])
          })
        )

        it.effect("unique and not-null violations map to `constraint`", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            yield* store.exec({ sql: "CREATE TABLE handles (handle TEXT NOT NULL UNIQUE)" })
            yield* store.exec({ sql: "INSERT INTO handles (handle) VALUES (?)", params: ["taken"] })
            const duplicate = yield* failureOf(store.exec({ sql: "INSERT INTO handles (handle) VALUES (?)", params: ["taken"] }))
            expect(duplicate.reason).toBe("constraint")
            const missing = yield* failureOf(store.exec({ sql: "INSERT INTO handles (handle) VALUES (?)", params: [null] }))
            expect(missing.reason).toBe("constraint")
          })
        )

        it.effect("bad statements map to `statement`", () =>
          Effect.gen(function* () {
            const store = yield* RegistryStore
            expect((yield* failureOf(store.exec({ sql: "INSERT INTO no_such_table (x) VALUES (1)" }))).reason).toBe("statement")
            expect((yield* failureOf(store.query({ sql: "SELEKT 1" }))).reason).toBe("statement")
            expect((yield* failureOf(store.query({ sql: "SELECT missing_column FROM namespaces" }))).reason).toBe("statement")
            expect(
              (yield* failureOf(store.batch([{ sql: "CREATE TABLE ok_then_bad (x INTEGER)" }, { sql: "NOT SQL AT ALL" }]))).reason
            ).toBe("statement")
            // The CREATE before the bad statement was rolled back with it.
            expect(yield* tableNames(store)).not.toContain("ok_then_bad")
          })
        )
      }
    )

    describe("keyset pages", () => {
      // 25 rows whose first key column ties in threes: a page boundary inside a tie must neither
      // repeat nor skip a row
      const seed = (store: RegistryStoreService, namespace: string) =>
        store.batch(
          Array.from({ length: 25 }, (_, i) => ({
            sql: "INSERT INTO members (namespace, wallet, role, added_at, added_by) VALUES (?, ?, ?, ?, ?)",
            params: [namespace, `0x${String(24 - i).padStart(40, "0")}`, "reader", Math.floor(i / 3), "test"]
          }))
        )
      const members = (namespace: string): KeysetSpec => ({
        select: "SELECT wallet, added_at FROM members",
        where: ["namespace = ?"],
        params: [namespace],
        order: ["added_at", "wallet"],
        direction: "asc"
      })
      const readAll = (store: RegistryStoreService, spec: KeysetSpec, limit: number) =>
        Effect.gen(function* () {
          const pages: Array<Array<string>> = []
          let after: KeyValues | undefined = undefined
          for (;;) {
            const page: Page<string> = yield* readPage(store, spec, { limit, after }, (r) => String(r["wallet"]))
            pages.push([...page.items])
            if (page.next === undefined) return pages
            after = page.next
          }
        })

      it.scopedLive("reads a list in bounded pages in key order, ties included, and says where it ends", () =>
        Effect.gen(function* () {
          const make = yield* harness.provision
          const store = yield* build(make())
          yield* seed(store, "paged")
          yield* seed(store, "other")
          const everything = (yield* store.query({
            sql: "SELECT wallet FROM members WHERE namespace = ? ORDER BY added_at, wallet",
            params: ["paged"]
          })).map((r) => String(r["wallet"]))
          const pages = yield* readAll(store, members("paged"), 10)
          expect(pages.map((p) => p.length)).toEqual([10, 10, 5])
          expect(pages.flat()).toEqual(everything)
          // exactly a page's worth: the last page says it is the last, no empty page follows
          expect((yield* readAll(store, members("paged"), 5)).map((p) => p.length)).toEqual([5, 5, 5, 5, 5])
          expect((yield* readAll(store, members("paged"), 25)).map((p) => p.length)).toEqual([25])
          // the statement reads one row past the page, never the whole list
          const statement = pageStatement(members("paged"), { limit: 10, after: [2, "0x0"] })
          expect(statement.params?.at(-1)).toBe(11)
          expect((yield* store.query(statement)).length).toBe(11)
        })
      )

      it.scopedLive("pages newest first by a single key, with the list's own conditions", () =>
        Effect.gen(function* () {
          const make = yield* harness.provision
          const store = yield* build(make())
          yield* store.batch(
            Array.from({ length: 25 }, (_, i) => ({
              sql: "INSERT INTO audit (namespace, at, action, principal, target, detail) VALUES (?, ?, ?, ?, ?, '{}')",
              params: [i % 5 === 0 ? "elsewhere" : "paged", i, i % 2 === 0 ? "even" : "odd", "p", String(i)]
            }))
          )
          const spec: KeysetSpec = {
            select: "SELECT id, target AS wallet FROM audit",
            where: ["namespace = ?", "action = ?"],
            params: ["paged", "even"],
            order: ["id"],
            direction: "desc"
          }
          const pages = yield* readAll(store, spec, 3)
          // even i, not a multiple of 5, newest first: 24 22 18 16 14 12 8 6 4 2
          expect(pages.flat()).toEqual(["24", "22", "18", "16", "14", "12", "8", "6", "4", "2"])
          expect(pages.map((p) => p.length)).toEqual([3, 3, 3, 1])
        })
      )
    })
  })
}
