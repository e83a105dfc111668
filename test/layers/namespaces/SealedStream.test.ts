/**
 * The backup's sealed stream and its entries, on real bytes: a round trip at sizes around the
 * chunk boundary gives back every byte and the announced sealed size; every single-byte change,
 * a cut at any chunk boundary, bytes appended, or another recipient's key fails to open; entries
 * come back with their digest and attestation.
 */
import { x25519 } from "@noble/curves/ed25519"
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { archiveSize, readEntries, writeEntries } from "../../../src/layers/namespaces/backup/ArchiveEntries.js"
import { CHUNK_BYTES, open, parsePublicKey, seal, sealedSize, SealedStreamError } from "../../../src/layers/namespaces/backup/SealedStream.js"

async function* pieces(bytes: Buffer, size: number) {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size)
}
const collect = async (source: AsyncIterable<Uint8Array>) => {
  const parts: Array<Uint8Array> = []
  for await (const part of source) parts.push(part)
  return Buffer.concat(parts)
}
const keys = () => {
  const secret = x25519.utils.randomPrivateKey()
  return { secret, public: x25519.getPublicKey(secret) }
}

describe("SealedStream", () => {
  it("round-trips sizes around the chunk boundary, in any piece size, at the announced sealed size", async () => {
    const k = keys()
    for (const size of [0, 1, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 3 * CHUNK_BYTES, 3 * CHUNK_BYTES + 17]) {
      const plain = randomBytes(size)
      const sealed = await collect(seal(k.public, pieces(plain, 7001)))
      expect(sealed.length).toBe(sealedSize(size))
      expect((await collect(open(k.secret, pieces(sealed, 999)))).equals(plain)).toBe(true)
    }
  })

  it("refuses any changed byte, a cut, appended bytes and another key", async () => {
    const k = keys()
    const plain = randomBytes(2 * CHUNK_BYTES + 100)
    const sealed = await collect(seal(k.public, pieces(plain, 65536)))
    const refused = (bytes: Buffer, secret = k.secret) =>
      expect(collect(open(secret, pieces(bytes, 4096)))).rejects.toBeInstanceOf(SealedStreamError)
    for (const at of [0, 9, 40, 41, 44, 45 + CHUNK_BYTES, sealed.length - 1]) {
      const changed = Buffer.from(sealed)
      changed[at] = changed[at]! ^ 0x01
      await refused(changed)
    }
    const frame = 4 + CHUNK_BYTES + 16
    await refused(sealed.subarray(0, 40 + frame))
    await refused(sealed.subarray(0, 40 + 2 * frame))
    await refused(sealed.subarray(0, sealed.length - 1))
    await refused(Buffer.concat([sealed, Buffer.from([0])]))
    await refused(sealed, keys().secret)
  })

  it("takes a public key as hex or base64(url)", () => {
    const k = keys()
    const hex = Buffer.from(k.public).toString("hex")
    expect(parsePublicKey(hex)).toEqual(Buffer.from(k.public))
    expect(parsePublicKey(Buffer.from(k.public).toString("base64"))).toEqual(Buffer.from(k.public))
    expect(parsePublicKey(Buffer.from(k.public).toString("base64url"))).toEqual(Buffer.from(k.public))
    expect(parsePublicKey(hex.slice(2))).toBeUndefined()
    expect(parsePublicKey("not a key")).toBeUndefined()
  })
})

describe("ArchiveEntries", () => {
  it("writes entries with an attested end and reads them back with the same digest", async () => {
    const db = randomBytes(100_000)
    const entries = [
      { kind: "manifest" as const, name: "", size: 2, bytes: () => pieces(Buffer.from("{}"), 10) },
      { kind: "database" as const, name: "app", size: db.length, bytes: () => pieces(db, 4096) }
    ]
    let attested = ""
    const plain = await collect(writeEntries(entries, (digest) => ((attested = digest), Buffer.from(digest, "hex"))))
    expect(plain.length).toBe(archiveSize(entries, 32))
    const seen: Array<string> = []
    let dbBack = Buffer.alloc(0)
    const { end, digest } = await readEntries(pieces(plain, 5000), async (head, body) => {
      seen.push(`${head.kind}:${head.name}`)
      const bytes = await collect(body)
      if (head.kind === "database") dbBack = bytes
    })
    expect(seen).toEqual(["manifest:", "database:app"])
    expect(dbBack.equals(db)).toBe(true)
    expect(digest).toBe(attested)
    expect(end.toString("hex")).toBe(attested)
  })
})
