/** Functions' migrations (docs/functions.md), kept beside migrations.ts so that list stays readable. */
import type { Migration } from "./migrations.js"

export const functionsMigration: Migration = {
    id: 16,
    name: "functions",
    statements: [
      // One row per function: its live version and its settings, which every version runs with
      // (docs/functions.md, "Versions"). The environment is sealed JSON.
      `CREATE TABLE IF NOT EXISTS functions (
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        memory_mb INTEGER NOT NULL,
        timeout_ms INTEGER NOT NULL,
        public INTEGER NOT NULL,
        env_sealed TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, name)
      )`,
      // Each deploy and rollback is a version; `ref` names its content reference (kind 'function').
      `CREATE TABLE IF NOT EXISTS function_versions (
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        cid TEXT NOT NULL,
        size INTEGER NOT NULL,
        ref TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, name, version)
      )`,
      `CREATE TABLE IF NOT EXISTS function_secrets (
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        key TEXT NOT NULL,
        sealed TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, name, key)
      )`,
      `CREATE TABLE IF NOT EXISTS function_logs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        at INTEGER NOT NULL,
        request_id TEXT NOT NULL,
        level TEXT NOT NULL,
        message TEXT NOT NULL
      )`,
      `CREATE INDEX IF NOT EXISTS function_logs_function ON function_logs (namespace, name, seq)`
    ]
  }

/**
 * Migration 17: functions' triggers (docs/functions.md, "Schedules", "Topics"), and the claims that
 * make each schedule's slot, and each message of a topic, run a function once cluster-wide.
 */
export const functionTriggersMigration: Migration = {
  id: 17,
  name: "function_triggers",
  statements: [
    // the function's cron expressions and its topics, each a JSON array
    `ALTER TABLE functions ADD COLUMN schedules TEXT NOT NULL DEFAULT '[]'`,
    `ALTER TABLE functions ADD COLUMN topics TEXT NOT NULL DEFAULT '[]'`,
    `CREATE TABLE IF NOT EXISTS function_topic_claims (
      namespace TEXT NOT NULL,
      name TEXT NOT NULL,
      topic TEXT NOT NULL,
      epoch TEXT NOT NULL,
      seq INTEGER NOT NULL,
      claimed_at INTEGER NOT NULL,
      PRIMARY KEY (namespace, name, topic, epoch, seq)
    )`,
    `CREATE INDEX IF NOT EXISTS function_topic_claims_age ON function_topic_claims (claimed_at)`,
    // one row per fired slot: the gateway whose insert made it runs the function
    `CREATE TABLE IF NOT EXISTS function_schedule_runs (
      namespace TEXT NOT NULL,
      name TEXT NOT NULL,
      expression TEXT NOT NULL,
      slot INTEGER NOT NULL,
      node TEXT NOT NULL,
      PRIMARY KEY (namespace, name, expression, slot)
    )`,
    `CREATE INDEX IF NOT EXISTS function_schedule_runs_slot ON function_schedule_runs (slot)`
  ]
}
