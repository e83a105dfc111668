/**
 * A node's own word, for the loopback node routes of spec §4.10 (`/v1/internal/node/enrol-key`,
 * `register`, `heartbeat`; docs/cluster.md, "The node routes"): a request stamped with the node's
 * Ed25519 key, and node ids derived from keys.
 *
 * The stamp signs the method, the path, the query, the node id, the body's SHA-256, a nonce and the
 * time, so a stamp answers for one request only, within 60 s, once (the nonce is spent by the
 * receiving node).
 *
 * A node made without `PORTICO_NODE_ID` takes its id from its key: `node-` and the first 16 bytes
 * of the SHA-256 of the raw public key, in hex. Such an id can be bound to no other key, even before
 * the registry has seen it, so the node's enrolment needs no trust on first use. An id named by
 * `PORTICO_NODE_ID` (or kept from an older release) is bound to the first key that registers it.
 */
import { createHash, createPublicKey, type KeyObject, randomBytes, sign, verify } from "node:crypto"

export const NODE_ID_HEADER = "x-portico-node-id"
export const NODE_STAMP_HEADER = "x-portico-node-stamp"
export const NODE_TIME_HEADER = "x-portico-node-time"
export const NODE_NONCE_HEADER = "x-portico-node-nonce"

/** How far a stamp's time may be from the receiver's clock, either way. */
export const STAMP_SKEW_SECONDS = 60

const NONCE = /^[A-Za-z0-9_-]{22,64}$/
const SIGNATURE = /^v1=[A-Za-z0-9_-]{86}$/
const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
const DERIVED = /^node-[0-9a-f]{32}$/

/** The id a node whose key's raw public half is `publicKey` (base64url) takes. */
export const derivedNodeId = (publicKey: string): string =>
  `node-${createHash("sha256").update(Buffer.from(publicKey, "base64url")).digest("hex").slice(0, 32)}`

/** Whether `id` has the form of a derived id: then only the key it derives from may hold it. */
export const isDerivedNodeId = (id: string): boolean => DERIVED.test(id)

/** Whether `publicKey` may hold `id` by derivation alone: a derived id from another key may not. */
export const keyMayHold = (id: string, publicKey: string): boolean => !isDerivedNodeId(id) || derivedNodeId(publicKey) === id

/** What one stamp answers for. */
export interface StampedRequest {
  readonly method: string
  readonly path: string
  /** The query without its `?`; empty when none. */
  readonly query: string
  readonly nodeId: string
  readonly body: string
}

/** A stamp's headers, read and checked for form and freshness (`readStamp`). */
export interface Stamp {
  readonly nodeId: string
  readonly signature: string
  readonly time: string
  readonly nonce: string
}

const message = (request: StampedRequest, time: string, nonce: string): Buffer =>
  Buffer.from(
    [
      "portico-node-stamp-v1",
      request.method.toUpperCase(),
      request.path,
      request.query,
      request.nodeId,
      createHash("sha256").update(request.body, "utf8").digest("hex"),
      nonce,
      time
    ].join("\n"),
    "utf8"
  )

/** The headers that stamp `request` with `privateKey` at `nowMs`. */
export const stampHeaders = (privateKey: KeyObject, request: StampedRequest, nowMs: number = Date.now()): Record<string, string> => {
  const time = String(Math.floor(nowMs / 1000))
  const nonce = randomBytes(18).toString("base64url")
  const signature = sign(null, message(request, time, nonce), privateKey).toString("base64url")
  return {
    [NODE_ID_HEADER]: request.nodeId,
    [NODE_STAMP_HEADER]: `v1=${signature}`,
    [NODE_TIME_HEADER]: time,
    [NODE_NONCE_HEADER]: nonce
  }
}

/**
 * The stamp's headers when they are whole, well formed and fresh at `nowMs`; else why not. Checked
 * before the body is read or the registry asked.
 */
export const readStamp = (
  headers: Readonly<Record<string, string | undefined>>,
  nowMs: number
): { readonly stamp: Stamp } | { readonly refused: string } => {
  const nodeId = headers[NODE_ID_HEADER]
  const signature = headers[NODE_STAMP_HEADER]
  const time = headers[NODE_TIME_HEADER]
  const nonce = headers[NODE_NONCE_HEADER]
  if (nodeId === undefined || signature === undefined || time === undefined || nonce === undefined) {
    return { refused: "node stamp missing: send X-Portico-Node-Id, -Stamp, -Time and -Nonce" }
  }
  if (!NODE_ID.test(nodeId) || !SIGNATURE.test(signature) || !/^\d{1,12}$/.test(time) || !NONCE.test(nonce)) {
    return { refused: "node stamp malformed" }
  }
  if (Math.abs(Number(time) - nowMs / 1000) > STAMP_SKEW_SECONDS) return { refused: "node stamp expired" }
  return { stamp: { nodeId, signature, time, nonce } }
}

/** Whether the stamp holds over `request` for the key whose raw public half is `publicKey`. */
export const stampHolds = (publicKey: string, request: StampedRequest, stamp: Stamp): boolean => {
  try {
    const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: publicKey }, format: "jwk" })
    return verify(null, message(request, stamp.time, stamp.nonce), key, Buffer.from(stamp.signature.slice(3), "base64url"))
  } catch {
    return false
  }
}
