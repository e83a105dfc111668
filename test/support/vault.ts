/**
 * A vault client as an app would write one (docs/vault.md): an Ed25519 identity key, and the
 * signed push and pull bodies, built with node:crypto alone.
 */
import { createHash, generateKeyPairSync, type KeyObject, sign } from "node:crypto"

export interface VaultIdentity {
  readonly identity: string
  readonly pubkey: string
  readonly privateKey: KeyObject
}

export const newIdentity = (): VaultIdentity => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519")
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(12)
  return { identity: createHash("sha256").update(raw).digest("hex"), pubkey: raw.toString("hex"), privateKey }
}

const signHex = (key: KeyObject, message: string) => sign(null, Buffer.from(message), key).toString("hex")

export const sha256Hex = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** A push body for `envelope` at `version`. */
export const pushBody = (id: VaultIdentity, version: number, envelope: Uint8Array) => ({
  identity: id.identity,
  version,
  envelope: Buffer.from(envelope).toString("base64"),
  pubkey: id.pubkey,
  signature: signHex(id.privateKey, `vault-push-v2:${id.identity}:${version}:${sha256Hex(envelope)}`)
})

/** A pull body signed at `timestamp` (Unix seconds; now by default). */
export const pullBody = (id: VaultIdentity, timestamp = Math.floor(Date.now() / 1000)) => ({
  identity: id.identity,
  timestamp,
  pubkey: id.pubkey,
  signature: signHex(id.privateKey, `vault-pull-v1:${id.identity}:${timestamp}`)
})
