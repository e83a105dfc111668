/**
 * A node-to-node call made as a peer of the cluster makes it (src/layers/coordination/Coordination.ts):
 * the coordination MAC v2 under the roots of a gateway's data directory (its `secret.key`, and the
 * generations in `secret.keys`), addressed to node `audience`. For tests of internal routes that
 * no client reaches.
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { canonicalJson } from "../../src/layers/coordination/Coordination.js"
import { readLaterRootsSync } from "../../src/layers/secrets/RootFile.js"
import { makeSealer } from "../../src/layers/secrets/Sealer.js"
import type { Gateway, Reply } from "./gateway.js"

/** The coordination headers (MAC v2, a fresh nonce) of a call to node `audience`'s `route` with `body`, under `gw`'s newest root. */
export const coordinationHeaders = (
  gw: Gateway,
  audience: string,
  route: string,
  body: string,
  time = Math.floor(Date.now() / 1000),
  secretHex?: string
): Record<string, string> => {
  // the root: PORTICO_SECRET when the cluster was given one, else the data dir's own
  const root = secretHex !== undefined ? Buffer.from(secretHex, "hex") : Buffer.from(fs.readFileSync(path.join(gw.dataDir, "secret.key"), "utf8").trim(), "base64")
  const sealer = makeSealer([root, ...readLaterRootsSync(gw.dataDir)])
  const nonce = randomBytes(18).toString("base64url")
  const text = ["POST", route, audience, String(time), nonce, createHash("sha256").update(body, "utf8").digest("hex")].join("\n")
  return {
    "x-portico-coordination-mac": "v2=" + sealer.hashAt(sealer.generation(), "coordination-mac-v2", text),
    "x-portico-coordination-time": String(time),
    "x-portico-coordination-nonce": nonce
  }
}

export const internalCall = (gw: Gateway, audience: string, route: string, payload: unknown, secretHex?: string): Promise<Reply> => {
  const body = canonicalJson(payload)
  return gw.request("POST", route, { body, headers: { "content-type": "application/json", ...coordinationHeaders(gw, audience, route, body, undefined, secretHex) } })
}
