/**
 * Fixed-size leaves for the UnixFS importer, cut into buffers that are filled again once the
 * blockstore has written them.
 *
 * Why: an upload arrives in 64 KiB socket reads, and the importer's own chunker copies them into
 * a new 1 MiB buffer per leaf. A leaf waits for its block write long enough to outlive the young
 * generation, so every leaf becomes old-generation external memory that only a full mark-compact
 * frees; V8 starts one each time that memory grows by 64 MiB. With the gateway's heap, a 256 MiB
 * upload paid for about ten of them (docs/performance.md). Here a leaf's buffer goes back to the
 * pool when the blockstore's `put` of that leaf has finished, so an upload allocates as many
 * buffers as it has blocks in flight, not one per MiB.
 *
 * The buffers themselves (`LeafBuffers`) are the engine's, shared by every upload of the process:
 * a pool per upload still allocated its twenty-odd buffers anew each time, and a gateway taking
 * one upload after another fell into a run of mark-compacts (six to eight per 256 MiB upload,
 * twice the upload's CPU) from the second or third upload on. Shared buffers are allocated once
 * and reused while uploads keep coming; after a quiet minute the free ones are dropped, so an
 * idle gateway does not hold them.
 *
 * A buffer is filled again only after the `put` that was given it has resolved: the bytes are on
 * disk by then (BlockFiles writes a temporary file and renames it before resolving), and
 * nothing else holds them. The importer keeps the first leaf's entry until it knows whether the
 * file has a second one, so the first leaf's buffer is never lent: it does not go back. A buffer
 * is lent at most once at a time (`lent`), so a second `put` of the same bytes cannot return it
 * twice.
 */
import type { WritableStorage } from "ipfs-unixfs-importer"

/** Leaf-sized buffers shared by the uploads of one engine. */
export class LeafBuffers {
  private readonly free: Array<Buffer> = []
  private lastUse = 0
  private trimmer: ReturnType<typeof setTimeout> | undefined
  /** Buffers allocated so far (every other leaf reused one). */
  allocated = 0

  constructor(
    readonly size: number,
    /** Free buffers kept at most; one given back beyond that is left to the collector. */
    private readonly keep = 48,
    /** Free buffers are dropped once none has been taken or given back for this long. */
    private readonly idleMs = 60_000
  ) {}

  /** Free buffers held now. */
  get held(): number {
    return this.free.length
  }

  take(): Buffer {
    this.lastUse = Date.now()
    const reused = this.free.pop()
    if (reused !== undefined) return reused
    this.allocated++
    return Buffer.allocUnsafeSlow(this.size)
  }

  give(buffer: Buffer): void {
    this.lastUse = Date.now()
    if (this.free.length >= this.keep) return
    this.free.push(buffer)
    this.trimmer ??= setTimeout(this.trim, this.idleMs).unref()
  }

  private readonly trim = () => {
    const quiet = Date.now() - this.lastUse
    this.trimmer = quiet >= this.idleMs ? undefined : setTimeout(this.trim, this.idleMs - quiet).unref()
    if (this.trimmer === undefined) this.free.length = 0
  }
}

/** One upload's leaves, cut into the engine's shared buffers. */
export class LeafPool {
  /** Leaves handed out and not yet written, by their memory; a release of anything else is ignored. */
  private readonly lent = new Map<ArrayBufferLike, Buffer>()
  /** Bytes the cut leaves hold in all; the file's size once the source is read. */
  bytes = 0

  constructor(private readonly buffers: LeafBuffers) {}

  get leafSize(): number {
    return this.buffers.size
  }

  /**
   * The importer's chunker: the source's bytes in leaves of `leafSize`, the last one shorter, and
   * one empty leaf for an empty source (what the importer's `fixedSize` chunker gives, so the
   * CIDs are the same). It also does the importer's chunk validation: anything but bytes in the
   * source fails the import (the importer's own validator would turn a string or an array of
   * numbers into bytes; no caller of the engine passes those).
   */
  readonly chunker = (source: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> => this.cut(source)

  private async *cut(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    /** The buffer being filled; undefined while a full one is out with the importer. */
    let leaf: Buffer | undefined = this.take()
    let filled = 0
    let first = true
    try {
      for await (const chunk of source) {
        if (!(chunk instanceof Uint8Array)) throw new TypeError("the content is not bytes")
        this.bytes += chunk.length
        let at = 0
        while (at < chunk.length) {
          const into: Buffer = leaf ?? (leaf = this.take())
          const n = Math.min(chunk.length - at, this.leafSize - filled)
          into.set(n === chunk.length ? chunk : chunk.subarray(at, at + n), filled)
          filled += n
          at += n
          if (filled === this.leafSize) {
            leaf = undefined
            filled = 0
            if (!first) this.lent.set(into.buffer, into)
            first = false
            yield into
          }
        }
      }
      // the last, shorter leaf; for an empty source, the one empty leaf
      if (filled > 0 || first) {
        const last = leaf ?? this.take()
        leaf = undefined
        if (!first) this.lent.set(last.buffer, last)
        yield last.subarray(0, filled)
      }
    } finally {
      // a buffer taken and not handed out (the source ended on a leaf's edge, or failed) goes back
      if (leaf !== undefined) this.buffers.give(leaf)
    }
  }

  private take(): Buffer {
    return this.buffers.take()
  }

  /** `bytes` is written: its buffer, if it is a lent leaf, may be filled again. */
  release(bytes: Uint8Array): void {
    const leaf = this.lent.get(bytes.buffer)
    if (leaf === undefined) return
    this.lent.delete(bytes.buffer)
    this.buffers.give(leaf)
  }

  /** `store` for the importer: every `put` that succeeds releases its bytes. */
  releasing(store: WritableStorage): WritableStorage {
    return {
      put: async (cid, bytes, options) => {
        const stored = await store.put(cid, bytes, options)
        if (bytes instanceof Uint8Array) this.release(bytes)
        return stored
      }
    }
  }
}
