import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { RqliteSqlEngine } from "../../../src/layers/sql/RqliteSqlEngine.js"
import { hasRqlited, rqlited, rqlitedMissingMessage } from "../../support/rqlited.js"

if (!hasRqlited()) {
  describe("RqliteSqlEngine", () => {
    it("needs the rqlited binary", () => {
      expect.fail(rqlitedMissingMessage())
    })
  })
} else {
  describe("RqliteSqlEngine", () => {
    // node fires a timer past 2^31-1 ms at once and refuses an infinite AbortSignal.timeout: a
    // deadline that long must mean "none", not "already over"
    for (const [label, timeout] of [
      ["a 40-day", Duration.days(40)],
      ["an infinite", Duration.infinity]
    ] as const) {
      it.scopedLive(`answers and exports with ${label} deadline`, () =>
        Effect.gen(function* () {
          const server = yield* rqlited()
          const engine = RqliteSqlEngine.make({ url: server.url, timeout })
          yield* engine.statement({ sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)", params: [], kind: "write" }, "counted")
          yield* engine.statement({ sql: "INSERT INTO t VALUES (?, ?)", params: [7, "seven"], kind: "write" }, "counted")
          const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-engine-"))
          yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
          const dest = path.join(dir, "copy.db")
          yield* engine.exportTo(dest)
          const copy = new Database(dest, { readonly: true })
          try {
            expect(copy.prepare("SELECT id, name FROM t").all()).toEqual([{ id: 7, name: "seven" }])
          } finally {
            copy.close()
          }
        })
      )
    }
  })
}
