/** Ranges of UnixFS files read block by block, checked against the bytes that went in. */
import { importer } from "ipfs-unixfs-importer"
import { fixedSize } from "ipfs-unixfs-importer/chunker"
import { balanced } from "ipfs-unixfs-importer/layout"
import { CID } from "multiformats/cid"
import { describe, expect, it } from "vitest"
import { fileSize, readRange } from "../../../src/layers/storage/UnixfsReader.js"

/** Imports into a map, with small chunks and few links so the DAG has several levels. */
const build = async (bytes: Uint8Array, rawLeaves: boolean) => {
  const blocks = new Map<string, Uint8Array>()
  const store = { put: async (cid: CID, b: Uint8Array) => (blocks.set(cid.toString(), b), cid) } as never
  let root: CID | undefined
  for await (const entry of importer([{ content: [bytes] }], store, {
    cidVersion: rawLeaves ? 1 : 0,
    rawLeaves,
    chunker: fixedSize({ chunkSize: 16 }),
    layout: balanced({ maxChildrenPerNode: 3 }),
    reduceSingleLeafToSelf: true
  })) {
    root = entry.cid
  }
  let reads = 0
  const source = {
    read: async (cid: CID) => {
      reads++
      const b = blocks.get(cid.toString())
      if (b === undefined) throw new Error("absent")
      return b
    }
  }
  return { root: root as CID, source, reads: () => reads, blocks }
}

const collect = async (it: AsyncIterable<Uint8Array>) => {
  const parts: Array<Uint8Array> = []
  for await (const p of it) parts.push(p)
  return Buffer.concat(parts)
}

describe("UnixFS range reader", () => {
  for (const rawLeaves of [true, false]) {
    it(`reads every range of a multi-level file (${rawLeaves ? "raw leaves" : "dag-pb leaves"})`, async () => {
      const bytes = new Uint8Array(1000).map((_, i) => (i * 7 + 3) % 251)
      const { root, source } = await build(bytes, rawLeaves)
      expect(await fileSize(source, root)).toBe(1000)
      expect(await collect(readRange(source, root, 0, 1000))).toEqual(Buffer.from(bytes))
      const ranges: ReadonlyArray<readonly [number, number]> = [[0, 1], [15, 2], [16, 16], [17, 300], [999, 1], [500, 500], [0, 0], [47, 49]]
      for (const [offset, length] of ranges) {
        expect(await collect(readRange(source, root, offset, length)), `${offset}+${length}`).toEqual(Buffer.from(bytes.slice(offset, offset + length)))
      }
    })
  }

  it("reads only the blocks a small range needs", async () => {
    const { root, source, reads, blocks } = await build(new Uint8Array(4096).map((_, i) => (i * 31) % 256 ^ (i >> 8)), true)
    await collect(readRange(source, root, 2000, 10))
    // the path from the root to one leaf, not the file's ~260 blocks
    expect(reads()).toBeLessThan(10)
    expect(blocks.size).toBeGreaterThan(200)
  })

  it("fails, rather than inventing bytes, when a block is missing", async () => {
    const { root, source, blocks } = await build(new Uint8Array(100).fill(2), true)
    for (const key of [...blocks.keys()]) if (key !== root.toString()) blocks.delete(key)
    await expect(collect(readRange(source, root, 0, 100))).rejects.toThrow("absent")
  })
})
