import * as Reactivity from "@effect/experimental/Reactivity"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Either, Layer } from "effect"
import Database from "better-sqlite3"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { RegistryStore } from "../../../src/layers/registry/RegistryStore.js"
import { registryDbPath, SqliteRegistryStore } from "../../../src/layers/registry/SqliteRegistryStore.js"
import { registryStoreSuite } from "./RegistryStore.suite.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(path.join(tmpdir(), "portico-sqlite-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

registryStoreSuite("SqliteRegistryStore", {
  provision: Effect.map(tempDir, (dir) => () =>
    SqliteRegistryStore.layer({
      filename: registryDbPath(dir),
      // The concurrent-build test opens several connections in this one thread, where a
      // connection waiting on the lock blocks the holder too: keep that wait short.
      busyTimeout: Duration.millis(250)
    })
  )
})

describe("SqliteRegistryStore specifics", () => {
  it.scopedLive("creates missing directories and reports engine `sqlite`", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const filename = path.join(dir, "nested", "deeper", "registry.db")
      const context = yield* Layer.build(SqliteRegistryStore.layer({ filename }))
      const store = Context.get(context, RegistryStore)
      expect(store.engine).toBe("sqlite")
      expect(existsSync(filename)).toBe(true)
    })
  )

  it.scopedLive("an unusable path fails the build with `unavailable`", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      // A regular file where a directory is needed.
      writeFileSync(path.join(dir, "file"), "")
      const error = yield* Effect.flip(Layer.build(SqliteRegistryStore.layer({ filename: path.join(dir, "file", "registry.db") })))
      expect(error.reason).toBe("unavailable")
    })
  )

  it.scopedLive("another connection holding the write lock makes writes `unavailable` after the busy timeout", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const filename = registryDbPath(dir)
      const store = Context.get(
        yield* Layer.build(SqliteRegistryStore.layer({ filename, busyTimeout: Duration.millis(150) })),
        RegistryStore
      )
      yield* store.exec({ sql: "CREATE TABLE t (x INTEGER)" })
      // A second connection (as the CLI would open) takes the write lock and keeps it.
      const other = yield* SqliteClient.make({ filename }).pipe(Effect.provide(Reactivity.layer))
      yield* other.unsafe("BEGIN IMMEDIATE")
      const started = Date.now()
      const error = yield* Effect.flip(store.exec({ sql: "INSERT INTO t (x) VALUES (1)" }))
      expect(error.reason).toBe("unavailable")
      expect(Date.now() - started).toBeGreaterThanOrEqual(100)
      // Reads still work under WAL while the lock is held, and writes resume once it is gone.
      expect(yield* store.query({ sql: "SELECT COUNT(*) AS n FROM t" })).toEqual([{ n: 0 }])
      yield* other.unsafe("ROLLBACK")
      expect((yield* store.exec({ sql: "INSERT INTO t (x) VALUES (1)" })).rowsAffected).toBe(1)
    })
  )

  it.scopedLive("an answer kept between commits is read again after any connection commits", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const filename = registryDbPath(dir)
      const store = Context.get(yield* Layer.build(SqliteRegistryStore.layer({ filename })), RegistryStore)
      const queryNow = store.queryNow
      if (queryNow === undefined) return expect.fail("the SQLite store reads on the spot")
      yield* store.exec({ sql: "CREATE TABLE t (id TEXT PRIMARY KEY, v INTEGER)" })
      yield* store.exec({ sql: "INSERT INTO t VALUES ('a', 1)" })
      const read = () => Either.getOrThrow(queryNow({ sql: "SELECT v FROM t WHERE id = ?", params: ["a"] }))
      expect(read()).toEqual([{ v: 1 }])
      const kept = read()
      expect(read()).toBe(kept) // the very same answer: nothing was committed in between

      // another connection, as a second gateway or the CLI would hold, commits a change
      const other = new Database(filename)
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      other.prepare("UPDATE t SET v = 2 WHERE id = 'a'").run()
      expect(read()).toEqual([{ v: 2 }])
      // this store's own writes, and a write that changes nothing the statement reads, too
      yield* store.exec({ sql: "UPDATE t SET v = 3 WHERE id = 'a'" })
      expect(read()).toEqual([{ v: 3 }])
      const before = read()
      other.prepare("INSERT INTO t VALUES ('b', 9)").run()
      const after = read()
      expect(after).toEqual([{ v: 3 }])
      expect(after).not.toBe(before)
      // a checkpoint that empties the WAL moves the generation on as well
      other.pragma("wal_checkpoint(TRUNCATE)")
      other.prepare("UPDATE t SET v = 4 WHERE id = 'a'").run()
      expect(read()).toEqual([{ v: 4 }])
      // kept answers cannot be changed by one caller under another's feet
      expect(Object.isFrozen(read()[0])).toBe(true)
    })
  )

  it.scopedLive("inside holdNow one check for commits stands for every read; the first read after it checks again", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const filename = registryDbPath(dir)
      const store = Context.get(yield* Layer.build(SqliteRegistryStore.layer({ filename })), RegistryStore)
      const { queryNow, holdNow } = store
      if (queryNow === undefined || holdNow === undefined) return expect.fail("the SQLite store reads on the spot")
      yield* store.exec({ sql: "CREATE TABLE t (id TEXT PRIMARY KEY, v INTEGER)" })
      yield* store.exec({ sql: "INSERT INTO t VALUES ('a', 1)" })
      const read = () => Either.getOrThrow(queryNow({ sql: "SELECT v FROM t WHERE id = ?", params: ["a"] }))
      const kept = read()
      const other = new Database(filename)
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      const inside = holdNow(() => {
        // committed after the hold's one check: the requests it answers were all read before
        other.prepare("UPDATE t SET v = 2 WHERE id = 'a'").run()
        const first = read()
        // a hold inside a hold checks nothing more
        const nested = holdNow(() => read())
        return [first, nested]
      })
      expect(inside[0]).toBe(kept)
      expect(inside[1]).toBe(kept)
      expect(read()).toEqual([{ v: 2 }])
      // a hold that begins after the commit sees it
      other.prepare("UPDATE t SET v = 3 WHERE id = 'a'").run()
      expect(holdNow(() => read())).toEqual([{ v: 3 }])
      // and one that ends by throwing lets the next read check again
      expect(() =>
        holdNow(() => {
          other.prepare("UPDATE t SET v = 4 WHERE id = 'a'").run()
          throw new Error("stop")
        })
      ).toThrow("stop")
      expect(read()).toEqual([{ v: 4 }])
    })
  )
})
