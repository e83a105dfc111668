/**
 * What is inside a namespace backup's sealed stream (docs/namespaces.md "Backup and restore"): a
 * sequence of entries, each a 4-byte big-endian length, that many bytes of JSON
 * `{kind, name, size}`, then `size` bytes. The first entry is the manifest, the last `end`, which
 * carries the gateway's attestation of every byte before it.
 */
import * as crypto from "node:crypto"
import { ByteReader } from "./SealedStream.js"

export type EntryKind = "manifest" | "registry" | "database" | "cluster-sql" | "pins" | "end"

export interface EntryHead {
  readonly kind: EntryKind
  /** The database's name for `database`; "" otherwise. */
  readonly name: string
  readonly size: number
}

export interface OutgoingEntry extends EntryHead {
  readonly bytes: () => AsyncIterable<Uint8Array>
}

/** Entry heads are small; a larger one is not an archive this gateway wrote. */
const HEAD_MAX = 4096
const KINDS: ReadonlySet<string> = new Set(["manifest", "registry", "database", "cluster-sql", "pins", "end"])

const headBytes = (head: EntryHead): Buffer => {
  const json = Buffer.from(JSON.stringify({ kind: head.kind, name: head.name, size: head.size }), "utf8")
  const length = Buffer.alloc(4)
  length.writeUInt32BE(json.length)
  return Buffer.concat([length, json])
}

/** The plaintext size of `entries` followed by an `end` entry whose body is `endBytes` long. */
export const archiveSize = (entries: ReadonlyArray<EntryHead>, endBytes: number): number =>
  entries.reduce((sum, e) => sum + headBytes(e).length + e.size, 0) + headBytes({ kind: "end", name: "", size: endBytes }).length + endBytes

/**
 * The entries' bytes, then `end` with `attest(digest)`'s answer as its body (`digest` the SHA-256
 * of every byte before the end entry, hex). `endBytes` must be that answer's length (the size is
 * announced before the digest is known). An entry whose source yields other than its size fails
 * the stream: the announced length would be wrong.
 */
export async function* writeEntries(
  entries: ReadonlyArray<OutgoingEntry>,
  attest: (digest: string) => Uint8Array
): AsyncGenerator<Uint8Array> {
  const hash = crypto.createHash("sha256")
  for (const entry of entries) {
    const head = headBytes(entry)
    hash.update(head)
    yield head
    let seen = 0
    for await (const chunk of entry.bytes()) {
      seen += chunk.length
      hash.update(chunk)
      yield chunk
    }
    if (seen !== entry.size) throw new Error(`entry ${entry.kind} ${entry.name} changed size while it was read (${seen} of ${entry.size})`)
  }
  const end = attest(hash.digest("hex"))
  yield headBytes({ kind: "end", name: "", size: end.length })
  yield end
}

/** The archive's entries are not as this gateway writes them. */
export class ArchiveFormatError extends Error {}

/**
 * Reads entries from the opened stream, calling `entry` for each with its head and a reader of
 * exactly its body (which it must drain), until `end`, whose body and the digest of everything
 * before it are answered.
 */
export const readEntries = async (
  plain: AsyncIterable<Uint8Array>,
  entry: (head: EntryHead, body: AsyncIterable<Uint8Array>) => Promise<void>
): Promise<{ readonly end: Buffer; readonly digest: string }> => {
  const reader = new ByteReader(plain)
  const hash = crypto.createHash("sha256")
  for (;;) {
    const lengthBytes = await reader.read(4)
    if (lengthBytes === undefined) throw new ArchiveFormatError("the archive has no end entry")
    const length = lengthBytes.readUInt32BE(0)
    if (length === 0 || length > HEAD_MAX) throw new ArchiveFormatError("an entry head out of range")
    const json = await reader.read(length)
    if (json === undefined) throw new ArchiveFormatError("the archive ends inside an entry head")
    const head = parseHead(json)
    if (head.kind === "end") {
      const digest = hash.digest("hex")
      const end = await reader.read(head.size)
      if (end === undefined) throw new ArchiveFormatError("the archive ends inside its end entry")
      if (!(await reader.atEnd())) throw new ArchiveFormatError("bytes after the end entry")
      return { end, digest }
    }
    hash.update(lengthBytes)
    hash.update(json)
    let left = head.size
    let drained = false
    const body = async function* () {
      while (left > 0) {
        const piece = await reader.read(Math.min(left, 64 * 1024))
        if (piece === undefined) throw new ArchiveFormatError("the archive ends inside an entry")
        left -= piece.length
        hash.update(piece)
        yield piece
      }
      drained = true
    }
    await entry(head, body())
    if (!drained && left > 0) throw new ArchiveFormatError(`entry ${head.kind} was not read whole`)
  }
}

const parseHead = (json: Buffer): EntryHead => {
  let value: unknown
  try {
    value = JSON.parse(json.toString("utf8"))
  } catch {
    throw new ArchiveFormatError("an entry head is not JSON")
  }
  const v = value as Record<string, unknown>
  if (
    typeof value !== "object" || value === null ||
    typeof v["kind"] !== "string" || !KINDS.has(v["kind"]) ||
    typeof v["name"] !== "string" ||
    typeof v["size"] !== "number" || !Number.isSafeInteger(v["size"]) || (v["size"]) < 0
  ) {
    throw new ArchiveFormatError("an entry head is malformed")
  }
  return { kind: v["kind"] as EntryKind, name: v["name"], size: v["size"] }
}

/** Reads a whole small body into memory, refusing one over `max` bytes. */
export const readSmall = async (head: EntryHead, body: AsyncIterable<Uint8Array>, max: number): Promise<Buffer> => {
  if (head.size > max) throw new ArchiveFormatError(`the ${head.kind} entry is over ${max} bytes`)
  const parts: Array<Uint8Array> = []
  for await (const part of body) parts.push(part)
  return Buffer.concat(parts)
}
