/**
 * A deployment's content archive (tar.gz) unpacked into a directory as it streams in: never held
 * whole in memory, bounded in compressed size, unpacked size and entry count, and refused whole
 * (nothing left behind) on the first entry that could reach outside the tree or is not a plain
 * file, directory or link. tar-stream only parses; every file is written here, after our own
 * checks, into a fresh directory beside the target that is renamed into place on success and
 * removed on any failure.
 */
import { Data, Effect } from "effect"
import { constants as fsConstants } from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Readable, Transform, type TransformCallback } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as zlib from "node:zlib"
import * as tar from "tar-stream"

/** The caps on one archive. Defaults below; settings may lower or raise them per gateway. */
export interface ArchiveLimits {
  /** Bytes of the tar.gz as uploaded. */
  readonly maxCompressedBytes: number
  /** Bytes of all regular files together, as unpacked. */
  readonly maxUnpackedBytes: number
  /** Entries of every kind (files, directories, links). */
  readonly maxEntries: number
}

/**
 * 256 MiB uploaded (the spec's other upload caps, import and backup, are 256 MiB), 1 GiB unpacked
 * (a Next.js standalone build or a Node.js app with its node_modules), 100,000 entries.
 */
export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = {
  maxCompressedBytes: 256 * 1024 * 1024,
  maxUnpackedBytes: 1024 * 1024 * 1024,
  maxEntries: 100_000
}

/** Longest entry path and path segment taken (Linux's PATH_MAX and NAME_MAX). */
const MAX_PATH_BYTES = 4096
const MAX_SEGMENT_BYTES = 255
/** Symlinks followed resolving one link's target (Linux's own limit). */
const MAX_LINK_HOPS = 40

export type ArchiveRefusalReason =
  /** Over a cap: the route answers 413. */
  | "compressed_too_large"
  | "unpacked_too_large"
  | "too_many_entries"
  /** The archive's content: the route answers 400. */
  | "absolute_path"
  | "parent_segment"
  | "link_escapes"
  | "through_link"
  | "special_file"
  | "duplicate_entry"
  | "bad_name"
  | "malformed"

/** The archive is refused; `path` names the entry when one is to blame. Nothing was left on disk. */
export class ArchiveRefused extends Data.TaggedError("ArchiveRefused")<{
  readonly reason: ArchiveRefusalReason
  readonly path: string | undefined
  readonly detail: string
}> {
  override get message(): string {
    return this.path === undefined ? this.detail : `${this.detail}: ${this.path}`
  }
  /** Whether the refusal is a size cap (413) rather than the archive's content (400). */
  get overCap(): boolean {
    return this.reason === "compressed_too_large" || this.reason === "unpacked_too_large" || this.reason === "too_many_entries"
  }
}

/** The platform could not write (disk full, permissions, target taken): not the archive's fault. */
export class ArchiveWriteFailed extends Data.TaggedError("ArchiveWriteFailed")<{ readonly detail: string }> {}

export interface ArchiveSummary {
  readonly entries: number
  readonly files: number
  readonly unpackedBytes: number
  readonly compressedBytes: number
}

const refuse = (reason: ArchiveRefusalReason, detail: string, entryPath?: string) => new ArchiveRefused({ reason, path: entryPath, detail })

/**
 * Unpacks `source` (a tar.gz, from a request body, a file or any byte stream) into `target`,
 * which must not exist yet. On success `target` holds exactly the archive's tree; on any failure
 * it does not exist and nothing is left beside it. An interruption stops the unpacking and
 * completes only once it has ended and removed its partial directory (one that lands during the
 * final rename finds `target` in place), so a caller's cleanup never runs beside a write.
 */
export const extractArchive = (
  source: AsyncIterable<Uint8Array>,
  target: string,
  limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS
): Effect.Effect<ArchiveSummary, ArchiveRefused | ArchiveWriteFailed> =>
  Effect.async<ArchiveSummary, ArchiveRefused | ArchiveWriteFailed>((resume) => {
    const controller = new AbortController()
    const settled = unpack(source, target, limits, controller.signal).then(
      (summary) => resume(Effect.succeed(summary)),
      (error: unknown) =>
        resume(Effect.fail(error instanceof ArchiveRefused ? error : new ArchiveWriteFailed({ detail: error instanceof Error ? error.message : String(error) })))
    )
    return Effect.promise(() => {
      controller.abort()
      return settled
    })
  })

/**
 * An entry's path as segments under the root: no absolute path, no `..`, no NUL, control
 * character or backslash (a Windows separator, or a name nothing serves well); `.` and empty
 * segments dropped. The root itself is `[]`.
 */
export const entrySegments = (name: string): ReadonlyArray<string> | ArchiveRefused => {
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) return refuse("absolute_path", "an absolute path", name)
  if (/[\u0000-\u001f\u007f\\]/.test(name)) return refuse("bad_name", "a control character or backslash in a name", name)
  if (Buffer.byteLength(name) > MAX_PATH_BYTES) return refuse("bad_name", `a path over ${MAX_PATH_BYTES} bytes`, name.slice(0, 200))
  const segments = name.split("/").filter((segment) => segment !== "" && segment !== ".")
  if (segments.includes("..")) return refuse("parent_segment", "a '..' segment", name)
  if (segments.some((segment) => Buffer.byteLength(segment) > MAX_SEGMENT_BYTES)) return refuse("bad_name", `a name over ${MAX_SEGMENT_BYTES} bytes`, name.slice(0, 200))
  return segments
}

/** Whether a symlink's target, read from the link's directory, stays in the tree by its text alone. */
export const linkTextStaysInside = (linkSegments: ReadonlyArray<string>, target: string): boolean => {
  if (target === "" || target.startsWith("/") || target.includes("\u0000")) return false
  const stack = linkSegments.slice(0, -1)
  for (const segment of target.split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === "..") {
      if (stack.length === 0) return false
      stack.pop()
    } else stack.push(segment)
  }
  return true
}

const fileMode = (archived: number | undefined): number => ((archived ?? 0o644) & 0o111 ? 0o755 : 0o644)

const unpack = async (source: AsyncIterable<Uint8Array>, target: string, limits: ArchiveLimits, signal: AbortSignal): Promise<ArchiveSummary> => {
  const parent = path.dirname(target)
  await fs.mkdir(parent, { recursive: true })
  const work = await fs.mkdtemp(path.join(parent, `.${path.basename(target)}.partial-`))
  let firstRefusal: ArchiveRefused | undefined
  const stop: (refusal: ArchiveRefused) => never = (refusal) => {
    firstRefusal ??= refusal
    throw refusal
  }
  try {
    let compressedBytes = 0
    const counted = async function* () {
      for await (const chunk of source) {
        if (signal.aborted) throw new Error("interrupted")
        compressedBytes += chunk.byteLength
        if (compressedBytes > limits.maxCompressedBytes) stop(refuse("compressed_too_large", `the archive is over ${limits.maxCompressedBytes} bytes`))
        yield chunk
      }
    }
    // headers, padding and a gzip bomb's zeros after the end are bytes too: bound what is inflated
    const maxInflated = limits.maxUnpackedBytes + (limits.maxEntries + 2) * 4096
    let inflated = 0
    const inflatedCap = new Transform({
      transform(chunk: Buffer, _encoding, callback: TransformCallback) {
        inflated += chunk.byteLength
        if (inflated > maxInflated) {
          firstRefusal ??= refuse("unpacked_too_large", `the archive unpacks to over ${limits.maxUnpackedBytes} bytes`)
          callback(firstRefusal)
        } else callback(null, chunk)
      }
    })
    const root = await fs.realpath(work)
    const extract = tar.extract()
    // the iterator listens from here on: a parse error raised before the loop starts is not lost
    const parsed = extract[Symbol.asyncIterator]()
    // an interrupted upload may stall mid-entry: destroying the parser ends the loop below
    signal.addEventListener("abort", () => extract.destroy(new Error("interrupted")), { once: true })
    const feeding = pipeline(Readable.from(counted()), zlib.createGunzip(), inflatedCap, extract)
    // the loop below sees a failure of the feed as the extractor's error; the feed's own is kept
    const fed = feeding.then(
      () => undefined,
      (error: unknown) => error
    )

    const links: Array<ReadonlyArray<string>> = []
    let entries = 0
    let files = 0
    let unpackedBytes = 0
    try {
      for await (const entry of { [Symbol.asyncIterator]: () => parsed }) {
        if (signal.aborted) throw new Error("interrupted")
        const header = entry.header
        entries += 1
        if (entries > limits.maxEntries) stop(refuse("too_many_entries", `the archive has over ${limits.maxEntries} entries`))
        const segments = entrySegments(header.name)
        if (segments instanceof ArchiveRefused) stop(segments)
        const relative = segments.join("/")
        const at = path.join(root, relative)
        switch (header.type) {
          case "directory": {
            await ensureDirectory(root, segments as ReadonlyArray<string>, header.name, stop)
            break
          }
          case "file":
          case "contiguous-file": {
            if (segments.length === 0) stop(refuse("malformed", "a file entry names the root", header.name))
            const size = header.size ?? 0
            if (unpackedBytes + size > limits.maxUnpackedBytes) stop(refuse("unpacked_too_large", `the archive unpacks to over ${limits.maxUnpackedBytes} bytes`, header.name))
            await ensureDirectory(root, segments.slice(0, -1), header.name, stop)
            await refuseExisting(at, header.name, stop)
            // O_EXCL: never through a link planted at this name, never over another entry
            const handle = await fs.open(at, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600)
            try {
              let written = 0
              for await (const chunk of entry as AsyncIterable<Buffer>) {
                written += chunk.byteLength
                if (written > size) stop(refuse("malformed", "an entry longer than its header says", header.name))
                await handle.write(chunk)
              }
              await handle.chmod(fileMode(header.mode))
            } finally {
              await handle.close()
            }
            unpackedBytes += size
            files += 1
            continue
          }
          case "symlink": {
            const linkTarget = header.linkname ?? ""
            if (segments.length === 0) stop(refuse("malformed", "a link entry names the root", header.name))
            if (!linkTextStaysInside(segments, linkTarget)) stop(refuse("link_escapes", `a symlink to '${linkTarget.slice(0, 200)}' leaves the tree`, header.name))
            await ensureDirectory(root, segments.slice(0, -1), header.name, stop)
            await refuseExisting(at, header.name, stop)
            await fs.symlink(linkTarget, at)
            links.push(segments)
            break
          }
          case "link": {
            const linkSegments = entrySegments(header.linkname ?? "")
            if (linkSegments instanceof ArchiveRefused) stop(refuse("link_escapes", `a hard link to '${(header.linkname ?? "").slice(0, 200)}' leaves the tree`, header.name))
            if (segments.length === 0) stop(refuse("malformed", "a link entry names the root", header.name))
            const existing = path.join(root, linkSegments.join("/"))
            // the target must be a regular file this archive already wrote, reached through real directories only
            await ensureDirectory(root, linkSegments.slice(0, -1), header.name, stop, false)
            const stat = await fs.lstat(existing).catch(() => undefined)
            if (stat === undefined || !stat.isFile()) stop(refuse("malformed", "a hard link to no file earlier in the archive", header.name))
            await ensureDirectory(root, segments.slice(0, -1), header.name, stop)
            await refuseExisting(at, header.name, stop)
            await fs.link(existing, at)
            break
          }
          default:
            stop(refuse("special_file", `a ${header.type ?? "unknown"} entry (only files, directories and links are taken)`, header.name))
        }
        // directories and links carry no data; drain whatever a header claims
        for await (const _ of entry as AsyncIterable<Buffer>) void _
      }
    } catch (error) {
      extract.destroy()
      if (firstRefusal !== undefined) throw firstRefusal
      // a broken feed (not gzip, cut short) reaches the loop as the parser's bare destruction: the
      // feed's own error says what was wrong. Not waited for beyond a turn: a stalled upload would hold the answer.
      const feedError = await Promise.race([fed, new Promise<undefined>((resolve) => setImmediate(() => resolve(undefined)))])
      throw feedError !== undefined && isFormatError(feedError) ? malformed(feedError) : error
    }
    const feedError = await fed
    if (feedError !== undefined) throw firstRefusal ?? malformed(feedError)
    for (const link of links) {
      if (!(await linkResolvesInside(root, link))) stop(refuse("link_escapes", "a symlink resolves, through other links, outside the tree", link.join("/")))
    }
    // mkdtemp made it 0700; the tree is readable as unpacked (the sandbox decides who reads it)
    await fs.chmod(work, 0o755)
    if (signal.aborted) throw new Error("interrupted")
    await fs.rename(work, target)
    return { entries, files, unpackedBytes, compressedBytes }
  } catch (error) {
    await fs.rm(work, { recursive: true, force: true })
    if (firstRefusal !== undefined) throw firstRefusal
    if (error instanceof ArchiveRefused) throw error
    if (isFormatError(error)) throw malformed(error)
    throw error
  }
}

/** zlib's and tar-stream's own complaints: the upload is not a well-formed tar.gz. */
const isFormatError = (error: unknown): boolean =>
  error instanceof Error &&
  ((typeof (error as NodeJS.ErrnoException).code === "string" && (error as NodeJS.ErrnoException).code?.startsWith("Z_") === true) ||
    /Unexpected end of data|Invalid tar header|unexpected end of file|incorrect header check|Invalid header|checksum/i.test(error.message))

const malformed = (error: unknown): ArchiveRefused =>
  refuse("malformed", `not a well-formed tar.gz (${error instanceof Error ? error.message.slice(0, 120) : "unreadable"})`)

/**
 * Makes (or finds) each directory of `segments` under `root`, and refuses if any is a link or a
 * file: no entry is ever written through a symlink, wherever that link points.
 */
const ensureDirectory = async (
  root: string,
  segments: ReadonlyArray<string>,
  entryName: string,
  stop: (refusal: ArchiveRefused) => never,
  create = true
): Promise<void> => {
  let current = root
  for (const segment of segments) {
    current = path.join(current, segment)
    const stat = await fs.lstat(current).catch((error: NodeJS.ErrnoException) => (error.code === "ENOENT" ? undefined : Promise.reject(error)))
    if (stat === undefined) {
      if (!create) stop(refuse("malformed", "a hard link to no file earlier in the archive", entryName))
      await fs.mkdir(current, { mode: 0o755 })
    } else if (stat.isSymbolicLink()) stop(refuse("through_link", "an entry under a symlink", entryName))
    else if (!stat.isDirectory()) stop(refuse("malformed", "an entry under a file", entryName))
  }
}

/** A name is written once: a second entry of a file or link name is refused, not overwritten. */
const refuseExisting = async (at: string, entryName: string, stop: (refusal: ArchiveRefused) => never): Promise<void> => {
  const exists = await fs.lstat(at).then(
    () => true,
    () => false
  )
  if (exists) stop(refuse("duplicate_entry", "a name that appears twice", entryName))
}

/**
 * Resolves a written symlink as the kernel would, one segment at a time through the links the
 * archive made, and says whether it stays under the root all the way. Each link's text was checked
 * alone; this catches chains such as `up -> ..` inside `sub/`, then `x -> sub/up/..`.
 */
const linkResolvesInside = async (root: string, link: ReadonlyArray<string>): Promise<boolean> => {
  const stack = link.slice(0, -1)
  const pending = (await fs.readlink(path.join(root, ...link))).split("/")
  let hops = 0
  let missing = false
  while (pending.length > 0) {
    const segment = pending.shift() as string
    if (segment === "" || segment === ".") continue
    if (segment === "..") {
      if (stack.length === 0) return false
      stack.pop()
      continue
    }
    if (missing) {
      stack.push(segment)
      continue
    }
    const at = path.join(root, ...stack, segment)
    const stat = await fs.lstat(at).catch(() => undefined)
    if (stat === undefined) {
      missing = true
      stack.push(segment)
    } else if (stat.isSymbolicLink()) {
      hops += 1
      if (hops > MAX_LINK_HOPS) return false
      const next = await fs.readlink(at)
      if (next.startsWith("/")) return false
      pending.unshift(...next.split("/"))
    } else stack.push(segment)
  }
  return true
}
