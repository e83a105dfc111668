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
 * A buffer is filled again only after the `put` that was given it has resolved: the bytes are on
 * disk by then (blockstore-fs writes a temporary file and renames it before resolving), and
 * nothing else holds them. The importer keeps the first leaf's entry until it knows whether the
 * file has a second one, so the first leaf's buffer is never lent: it is not in the pool.
 * A buffer is lent at most once at a time (`lent`), so a second `put` of the same bytes cannot
 * return it twice.
 */
import type { WritableStorage } from "ipfs-unixfs-importer"

export class LeafPool {
  private readonly free: Array<Buffer> = []
  /** Leaves handed out and not yet written, by their memory; a release of anything else is ignored. */
  private readonly lent = new Map<ArrayBufferLike, Buffer>()
  /** Bytes the cut leaves hold in all; the file's size once the source is read. */
  bytes = 0
  /** Buffers allocated so far (the rest of the leaves reused one). */
  allocated = 0

  constructor(
    readonly leafSize: number,
    /** Free buffers kept for reuse at most; one released beyond that is left to the collector. */
    private readonly keep = 32
  ) {}

  /**
   * The importer's chunker: the source's bytes in leaves of `leafSize`, the last one shorter, and
   * one empty leaf for an empty source (what the importer's `fixedSize` chunker gives, so the
   * CIDs are the same).
   */
  readonly chunker = (source: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> => this.cut(source)

  private async *cut(source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    let leaf = this.take()
    let filled = 0
    let first = true
    for await (const chunk of source) {
      this.bytes += chunk.length
      let at = 0
      while (at < chunk.length) {
        const n = Math.min(chunk.length - at, this.leafSize - filled)
        leaf.set(n === chunk.length ? chunk : chunk.subarray(at, at + n), filled)
        filled += n
        at += n
        if (filled === this.leafSize) {
          if (!first) this.lent.set(leaf.buffer, leaf)
          first = false
          yield leaf
          leaf = this.take()
          filled = 0
        }
      }
    }
    // the last, shorter leaf; for an empty source, the one empty leaf
    if (filled > 0 || first) yield leaf.subarray(0, filled)
  }

  private take(): Buffer {
    const reused = this.free.pop()
    if (reused !== undefined) return reused
    this.allocated++
    return Buffer.allocUnsafeSlow(this.leafSize)
  }

  /** `bytes` is written: its buffer, if it is a lent leaf, may be filled again. */
  release(bytes: Uint8Array): void {
    const leaf = this.lent.get(bytes.buffer)
    if (leaf === undefined) return
    this.lent.delete(bytes.buffer)
    if (this.free.length < this.keep) this.free.push(leaf)
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
