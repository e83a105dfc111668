/**
 * How a static site lives in content storage. Storage holds files, not directories (one CID per
 * byte stream, spec §2.4), so a site is each of its files stored as content plus a manifest, a
 * small JSON document stored as content too, that maps each path to its file's CID and size. The
 * manifest's CID is the site's content CID, the version's artifact: a version is immutable, a
 * rollback points at an older manifest, and files two versions share are stored once.
 *
 * Every file and the manifest are referenced under kind `deployment` (ref: the caller's, e.g. the
 * deployment's name), so the site survives the namespace's unpins and counts against its quota.
 * The manifest is written only by the gateway (from an archive it extracted and checked), never
 * taken from a tenant, so serving trusts its CIDs.
 */
import { Effect, Either, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Refused, refuse } from "../../Refused.js"
import type { StorageService } from "../../storage/Storage.js"
import type { StorageRefused } from "../../storage/StorageRefused.js"

export const SiteFile = Schema.Struct({ cid: Schema.String, size: Schema.NonNegativeInt })
export type SiteFile = typeof SiteFile.Type

/**
 * A manifest as serving reads it. Stored as `{"portico_site":1,"files":{"<path>":{"cid","size"}}}`,
 * `files` keyed by the path inside the site (`/`-separated, no leading slash). In memory the files
 * are a Map: a path is any name a tenant's archive holds (`constructor`, `__proto__`), never a
 * member of an object's prototype.
 */
export interface SiteManifest {
  readonly files: ReadonlyMap<string, SiteFile>
  /** The stored document's bytes: what the manifest cache counts. */
  readonly bytes: number
}

/** A manifest larger than this is not written nor read (about 80,000 files of short paths). */
export const MANIFEST_MAX_BYTES = 8 * 1024 * 1024

/**
 * The most one file adds to the manifest besides its JSON-quoted path: `:{"cid":"…","size":…},`
 * with a CID of up to 100 characters (CIDv1 base32 of SHA-256 is 59) and a size of 16 digits.
 */
const ENTRY_MAX_BYTES = 140

export interface StoredSite {
  /** The manifest's CID: the site's content CID. */
  readonly cid: string
  readonly files: number
  /** Bytes of the files (the manifest not counted). */
  readonly bytes: number
}

/**
 * The regular files under `root`, as site paths. Links are followed only to a regular file that is
 * itself inside `root` (the archive reader already refused links leaving the tree); a link to a
 * directory is not followed, so a loop cannot make the walk endless.
 */
const siteFiles = async (root: string): Promise<ReadonlyArray<{ readonly sitePath: string; readonly file: string }>> => {
  const realRoot = await fs.promises.realpath(root)
  const found: Array<{ sitePath: string; file: string }> = []
  const walk = async (dir: string, prefix: string): Promise<void> => {
    const entries = await fs.promises.readdir(dir, { withFileTypes: true })
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const entry of entries) {
      const full = path.join(dir, entry.name)
      const sitePath = prefix === "" ? entry.name : `${prefix}/${entry.name}`
      if (entry.isDirectory()) await walk(full, sitePath)
      else if (entry.isFile()) found.push({ sitePath, file: full })
      else if (entry.isSymbolicLink()) {
        const target = await fs.promises.realpath(full).catch(() => undefined)
        if (target === undefined || !target.startsWith(realRoot + path.sep)) continue
        if ((await fs.promises.stat(target)).isFile()) found.push({ sitePath, file: target })
      }
    }
  }
  await walk(realRoot, "")
  return found
}

async function* jsonBytes(text: string) {
  yield Buffer.from(text, "utf8")
}

/**
 * Stores every file of the directory `root` and then the manifest, all referenced under kind
 * `deployment` and `ref`, and answers the manifest's CID. A refusal (the quota, the store down)
 * leaves the files stored so far referenced under `ref`: the caller releases `ref` when it gives up.
 */
export const storeSiteDirectory = (
  storage: StorageService,
  namespace: string,
  ref: string,
  root: string
): Effect.Effect<StoredSite, Refused<"BAD_REQUEST" | "PAYLOAD_TOO_LARGE" | "UNAVAILABLE">> =>
  Effect.gen(function* () {
    const files = yield* Effect.tryPromise({
      try: () => siteFiles(root),
      // the directory is the gateway's own extraction: a failure here is not the tenant's
      catch: () => refuse("UNAVAILABLE", "the site's files could not be read", "retry the deploy")
    })
    // refused before a byte is stored: a manifest serving could not read would make a site that never answers
    const bound = files.reduce((sum, { sitePath }) => sum + Buffer.byteLength(JSON.stringify(sitePath)) + ENTRY_MAX_BYTES, 64)
    if (bound > MANIFEST_MAX_BYTES) {
      return yield* Effect.fail(
        refuse("PAYLOAD_TOO_LARGE", `the site has too many files: ${files.length} files would make a manifest of over ${MANIFEST_MAX_BYTES / 1024 / 1024} MiB`, "a static site takes about 80,000 files of short paths; bundle or drop files")
      )
    }
    const entries: Array<[string, SiteFile]> = []
    let bytes = 0
    for (const { sitePath, file } of files) {
      const stored = yield* storage.store(namespace, "deployment", ref, sitePath, fs.createReadStream(file), () => [])
      entries.push([sitePath, { cid: stored.cid, size: stored.size }])
      bytes += stored.size
    }
    // fromEntries defines own properties, so a path named __proto__ is a key like any other
    const text = JSON.stringify({ portico_site: 1, files: Object.fromEntries(entries) })
    const stored = yield* storage.store(namespace, "deployment", ref, "site manifest", jsonBytes(text), () => [])
    return { cid: stored.cid, files: files.length, bytes }
  })

/** Why a manifest could not be read: the storage refusal, or a document that is not a manifest. */
export type ManifestUnreadable = StorageRefused | { readonly _tag: "NotAManifest"; readonly detail: string }

/** Reads and checks the manifest `cid`, which `namespace` must hold. */
export const readManifest = (storage: StorageService, namespace: string, cid: string): Effect.Effect<SiteManifest, ManifestUnreadable> =>
  Effect.gen(function* () {
    const opened = yield* storage.open(namespace, cid)
    if (opened.size > MANIFEST_MAX_BYTES) {
      return yield* Effect.fail({ _tag: "NotAManifest" as const, detail: `the manifest is ${opened.size} bytes` })
    }
    const text = yield* Effect.tryPromise({
      try: async () => {
        const chunks: Array<Uint8Array> = []
        for await (const chunk of storage.read(opened.cid, 0, opened.size)) chunks.push(chunk)
        return Buffer.concat(chunks).toString("utf8")
      },
      catch: (e) => ({ _tag: "NotAManifest" as const, detail: `the manifest could not be read: ${String(e)}` })
    })
    return yield* Either.match(parseManifest(text), {
      onLeft: (detail) => Effect.fail({ _tag: "NotAManifest" as const, detail }),
      onRight: Effect.succeed
    })
  })

const decodeFile = Schema.decodeUnknownEither(SiteFile)

/** The manifest in `text`, or why it is not one. JSON.parse keeps every key an own property. */
export const parseManifest = (text: string): Either.Either<SiteManifest, string> => {
  let document: unknown
  try {
    document = JSON.parse(text)
  } catch (e) {
    return Either.left(`the manifest is not JSON: ${String(e)}`)
  }
  if (typeof document !== "object" || document === null || (document as { portico_site?: unknown }).portico_site !== 1) {
    return Either.left("not a portico_site 1 manifest")
  }
  const listed = (document as { files?: unknown }).files
  if (typeof listed !== "object" || listed === null || Array.isArray(listed)) return Either.left("the manifest has no files object")
  const files = new Map<string, SiteFile>()
  for (const [sitePath, entry] of Object.entries(listed)) {
    const file = decodeFile(entry)
    if (Either.isLeft(file)) return Either.left(`the manifest's entry ${JSON.stringify(sitePath)} is not a file: ${file.left.message}`)
    files.set(sitePath, file.right)
  }
  return Either.right({ files, bytes: Buffer.byteLength(text) })
}
