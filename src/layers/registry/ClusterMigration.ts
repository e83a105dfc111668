/**
 * Migration 18: the cluster's nodes (docs/cluster.md, "Membership"). One row per node, its id bound
 * to its public key at its first heartbeat; `joined_at`, `last_seen` and `left_at` (set by a clean
 * stop, cleared by the next heartbeat) are Unix milliseconds by the registry's clock (Membership.ts).
 */
import type { Migration } from "./migrations.js"

export const clusterNodesMigration: Migration = {
  id: 18,
  name: "cluster_nodes",
  statements: [
    `CREATE TABLE IF NOT EXISTS cluster_nodes (
      id TEXT PRIMARY KEY,
      public_key TEXT NOT NULL,
      internal_url TEXT NOT NULL,
      version TEXT NOT NULL,
      joined_at INTEGER NOT NULL,
      last_seen INTEGER NOT NULL,
      left_at INTEGER
    )`
  ]
}
