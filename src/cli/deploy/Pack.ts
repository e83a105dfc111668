/**
 * The content archive `portico deploy` uploads: a tar.gz written to a file as it is read from disk
 * (tar-stream's packer into node:zlib's gzip into the file, with back-pressure), so memory does
 * not grow with the app, and the size is known before the upload starts (for the progress bar and
 * an exact Content-Length).
 *
 * What goes in: regular files (mode 0755 when any execute bit is set, else 0644, as the gateway
 * writes them anyway), directories, and symbolic links whose target stays inside the source
 * directory. Refused before anything is uploaded, naming the path: a link with an absolute target
 * or one that leaves the directory (by its text, or through other links), and anything that is
 * not a file, directory or link (sockets, fifos, devices). The gateway refuses all of these too
 * (Archive.ts); refusing here says which file, before a long upload. `.git` directories, at any
 * depth, are left out. Entries are in name order, so the same tree packs the same way.
 */
import { createReadStream, createWriteStream, type Dirent, promises as fsp } from "node:fs"
import * as path from "node:path"
import { pipeline } from "node:stream/promises"
import { createGzip } from "node:zlib"
import * as tar from "tar-stream"
import { CliError } from "../Cli.js"

/** One thing to put in the archive: a directory's contents (or one file) under a path of the archive ("" is the root). */
export interface PackSource {
  readonly from: string
  readonly as: string
}

export interface Packed {
  readonly file: string
  readonly bytes: number
  readonly files: number
  readonly entries: number
}

const refused = (what: string): CliError => new CliError(`cannot pack the app: ${what}`)

const posixJoin = (...parts: ReadonlyArray<string>): string => path.posix.join(...parts.filter((p) => p !== ""))

/** True when `target` (absolute, real) is `root` or inside it. */
const inside = (root: string, target: string): boolean => target === root || target.startsWith(root + path.sep)

/**
 * A link's target must stay in the source directory: its text read from the link's own directory
 * (lexically, so a dangling link is judged too), and, when it resolves, its real path (so a chain
 * of links each looking harmless cannot leave).
 */
const checkLink = async (realRoot: string, file: string, rel: string): Promise<string> => {
  const target = await fsp.readlink(file)
  if (target === "" || path.isAbsolute(target)) {
    throw refused(`${rel} is a link to the absolute path ${JSON.stringify(target)}; links must be relative and stay inside the app's directory`)
  }
  const lexical = path.posix.normalize(path.posix.join(path.posix.dirname(rel), target.split(path.sep).join("/")))
  if (lexical === ".." || lexical.startsWith("../")) {
    throw refused(`${rel} is a link to ${JSON.stringify(target)}, outside the app's directory; copy what it points to into the app instead`)
  }
  let real: string | undefined
  try {
    real = await fsp.realpath(file)
  } catch {
    real = undefined // dangling inside the tree: packed as it is, the lexical check holds
  }
  if (real !== undefined && !inside(realRoot, real)) {
    throw refused(`${rel} is a link that resolves (through other links) to ${real}, outside the app's directory`)
  }
  return target
}

const fileMode = (mode: number): number => ((mode & 0o111) !== 0 ? 0o755 : 0o644)

/** Writes the archive of `sources` to `out` (created, never overwritten). */
export const packArchive = async (sources: ReadonlyArray<PackSource>, out: string): Promise<Packed> => {
  const pack = tar.pack()
  const written = pipeline(pack, createGzip(), createWriteStream(out, { flags: "wx", mode: 0o600 }))
  let files = 0
  let entries = 0
  const dirsMade = new Set<string>()

  const addDir = (name: string, mtime: Date): void => {
    if (name === "" || dirsMade.has(name)) return
    dirsMade.add(name)
    entries++
    pack.entry({ name: name + "/", type: "directory", mode: 0o755, mtime })
  }

  const addFile = async (file: string, name: string, stat: { size: number; mode: number; mtime: Date }): Promise<void> => {
    files++
    entries++
    const entry = pack.entry({ name, type: "file", size: stat.size, mode: fileMode(stat.mode), mtime: stat.mtime })
    await pipeline(createReadStream(file), entry)
  }

  const walk = async (source: PackSource, realRoot: string, dir: string, rel: string): Promise<void> => {
    const children: Array<Dirent> = (await fsp.readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const child of children) {
      const childRel = posixJoin(rel, child.name)
      if (child.name === ".git") continue
      const full = path.join(dir, child.name)
      const name = posixJoin(source.as, childRel)
      const stat = await fsp.lstat(full)
      if (stat.isDirectory()) {
        addDir(name, stat.mtime)
        await walk(source, realRoot, full, childRel)
      } else if (stat.isFile()) {
        await addFile(full, name, stat)
      } else if (stat.isSymbolicLink()) {
        const target = await checkLink(realRoot, full, childRel)
        entries++
        pack.entry({ name, type: "symlink", linkname: target, mode: 0o777, mtime: stat.mtime })
      } else {
        throw refused(`${childRel} is not a regular file, directory or link (a socket, fifo or device); remove it or deploy another directory`)
      }
    }
  }

  const fill = async (): Promise<void> => {
    for (const source of sources) {
      const stat = await fsp.stat(source.from)
      // The parents of a source placed under a path (`.next/static`) come first, as tar expects.
      const parts = source.as.split("/").filter((p) => p !== "")
      for (let i = 1; i < (stat.isDirectory() ? parts.length + 1 : parts.length); i++) addDir(parts.slice(0, i).join("/"), stat.mtime)
      if (stat.isDirectory()) await walk(source, await fsp.realpath(source.from), source.from, "")
      else await addFile(source.from, source.as, stat)
    }
    pack.finalize()
  }

  try {
    const filled = fill().catch((error: unknown) => {
      pack.destroy(error instanceof Error ? error : new Error(String(error)))
      throw error
    })
    await Promise.all([filled, written])
  } catch (error) {
    await fsp.rm(out, { force: true })
    if (error instanceof CliError) throw error
    throw new CliError(`cannot pack the app: ${error instanceof Error ? error.message : String(error)}`)
  }
  const { size } = await fsp.stat(out)
  return { file: out, bytes: size, files, entries }
}
