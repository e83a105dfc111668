/**
 * The record of namespace deletions over the registry's SQLite file: opened once per name with
 * every part owed, parts marked done or failed, the lease that keeps a second gateway out, the
 * retry's schedule, and the close that ends `pending`. The retry's backoff doubles up to its cap.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { retryDelayMs } from "../../../src/layers/namespaces/NamespaceTeardown.js"
import { TEARDOWN_PARTS, TeardownLedger } from "../../../src/layers/namespaces/TeardownLedger.js"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"

const layer = Layer.provideMerge(TeardownLedger.Live, SqliteRegistryStore.Test)

describe("TeardownLedger", () => {
  it.scoped("records a deletion once, tracks its parts and lease, and closes it", () =>
    Effect.gen(function* () {
      const ledger = yield* TeardownLedger
      const store = yield* RegistryStore
      const row = { namespace: "shop", actor: "0xabc", reason: "", startedAt: 1000, runner: "node-a", leaseUntil: 5000, nextAt: 1000 }
      expect(yield* ledger.pending("shop")).toBe(false)
      expect(yield* ledger.open(row, [{ sql: "INSERT INTO audit (namespace, at, action, principal, target, detail) VALUES ('x', 1, 'a', 'p', 't', '{}')" }])).toBe(true)
      expect(yield* ledger.pending("shop")).toBe(true)
      // the statements given ride in the same batch
      expect(yield* store.query({ sql: "SELECT action FROM audit WHERE namespace = 'x'" })).toHaveLength(1)
      // a second open writes nothing, its statements included
      expect(yield* ledger.open({ ...row, runner: "node-b" }, [{ sql: "INSERT INTO audit (namespace, at, action, principal, target, detail) VALUES ('x', 2, 'b', 'p', 't', '{}')" }])).toBe(false)
      expect(yield* store.query({ sql: "SELECT action FROM audit WHERE namespace = 'x'" })).toHaveLength(1)
      expect((yield* ledger.owed("shop")).map((p) => p.part)).toEqual([...TEARDOWN_PARTS])

      // another gateway waits for the lease; the runner renews it
      expect(yield* ledger.claim("shop", "node-b", 4000, 9000)).toBe(false)
      expect(yield* ledger.claim("shop", "node-a", 4000, 9000)).toBe(true)
      expect(yield* ledger.claim("shop", "node-b", 9000, 12000)).toBe(true)
      expect((yield* ledger.get("shop"))?.runner).toBe("node-b")

      yield* ledger.done("shop", "access", 2000)
      yield* ledger.failed("shop", "cache", "cache: redis down")
      yield* ledger.failed("shop", "cache", "cache: redis down again")
      const owed = yield* ledger.owed("shop")
      expect(owed.map((p) => p.part)).not.toContain("access")
      expect(owed.find((p) => p.part === "cache")).toEqual({ part: "cache", attempts: 2, lastError: "cache: redis down again" })

      // later: the lease given up, the retry scheduled, an attempt counted (the runner's only)
      yield* ledger.later("shop", "node-a", 99_999)
      expect((yield* ledger.get("shop"))?.attempts).toBe(0)
      yield* ledger.later("shop", "node-b", 20_000)
      expect(yield* ledger.get("shop")).toMatchObject({ attempts: 1, nextAt: 20_000, leaseUntil: 0 })
      expect((yield* ledger.all).map((r) => r.namespace)).toEqual(["shop"])

      yield* store.batch(ledger.close("shop"))
      expect(yield* ledger.pending("shop")).toBe(false)
      expect(yield* ledger.owed("shop")).toEqual([])
      // and the name can be recorded again, every part owed afresh
      expect(yield* ledger.open(row, [])).toBe(true)
      expect(yield* ledger.owed("shop")).toHaveLength(TEARDOWN_PARTS.length)
    }).pipe(Effect.provide(layer))
  )

  it("retries after 5 s, doubling, at most every 10 minutes", () => {
    expect([0, 1, 2, 3].map(retryDelayMs)).toEqual([5_000, 10_000, 20_000, 40_000])
    expect(retryDelayMs(7)).toBe(600_000)
    expect(retryDelayMs(1000)).toBe(600_000)
  })
})
