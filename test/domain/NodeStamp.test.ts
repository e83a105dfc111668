import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { derivedNodeId, isDerivedNodeId, keyMayHold, readStamp, stampHeaders, stampHolds } from "../../src/domain/NodeStamp.js"
import { isLoopbackSource } from "../../src/layers/nodes/NodeEnrolment.js"
import { loadNodeKey } from "../../src/layers/config/NodeKey.js"
import { localNodeId } from "../../src/layers/config/PorticoConfig.js"

const keyPair = () => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519")
  return { privateKey, publicKey: (publicKey.export({ format: "jwk" }) as { x: string }).x }
}
const request = { method: "POST", path: "/v1/internal/node/heartbeat", query: "", nodeId: "node-a", body: "{}" }

describe("node stamps", () => {
  it("hold over the request they were made for, by the key that made them, and nothing else", () => {
    const key = keyPair()
    const headers = stampHeaders(key.privateKey, request)
    const read = readStamp(headers, Date.now())
    if (!("stamp" in read)) throw new Error(read.refused)
    expect(stampHolds(key.publicKey, request, read.stamp)).toBe(true)
    expect(stampHolds(keyPair().publicKey, request, read.stamp)).toBe(false)
    for (const spoiled of [{ body: "{ }" }, { path: "/v1/internal/node/register" }, { query: "a=1" }, { method: "PUT" }, { nodeId: "node-b" }]) {
      expect(stampHolds(key.publicKey, { ...request, ...spoiled }, read.stamp)).toBe(false)
    }
    expect(stampHolds("not a key", request, read.stamp)).toBe(false)
  })

  it("are refused missing, malformed or out of the 60 s window, before any key is asked", () => {
    const headers = stampHeaders(keyPair().privateKey, request)
    expect(readStamp({}, Date.now())).toEqual({ refused: expect.stringMatching(/missing/) })
    expect(readStamp({ ...headers, "x-portico-node-stamp": "v1=short" }, Date.now())).toEqual({ refused: "node stamp malformed" })
    expect(readStamp({ ...headers, "x-portico-node-id": "../x" }, Date.now())).toEqual({ refused: "node stamp malformed" })
    expect(readStamp(headers, Date.now() + 61_000)).toEqual({ refused: "node stamp expired" })
    expect(readStamp(headers, Date.now() - 61_000)).toEqual({ refused: "node stamp expired" })
  })
})

describe("node ids derived from keys", () => {
  it("are node- and 32 hex of the key's SHA-256, held by that key only; a named id by any", () => {
    const key = keyPair()
    const id = derivedNodeId(key.publicKey)
    expect(id).toMatch(/^node-[0-9a-f]{32}$/)
    expect(isDerivedNodeId(id)).toBe(true)
    expect(keyMayHold(id, key.publicKey)).toBe(true)
    expect(keyMayHold(id, keyPair().publicKey)).toBe(false)
    expect(keyMayHold("node-a", keyPair().publicKey)).toBe(true)
    // the ids of older releases (node-<12 hex>) are named ids
    expect(isDerivedNodeId("node-0123456789ab")).toBe(false)
  })

  it("name a new data directory's node, which keeps its id", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-node-id-"))
    try {
      const id = localNodeId(dir)
      expect(id).toBe(derivedNodeId(loadNodeKey(dir).publicKey))
      expect(localNodeId(dir)).toBe(id)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("loopback sources", () => {
  it("are 127.0.0.0/8 and ::1, mapped or not; the private network is not", () => {
    for (const yes of ["127.0.0.1", "127.0.0.12", "::1", "::ffff:127.0.0.1"]) expect([yes, isLoopbackSource(yes)]).toEqual([yes, true])
    for (const no of [undefined, "10.0.0.1", "192.168.1.2", "100.64.0.1", "fd00::1", "::ffff:10.0.0.1", "1.2.3.4"]) expect([no, isLoopbackSource(no)]).toEqual([no, false])
  })
})
