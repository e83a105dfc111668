/**
 * The engine's block writer against the blockstore that reads its blocks: the same files, whole or
 * absent, under concurrent writes of one block, a shard directory removed under it, and failures.
 */
import { FsBlockstore } from "blockstore-fs"
import { NextToLast } from "blockstore-fs/sharding"
import { CID } from "multiformats/cid"
import * as raw from "multiformats/codecs/raw"
import { sha256 } from "multiformats/hashes/sha2"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { BlockFiles, isStaleTemp } from "../../../src/layers/storage/BlockFiles.js"
import { bytesOf } from "../../support/bytes.js"

const freshDir = () => mkdtempSync(path.join(process.env["PORTICO_TEST_TMP"] ?? os.tmpdir(), "portico-blockfiles-"))
const rawCid = async (bytes: Uint8Array) => CID.createV1(raw.code, await sha256.digest(bytes))
const read = async (store: FsBlockstore, cid: CID) => {
  const parts: Array<Uint8Array> = []
  for await (const part of store.get(cid)) parts.push(part)
  return Buffer.concat(parts)
}
/** Every file under the store's shard directories, hidden ones (temporaries) included. */
const files = (dir: string) => readdirSync(dir).flatMap((shard) => readdirSync(path.join(dir, shard)))

describe("BlockFiles", () => {
  it("writes each block where FsBlockstore reads it, and leaves no temporary file", async () => {
    const dir = freshDir()
    const layout = new NextToLast()
    const writer = new BlockFiles(dir, layout)
    const store = new FsBlockstore(dir, { shardingStrategy: layout })
    await store.open()
    const blocks = [bytesOf(0, 1), bytesOf(1, 2), bytesOf(1024 * 1024, 3), bytesOf(1024 * 1024 + 1, 4)]
    for (const bytes of blocks) {
      const cid = await rawCid(bytes)
      expect(await writer.put(cid, bytes)).toBe(cid)
      expect(await store.has(cid)).toBe(true)
      expect((await read(store, cid)).equals(Buffer.from(bytes))).toBe(true)
    }
    expect(files(dir).every((f) => f.endsWith(".data"))).toBe(true)
    expect(files(dir)).toHaveLength(blocks.length)
  })

  it("takes concurrent writes of one block, and one over a block already there", async () => {
    const dir = freshDir()
    const layout = new NextToLast()
    const writer = new BlockFiles(dir, layout)
    const store = new FsBlockstore(dir, { shardingStrategy: layout })
    const bytes = bytesOf(300_000, 9)
    const cid = await rawCid(bytes)
    await Promise.all(Array.from({ length: 8 }, () => writer.put(cid, bytes)))
    await writer.put(cid, bytes)
    expect((await read(store, cid)).equals(Buffer.from(bytes))).toBe(true)
    expect(files(dir)).toEqual([layout.encode(cid).file])
  })

  it("makes a shard directory again when it was removed after its first block", async () => {
    const dir = freshDir()
    const layout = new NextToLast()
    const writer = new BlockFiles(dir, layout)
    const first = bytesOf(100, 1)
    const cid = await rawCid(first)
    await writer.put(cid, first)
    rmSync(path.join(dir, layout.encode(cid).dir), { recursive: true })
    await writer.put(cid, first)
    expect((await read(new FsBlockstore(dir, { shardingStrategy: layout }), cid)).equals(Buffer.from(first))).toBe(true)
  })

  it("fails a write it cannot finish and leaves neither the block nor a temporary file", async () => {
    const dir = freshDir()
    const layout = new NextToLast()
    const bytes = bytesOf(5000, 4)
    const cid = await rawCid(bytes)
    const { dir: shard, file } = layout.encode(cid)
    // the block's final name is taken by a directory: the rename cannot replace it
    mkdirSync(path.join(dir, shard, file, "inside"), { recursive: true })
    await expect(new BlockFiles(dir, layout).put(cid, bytes)).rejects.toThrow()
    expect(readdirSync(path.join(dir, shard))).toEqual([file])
    // the shard directory is a file: nothing can be written under it
    const other = bytesOf(10, 5)
    const otherCid = await rawCid(other)
    const otherShard = layout.encode(otherCid).dir
    rmSync(path.join(dir, otherShard), { recursive: true, force: true })
    writeFileSync(path.join(dir, otherShard), "not a directory")
    await expect(new BlockFiles(dir, layout).put(otherCid, other)).rejects.toThrow()
  })

  it.each([
    [".ABC.data.12-1.tmp", 0, 3_600_000, true],
    [".ABC.data.12-1.tmp", 1, 3_600_000, false],
    ["ABC.data", 0, 7_200_000, false],
    [".ABC.data", 0, 7_200_000, false],
    ["ABC.data.tmp", 0, 7_200_000, false]
  ])("counts %s modified at %i as stale at %i: %s", (file, modified, now, stale) => {
    expect(isStaleTemp(file, modified, now)).toBe(stale)
  })
})
