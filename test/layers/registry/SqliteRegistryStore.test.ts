import * as Reactivity from "@effect/experimental/Reactivity"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer } from "effect"
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
})
