/**
 * Migration 25: deployment replicas (spec §2.7 "replica row", §3.4, §4.8; docs/deployments.md,
 * "Replicas").
 *
 * - `deployment_replicas`: one row per deployment and node running it besides its home node.
 *   `status` is `active` or `failed`; `port` is the app's port on that node (NULL after a failed
 *   setup, spec §2.7); `version` the deployment version it runs and `env_version` the environment
 *   stamp it was started with (20-digit text, as `deployments.env_version`), so a replica refuses
 *   an older one; `reason` why it failed; `updated_at` Unix seconds.
 * - `app_ports`: every port taken on a node, by a home or a replica, so both allocations pick from
 *   one set (each statement sees the other's rows: both engines apply writes one at a time).
 * - `deployment_teardowns` keyed by deployment and node: a delete owes one to the home node and
 *   one to each replica node.
 * - `deployment_versions.cid`: a dynamic version's prepared directory (after the build or the
 *   install) as a tar.gz in content storage, which a replica fetches by CID.
 */
import type { Migration } from "./migrations.js"

export const replicasMigration: Migration = {
  id: 25,
  name: "deployment_replicas",
  statements: [
    `CREATE TABLE IF NOT EXISTS deployment_replicas (
      deployment_id TEXT NOT NULL,
      node_id TEXT NOT NULL,
      status TEXT NOT NULL,
      port INTEGER,
      version INTEGER NOT NULL,
      env_version TEXT NOT NULL,
      reason TEXT,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (deployment_id, node_id)
    )`,
    `CREATE UNIQUE INDEX IF NOT EXISTS deployment_replicas_port ON deployment_replicas (node_id, port) WHERE port IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS deployment_replicas_node ON deployment_replicas (node_id)`,
    `CREATE VIEW IF NOT EXISTS app_ports AS
       SELECT home_node AS node, port FROM deployments WHERE port IS NOT NULL
       UNION ALL SELECT node_id AS node, port FROM deployment_replicas WHERE port IS NOT NULL`,
    `ALTER TABLE deployment_versions ADD COLUMN cid TEXT`,
    // a teardown is owed by each node that ran the app, its home and its replicas: one row per
    // deployment and node (`home_node` names the node that owes it)
    `CREATE TABLE IF NOT EXISTS deployment_teardowns_by_node (
        deployment_id TEXT NOT NULL,
        home_node TEXT NOT NULL,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (deployment_id, home_node)
      )`,
    `INSERT INTO deployment_teardowns_by_node SELECT deployment_id, home_node, namespace, name, created_at FROM deployment_teardowns`,
    `DROP TABLE deployment_teardowns`,
    `ALTER TABLE deployment_teardowns_by_node RENAME TO deployment_teardowns`,
    `CREATE INDEX IF NOT EXISTS deployment_teardowns_node ON deployment_teardowns (home_node)`
  ]
}
