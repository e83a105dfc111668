/**
 * Migrations 18-22: the cluster's nodes, the invites that admit them, node-local databases moving
 * off a node that leaves, the lease of the cluster's one background worker, and the generations of
 * the root secret (docs/cluster.md).
 *
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

/**
 * Migration 19: one-use invites that admit a node (docs/cluster.md, "Joining"). `id` is the
 * SHA-256 of the token; the token itself is kept sealed under the root secret, as the admitting
 * node checks the joiner's HMAC with it. `node_id`, when set, is the only node the invite admits.
 * A node that leaves keeps its row with `retired_at`, and its key is no longer accepted; a node
 * being drained has `draining_at`.
 */
export const nodeInvitesMigration: Migration = {
  id: 19,
  name: "node_invites",
  statements: [
    `CREATE TABLE IF NOT EXISTS node_invites (
      id TEXT PRIMARY KEY,
      token_sealed TEXT NOT NULL,
      node_id TEXT,
      created_by TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      used_at INTEGER,
      used_by TEXT
    )`,
    "ALTER TABLE cluster_nodes ADD COLUMN retired_at INTEGER",
    "ALTER TABLE cluster_nodes ADD COLUMN draining_at INTEGER"
  ]
}

/**
 * Migration 20: a node-local database being handed to another node (docs/cluster.md, "Leaving"):
 * the node it moves to, and until when (Unix milliseconds, the registry's clock) the receiver may
 * take the home role. The home node refuses the database's statements while it is handed off.
 */
export const databaseMovesMigration: Migration = {
  id: 20,
  name: "database_moves",
  statements: ["ALTER TABLE local_databases ADD COLUMN moving_to TEXT", "ALTER TABLE local_databases ADD COLUMN moving_until INTEGER"]
}

/**
 * Migration 21: leases held by one node of the cluster at a time (ClusterWorker.ts): the holder
 * and until when (Unix milliseconds, the registry's clock).
 */
export const clusterLeasesMigration: Migration = {
  id: 21,
  name: "cluster_leases",
  statements: [
    `CREATE TABLE IF NOT EXISTS cluster_leases (
      name TEXT PRIMARY KEY,
      holder TEXT NOT NULL,
      until INTEGER NOT NULL
    )`
  ]
}

/**
 * Migration 22: the root secret's generations after 0 (docs/cluster.md, "Root-secret rotation"):
 * generation n's root sealed under generation n - 1's (Sealer purpose `root-secret`), so a node
 * holding any generation opens every later one in turn. Written once per generation, never
 * changed; `created_at` is Unix milliseconds, `created_by` the operator's wallet.
 */
export const clusterSecretsMigration: Migration = {
  id: 22,
  name: "cluster_secrets",
  statements: [
    `CREATE TABLE IF NOT EXISTS cluster_secrets (
      generation INTEGER PRIMARY KEY,
      sealed_root TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      created_by TEXT NOT NULL
    )`
  ]
}

/** Where a node's clients reach it (`PORTICO_PUBLIC_URL`), beside where other nodes do; empty when unset. */
export const nodePublicUrlMigration: Migration = {
  id: 23,
  name: "cluster_nodes_public_url",
  statements: ["ALTER TABLE cluster_nodes ADD COLUMN public_url TEXT NOT NULL DEFAULT ''"]
}

/** Migrations 18-23, in order. */
export const clusterMigrations: ReadonlyArray<Migration> = [
  clusterNodesMigration,
  nodeInvitesMigration,
  databaseMovesMigration,
  clusterLeasesMigration,
  clusterSecretsMigration,
  nodePublicUrlMigration
]
