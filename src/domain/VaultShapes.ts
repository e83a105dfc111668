/** How the vault's fields are written (docs/vault.md): client-safe, so the wire schemas use them too. */
/** An identity: the lowercase hex SHA-256 of the raw 32-byte Ed25519 public key. */
export const IDENTITY_PATTERN = /^[0-9a-f]{64}$/
/** A public key: its 32 raw bytes, lowercase hex. */
export const PUBLIC_KEY_PATTERN = /^[0-9a-f]{64}$/
/** A signature: its 64 raw bytes, lowercase hex. */
export const SIGNATURE_PATTERN = /^[0-9a-f]{128}$/
/** A digest: SHA-256, lowercase hex. */
export const DIGEST_PATTERN = /^[0-9a-f]{64}$/

