/**
 * The sealed stream a namespace backup travels in (docs/namespaces.md "Backup and restore"): an
 * anonymous sealed box made for streams. The sender makes an ephemeral X25519 key pair, agrees a
 * secret with the recipient's public key, derives one ChaCha20-Poly1305 key from it (HKDF-SHA-256),
 * and seals the bytes in 64 KiB chunks, each with its own nonce (its index and a last-chunk flag),
 * so neither side ever holds the whole archive, and a chunk dropped, repeated, reordered or cut off
 * at the end fails to open.
 *
 * X25519 is @noble/curves; HKDF and ChaCha20-Poly1305 are Node's (OpenSSL).
 */
import { x25519 } from "@noble/curves/ed25519"
import * as crypto from "node:crypto"

/** Bytes of plaintext in every chunk but the last; the last holds fewer (possibly none). */
export const CHUNK_BYTES = 64 * 1024
const TAG_BYTES = 16
const MAGIC = Buffer.from("PNSBKP1\n", "latin1")
/** The magic and the ephemeral public key; it is the associated data of every chunk. */
export const HEADER_BYTES = MAGIC.length + 32
const INFO = Buffer.from("portico/namespace-backup/v1", "utf8")

/** The sealed stream cannot be opened: not one, another recipient's, or changed. Never says which. */
export class SealedStreamError extends Error {
  constructor(readonly detail: string) {
    super("the archive is not sealed to this key, or it was changed")
  }
}

const keyFor = (shared: Uint8Array, ephemeralPublic: Uint8Array, recipientPublic: Uint8Array): Buffer =>
  Buffer.from(crypto.hkdfSync("sha256", shared, Buffer.concat([ephemeralPublic, recipientPublic]), INFO, 32))

const nonceOf = (index: number, last: boolean): Buffer => {
  const nonce = Buffer.alloc(12)
  nonce.writeUInt32BE(Math.floor(index / 2 ** 32), 0)
  nonce.writeUInt32BE(index >>> 0, 4)
  nonce[11] = last ? 1 : 0
  return nonce
}

/** The sealed size of `plainBytes`: the header, and a length and tag for each chunk. */
export const sealedSize = (plainBytes: number): number =>
  HEADER_BYTES + plainBytes + (Math.floor(plainBytes / CHUNK_BYTES) + 1) * (4 + TAG_BYTES)

/** The public key of an X25519 secret key. */
export const publicKeyOf = (secretKey: Uint8Array): Uint8Array => x25519.getPublicKey(secretKey)

/** Seals `source` to `recipientPublic`, as it is read. */
export async function* seal(recipientPublic: Uint8Array, source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const ephemeral = x25519.utils.randomPrivateKey()
  const ephemeralPublic = x25519.getPublicKey(ephemeral)
  const key = keyFor(x25519.getSharedSecret(ephemeral, recipientPublic), ephemeralPublic, recipientPublic)
  const header = Buffer.concat([MAGIC, ephemeralPublic])
  yield header
  let index = 0
  const sealOne = (plain: Uint8Array, last: boolean): Buffer => {
    const cipher = crypto.createCipheriv("chacha20-poly1305", key, nonceOf(index++, last), { authTagLength: TAG_BYTES })
    cipher.setAAD(header, { plaintextLength: plain.length })
    const body = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()])
    const length = Buffer.alloc(4)
    length.writeUInt32BE(body.length)
    return Buffer.concat([length, body])
  }
  const pending: Array<Uint8Array> = []
  let held = 0
  for await (const piece of source) {
    pending.push(piece)
    held += piece.length
    if (held < CHUNK_BYTES) continue
    const all = Buffer.concat(pending)
    let at = 0
    for (; all.length - at >= CHUNK_BYTES; at += CHUNK_BYTES) yield sealOne(all.subarray(at, at + CHUNK_BYTES), false)
    pending.length = 0
    held = all.length - at
    if (held > 0) pending.push(all.subarray(at))
  }
  yield sealOne(Buffer.concat(pending), true)
}

/** Reads exactly `n` bytes at a time from an async byte source. */
export class ByteReader {
  private buffered: Array<Buffer> = []
  private held = 0
  private readonly iterator: AsyncIterator<Uint8Array>
  constructor(source: AsyncIterable<Uint8Array>) {
    this.iterator = source[Symbol.asyncIterator]()
  }
  /** `n` bytes, or undefined when the source ended first (`atEnd` tells a clean end from a cut). */
  async read(n: number): Promise<Buffer | undefined> {
    while (this.held < n) {
      const next = await this.iterator.next()
      if (next.done === true) return undefined
      this.buffered.push(Buffer.from(next.value))
      this.held += next.value.length
    }
    const all = this.buffered.length === 1 ? this.buffered[0]! : Buffer.concat(this.buffered)
    const out = all.subarray(0, n)
    const rest = all.subarray(n)
    this.buffered = rest.length > 0 ? [rest] : []
    this.held = rest.length
    return out
  }
  /** True when nothing is left. */
  async atEnd(): Promise<boolean> {
    if (this.held > 0) return false
    for (;;) {
      const next = await this.iterator.next()
      if (next.done === true) return true
      if (next.value.length > 0) {
        this.buffered.push(Buffer.from(next.value))
        this.held += next.value.length
        return false
      }
    }
  }
}

/**
 * Opens what `seal` made for the public key of `secretKey`, chunk by chunk: a chunk is handed on
 * only once its tag checked, and the stream fails (SealedStreamError) at the first chunk that does
 * not open, when it ends before its last chunk, or when bytes follow the last chunk. A consumer
 * must not act on what it read until the stream has ended without failing.
 */
export async function* open(secretKey: Uint8Array, source: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = new ByteReader(source)
  const header = await reader.read(HEADER_BYTES)
  if (header === undefined || !header.subarray(0, MAGIC.length).equals(MAGIC)) throw new SealedStreamError("no sealed-archive header")
  const ephemeralPublic = header.subarray(MAGIC.length)
  let shared: Uint8Array
  try {
    shared = x25519.getSharedSecret(secretKey, ephemeralPublic)
  } catch {
    // a low-order point: no secret could be agreed
    throw new SealedStreamError("unusable ephemeral key")
  }
  const key = keyFor(shared, ephemeralPublic, publicKeyOf(secretKey))
  for (let index = 0; ; index++) {
    const lengthBytes = await reader.read(4)
    if (lengthBytes === undefined) throw new SealedStreamError("the archive ends before its last chunk")
    const length = lengthBytes.readUInt32BE(0)
    if (length < TAG_BYTES || length > CHUNK_BYTES + TAG_BYTES) throw new SealedStreamError("a chunk length out of range")
    const body = await reader.read(length)
    if (body === undefined) throw new SealedStreamError("the archive ends inside a chunk")
    // only a full chunk can be followed by another; anything shorter must be the last
    const last = length < CHUNK_BYTES + TAG_BYTES
    const decipher = crypto.createDecipheriv("chacha20-poly1305", key, nonceOf(index, last), { authTagLength: TAG_BYTES })
    decipher.setAAD(header, { plaintextLength: length - TAG_BYTES })
    decipher.setAuthTag(body.subarray(length - TAG_BYTES))
    let plain: Buffer
    try {
      plain = Buffer.concat([decipher.update(body.subarray(0, length - TAG_BYTES)), decipher.final()])
    } catch {
      throw new SealedStreamError(`chunk ${index} does not open`)
    }
    if (plain.length > 0) yield plain
    if (last) {
      if (!(await reader.atEnd())) throw new SealedStreamError("bytes after the last chunk")
      return
    }
  }
}

/**
 * An X25519 public key as the API takes it: 64 hexadecimal characters, or 32 bytes in base64 or
 * base64url (padding optional). Undefined when it is neither.
 */
export const parsePublicKey = (text: string): Uint8Array | undefined => {
  const trimmed = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, "hex")
  if (/^[A-Za-z0-9+/_-]{43}={0,1}$/.test(trimmed)) {
    const bytes = Buffer.from(trimmed.replace(/-/g, "+").replace(/_/g, "/"), "base64")
    return bytes.length === 32 ? bytes : undefined
  }
  return undefined
}
