/**
 * Content identifiers as the storage routes accept them: a CID that parses and is written in its
 * canonical text form (a CIDv1 in lowercase base32, a CIDv0 in base58btc `Qm…`). One spelling per
 * CID keeps pins, ownership rows and fetch capabilities keyed by the same string.
 */
import { CID } from "multiformats/cid"
import { Schema } from "effect"

/** Longer than any CID of a sha2-256 or sha2-512 multihash in base32; bounds the parse work. */
const MAX_CID_TEXT = 128

/** The canonical text of `text`, or undefined when it does not parse or is not canonical. */
export const canonicalCid = (text: string): string | undefined => {
  if (text.length === 0 || text.length > MAX_CID_TEXT) return undefined
  try {
    // re-decoded from bytes: a parsed CID remembers the text it came from and would echo it
    const canonical = CID.decode(CID.parse(text).bytes).toString()
    return canonical === text ? canonical : undefined
  } catch {
    return undefined
  }
}

export const isCanonicalCid = (text: string): boolean => canonicalCid(text) !== undefined

/** The IPIP-499 `unixfs-v1-2025` import profile: the parameters that make CIDs match Kubo's. */
export const UNIXFS_PROFILE = {
  cidVersion: 1,
  rawLeaves: true,
  chunkSize: 1024 * 1024,
  maxLinksPerNode: 1024
} as const

/** A CID path parameter; its canonical form is checked by the storage service (400 VALIDATION_FAILED). */
export const CidParam = Schema.String.pipe(Schema.maxLength(512)).annotations({
  identifier: "Cid",
  // A pattern gives the two spellings; whether the bytes are a CID (version, codec, multihash
  // and its length) is more than a pattern can say, so the format names it.
  jsonSchema: {
    type: "string",
    format: "cid",
    pattern: `^(?:b[a-z2-7]{1,${MAX_CID_TEXT - 1}}|Qm[1-9A-HJ-NP-Za-km-z]{44})$`,
    description:
      "A CID in canonical text form: CIDv1 lowercase base32 (`bafy…`, `bafk…`) or CIDv0 base58btc (`Qm…`); anything else, or a CID written another way, is 400"
  }
})
