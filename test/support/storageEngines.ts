/**
 * The content engines the storage suite runs on: the embedded blockstore always, and Kubo with
 * IPFS Cluster in the run storage.cluster.test.ts starts inside a loopback-only network
 * namespace (a missing binary fails that run).
 */
import { NextToLast } from "blockstore-fs/sharding"
import { CID } from "multiformats/cid"
import { existsSync } from "node:fs"
import * as path from "node:path"
import type { Gateway } from "./gateway.js"
import { startKuboCluster } from "./kubo.js"

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

const kubo = async (): Promise<StorageEngine> => {
  const cluster = await startKuboCluster()
  return {
    env: { PORTICO_STORAGE_KUBO_URL: cluster.kuboUrl, PORTICO_STORAGE_CLUSTER_URL: cluster.clusterUrl },
    holds: (_gw, cid) => cluster.hasBlock(cid),
    stop: cluster.stop
  }
}

/** Set by storage.cluster.test.ts for the run it starts inside a loopback-only network namespace. */
export const IN_NETNS = "PORTICO_TEST_NETNS"

export const storageEngines = (): Array<[string, () => Promise<StorageEngine>]> => {
  const engines: Array<[string, () => Promise<StorageEngine>]> = [["embedded", embedded]]
  if (process.env[IN_NETNS] === "1") engines.push(["kubo", kubo])
  return engines
}
