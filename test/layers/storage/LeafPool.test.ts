/**
 * The pooled chunker against the importer's own: the same leaves and CIDs for every size and
 * every way the source is cut, and no buffer filled again before its block was written. The store
 * here reads a block's bytes at the start and at the end of a slow, out-of-order `put`, as a disk
 * write does; a buffer reused too early would change them in between.
 */
import { importer, type WritableStorage } from "ipfs-unixfs-importer"
import { fixedSize } from "ipfs-unixfs-importer/chunker"
import { balanced } from "ipfs-unixfs-importer/layout"
import { CID } from "multiformats/cid"
import { sha256 } from "multiformats/hashes/sha2"
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import { LeafPool } from "../../../src/layers/storage/LeafPool.js"
import { bytesOf } from "../../support/bytes.js"

const LEAF = 1024

/** `bytes` as the network might deliver it: pieces of random sizes (some empty, some over a leaf). */
const pieces = (bytes: Uint8Array, seed: number): Array<Uint8Array> => {
  const out: Array<Uint8Array> = []
  let x = seed
  for (let at = 0; at < bytes.length; ) {
    x = (x * 1103515245 + 12345) >>> 0
    const n = Math.min(bytes.length - at, x % (3 * LEAF))
    out.push(bytes.subarray(at, at + n))
    at += n
  }
  return out
}

async function* delivered(chunks: ReadonlyArray<Uint8Array>) {
  for (const c of chunks) yield c
}

/** A store whose puts finish out of order after a while and check the bytes did not change meanwhile. */
const slowStore = (seed: number) => {
  const blocks = new Map<string, Buffer>()
  const changed: Array<string> = []
  let x = seed
  const store: WritableStorage = {
    put: async (cid, bytes) => {
      const view = bytes as Uint8Array
      const before = Buffer.from(view)
      x = (x * 1103515245 + 12345) >>> 0
      await new Promise((r) => setTimeout(r, x % 7))
      if (!before.equals(view)) changed.push(cid.toString())
      // the block's digest is the one its CID names
      if (!createHash("sha256").update(view).digest().equals(Buffer.from(cid.multihash.digest))) changed.push(cid.toString())
      blocks.set(cid.toString(), before)
      return cid
    }
  }
  return { store, blocks, changed }
}

const options = { cidVersion: 1 as const, rawLeaves: true, layout: balanced({ maxChildrenPerNode: 4 }), reduceSingleLeafToSelf: true }

const importWith = async (chunks: ReadonlyArray<Uint8Array>, store: WritableStorage, chunker: (s: AsyncIterable<Uint8Array>) => AsyncIterable<Uint8Array>) => {
  let root = ""
  for await (const entry of importer([{ content: delivered(chunks) }], store, { ...options, chunker })) root = entry.cid.toString()
  return root
}

describe("LeafPool", () => {
  const sizes = [0, 1, LEAF - 1, LEAF, LEAF + 1, 2 * LEAF, 7 * LEAF + 3, 40 * LEAF, 95 * LEAF + 17]

  it.each(sizes)("cuts %i bytes into the importer's leaves and CIDs, and writes every block unchanged", async (size) => {
    for (const seed of [1, 2, 3]) {
      const bytes = bytesOf(size, size + seed)
      const chunks = pieces(bytes, seed)
      const reference = slowStore(seed)
      const expected = await importWith(chunks, reference.store, fixedSize({ chunkSize: LEAF }))
      const pool = new LeafPool(LEAF)
      const pooled = slowStore(seed + 100)
      const root = await importWith(chunks, pool.releasing(pooled.store), pool.chunker)
      expect(root).toBe(expected)
      expect(pool.bytes).toBe(size)
      expect(pooled.changed).toEqual([])
      expect([...pooled.blocks.keys()].sort()).toEqual([...reference.blocks.keys()].sort())
      for (const [cid, block] of reference.blocks) expect(pooled.blocks.get(cid)?.equals(block), cid).toBe(true)
    }
  })

  it("reuses written leaves instead of allocating one per leaf", async () => {
    const pool = new LeafPool(LEAF)
    const { store, changed } = slowStore(5)
    await importWith(pieces(bytesOf(200 * LEAF, 9), 4), pool.releasing(store), pool.chunker)
    expect(changed).toEqual([])
    // the importer writes ten blocks at a time: about two batches of buffers, not 200
    expect(pool.allocated).toBeLessThan(40)
  })

  it("keeps a leaf's bytes unchanged until its put resolves, for a writer that cuts while puts are in flight", async () => {
    // the importer writes in batches and cuts no leaf while a batch is in flight; a writer with a
    // sliding window does, which is what would expose a buffer lent again too early
    const pool = new LeafPool(LEAF)
    const { store, blocks, changed } = slowStore(21)
    const pooled = pool.releasing(store)
    const bytes = bytesOf(64 * LEAF + 5, 13)
    const inFlight = new Set<Promise<unknown>>()
    let index = 0
    const cids: Array<string> = []
    for await (const leaf of pool.chunker(delivered(pieces(bytes, 8)))) {
      const cid = CID.createV1(0x55, await sha256.digest(leaf))
      cids.push(cid.toString())
      const put = Promise.resolve(pooled.put(cid, leaf)).finally(() => inFlight.delete(put))
      inFlight.add(put)
      if (inFlight.size >= 6) await Promise.race(inFlight)
      index++
    }
    await Promise.all(inFlight)
    expect(changed).toEqual([])
    expect(index).toBe(65)
    expect(Buffer.concat(cids.map((c) => blocks.get(c) ?? Buffer.alloc(0)))).toEqual(Buffer.from(bytes))
    expect(pool.allocated).toBeLessThan(20)
  })

  it("fills only its own buffers, and lends one released twice only once", async () => {
    const pool = new LeafPool(LEAF)
    const foreign = new Uint8Array(LEAF)
    pool.release(foreign)
    const leaves = pool.chunker(delivered(pieces(bytesOf(4 * LEAF, 3), 2)))[Symbol.asyncIterator]()
    const next = async () => (await leaves.next()).value as Uint8Array
    const first = await next()
    const second = await next()
    pool.release(second)
    pool.release(second)
    const third = await next()
    const fourth = await next()
    expect(third.buffer).toBe(second.buffer)
    expect(fourth.buffer).not.toBe(second.buffer)
    for (const leaf of [first, second, third, fourth]) expect(leaf.buffer).not.toBe(foreign.buffer)
  })
})
