/**
 * The vault's wire shapes (docs/vault.md): the public push and pull, and the guardian calls one
 * node makes of another (`/v1/internal/vault/*`). Client-safe: schemas only.
 */
import { Schema } from "effect"
import { NamespaceName } from "../../domain/Names.js"
import { DIGEST_PATTERN, IDENTITY_PATTERN, PUBLIC_KEY_PATTERN, SIGNATURE_PATTERN } from "../../domain/VaultShapes.js"
import { strict } from "../Wire.js"

const hex = (pattern: RegExp, what: string) =>
  Schema.String.pipe(Schema.pattern(pattern, { message: () => `${what}: lowercase hex` })).annotations({ description: what })

export const Identity = hex(IDENTITY_PATTERN, "the identity: SHA-256 of the raw 32-byte Ed25519 public key, 64 lowercase hex digits")
export const PublicKeyHex = hex(PUBLIC_KEY_PATTERN, "the raw 32-byte Ed25519 public key, 64 lowercase hex digits")
export const SignatureHex = hex(SIGNATURE_PATTERN, "the 64-byte Ed25519 signature, 128 lowercase hex digits")
const Digest = hex(DIGEST_PATTERN, "SHA-256 of the envelope, 64 lowercase hex digits")
export const VaultVersion = Schema.Int.pipe(Schema.between(1, Number.MAX_SAFE_INTEGER)).annotations({
  description: "the envelope's version: each push must name a higher one than the vault holds (the same one again only with the same envelope)"
})
const Threshold = Schema.Int.pipe(Schema.between(1, 255))

export const PushRequest = strict(
  Schema.Struct({
    identity: Identity,
    version: VaultVersion,
    envelope: Schema.String.annotations({
      description: "the secret as the client encrypted it, canonical standard base64 with padding; at most 512 KiB decoded by default (413 past it)"
    }),
    pubkey: PublicKeyHex,
    signature: SignatureHex.annotations({
      description: "Ed25519 over the UTF-8 of vault-push-v2:<identity>:<version>:<SHA-256 of the decoded envelope, lowercase hex>"
    })
  })
).annotations({ identifier: "VaultPush" })

export const Pushed = Schema.Struct({
  status: Schema.Literal("ok"),
  identity: Schema.String,
  version: Schema.Int,
  mode: Schema.Literal("local", "shared"),
  ack_count: Schema.Int.annotations({ description: "nodes that stored their share" }),
  total: Schema.Int.annotations({ description: "the cluster's nodes, each given one share" }),
  quorum: Schema.Int.annotations({ description: "nodes that must store a share for the push to stand" }),
  threshold: Schema.Int.annotations({ description: "shares a pull needs" })
}).annotations({ identifier: "VaultPushed" })

export const PullRequest = strict(
  Schema.Struct({
    identity: Identity,
    timestamp: Schema.Int.annotations({ description: "Unix seconds, within 120 s of the gateway's clock; each signature is honoured once" }),
    pubkey: PublicKeyHex,
    signature: SignatureHex.annotations({ description: "Ed25519 over the UTF-8 of vault-pull-v1:<identity>:<timestamp>" })
  })
).annotations({ identifier: "VaultPull" })

export const Pulled = Schema.Struct({
  identity: Schema.String,
  version: Schema.Int.annotations({ description: "the newest version enough nodes hold" }),
  envelope: Schema.String.annotations({ description: "what was pushed at that version, base64" }),
  collected: Schema.Int.annotations({ description: "shares of that version the nodes gave" }),
  threshold: Schema.Int
}).annotations({ identifier: "VaultPulled" })

export const VaultHealth = Schema.Struct({
  status: Schema.Literal("ok", "degraded", "unavailable").annotations({
    description: "ok: pushes and pulls can be served; degraded: pulls only (fewer live nodes than the quorum); unavailable: neither"
  }),
  mode: Schema.Literal("local", "shared").annotations({ description: "local: one node holds each envelope whole; shared: split across the nodes" }),
  guardians: Schema.Int.annotations({ description: "the cluster's nodes, each a guardian of one share" }),
  healthy: Schema.Int.annotations({ description: "guardians live now" }),
  threshold: Schema.Int,
  quorum: Schema.Int
}).annotations({ identifier: "VaultHealth" })

export const VaultStatus = Schema.Struct({
  mode: Schema.Literal("local", "shared"),
  threshold: Schema.Int,
  quorum: Schema.Int,
  guardians: Schema.Array(
    Schema.Struct({
      node: Schema.String,
      reachable: Schema.Boolean,
      shares: Schema.NullOr(Schema.Int).annotations({ description: "your namespace's identities this node holds a share of; null when it did not answer" })
    })
  )
}).annotations({ identifier: "VaultStatus" })

/**
 * The header that carries a share call's JSON beside a body of bytes: the order of a share put
 * (`SharePutEnvelope`), and the share's facts in a `found` answer (`ShareFound`). The bytes are
 * the share itself (its y bytes, then its x coordinate), never base64 inside JSON: a 64 KiB
 * envelope's share was 87 KB of base64 that both nodes encoded, hashed, parsed and decoded.
 */
export const SHARE_ENVELOPE_HEADER = "x-portico-forward-envelope"
export const SHARE_FOUND_HEADER = "x-portico-vault-share"
export const SHARE_BYTES_TYPE = "application/octet-stream"

/**
 * A share given to node `x`'s guardian, with the client's signature it checks again: this order
 * in `SHARE_ENVELOPE_HEADER` as canonical JSON, the share's bytes as the body. The coordination
 * MAC covers the order's text and the SHA-256 of the bytes (Coordination.ts `bytesSigned`).
 */
export const SharePutEnvelope = strict(
  Schema.Struct({
    namespace: NamespaceName,
    identity: Identity,
    version: VaultVersion,
    threshold: Threshold,
    digest: Digest,
    pubkey: PublicKeyHex,
    signature: SignatureHex
  })
)
/** The put's headers, as the route decodes them (the lane with the very same schema). */
export const SharePutHeaders = Schema.Struct({ [SHARE_ENVELOPE_HEADER]: Schema.parseJson(SharePutEnvelope) })
export const SharePutAnswer = Schema.Union(
  Schema.Struct({ outcome: Schema.Literal("stored") }),
  Schema.Struct({ outcome: Schema.Literal("conflict"), version: Schema.Int }),
  Schema.Struct({ outcome: Schema.Literal("refused"), reason: Schema.String })
)

export const ShareGetOrder = strict(
  Schema.Struct({ namespace: NamespaceName, identity: Identity, timestamp: Schema.Int, pubkey: PublicKeyHex, signature: SignatureHex })
)
/** A share found: these facts in `SHARE_FOUND_HEADER` as JSON, the share's bytes as the body (`SHARE_BYTES_TYPE`). */
export const ShareFound = Schema.Struct({ version: VaultVersion, threshold: Threshold, digest: Digest })
/** What a get answers in JSON: no share held, or a refusal. */
export const ShareGetAnswer = Schema.Union(
  Schema.Struct({ outcome: Schema.Literal("none") }),
  Schema.Struct({ outcome: Schema.Literal("refused"), reason: Schema.String, replayed: Schema.Boolean })
)

export const ShareNamespaceOrder = strict(Schema.Struct({ namespace: NamespaceName }))
export const ShareCount = Schema.Struct({ shares: Schema.Int })
export const SharesDropped = Schema.Struct({ dropped: Schema.Int })
