/**
 * The edge's certificate storage (`/v1/internal/tls-store`, docs/edge.md): the key-value store
 * with implicit directories that Caddy's storage interface (certmagic.Storage) describes, kept in
 * the registry so that every node's edge shares one set of certificates, keys and ACME accounts.
 *
 * Keys are paths (`certificates/<issuer>/<host>/<host>.crt`); a directory is any key's prefix up
 * to a `/`, and exists while a key under it does. Each value is sealed (purpose `tls-store`, owner
 * the key), so the registry never holds a private key in the clear. Locks are leases in
 * `cluster_leases` named `tls:<name>`, held by one edge process for LOCK_LEASE_MS at a time and
 * renewed by it while it works; a crashed holder's lock lapses, by the registry's clock.
 */
import { Context, Effect, Layer } from "effect"
import type { EdgeCode } from "../../domain/Errors.js"
import { REGISTRY_NOW } from "../cluster/Membership.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { Sealer } from "../secrets/Sealer.js"

/** How long a lock holds without being renewed (the edge renews every 20 s). */
export const LOCK_LEASE_MS = 60_000

/** A value's largest size: certificates, keys and account files are a few KiB. */
export const TLS_VALUE_MAX_BYTES = 1024 * 1024

export interface KeyInfo {
  readonly key: string
  readonly modifiedMs: number
  readonly size: number
  readonly terminal: boolean
}

export interface TlsStoreService {
  readonly store: (key: string, value: Uint8Array) => Effect.Effect<void, Refused<EdgeCode> | StoreError>
  /** NOT_FOUND when no value is at `key`. */
  readonly load: (key: string) => Effect.Effect<Uint8Array, Refused<EdgeCode> | StoreError>
  /** Removes `key` and everything under it as a directory; nothing there is no error. */
  readonly delete: (key: string) => Effect.Effect<void, StoreError>
  readonly exists: (key: string) => Effect.Effect<boolean, StoreError>
  /**
   * The keys under the directory `prefix` ("" is the root): its direct children (files and
   * directories), or with `recursive` every key below it. NOT_FOUND when there is none.
   */
  readonly list: (prefix: string, recursive: boolean) => Effect.Effect<ReadonlyArray<string>, Refused<EdgeCode> | StoreError>
  readonly stat: (key: string) => Effect.Effect<KeyInfo, Refused<EdgeCode> | StoreError>
  /** Takes or renews `name` for `owner`; CONFLICT while another owner holds it. */
  readonly lock: (name: string, owner: string) => Effect.Effect<void, Refused<EdgeCode> | StoreError>
  readonly unlock: (name: string, owner: string) => Effect.Effect<void, StoreError>
}

const missing = (key: string) => refuse("NOT_FOUND", `nothing is stored at ${key}`)

/** The bounds of the keys below directory `dir`: from `dir/` up to (not including) `dir0`, '0' following '/'. */
const below = (dir: string): { readonly sql: string; readonly params: ReadonlyArray<string> } =>
  dir === "" ? { sql: "1 = 1", params: [] } : { sql: "key > ? AND key < ?", params: [`${dir}/`, `${dir}0`] }

const trimmed = (key: string) => key.replace(/\/+$/, "")

export const makeTlsStore = Effect.gen(function* () {
  const store = yield* RegistryStore
  const sealer = yield* Sealer

  const service: TlsStoreService = {
    store: (key, value) =>
      value.byteLength > TLS_VALUE_MAX_BYTES
        ? Effect.fail(refuse("PAYLOAD_TOO_LARGE", `a stored value is at most ${TLS_VALUE_MAX_BYTES} bytes`))
        : Effect.asVoid(
            store.exec({
              sql: `INSERT INTO tls_store (key, sealed, size, modified_at) VALUES (?, ?, ?, ${REGISTRY_NOW})
                    ON CONFLICT (key) DO UPDATE SET sealed = excluded.sealed, size = excluded.size, modified_at = excluded.modified_at`,
              params: [key, sealer.seal("tls-store", key, value), value.byteLength]
            })
          ),

    load: (key) =>
      Effect.gen(function* () {
        const [row] = yield* store.query({ sql: "SELECT sealed FROM tls_store WHERE key = ?", params: [key] })
        if (row === undefined) return yield* Effect.fail(missing(key))
        // a value that does not open under any root held is as good as absent: the edge issues anew
        return yield* Effect.mapError(sealer.open("tls-store", key, String(row.sealed)), () => missing(key))
      }),

    delete: (key) => {
      const dir = below(trimmed(key))
      return Effect.asVoid(store.exec({ sql: `DELETE FROM tls_store WHERE key = ? OR (${dir.sql})`, params: [key, ...dir.params] }))
    },

    exists: (key) => {
      const dir = below(trimmed(key))
      return Effect.map(
        store.query({ sql: `SELECT 1 AS found FROM tls_store WHERE key = ? OR (${dir.sql}) LIMIT 1`, params: [key, ...dir.params] }),
        (rows) => rows.length > 0
      )
    },

    list: (prefix, recursive) =>
      Effect.gen(function* () {
        const dir = trimmed(prefix)
        const range = below(dir)
        const rows = yield* store.query({ sql: `SELECT key FROM tls_store WHERE ${range.sql} ORDER BY key`, params: range.params })
        if (rows.length === 0) return yield* Effect.fail(missing(prefix))
        const start = dir === "" ? 0 : dir.length + 1
        const keys = new Set<string>()
        for (const row of rows) {
          const key = String(row.key)
          if (recursive) {
            keys.add(key)
            continue
          }
          const slash = key.indexOf("/", start)
          keys.add(slash === -1 ? key : key.slice(0, slash))
        }
        return [...keys]
      }),

    stat: (key) =>
      Effect.gen(function* () {
        const [file] = yield* store.query({ sql: "SELECT size, modified_at FROM tls_store WHERE key = ?", params: [key] })
        if (file !== undefined) return { key, modifiedMs: Number(file.modified_at), size: Number(file.size), terminal: true }
        const dir = below(trimmed(key))
        const [under] = yield* store.query({ sql: `SELECT MAX(modified_at) AS modified_at, COUNT(*) AS n FROM tls_store WHERE ${dir.sql}`, params: dir.params })
        if (under === undefined || Number(under.n) === 0) return yield* Effect.fail(missing(key))
        return { key, modifiedMs: Number(under.modified_at), size: 0, terminal: false }
      }),

    lock: (name, owner) =>
      Effect.flatMap(
        store.exec({
          sql: `INSERT INTO cluster_leases (name, holder, until) VALUES (?, ?, ${REGISTRY_NOW} + ?)
                ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
                WHERE cluster_leases.holder = excluded.holder OR cluster_leases.until < ${REGISTRY_NOW}`,
          params: [`tls:${name}`, owner, LOCK_LEASE_MS]
        }),
        (r) => (r.rowsAffected === 1 ? Effect.void : Effect.fail(refuse("CONFLICT", `the lock ${name} is held by another edge`, "wait and ask again")))
      ),

    unlock: (name, owner) => Effect.asVoid(store.exec({ sql: "DELETE FROM cluster_leases WHERE name = ? AND holder = ?", params: [`tls:${name}`, owner] }))
  }
  return service
})

export class TlsStore extends Context.Tag("portico/TlsStore")<TlsStore, TlsStoreService>() {
  static readonly Live = Layer.effect(TlsStore, makeTlsStore)
  static readonly Test = Layer.suspend(() => TlsStore.Live.pipe(Layer.provide(Layer.mergeAll(SqliteRegistryStore.Test, Sealer.Test))))
}
