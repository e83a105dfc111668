/** The embedded engine on a real blockstore directory: reclaims never race an import. */
import { it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { NextToLast } from "blockstore-fs/sharding"
import { CID } from "multiformats/cid"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect } from "vitest"
import { makeEmbeddedEngine } from "../../../src/layers/storage/EmbeddedContentEngine.js"

const MiB = 1024 * 1024
const blockFiles = (dir: string) => readdirSync(dir).flatMap((shard) => readdirSync(path.join(dir, shard)))

describe("embedded content engine", () => {
  it.live("makes a sweep wait for an import whose pin is not recorded yet", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(path.join(process.env["PORTICO_TEST_TMP"] ?? os.tmpdir(), "portico-blocks-"))
      const engine = yield* makeEmbeddedEngine({ directory: dir, nodeId: "n" })
      const more = yield* Deferred.make<void>()
      const source = (async function* () {
        yield new Uint8Array(MiB).fill(1)
        await Effect.runPromise(Deferred.await(more))
        yield new Uint8Array(MiB).fill(2)
      })()
      const scope = yield* Scope.make()
      const adding = yield* Effect.fork(Scope.extend(engine.add(source), scope))
      yield* Effect.sleep("200 millis")
      // the import is part way: a sweep now must wait for it, and read the pins only then
      const pinned: Array<string> = []
      const sweeping = yield* Effect.fork(engine.sweep(Effect.sync(() => [...pinned])))
      yield* Effect.sleep("200 millis")
      expect(sweeping.unsafePoll()).toBeNull()
      yield* Deferred.succeed(more, undefined)
      const imported = yield* Fiber.join(adding)
      // still held: the caller records its pin here, then closes the scope
      expect(yield* engine.size(imported.cid)).toBe(2 * MiB)
      yield* engine.pin(imported.cid, "x")
      pinned.push(imported.cid)
      yield* Scope.close(scope, Exit.void)
      // the pin recorded while the sweep waited keeps all three blocks
      expect((yield* Fiber.join(sweeping)).removed).toBe(0)
      expect(yield* engine.size(imported.cid)).toBe(2 * MiB)
      // unpinned, the next sweep reclaims them
      pinned.length = 0
      expect((yield* engine.sweep(Effect.sync(() => [...pinned]))).removed).toBe(3)
      expect(blockFiles(dir)).toEqual([])
      expect(yield* engine.size(imported.cid)).toBeUndefined()
    })
  )

  it.live("keeps the blocks other pins reach when it evicts", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(path.join(process.env["PORTICO_TEST_TMP"] ?? os.tmpdir(), "portico-blocks-"))
      const engine = yield* makeEmbeddedEngine({ directory: dir, nodeId: "n" })
      const leaf = new Uint8Array(MiB).fill(7)
      const one = yield* Effect.scoped(engine.add([leaf] as unknown as AsyncIterable<Uint8Array>))
      const two = yield* Effect.scoped(engine.add((async function* () { yield leaf; yield new Uint8Array(10).fill(8) })()))
      // pinned again before the eviction ran: nothing is removed
      expect(yield* engine.evict(two.cid, Effect.succeed([one.cid, two.cid]))).toBe(false)
      expect(yield* engine.size(two.cid)).toBe(MiB + 10)
      expect(yield* engine.evict(two.cid, Effect.succeed([one.cid]))).toBe(true)
      expect(yield* engine.size(one.cid)).toBe(MiB)
      expect(yield* engine.size(two.cid)).toBeUndefined()
      yield* engine.pin(one.cid, "still whole")
      expect(yield* Effect.flip(engine.pin(two.cid, "gone"))).toMatchObject({ reason: "missing" })
    })
  )

  it.live("removes the temporary files of block writes a crash cut short once they are an hour old", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(path.join(process.env["PORTICO_TEST_TMP"] ?? os.tmpdir(), "portico-blocks-"))
      const engine = yield* makeEmbeddedEngine({ directory: dir, nodeId: "n" })
      const kept = yield* Effect.scoped(engine.add([new Uint8Array(100).fill(3)] as unknown as AsyncIterable<Uint8Array>))
      mkdirSync(path.join(dir, "ZZ"), { recursive: true })
      const old = path.join(dir, "ZZ", ".CIQOLD.data.1-1.tmp")
      const young = path.join(dir, "ZZ", ".CIQYOUNG.data.1-2.tmp")
      writeFileSync(old, "half a block")
      writeFileSync(young, "a block being written")
      const twoHoursAgo = (Date.now() - 2 * 3600 * 1000) / 1000
      utimesSync(old, twoHoursAgo, twoHoursAgo)
      expect((yield* engine.sweep(Effect.succeed([kept.cid]))).removed).toBe(0)
      expect(readdirSync(path.join(dir, "ZZ"))).toEqual([".CIQYOUNG.data.1-2.tmp"])
      expect(yield* engine.size(kept.cid)).toBe(100)
    })
  )

  it.live("pins what an import still holding the lock wrote without a walk, and walks again once every such import has closed", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(path.join(process.env["PORTICO_TEST_TMP"] ?? os.tmpdir(), "portico-blocks-"))
      const engine = yield* makeEmbeddedEngine({ directory: dir, nodeId: "n" })
      const content = () => (async function* () { yield new Uint8Array(MiB).fill(4); yield new Uint8Array(MiB).fill(5) })()
      const first = yield* Scope.make()
      const second = yield* Scope.make()
      const one = yield* Scope.extend(engine.add(content()), first)
      const two = yield* Scope.extend(engine.add(content()), second)
      expect(two.cid).toBe(one.cid)
      // a leaf removed by hand while both imports hold: the pin trusts what they wrote
      const rootFile = new NextToLast().encode(CID.parse(one.cid)).file
      const leaf = readdirSync(dir).flatMap((shard) => readdirSync(path.join(dir, shard)).map((f) => path.join(dir, shard, f))).find((f) => !f.endsWith(rootFile))
      expect(leaf).toBeDefined()
      rmSync(leaf as string)
      yield* engine.pin(one.cid, "x")
      yield* Scope.close(first, Exit.void)
      yield* engine.pin(one.cid, "x")
      // the last import closed: the pin walks the DAG and finds the leaf missing
      yield* Scope.close(second, Exit.void)
      const refused = yield* Effect.flip(engine.pin(one.cid, "x"))
      expect(refused.reason).toBe("missing")
    })
  )
})
