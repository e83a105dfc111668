/**
 * The embedded content engine: blocks in a `blockstore-fs` directory under `<dataDir>/blocks`,
 * files cut into blocks by the IPFS project's UnixFS importer and read back by its exporter, with
 * the `unixfs-v1-2025` profile so a CID here is the CID Kubo gives the same bytes.
 *
 * Pins are the registry's (one per CID cluster-wide); this engine only checks that a pinned DAG
 * is whole and reclaims what no pin reaches, under the ReclaimLock it shares with imports.
 */
import * as dagPb from "@ipld/dag-pb"
import { FsBlockstore } from "blockstore-fs"
import { NextToLast } from "blockstore-fs/sharding"
import { Effect, Layer } from "effect"
import { CID } from "multiformats/cid"
import { promises as fs } from "node:fs"
import * as path from "node:path"
import { UNIXFS_PROFILE } from "../../domain/ContentId.js"
import { testDirectory } from "../TestLayer.js"
import { BlockFiles, isStaleTemp } from "./BlockFiles.js"
import { LeafBuffers, LeafPool } from "./LeafPool.js"
import { makeReclaimLock } from "./ReclaimLock.js"
import { ContentEngine, ContentEngineError, type ContentEngineService, EVICT_WAIT, type PinState } from "./ContentEngine.js"
import { type BlockSource, fileSize, readRange } from "./UnixfsReader.js"

/**
 * The UnixFS importer, loaded on the first upload and kept: a gateway's start does not pay for
 * its modules (about 50 ms of CPU) before anything is uploaded.
 */
let importerModules: Promise<readonly [typeof import("ipfs-unixfs-importer"), typeof import("ipfs-unixfs-importer/layout")]> | undefined
const loadImporter = () => (importerModules ??= Promise.all([import("ipfs-unixfs-importer"), import("ipfs-unixfs-importer/layout")]))

const RAW = 0x55
const DAG_PB = 0x70

const failed = (detail: unknown) => new ContentEngineError({ reason: "failed", detail: String(detail) })

export interface EmbeddedOptions {
  readonly directory: string
  readonly nodeId: string
}

export const makeEmbeddedEngine = (options: EmbeddedOptions) =>
  Effect.gen(function* () {
    /** The file a block lives in: the blockstore's own sharding, so writes, walks and sweeps agree. */
    const sharding = new NextToLast()
    const store = new FsBlockstore(options.directory, { shardingStrategy: sharding })
    yield* Effect.tryPromise({ try: () => store.open(), catch: failed })
    const lock = yield* makeReclaimLock
    /**
     * Roots imported by an `add` whose scope is still open, with how many such scopes hold each.
     * Their blocks were all written by that import and no reclaim can run while it holds the
     * lock, so pinning them needs no walk (for a 256 MiB upload the walk was 256 sequential
     * checks, 20-30 ms of the request).
     */
    const justImported = new Map<string, number>()
    /** Leaf buffers every upload of this engine cuts into and gives back (LeafPool.ts). */
    const leafBuffers = new LeafBuffers(UNIXFS_PROFILE.chunkSize)

    /** Block writes of imports (BlockFiles.ts); reads, `has` and deletes are the blockstore's. */
    const writer = new BlockFiles(options.directory, sharding)
    const blockKey = (cid: CID): string => sharding.encode(cid).file

    /** A block file read whole, in one call (the blockstore's `get` reads 64 KiB pieces and copies them). */
    const blockPath = (cid: CID): string => {
      const { dir, file } = sharding.encode(cid)
      return path.join(options.directory, dir, file)
    }
    const blocks: BlockSource = { read: (cid) => fs.readFile(blockPath(cid)) }
    const readBlock = async (cid: CID): Promise<Uint8Array | undefined> => {
      try {
        return await fs.readFile(blockPath(cid))
      } catch {
        return undefined
      }
    }

    /**
     * Visits the blocks of a DAG, root first, descending where `visit` says so. Raw leaves are
     * not read (their CID says all). False when a dag-pb node on the way is absent.
     */
    const walk = async (root: CID, visit: (cid: CID) => boolean | Promise<boolean>): Promise<boolean> => {
      let whole = true
      const stack: Array<CID> = [root]
      while (stack.length > 0) {
        const cid = stack.pop() as CID
        if (!(await visit(cid))) continue
        if (cid.code !== DAG_PB) continue
        const bytes = await readBlock(cid)
        if (bytes === undefined) {
          whole = false
          continue
        }
        const node = dagPb.decode(bytes)
        for (let i = node.Links.length - 1; i >= 0; i--) {
          const link = node.Links[i]
          if (link !== undefined) stack.push(link.Hash)
        }
      }
      return whole
    }

    /** Block keys that the DAGs of `roots` reach (as far as they are present). */
    const mark = async (roots: ReadonlyArray<string>): Promise<Set<string>> => {
      const marked = new Set<string>()
      for (const text of roots) {
        let root: CID
        try {
          root = CID.parse(text)
        } catch {
          continue
        }
        await walk(root, (cid) => {
          const key = blockKey(cid)
          if (marked.has(key)) return false
          marked.add(key)
          return true
        })
      }
      return marked
    }

    /** Fails `missing` unless every block of the DAG of `text` is here. */
    const checkWhole = (text: string) =>
      Effect.tryPromise({
        try: async () => {
          const root = CID.parse(text)
          let present = true
          const whole = await walk(root, async (cid) => {
            if (cid.code === RAW && !(await store.has(cid))) present = false
            return present
          })
          return whole && present
        },
        catch: failed
      }).pipe(
        Effect.flatMap((whole) =>
          whole ? Effect.void : Effect.fail(new ContentEngineError({ reason: "missing", detail: `${text} is not whole here` }))
        )
      )

    const engine: ContentEngineService = {
      kind: "embedded",
      add: (bytes) =>
        Effect.gen(function* () {
          yield* lock.hold
          const imported = yield* Effect.tryPromise({
            try: async () => {
              const [{ importer }, { balanced }] = await loadImporter()
              let last: { cid: CID } | undefined
              // leaves cut into the engine's reused buffers (LeafPool.ts); the pool also counts
              // the file's bytes, since the importer's entry size counts the DAG's own nodes too
              const leaves = new LeafPool(leafBuffers)
              for await (const entry of importer([{ content: bytes }], leaves.releasing(writer), {
                cidVersion: UNIXFS_PROFILE.cidVersion,
                rawLeaves: UNIXFS_PROFILE.rawLeaves,
                chunker: leaves.chunker,
                // the chunker refuses anything but bytes itself (LeafPool.ts): one pass per chunk less
                chunkValidator: passThrough,
                layout: balanced({ maxChildrenPerNode: UNIXFS_PROFILE.maxLinksPerNode }),
                reduceSingleLeafToSelf: true
              })) {
                last = entry
              }
              if (last === undefined) throw new Error("the importer produced no root")
              return { cid: last.cid.toString(), size: leaves.bytes }
            },
            catch: (e) =>
              new ContentEngineError({ reason: "failed", detail: e instanceof Error ? e.message : String(e), cause: e })
          })
          justImported.set(imported.cid, (justImported.get(imported.cid) ?? 0) + 1)
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              const left = (justImported.get(imported.cid) ?? 1) - 1
              if (left > 0) justImported.set(imported.cid, left)
              else justImported.delete(imported.cid)
            })
          )
          return imported
        }),

      size: (text) =>
        Effect.tryPromise({
          try: async () => {
            const cid = CID.parse(text)
            if (!(await store.has(cid))) return undefined
            return await fileSize(blocks, cid)
          },
          catch: failed
        }),

      read: (text, offset, length) => readRange(blocks, CID.parse(text), offset, length),

      pin: (text) => (justImported.has(text) ? Effect.void : checkWhole(text)),

      // The registry row is the pin; the blocks wait for the sweep.
      unpin: () => Effect.void,

      status: (text) =>
        Effect.tryPromise({ try: () => store.has(CID.parse(text)), catch: failed }).pipe(
          Effect.map(
            (present): PinState =>
              present
                ? { status: "pinned", replicationMin: 1, replicationMax: 1, replicationFactor: 1, peers: [options.nodeId], error: "" }
                : {
                    status: "error",
                    replicationMin: 1,
                    replicationMax: 1,
                    replicationFactor: 0,
                    peers: [options.nodeId],
                    error: "blocks missing on this node"
                  }
          )
        ),

      evict: (text, keep) =>
        lock.exclusiveWithin(EVICT_WAIT)(
          Effect.flatMap(keep, (pinned) =>
            pinned.includes(text)
              ? Effect.succeed(false)
              : Effect.tryPromise({
            try: async () => {
              const kept = await mark(pinned)
              const doomed: Array<CID> = []
              await walk(CID.parse(text), (cid) => {
                if (kept.has(blockKey(cid))) return false
                doomed.push(cid)
                return true
              })
              for (const cid of doomed) await store.delete(cid)
              for (const cid of doomed) if (await store.has(cid)) return false
              return true
            },
            catch: failed
          })
          )
        ),

      sweep: (keep) =>
        lock.exclusive(
          Effect.flatMap(keep, (pinned) => Effect.tryPromise({
            try: async () => {
              const kept = await mark(pinned)
              let removed = 0
              for (const shard of await readdirOrEmpty(options.directory)) {
                const dir = path.join(options.directory, shard)
                const now = Date.now()
                for (const file of await readdirOrEmpty(dir)) {
                  if (file.endsWith(".tmp")) {
                    // a block write a crash cut short (BlockFiles.ts); young ones may still be writing
                    const stat = await fs.stat(path.join(dir, file)).catch(() => undefined)
                    if (stat !== undefined && isStaleTemp(file, stat.mtimeMs, now)) await fs.rm(path.join(dir, file), { force: true })
                    continue
                  }
                  if (!file.endsWith(".data") || kept.has(file)) continue
                  await fs.rm(path.join(dir, file), { force: true })
                  removed++
                }
              }
              return { removed }
            },
            catch: failed
          }))
        )
    }
    return engine
  })

const passThrough = (source: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> => source

const readdirOrEmpty = async (dir: string): Promise<Array<string>> => {
  try {
    return await fs.readdir(dir)
  } catch {
    return []
  }
}

export const EmbeddedContentEngine = {
  layer: (options: EmbeddedOptions) => Layer.effect(ContentEngine, makeEmbeddedEngine(options)),
  /** The engine on a block directory of its own, removed with the layer (test double). */
  Test: Layer.scoped(
    ContentEngine,
    Effect.flatMap(testDirectory("blocks"), (directory) => makeEmbeddedEngine({ directory, nodeId: "test-node" }))
  )
}
