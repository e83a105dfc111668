/**
 * A dynamic version's prepared directory (`versions/<n>`: the unpacked app, its build or install,
 * `start.json`) as one tar.gz in content storage, and back (docs/deployments.md, "Replicas"). The
 * home node packs it once the version is prepared and stores it under the reference kind
 * `deployment` (ref: the deployment's name, as a static site's files), so it counts against the
 * namespace's quota and survives its unpins; a replica fetches it by CID through its own storage
 * engine (Kubo's swarm across nodes) and unpacks it with the upload's own checks (Archive.ts), so
 * a damaged or forged archive can write nothing outside the version's directory.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Readable } from "node:stream"
import * as zlib from "node:zlib"
import * as tar from "tar-stream"
import type { Refused } from "../../Refused.js"
import type { StorageService } from "../../storage/Storage.js"
import { type ArchiveRefused, type ArchiveWriteFailed, extractArchive } from "../Archive.js"

/** Walks `root` depth first, in name order, yielding paths relative to it (directories before their entries). */
const walk = async function* (root: string, rel = ""): AsyncGenerator<{ readonly rel: string; readonly stat: fs.Stats }> {
  const names = (await fs.promises.readdir(path.join(root, rel))).sort()
  for (const name of names) {
    const entry = rel === "" ? name : `${rel}/${name}`
    const stat = await fs.promises.lstat(path.join(root, entry))
    yield { rel: entry, stat }
    if (stat.isDirectory()) yield* walk(root, entry)
  }
}

/** `dir` as a gzipped tar stream: files, directories and symlinks with their modes; nothing else exists in a prepared version. */
export const packDirectory = (dir: string): AsyncIterable<Uint8Array> => {
  const pack = tar.pack()
  const fill = async () => {
    for await (const { rel, stat } of walk(dir)) {
      const mode = stat.mode & 0o7777
      if (stat.isDirectory()) {
        pack.entry({ name: `${rel}/`, type: "directory", mode })
      } else if (stat.isSymbolicLink()) {
        pack.entry({ name: rel, type: "symlink", linkname: await fs.promises.readlink(path.join(dir, rel)), mode })
      } else if (stat.isFile()) {
        await new Promise<void>((resolve, reject) => {
          const sink = pack.entry({ name: rel, type: "file", size: stat.size, mode }, (error) => (error ? reject(error) : resolve()))
          fs.createReadStream(path.join(dir, rel)).on("error", reject).pipe(sink)
        })
      }
    }
    pack.finalize()
  }
  fill().catch((error: unknown) => pack.destroy(error instanceof Error ? error : new Error(String(error))))
  return Readable.from(pack.pipe(zlib.createGzip({ level: 6 })))
}

/** Stores version directory `versionDir` of deployment `name` as content; answers its CID. */
export const storeVersion = (
  storage: StorageService,
  namespace: string,
  name: string,
  version: number,
  versionDir: string
): Effect.Effect<string, Refused<"BAD_REQUEST" | "PAYLOAD_TOO_LARGE" | "UNAVAILABLE">> =>
  Effect.map(storage.store(namespace, "deployment", name, `${name} version ${version}.tar.gz`, packDirectory(versionDir), () => []), (stored) => stored.cid)

/** Why a fetch did not end with the directory in place. */
export type FetchFailure =
  /** The content is not (yet) retrievable here: worth another try. */
  | { readonly _tag: "NotYet"; readonly detail: string }
  /** Anything else: no retry helps. */
  | { readonly _tag: "Refused"; readonly detail: string }

const archiveFailure = (e: ArchiveRefused | ArchiveWriteFailed): FetchFailure =>
  e._tag === "ArchiveRefused" ? { _tag: "Refused", detail: `the stored version is not a valid archive: ${e.message}` } : { _tag: "Refused", detail: `not written: ${e.detail}` }

/**
 * Fetches `cid` (held by `namespace`) and unpacks it as `target`, which must not exist. The
 * namespace not holding the CID, or an archive the checks refuse, fails at once; an engine that
 * cannot read it yet (its blocks still travelling, a peer down) is `NotYet`.
 */
export const fetchVersion = (storage: StorageService, namespace: string, cid: string, target: string): Effect.Effect<void, FetchFailure> =>
  Effect.gen(function* () {
    const opened = yield* Effect.mapError(storage.open(namespace, cid), (e): FetchFailure =>
      e.code === "UNAVAILABLE" ? { _tag: "NotYet", detail: e.reason } : { _tag: "Refused", detail: `the version's content: ${e.reason}` }
    )
    let readFailure: string | undefined
    const source = async function* () {
      try {
        yield* storage.read(opened.cid, 0, opened.size)
      } catch (error) {
        readFailure = error instanceof Error ? error.message : String(error)
        throw error
      }
    }
    const unpacked = yield* Effect.either(extractArchive(source(), target))
    if (unpacked._tag === "Left") {
      const failure: FetchFailure = readFailure !== undefined ? { _tag: "NotYet", detail: readFailure } : archiveFailure(unpacked.left)
      return yield* Effect.fail(failure)
    }
  })
