/**
 * Joining a node to the cluster with an invite (docs/cluster.md, "Joining"): the invite's text,
 * the joiner's proof, and the sealed answer. Shared by the gateway that admits a node
 * (src/layers/nodes/NodeInvites.ts) and the joiner (`portico serve --join`, src/cli/join.ts).
 *
 * An invite carries a join URL and a 256-bit token. The token never crosses the network: the
 * joiner names the invite by the token's SHA-256 and proves it holds the token with an HMAC over
 * its request, so a captured request cannot be replayed with other keys. The joiner also signs the
 * request with its node key (it holds the key it registers) and sends an ephemeral X25519 key. The
 * cluster's secrets come back sealed with ChaCha20-Poly1305 under a key derived from the X25519
 * agreement salted with the token: someone who swapped the joiner's X25519 key on the way still
 * lacks the token, and someone who saw the invite's text but not the answer lacks the agreement.
 */
import { x25519 } from "@noble/curves/ed25519"
import * as crypto from "node:crypto"

export const INVITE_PREFIX = "pjoin_"
/** An invite's request is fresh within this much of the admitting node's clock. */
export const JOIN_SKEW_SECONDS = 60

export interface NodeInvite {
  /** Where the joiner sends its request: the admitting node's internal URL. */
  readonly url: string
  /** 32 random bytes, base64url. */
  readonly token: string
}

export const encodeInvite = (invite: NodeInvite): string =>
  INVITE_PREFIX + Buffer.from(JSON.stringify({ u: invite.url, t: invite.token }), "utf8").toString("base64url")

/** The invite in `text`, or undefined when it is not one. */
export const decodeInvite = (text: string): NodeInvite | undefined => {
  const trimmed = text.trim()
  if (!trimmed.startsWith(INVITE_PREFIX) || trimmed.length > 2048) return undefined
  try {
    const parsed: unknown = JSON.parse(Buffer.from(trimmed.slice(INVITE_PREFIX.length), "base64url").toString("utf8"))
    if (typeof parsed !== "object" || parsed === null) return undefined
    const { u, t } = parsed as { u?: unknown; t?: unknown }
    if (typeof u !== "string" || typeof t !== "string" || !/^[A-Za-z0-9_-]{43}$/.test(t)) return undefined
    const url = new URL(u)
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined
    return { url: u.replace(/\/$/, ""), token: t }
  } catch {
    return undefined
  }
}

export const newInviteToken = (): string => crypto.randomBytes(32).toString("base64url")

/** The invite's id: the SHA-256 of its token, the only name it has outside the invite itself. */
export const inviteIdOf = (token: string): string => crypto.createHash("sha256").update(token, "utf8").digest("base64url")

/** What the joiner proves and signs (every field of its request but the proof and signature). */
export interface JoinClaim {
  readonly invite_id: string
  readonly node_id: string
  /** The joiner's Ed25519 node key, raw, base64url. */
  readonly public_key: string
  /** The joiner's ephemeral X25519 key, raw, base64url. */
  readonly seal_key: string
  /** Unix seconds. */
  readonly iat: number
}

export const claimText = (claim: JoinClaim): string =>
  ["portico/join/v1", claim.invite_id, claim.node_id, claim.public_key, claim.seal_key, String(claim.iat)].join("\n")

/** HMAC-SHA-256 of the claim keyed by the invite's token, base64url. */
export const proofOf = (token: string, claim: JoinClaim): string =>
  crypto.createHmac("sha256", Buffer.from(token, "base64url")).update(claimText(claim), "utf8").digest("base64url")

/** The joiner's node key's signature over the claim, base64url. */
export const signClaim = (privateKey: crypto.KeyObject, claim: JoinClaim): string =>
  crypto.sign(null, Buffer.from(claimText(claim), "utf8"), privateKey).toString("base64url")

export const claimSignatureHolds = (claim: JoinClaim, signature: string): boolean => {
  try {
    const key = crypto.createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: claim.public_key }, format: "jwk" })
    return crypto.verify(null, Buffer.from(claimText(claim), "utf8"), key, Buffer.from(signature, "base64url"))
  } catch {
    return false
  }
}

const answerKey = (shared: Uint8Array, token: string, claim: JoinClaim): Buffer =>
  Buffer.from(crypto.hkdfSync("sha256", shared, Buffer.from(token, "base64url"), "portico/join-answer/v1\n" + claimText(claim), 32))

export interface SealedAnswer {
  /** The admitting node's ephemeral X25519 key, base64url. */
  readonly seal_from: string
  /** nonce ‖ ciphertext ‖ tag, base64url. */
  readonly sealed: string
}

/** Seals `plaintext` to the joiner's X25519 key, salted with the invite's token. */
export const sealAnswer = (token: string, claim: JoinClaim, plaintext: Uint8Array): SealedAnswer => {
  const ephemeral = x25519.utils.randomPrivateKey()
  const key = answerKey(x25519.getSharedSecret(ephemeral, Buffer.from(claim.seal_key, "base64url")), token, claim)
  const nonce = crypto.randomBytes(12)
  const cipher = crypto.createCipheriv("chacha20-poly1305", key, nonce, { authTagLength: 16 })
  const body = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()])
  return { seal_from: Buffer.from(x25519.getPublicKey(ephemeral)).toString("base64url"), sealed: Buffer.concat([nonce, body]).toString("base64url") }
}

/** Opens the answer with the joiner's X25519 secret key; undefined when it does not open. */
export const openAnswer = (token: string, claim: JoinClaim, sealKey: Uint8Array, answer: SealedAnswer): Uint8Array | undefined => {
  try {
    const key = answerKey(x25519.getSharedSecret(sealKey, Buffer.from(answer.seal_from, "base64url")), token, claim)
    const bytes = Buffer.from(answer.sealed, "base64url")
    const decipher = crypto.createDecipheriv("chacha20-poly1305", key, bytes.subarray(0, 12), { authTagLength: 16 })
    decipher.setAuthTag(bytes.subarray(bytes.length - 16))
    return new Uint8Array(Buffer.concat([decipher.update(bytes.subarray(12, bytes.length - 16)), decipher.final()]))
  } catch {
    return undefined
  }
}

/** A fresh X25519 key pair for one join. */
export const newSealKey = (): { readonly secret: Uint8Array; readonly public: string } => {
  const secret = x25519.utils.randomPrivateKey()
  return { secret, public: Buffer.from(x25519.getPublicKey(secret)).toString("base64url") }
}
