/**
 * Re-sealing after a rotation (docs/cluster.md, "Root-secret rotation"): every sealed column of
 * the registry, with the purpose and owner it is sealed for, and the cluster worker's task that
 * moves values sealed under an older root generation to the newest, in small batches. Each value is
 * replaced by a compare-and-swap (`WHERE rowid = ? AND <column> = <old value>`), so a value
 * changed meanwhile by its own service is left as that service wrote it.
 *
 * A value sealed anywhere must be listed here: `seal(` in src/ names each.
 */
import { Effect } from "effect"
import type { RegistryStoreService, StoreError } from "../registry/RegistryStore.js"
import type { Purpose, SealerService } from "./Sealer.js"

export interface SealedColumn {
  readonly table: string
  readonly column: string
  readonly purpose: Purpose
  /** The columns the owner is made of. */
  readonly ownerColumns: ReadonlyArray<string>
  /** The owner the value is bound to, from those columns (as the sealing service forms it). */
  readonly owner: (row: Readonly<Record<string, unknown>>) => string
}

const s = (v: unknown) => String(v)

export const SEALED_COLUMNS: ReadonlyArray<SealedColumn> = [
  // src/layers/sessions/Refresh.ts: a rotated refresh token's successor, for the grace reuse
  { table: "refresh_tokens", column: "successor", purpose: "refresh-successor", ownerColumns: ["hash"], owner: (r) => s(r.hash) },
  // src/layers/push/PushStore.ts: provider credentials and topic tokens
  { table: "push_credentials", column: "sealed", purpose: "push-credentials", ownerColumns: ["namespace", "provider"], owner: (r) => `${s(r.namespace)}/${s(r.provider)}` },
  {
    table: "push_topics",
    column: "sealed_token",
    purpose: "push-credentials",
    ownerColumns: ["namespace", "topic_id"],
    owner: (r) => `${s(r.namespace)}/topic/${s(r.topic_id)}`
  },
  // src/layers/functions/Functions.ts: a function's environment and its secrets
  { table: "functions", column: "env_sealed", purpose: "function-env", ownerColumns: ["namespace", "name"], owner: (r) => `${s(r.namespace)}/${s(r.name)}` },
  {
    table: "function_secrets",
    column: "sealed",
    purpose: "function-secret",
    ownerColumns: ["namespace", "name", "key"],
    owner: (r) => `${s(r.namespace)}/${s(r.name)}/${s(r.key)}`
  },
  // src/layers/nodes/NodeInvites.ts: a node invite's token
  { table: "node_invites", column: "token_sealed", purpose: "node-invite", ownerColumns: ["id"], owner: (r) => s(r.id) },
  // src/layers/tokens/KeyRing.ts: the token signing keys' private halves
  { table: "signing_keys", column: "sealed_private", purpose: "signing-keys", ownerColumns: ["kid"], owner: (r) => s(r.kid) },
  // src/layers/deployments/DeploymentStore.ts: a deployment's environment
  { table: "deployments", column: "env_sealed", purpose: "deployment-env", ownerColumns: ["namespace", "id"], owner: (r) => `${s(r.namespace)}/${s(r.id)}` },
  // src/layers/edge/TlsStore.ts: the edge's certificates, keys and ACME accounts
  { table: "tls_store", column: "sealed", purpose: "tls-store", ownerColumns: ["key"], owner: (r) => s(r.key) },
  // src/layers/webrtc/WebRtc.ts: a namespace's relay secret
  { table: "webrtc_settings", column: "relay_secret_sealed", purpose: "webrtc-relay", ownerColumns: ["namespace"], owner: (r) => s(r.namespace) }
]

export interface ResealCount {
  /** Values moved to the newest generation. */
  readonly resealed: number
  /** Values under an older generation left as they were: they did not open, or changed meanwhile. */
  readonly skipped: number
}

/**
 * One pass over every sealed column, `batch` rows at a time: each value not under the newest
 * generation is opened and sealed again under it.
 */
export const resealAll = (store: RegistryStoreService, sealer: SealerService, batch = 50): Effect.Effect<ResealCount, StoreError> =>
  Effect.gen(function* () {
    let resealed = 0
    let skipped = 0
    const newest = sealer.generation()
    if (newest === 0) return { resealed, skipped }
    const current = `v2.${newest}.%`
    for (const c of SEALED_COLUMNS) {
      let after = 0
      for (;;) {
        const rows = yield* store.query({
          sql: `SELECT rowid AS rid, ${c.ownerColumns.join(", ")}, ${c.column} AS sealed FROM ${c.table}
                WHERE rowid > ? AND ${c.column} IS NOT NULL AND ${c.column} NOT LIKE ? ORDER BY rowid LIMIT ?`,
          params: [after, current, batch]
        })
        for (const row of rows) {
          after = Number(row.rid)
          const old = String(row.sealed)
          const opened = yield* Effect.either(sealer.open(c.purpose, c.owner(row), old))
          if (opened._tag === "Left") {
            skipped++
            continue
          }
          const updated = yield* store.exec({
            sql: `UPDATE ${c.table} SET ${c.column} = ? WHERE rowid = ? AND ${c.column} = ?`,
            params: [sealer.seal(c.purpose, c.owner(row), opened.right), Number(row.rid), old]
          })
          if (updated.rowsAffected === 1) resealed++
          else skipped++
        }
        if (rows.length < batch) break
      }
    }
    return { resealed, skipped }
  })
