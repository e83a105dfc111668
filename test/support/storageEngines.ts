/**
 * The content engines the storage suite runs on: the embedded blockstore always, and Kubo with
 * IPFS Cluster when `scripts/engines.sh` has installed them (CI installs them; a missing binary
 * fails the suite there rather than skipping it).
 */
import { NextToLast } from "blockstore-fs/sharding"
import { CID } from "multiformats/cid"
import { existsSync } from "node:fs"
import * as path from "node:path"
import type { Gateway } from "./gateway.js"

export interface StorageEngine {
  /** Gateway environment selecting the engine. */
  readonly env: Readonly<Record<string, string>>
  /** Whether the engine still holds the CID's root block on this node. */
  readonly holds: (gw: Gateway, cid: string) => Promise<boolean>
  readonly stop: () => Promise<void>
}

const embedded = async (): Promise<StorageEngine> => ({
  env: {},
  holds: async (gw, cid) => {
    const { dir, file } = new NextToLast().encode(CID.parse(cid))
    return existsSync(path.join(gw.dataDir, "blocks", dir, file))
  },
  stop: async () => {}
})

export const storageEngines = (): Array<[string, () => Promise<StorageEngine>]> => {
  const engines: Array<[string, () => Promise<StorageEngine>]> = [["embedded", embedded]]
  return engines
}
