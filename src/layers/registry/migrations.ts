/**
 * The registry schema, ordered migrations shared by both engines (SQLite through `@effect/sql`'s
 * Migrator; rqlite one atomic batch each, in `portico_migrations`). Never edit one that shipped.
 */
import { clusterMigrations } from "./ClusterMigration.js"
import { customDomainClaimsMigration, deploymentTeardownsMigration } from "./DeploymentsMigration.js"
import { edgeMigration } from "./EdgeMigration.js"
import { replicasMigration } from "./ReplicasMigration.js"
import { webRtcAdmissionsMigration, webRtcMigration } from "./WebRtcMigration.js"
import { functionTriggersMigration, functionsMigration } from "./FunctionsMigration.js"

export interface Migration {
  readonly id: number
  readonly name: string
  readonly statements: ReadonlyArray<string>
}

export const migrations: ReadonlyArray<Migration> = [
  {
    id: 1,
    name: "namespaces_members_keys",
    statements: [
      `CREATE TABLE IF NOT EXISTS namespaces (
        name TEXT PRIMARY KEY,
        owner TEXT,
        created_at INTEGER NOT NULL,
        rate_limit_rps INTEGER,
        rate_limit_burst INTEGER
      )`,
      `CREATE TABLE IF NOT EXISTS members (
        namespace TEXT NOT NULL,
        wallet TEXT NOT NULL,
        role TEXT NOT NULL,
        added_at INTEGER NOT NULL,
        added_by TEXT NOT NULL,
        PRIMARY KEY (namespace, wallet)
      )`,
      `CREATE TABLE IF NOT EXISTS api_keys (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        hash TEXT NOT NULL,
        role TEXT NOT NULL,
        scopes TEXT NOT NULL,
        label TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        created_by TEXT NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER
      )`,
      `CREATE INDEX IF NOT EXISTS api_keys_namespace ON api_keys (namespace, created_at)`,
      `CREATE TABLE IF NOT EXISTS signing_keys (
        kid TEXT PRIMARY KEY,
        alg TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        sealed_private TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        retired_at INTEGER
      )`,
      `CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        at INTEGER NOT NULL,
        action TEXT NOT NULL,
        principal TEXT NOT NULL,
        target TEXT NOT NULL,
        detail TEXT NOT NULL
      )`,
      `CREATE INDEX IF NOT EXISTS audit_namespace_at ON audit (namespace, at)`
    ]
  },
  {
    id: 2,
    name: "sign_in_sessions_devices",
    statements: [
      `CREATE TABLE IF NOT EXISTS auth_challenges (
        nonce TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        wallet TEXT NOT NULL,
        device_id TEXT,
        expires_at INTEGER NOT NULL,
        spent_at INTEGER
      )`,
      `CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        wallet TEXT NOT NULL,
        device_id TEXT,
        created_at INTEGER NOT NULL,
        refreshed_at INTEGER NOT NULL,
        ended_at INTEGER,
        end_reason TEXT
      )`,
      `CREATE INDEX IF NOT EXISTS sessions_wallet ON sessions (namespace, wallet)`,
      `CREATE TABLE IF NOT EXISTS refresh_tokens (
        hash TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        used_at INTEGER,
        successor TEXT,
        grace_used INTEGER NOT NULL DEFAULT 0
      )`,
      `CREATE INDEX IF NOT EXISTS refresh_tokens_session ON refresh_tokens (session_id)`,
      `CREATE TABLE IF NOT EXISTS devices (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        wallet TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        label TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER,
        PRIMARY KEY (namespace, id)
      )`,
      `CREATE TABLE IF NOT EXISTS proof_nonces (
        key TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL
      )`,
      `ALTER TABLE namespaces ADD COLUMN device_policy TEXT NOT NULL DEFAULT 'optional'`,
      `ALTER TABLE namespaces ADD COLUMN sign_in TEXT NOT NULL DEFAULT 'members'`
    ]
  },
  {
    id: 3,
    name: "sign_in_keys_device_requests",
    statements: [
      // Keys an end user minted from a sign-in: a stricter session policy revokes them all.
      `ALTER TABLE api_keys ADD COLUMN origin TEXT NOT NULL DEFAULT 'admin'`,
      // A device waiting for someone: approval of a further device (policy approval), a link
      // started by a new device (seedless), or a plain login from a machine with no wallet.
      `CREATE TABLE IF NOT EXISTS device_requests (
        device_code_hash TEXT PRIMARY KEY,
        user_code TEXT NOT NULL,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        wallet TEXT,
        device_id TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        label TEXT NOT NULL,
        status TEXT NOT NULL,
        approved_by TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        last_poll_at INTEGER,
        session_id TEXT
      )`,
      `CREATE UNIQUE INDEX IF NOT EXISTS device_requests_user_code ON device_requests (namespace, user_code)`
    ]
  },
  {
    id: 4,
    name: "node_local_databases",
    statements: [
      // A node-local database lives in one file on its home node; the registry says which node,
      // so any gateway can route to it. Backups (issue storage) add rows of their own.
      `CREATE TABLE IF NOT EXISTS local_databases (
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        home_node TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, name)
      )`
    ]
  },
  {
    id: 5,
    name: "content_storage",
    statements: [
      // One pin per CID cluster-wide, whoever holds the bytes.
      `CREATE TABLE IF NOT EXISTS content_pins (
        cid TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      )`,
      // Every reference that keeps a CID: a namespace's pin (kind 'pin', ref ''), a database
      // backup (kind 'backup', ref the backup id), later deployments. A namespace holds a CID
      // while it has a row here; the pin goes when the last row does.
      `CREATE TABLE IF NOT EXISTS content_refs (
        cid TEXT NOT NULL,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        ref TEXT NOT NULL,
        name TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (cid, namespace, kind, ref)
      )`,
      `CREATE INDEX IF NOT EXISTS content_refs_namespace ON content_refs (namespace, cid)`,
      // Fetch capabilities: only hashes of the token secret and the revoke key are kept.
      `CREATE TABLE IF NOT EXISTS fetch_caps (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        cid TEXT NOT NULL,
        token_hash TEXT NOT NULL,
        revoke_hash TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        revoked_at INTEGER
      )`,
      `CREATE INDEX IF NOT EXISTS fetch_caps_expiry ON fetch_caps (expires_at)`,
      `CREATE TABLE IF NOT EXISTS local_database_backups (
        namespace TEXT NOT NULL,
        id TEXT NOT NULL,
        database_name TEXT NOT NULL,
        backup_cid TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, id)
      )`,
      `CREATE INDEX IF NOT EXISTS local_database_backups_by_name ON local_database_backups (namespace, database_name, created_at)`
    ]
  },
  {
    id: 6,
    name: "sign_in_expiry_indexes",
    statements: [
      // Each new challenge, proof and device request deletes the expired ones (anyone may make
      // them): by expiry, so that delete reads only what it removes.
      `CREATE INDEX IF NOT EXISTS auth_challenges_expiry ON auth_challenges (expires_at)`,
      `CREATE INDEX IF NOT EXISTS proof_nonces_expiry ON proof_nonces (expires_at)`,
      `CREATE INDEX IF NOT EXISTS device_requests_expiry ON device_requests (expires_at)`
    ]
  },
  {
    id: 7,
    name: "list_paging_cors_origins",
    statements: [
      // Lists are read in keyset pages (src/layers/registry/Keyset.ts): an index in each list's
      // order, so a page reads only its own rows however deep it is.
      `CREATE INDEX IF NOT EXISTS members_page ON members (namespace, added_at, wallet)`,
      `CREATE INDEX IF NOT EXISTS sessions_page ON sessions (namespace, wallet, created_at, id)`,
      `CREATE INDEX IF NOT EXISTS devices_page ON devices (namespace, wallet, created_at, id)`,
      `CREATE INDEX IF NOT EXISTS audit_page ON audit (namespace, id)`,
      // The browser origins a namespace admits (docs/api.md, "Browsers and CORS"): a JSON array
      // of exact origins; none by default.
      `ALTER TABLE namespaces ADD COLUMN cors_origins TEXT NOT NULL DEFAULT '[]'`
    ]
  },
  {
    id: 8,
    name: "poll_interval_ownership_offers",
    statements: [
      // RFC 8628 §3.5: each slow_down adds 5 s to the interval a device request's poller must
      // keep, for the rest of that request (NULL: the starting interval).
      `ALTER TABLE device_requests ADD COLUMN poll_interval INTEGER`,
      // A namespace's ownership moves in two steps (docs/api.md, "Ownership transfer"): the
      // owner's offer waits here until the recipient accepts it from its own session, the owner
      // cancels it, or it expires. One offer per namespace: a new one replaces it.
      `CREATE TABLE IF NOT EXISTS ownership_offers (
        namespace TEXT PRIMARY KEY,
        from_owner TEXT,
        to_wallet TEXT NOT NULL,
        offered_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      )`
    ]
  },
  {
    id: 9,
    name: "push_credentials_devices_topics",
    statements: [
      // A namespace's push credentials (one per provider, and the legacy push config as slot
      // 'push_config'): the whole credential sealed for its namespace and slot, nothing in clear.
      `CREATE TABLE IF NOT EXISTS push_credentials (
        namespace TEXT NOT NULL,
        provider TEXT NOT NULL,
        sealed TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        updated_by TEXT NOT NULL,
        PRIMARY KEY (namespace, provider)
      )`,
      // A user's devices: one registration per (namespace, subject, device id). "bound" = 1 when
      // the device id is a device-bound session's verified one, so revoking that device ends it.
      `CREATE TABLE IF NOT EXISTS push_devices (
        namespace TEXT NOT NULL,
        subject TEXT NOT NULL,
        device_id TEXT NOT NULL,
        bound INTEGER NOT NULL,
        provider TEXT NOT NULL,
        token TEXT NOT NULL,
        platform TEXT,
        app_version TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, subject, device_id)
      )`,
      `CREATE INDEX IF NOT EXISTS push_devices_device ON push_devices (namespace, device_id)`,
      // Spec §3.3: a topic keeps its id, its sealed provider and token, and its expiry; no
      // account, subject or registration time. token_hash (a keyed hash of provider and token)
      // makes one token belong to one topic per namespace.
      `CREATE TABLE IF NOT EXISTS push_topics (
        namespace TEXT NOT NULL,
        topic_id TEXT NOT NULL,
        token_hash TEXT NOT NULL,
        sealed_token TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, topic_id)
      )`,
      `CREATE UNIQUE INDEX IF NOT EXISTS push_topics_token ON push_topics (namespace, token_hash)`,
      `CREATE INDEX IF NOT EXISTS push_topics_expiry ON push_topics (expires_at)`
    ]
  },
  {
    id: 10,
    name: "deployments",
    statements: [
      // Spec §2.7: one row per deployment. port: dynamic types only, unique per node; updated_at and
      // env_version: nanosecond stamps as 20-digit text (past 2^53, so not a JSON number on rqlite's
      // wire), strictly increasing per deployment. env_sealed: the environment sealed to
      // `<namespace>/<id>`. src/layers/deployments/DeploymentStore.ts.
      `CREATE TABLE IF NOT EXISTS deployments (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        status TEXT NOT NULL,
        version INTEGER NOT NULL,
        domain TEXT NOT NULL,
        home_node TEXT NOT NULL,
        port INTEGER,
        artifact TEXT NOT NULL,
        memory_bytes INTEGER NOT NULL,
        cpu_millis INTEGER NOT NULL,
        pids INTEGER NOT NULL,
        restart_policy TEXT NOT NULL,
        health_path TEXT,
        grants TEXT NOT NULL,
        env_sealed TEXT NOT NULL,
        env_version TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at TEXT NOT NULL
      )`,
      `CREATE UNIQUE INDEX IF NOT EXISTS deployments_name ON deployments (namespace, name)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS deployments_domain ON deployments (domain)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS deployments_port ON deployments (home_node, port) WHERE port IS NOT NULL`,
      // One row per version: a rollback is a new version pointing at an older one's artifact.
      `CREATE TABLE IF NOT EXISTS deployment_versions (
        deployment_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        artifact TEXT NOT NULL,
        source TEXT NOT NULL,
        rollback_from INTEGER,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (deployment_id, version)
      )`,
      // The events route's rows (spec §6.1), newest kept, in seq order.
      `CREATE TABLE IF NOT EXISTS deployment_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        deployment_id TEXT NOT NULL,
        type TEXT NOT NULL,
        version INTEGER NOT NULL,
        at INTEGER NOT NULL,
        detail TEXT NOT NULL
      )`,
      `CREATE INDEX IF NOT EXISTS deployment_events_page ON deployment_events (deployment_id, seq)`,
      // Custom domains: unique across the registry, and never another deployment's own domain.
      `CREATE TABLE IF NOT EXISTS deployment_domains (
        domain TEXT PRIMARY KEY,
        deployment_id TEXT NOT NULL,
        token TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        verified_at INTEGER
      )`,
      `CREATE INDEX IF NOT EXISTS deployment_domains_deployment ON deployment_domains (deployment_id, domain)`
    ]
  },
  {
    id: 11,
    name: "operators",
    statements: [
      // The operator plane (issue 25, docs/operators.md): the operator list, the operator audit
      // trail, one-use invites (only the token's hash kept), the creators allowlist and the
      // operator settings (absent row: the default).
      `CREATE TABLE IF NOT EXISTS operators (
        wallet TEXT PRIMARY KEY,
        added_at INTEGER NOT NULL,
        added_by TEXT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS operator_audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        detail TEXT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS operator_invites (
        hash TEXT PRIMARY KEY,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        redeemed_by TEXT,
        redeemed_at INTEGER
      )`,
      `CREATE TABLE IF NOT EXISTS namespace_creators (
        wallet TEXT PRIMARY KEY,
        added_at INTEGER NOT NULL,
        added_by TEXT NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS operator_settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        updated_by TEXT NOT NULL
      )`
    ]
  },
  {
    id: 12,
    name: "namespace_teardowns",
    statements: [
      // A namespace deletion (docs/namespaces.md, "Deleting a namespace"): written before anything
      // is removed, naming every part owed; each part is marked done when removed, and the rows go
      // with the namespace row in the last batch. A gateway's start finishes what it finds here.
      // runner and lease_until: the gateway working on it now (another answers 409 until it lapses).
      `CREATE TABLE IF NOT EXISTS portico_teardowns (
        namespace TEXT PRIMARY KEY,
        actor TEXT NOT NULL,
        reason TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        runner TEXT NOT NULL,
        lease_until INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS portico_teardown_parts (
        namespace TEXT NOT NULL,
        part TEXT NOT NULL,
        done_at INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        PRIMARY KEY (namespace, part)
      )`
    ]
  },
  {
    id: 13,
    name: "namespace_restores",
    statements: [
      // A restore's writes under way (docs/namespaces.md, "Restore"): written before the first
      // write, removed in the batch that writes the registry rows. A row found at a gateway's
      // start is a restore that stopped half way, and the runner takes its writes back.
      // undo_file: the cluster SQL store's state before (empty: none, the store file is dropped).
      `CREATE TABLE IF NOT EXISTS portico_restores (
        namespace TEXT PRIMARY KEY,
        runner TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        store_loaded INTEGER NOT NULL,
        undo_file TEXT NOT NULL,
        databases TEXT NOT NULL
      )`
    ]
  },
  customDomainClaimsMigration,
  deploymentTeardownsMigration,
  functionsMigration,
  functionTriggersMigration,
  // 18 on: one module per family beside this one
  ...clusterMigrations,
  edgeMigration,
  replicasMigration,
  webRtcMigration,
  webRtcAdmissionsMigration
]
