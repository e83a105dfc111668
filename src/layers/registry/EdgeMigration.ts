/**
 * Migration 24: what the TLS edge keeps in the registry (docs/edge.md), shared by every node's
 * edge: Caddy's storage (certificates, their keys, ACME accounts; each value sealed, Sealer
 * purpose `tls-store`, owner the key) and the DNS-01 challenge records the edge asked for.
 * `modified_at` and `created_at` are Unix milliseconds. Locks of the storage are leases in
 * `cluster_leases` (migration 21), named `tls:<name>`.
 */
import type { Migration } from "./migrations.js"

export const edgeMigration: Migration = {
  id: 24,
  name: "edge_tls",
  statements: [
    `CREATE TABLE IF NOT EXISTS tls_store (
      key TEXT PRIMARY KEY,
      sealed TEXT NOT NULL,
      size INTEGER NOT NULL,
      modified_at INTEGER NOT NULL
    )`,
    `CREATE TABLE IF NOT EXISTS acme_challenges (
      fqdn TEXT NOT NULL,
      value TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (fqdn, value)
    )`
  ]
}
