/**
 * The vault's rules (docs/vault.md): who an identity is, what its key signs, how many shares a
 * secret needs, and whether a share's envelope is the one its digest names. Pure: no storage, no
 * HTTP; the service and the guardians (src/layers/vault) apply them.
 */
import { createHash, createPublicKey, type KeyObject, verify } from "node:crypto"
import { ed25519KeyProblem } from "./DeviceKey.js"
import { PUBLIC_KEY_PATTERN, SIGNATURE_PATTERN } from "./VaultShapes.js"

/** How far a pull's timestamp may be from the node's clock, either way (seconds). */
export const PULL_WINDOW_SECONDS = 120

export const sha256Hex = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

/** The identity of a raw Ed25519 public key. */
export const identityOf = (publicKey: Uint8Array): string => sha256Hex(publicKey)

/**
 * What a push's key signs: the action, the identity, the version and the SHA-256 of the envelope,
 * so a captured signature cannot carry another envelope, nor the same one at another version.
 */
export const pushMessage = (identity: string, version: number, digest: string): string => `vault-push-v2:${identity}:${version}:${digest}`

/** What a pull's key signs: the action, the identity and the time (Unix seconds). */
export const pullMessage = (identity: string, timestamp: number): string => `vault-pull-v1:${identity}:${timestamp}`

/**
 * The shares a secret needs (`threshold`, K) and the nodes that must store a push for it to stand
 * (`quorum`, W), for a cluster of `members` nodes. K is a majority, so no minority of nodes can
 * read a secret; W is one more than K where there is room, so a push that stood survives the loss
 * of any one node that took it. One node: K = W = 1, a copy (`mode: local`). Two: both.
 * Three: K = 2, W = 3; five: K = 3, W = 4; seven: K = 4, W = 5.
 */
export const sharingOf = (members: number): { readonly threshold: number; readonly quorum: number } => {
  const n = Math.max(1, Math.min(255, Math.floor(members)))
  const threshold = n === 1 ? 1 : Math.floor(n / 2) + 1
  return { threshold, quorum: Math.min(n, threshold + 1) }
}

const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex")

/** Keys checked once: the prime-order check costs about a millisecond, and an identity signs again and again. */
const checked = new Map<string, { readonly key: KeyObject } | { readonly problem: string }>()
const CHECKED_MAX = 10_000

/**
 * The key of `publicKeyHex` for verifying, or why it cannot be one: not canonical, of small order,
 * or outside the prime-order subgroup (a small-order key would verify a forged signature).
 */
export const verifierOf = (publicKeyHex: string): { readonly key: KeyObject } | { readonly problem: string } => {
  const known = checked.get(publicKeyHex)
  if (known !== undefined) return known
  const raw = Buffer.from(publicKeyHex, "hex")
  const problem = PUBLIC_KEY_PATTERN.test(publicKeyHex) ? ed25519KeyProblem(new Uint8Array(raw)) : "pubkey is 64 lowercase hex digits"
  const answer = problem === undefined ? { key: createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: "der", type: "spki" }) } : { problem }
  if (checked.size >= CHECKED_MAX) checked.delete(checked.keys().next().value!)
  checked.set(publicKeyHex, answer)
  return answer
}

/**
 * Why a signed request does not hold, or undefined when it does: the key must be sound, the
 * identity must be its hash, and the signature must verify over `message`.
 */
export const signatureProblem = (
  request: { readonly identity: string; readonly pubkey: string; readonly signature: string },
  message: string
): { readonly field: "pubkey" | "identity" | "signature"; readonly reason: string } | undefined => {
  const verifier = verifierOf(request.pubkey)
  if ("problem" in verifier) return { field: "pubkey", reason: verifier.problem }
  if (identityOf(Buffer.from(request.pubkey, "hex")) !== request.identity) {
    return { field: "identity", reason: "identity is not the SHA-256 of pubkey" }
  }
  if (!SIGNATURE_PATTERN.test(request.signature)) return { field: "signature", reason: "signature is 128 lowercase hex digits" }
  const ok = verify(null, Buffer.from(message), verifier.key, Buffer.from(request.signature, "hex"))
  return ok ? undefined : { field: "signature", reason: "the signature does not verify over the message for this key" }
}

/**
 * The bytes of `text` when it is canonical standard base64 with padding (as `btoa()` writes it),
 * else undefined: decoded, and refused unless it encodes back to itself, so every envelope has one
 * spelling. A round trip through node's codec is several times faster than a pattern over the text.
 */
export const canonicalBase64 = (text: string): Uint8Array | undefined => {
  const bytes = Buffer.from(text, "base64")
  return bytes.toString("base64") === text ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : undefined
}

/** Whether `timestamp` (Unix seconds) is within the pull window of `nowMs`. */
export const isFresh = (timestamp: number, nowMs: number): boolean => Math.abs(nowMs / 1000 - timestamp) <= PULL_WINDOW_SECONDS
