/**
 * The embedded engine's block writes: each block in the file `FsBlockstore` would give it (its
 * `NextToLast` sharding, `<dir>/<BASE32 multihash>.data`), written to a temporary file and renamed
 * into place, so a reader sees a whole block or none. Reads, `has` and deletes stay the
 * blockstore's.
 *
 * Why not the blockstore's own `put`: it runs a recursive `mkdir` of the shard directory for every
 * block, then steno's atomic writer (the block in 512 KiB writes, the rename behind a retry loop),
 * each step a trip to the thread pool wrapped in an abort race. A 256 MiB upload is 256 blocks;
 * writing them here (a shard directory made once per engine, the block in one write) took about
 * a fifth off the whole upload's time (docs/performance.md).
 *
 * The temporary name is unique per write (steno's is one per block, shared by two writers of the
 * same block at once). A temporary file left by a crash is never read (it does not end in
 * `.data`); the sweep removes old ones (`isStaleTemp`).
 */
import type { CID } from "multiformats/cid"
import * as fs from "node:fs"
import * as path from "node:path"

/** The sharding the blockstore was opened with: where a block's file lives. */
export interface BlockLayout {
  readonly encode: (cid: CID) => { readonly dir: string; readonly file: string }
}

const TEMP = ".tmp"

/** A temporary file of a block write at least `ageMs` old: its write has long ended. */
export const isStaleTemp = (file: string, modifiedMs: number, now: number, ageMs = 60 * 60 * 1000): boolean =>
  file.startsWith(".") && file.endsWith(TEMP) && now - modifiedMs >= ageMs

const call = <A>(run: (done: (error: NodeJS.ErrnoException | null, value: A) => void) => void): Promise<A> =>
  new Promise((resolve, reject) => run((error, value) => (error === null ? resolve(value) : reject(error))))

const writeAll = async (fd: number, bytes: Uint8Array): Promise<void> => {
  let at = 0
  while (at < bytes.length) {
    at += await call<number>((done) => fs.write(fd, bytes, at, bytes.length - at, null, done))
  }
}

export class BlockFiles {
  /** Shard directories made (or found) since this writer started. */
  private readonly made = new Set<string>()
  private writes = 0

  constructor(
    readonly directory: string,
    private readonly layout: BlockLayout
  ) {}

  /** The blockstore's `put`: resolves once the block is in place under its final name. */
  readonly put = async (cid: CID, bytes: Uint8Array): Promise<CID> => {
    const { dir, file } = this.layout.encode(cid)
    const shard = path.join(this.directory, dir)
    if (!this.made.has(dir)) await this.makeShard(dir, shard)
    const temp = path.join(shard, `.${file}.${process.pid}-${++this.writes}${TEMP}`)
    let fd: number
    try {
      fd = await call<number>((done) => fs.open(temp, "wx", done))
    } catch (e) {
      // the shard directory went away since it was made (removed by hand): make it again, once
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
      this.made.delete(dir)
      await this.makeShard(dir, shard)
      fd = await call<number>((done) => fs.open(temp, "wx", done))
    }
    try {
      try {
        await writeAll(fd, bytes)
      } finally {
        await call<void>((done) => fs.close(fd, (error) => done(error ?? null, undefined)))
      }
      await call<void>((done) => fs.rename(temp, path.join(shard, file), (error) => done(error ?? null, undefined)))
    } catch (e) {
      // the failure is what the caller hears; a temporary file that cannot go now goes with the sweep
      await fs.promises.rm(temp, { force: true }).catch(() => undefined)
      throw e
    }
    return cid
  }

  private async makeShard(dir: string, shard: string): Promise<void> {
    await fs.promises.mkdir(shard, { recursive: true })
    this.made.add(dir)
  }
}
