/**
 * This node's identity key (docs/cluster.md, "Node identity"): an Ed25519 key kept in the data
 * directory (`node.key`, mode 0600), made at the first start. The registry binds the node's id to
 * its public key at the node's first heartbeat; another process presenting the same id with
 * another key is refused (Membership.ts), so a node id cannot be taken over by copying a name.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"

export interface NodeKey {
  /** The raw 32-byte public key, base64url: what the registry binds the node id to. */
  readonly publicKey: string
  readonly privateKey: KeyObject
}

/** The key of the node whose data directory is `dataDir`, made and kept there when absent. */
export const loadNodeKey = (dataDir: string): NodeKey => {
  const file = path.join(dataDir, "node.key")
  let pem: string
  try {
    pem = readFileSync(file, "utf8")
  } catch {
    mkdirSync(dataDir, { recursive: true })
    const made = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }) as string
    try {
      writeFileSync(file, made, { flag: "wx", mode: 0o600 })
    } catch {
      // another process on this data directory wrote one first: theirs stands
    }
    pem = readFileSync(file, "utf8")
  }
  const privateKey = createPrivateKey(pem)
  const jwk = createPublicKey(privateKey).export({ format: "jwk" }) as { x: string }
  return { publicKey: jwk.x, privateKey }
}
