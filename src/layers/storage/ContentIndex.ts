/**
 * The cluster-wide reference index of content, in the registry: one pin row per CID, and one
 * reference row per thing that keeps it (a namespace's pin, a database backup, later a
 * deployment). A namespace holds a CID while it has a reference to it.
 *
 * Every conditional write is a SQL predicate (the registry may be rqlite): the quota is checked
 * in the insert itself, and the pin row goes only when no reference is left at that instant.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { RegistryStore, type Statement, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export type RefKind = "pin" | "backup" | "deployment" | "function"

export interface Reference {
  readonly namespace: string
  readonly cid: string
  readonly kind: RefKind
  /** Distinguishes references of one kind: '' for a pin, the backup id for a backup. */
  readonly ref: string
  readonly name: string
  readonly size: number
}

export interface ContentIndexService {
  /** Whether the namespace holds the CID (any reference). */
  readonly holds: (namespace: string, cid: string) => Effect.Effect<boolean, StoreError>
  /** The name the namespace pinned the CID under, when it pinned it. */
  readonly pinName: (namespace: string, cid: string) => Effect.Effect<string | undefined, StoreError>
  /** Whether any namespace holds the CID. */
  readonly heldByAnyone: (cid: string) => Effect.Effect<boolean, StoreError>
  /** Bytes of distinct content the namespace holds. */
  readonly usage: (namespace: string) => Effect.Effect<number, StoreError>
  /**
   * Records a reference and the CID's pin, atomically, unless it would take the namespace past
   * `quota` (content it already holds is free). `extra` statements (a backup's own record) run
   * after it in the same batch and must be conditional on the reference row, so that a refusal
   * writes nothing. False when the quota refused it.
   */
  readonly add: (
    reference: Reference,
    quota: number,
    extra?: ReadonlyArray<Statement>
  ) => Effect.Effect<boolean, StoreError>
  /** Removes one reference; false when there was none. */
  readonly release: (reference: Pick<Reference, "namespace" | "cid" | "kind" | "ref">) => Effect.Effect<boolean, StoreError>
  /** References left on the CID, cluster-wide. */
  readonly count: (cid: string) => Effect.Effect<number, StoreError>
  /** Removes the pin row when no reference is left; false when one appeared meanwhile. */
  readonly dropPinIfUnreferenced: (cid: string) => Effect.Effect<boolean, StoreError>
  /** Every pinned CID (what sweeps and evictions keep). */
  readonly pinned: Effect.Effect<ReadonlyArray<string>, StoreError>
  /** Pins no reference keeps (an unpin whose count could not run left them). */
  readonly orphans: Effect.Effect<ReadonlyArray<string>, StoreError>
}

/** Distinct CIDs of a namespace with their sizes, summed. */
const USAGE = `SELECT COALESCE(SUM(size), 0) AS used FROM
  (SELECT MAX(size) AS size FROM content_refs WHERE namespace = ? GROUP BY cid)`

export class ContentIndex extends Context.Tag("portico/ContentIndex")<ContentIndex, ContentIndexService>() {
  static readonly Live = Layer.effect(
    ContentIndex,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const service: ContentIndexService = {
        holds: (namespace, cid) =>
          Effect.map(
            store.query({ sql: "SELECT 1 AS held FROM content_refs WHERE cid = ? AND namespace = ? LIMIT 1", params: [cid, namespace] }),
            (rows) => rows.length > 0
          ),
        pinName: (namespace, cid) =>
          Effect.map(
            store.query({
              sql: "SELECT name FROM content_refs WHERE cid = ? AND namespace = ? AND kind = 'pin' AND ref = ''",
              params: [cid, namespace]
            }),
            (rows) => (rows[0] === undefined ? undefined : String(rows[0]["name"] ?? ""))
          ),
        heldByAnyone: (cid) =>
          Effect.map(store.query({ sql: "SELECT 1 AS held FROM content_refs WHERE cid = ? LIMIT 1", params: [cid] }), (rows) => rows.length > 0),
        usage: (namespace) =>
          Effect.map(store.query({ sql: USAGE, params: [namespace] }), (rows) => Number(rows[0]?.["used"] ?? 0)),
        add: (r, quota, extra = []) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const results = yield* store.batch([
              {
                // a re-pin renames; new content counts against the quota, held content is free
                sql: `INSERT INTO content_refs (cid, namespace, kind, ref, name, size, created_at)
                      SELECT ?, ?, ?, ?, ?, ?, ?
                      WHERE EXISTS (SELECT 1 FROM content_refs WHERE cid = ? AND namespace = ?)
                         OR (${USAGE}) + ? <= ?
                      ON CONFLICT (cid, namespace, kind, ref) DO UPDATE SET name = excluded.name`,
                params: [r.cid, r.namespace, r.kind, r.ref, r.name, r.size, now, r.cid, r.namespace, r.namespace, r.size, quota]
              },
              {
                sql: `INSERT INTO content_pins (cid, size, created_at)
                      SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM content_refs WHERE cid = ?)
                      ON CONFLICT (cid) DO NOTHING`,
                params: [r.cid, r.size, now, r.cid]
              },
              ...extra
            ])
            return (results[0]?.rowsAffected ?? 0) > 0
          }),
        release: (r) =>
          Effect.map(
            store.exec({
              sql: "DELETE FROM content_refs WHERE cid = ? AND namespace = ? AND kind = ? AND ref = ?",
              params: [r.cid, r.namespace, r.kind, r.ref]
            }),
            (result) => result.rowsAffected > 0
          ),
        count: (cid) =>
          Effect.map(store.query({ sql: "SELECT COUNT(*) AS n FROM content_refs WHERE cid = ?", params: [cid] }), (rows) =>
            Number(rows[0]?.["n"] ?? 0)
          ),
        dropPinIfUnreferenced: (cid) =>
          Effect.map(
            store.exec({
              sql: "DELETE FROM content_pins WHERE cid = ? AND NOT EXISTS (SELECT 1 FROM content_refs WHERE cid = ?)",
              params: [cid, cid]
            }),
            (result) => result.rowsAffected > 0
          ),
        pinned: Effect.map(store.query({ sql: "SELECT cid FROM content_pins" }), (rows) => rows.map((r) => String(r["cid"]))),
        orphans: Effect.map(
          store.query({
            sql: "SELECT p.cid FROM content_pins p WHERE NOT EXISTS (SELECT 1 FROM content_refs r WHERE r.cid = p.cid) LIMIT 10000"
          }),
          (rows) => rows.map((r) => String(r["cid"]))
        )
      }
      return service
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() => ContentIndex.Live.pipe(Layer.provide(SqliteRegistryStore.Test)))
}
