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
import { LeafBuffers, LeafPool } from "../../../src/layers/storage/LeafPool.js"
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
      const pool = new LeafPool(new LeafBuffers(LEAF))
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
    const buffers = new LeafBuffers(LEAF)
    const pool = new LeafPool(buffers)
    const { store, changed } = slowStore(5)
    await importWith(pieces(bytesOf(200 * LEAF, 9), 4), pool.releasing(store), pool.chunker)
    expect(changed).toEqual([])
    // the importer writes ten blocks at a time: about two batches of buffers, not 200
    expect(buffers.allocated).toBeLessThan(40)
  })

  it("shares its buffers with the uploads after it: a second upload of the engine allocates almost none", async () => {
    const buffers = new LeafBuffers(LEAF)
    for (const [i, size] of [200 * LEAF, 200 * LEAF + 7, 3 * LEAF].entries()) {
      const before = buffers.allocated
      const bytes = bytesOf(size, 40 + i)
      const chunks = pieces(bytes, 30 + i)
      const reference = slowStore(60 + i)
      const expected = await importWith(chunks, reference.store, fixedSize({ chunkSize: LEAF }))
      const pool = new LeafPool(buffers)
      const { store, blocks, changed } = slowStore(50 + i)
      expect(await importWith(chunks, pool.releasing(store), pool.chunker)).toBe(expected)
      expect(changed).toEqual([])
      for (const [cid, block] of reference.blocks) expect(blocks.get(cid)?.equals(block), cid).toBe(true)
      // the first leaf stays with the importer; at most that one is new after the first upload
      if (i > 0) expect(buffers.allocated - before).toBeLessThanOrEqual(1)
    }
  })

  it("gives back a buffer it took but did not hand out: a source that ends on a leaf's edge, or fails", async () => {
    const buffers = new LeafBuffers(LEAF)
    const pool = new LeafPool(buffers)
    const { store } = slowStore(3)
    await importWith(pieces(bytesOf(8 * LEAF, 5), 6), pool.releasing(store), pool.chunker)
    const held = buffers.held
    const failing = async function* () {
      yield bytesOf(LEAF + 10, 1)
      throw new Error("cut short")
    }
    const cut = new LeafPool(buffers)
    await expect(async () => {
      for await (const _ of importer([{ content: failing() }], cut.releasing(store), { ...options, chunker: cut.chunker })) void _
    }).rejects.toThrow("cut short")
    // the half-filled second leaf came back; the first leaf stays with the importer
    expect(buffers.held).toBe(held - 1)
    expect(buffers.allocated).toBeLessThanOrEqual(held + 2)
  })

  it("drops its free buffers once uploads have stopped for its idle time, and keeps them while they come", async () => {
    const buffers = new LeafBuffers(LEAF, 48, 500)
    const { store } = slowStore(7)
    const upload = async () => {
      const pool = new LeafPool(buffers)
      await importWith(pieces(bytesOf(30 * LEAF, 2), 3), pool.releasing(store), pool.chunker)
    }
    await upload()
    expect(buffers.held).toBeGreaterThan(0)
    await new Promise((r) => setTimeout(r, 300))
    await upload()
    await new Promise((r) => setTimeout(r, 300))
    // past the idle time since the first upload, within it since the second: still held
    expect(buffers.held).toBeGreaterThan(0)
    await new Promise((r) => setTimeout(r, 1200))
    expect(buffers.held).toBe(0)
  })

  it("keeps a leaf's bytes unchanged until its put resolves, for a writer that cuts while puts are in flight", async () => {
    // the importer writes in batches and cuts no leaf while a batch is in flight; a writer with a
    // sliding window does, which is what would expose a buffer lent again too early
    const buffers = new LeafBuffers(LEAF)
    const pool = new LeafPool(buffers)
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
    expect(buffers.allocated).toBeLessThan(20)
  })

  it("fills only its own buffers, and lends one released twice only once", async () => {
    const pool = new LeafPool(new LeafBuffers(LEAF))
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
