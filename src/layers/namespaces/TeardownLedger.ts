/**
 * The registry's record of namespace deletions (docs/namespaces.md, "Deleting a namespace"): one
 * row per deletion in `portico_teardowns`, written before anything is removed, and one row per
 * part owed in `portico_teardown_parts`, marked done as each is removed. The rows go in the same
 * batch as the namespace's own row, so a deletion is never forgotten half done: a gateway's start
 * finishes every row it finds (NamespaceTeardown.ts).
 *
 * One gateway works on a deletion at a time: the row names it (`runner`) until `lease_until`;
 * another gateway answers 409 until the lease lapses, and the runner renews it with every part.
 */
import { Context, Effect, Layer } from "effect"
import { RegistryStore, type Statement, StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/**
 * What a deletion removes, in this order: its access first (no credential of it works after),
 * then its data; the rest of its registry rows go in the last batch with the namespace row.
 */
export const TEARDOWN_PARTS = ["access", "deployments", "functions", "databases", "cluster_sql", "storage", "cache", "push", "pubsub", "vault"] as const
export type TeardownPart = (typeof TEARDOWN_PARTS)[number]

export interface TeardownRow {
  readonly namespace: string
  readonly actor: string
  readonly reason: string
  readonly startedAt: number
  readonly runner: string
  readonly leaseUntil: number
  readonly attempts: number
  readonly nextAt: number
}

export interface OwedPart {
  readonly part: TeardownPart
  readonly attempts: number
  readonly lastError: string | undefined
}

export interface TeardownLedgerService {
  /** A deletion of that name still runs or is owed. */
  readonly pending: (namespace: string) => Effect.Effect<boolean, StoreError>
  /**
   * Writes the deletion's rows, with `also` (the operator audit row of a removal) in
   * the same batch. False when a deletion of that name is recorded already (nothing written).
   */
  readonly open: (
    row: Omit<TeardownRow, "attempts">,
    also: ReadonlyArray<Statement>
  ) => Effect.Effect<boolean, StoreError>
  /** Takes the deletion for `runner` until `leaseUntil`: false while another gateway's lease holds. */
  readonly claim: (namespace: string, runner: string, now: number, leaseUntil: number) => Effect.Effect<boolean, StoreError>
  readonly get: (namespace: string) => Effect.Effect<TeardownRow | undefined, StoreError>
  /** The parts not yet removed, in TEARDOWN_PARTS order. */
  readonly owed: (namespace: string) => Effect.Effect<ReadonlyArray<OwedPart>, StoreError>
  readonly done: (namespace: string, part: TeardownPart, at: number) => Effect.Effect<void, StoreError>
  readonly failed: (namespace: string, part: TeardownPart, error: string) => Effect.Effect<void, StoreError>
  /** Gives the lease up and sets when the background retry runs next. */
  readonly later: (namespace: string, runner: string, nextAt: number) => Effect.Effect<void, StoreError>
  /** Every recorded deletion (the start's and the retry loop's work). */
  readonly all: Effect.Effect<ReadonlyArray<TeardownRow>, StoreError>
  /** The statements that end the record; the caller runs them in the namespace row's batch. */
  readonly close: (namespace: string) => ReadonlyArray<Statement>
}

const toRow = (r: Readonly<Record<string, string | number | null>>): TeardownRow => ({
  namespace: String(r.namespace),
  actor: String(r.actor),
  reason: String(r.reason),
  startedAt: Number(r.started_at),
  runner: String(r.runner),
  leaseUntil: Number(r.lease_until),
  attempts: Number(r.attempts),
  nextAt: Number(r.next_at)
})

const isPart = (part: string): part is TeardownPart => (TEARDOWN_PARTS as ReadonlyArray<string>).includes(part)

export class TeardownLedger extends Context.Tag("portico/TeardownLedger")<TeardownLedger, TeardownLedgerService>() {
  static readonly Live = Layer.effect(
    TeardownLedger,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const ROW = "SELECT namespace, actor, reason, started_at, runner, lease_until, attempts, next_at FROM portico_teardowns"
      return {
        pending: (namespace) =>
          Effect.map(
            store.query({ sql: "SELECT 1 AS owed FROM portico_teardowns WHERE namespace = ?", params: [namespace] }),
            (rows) => rows.length > 0
          ),
        open: (row, also) =>
          store
            .batch([
              {
                sql: `INSERT INTO portico_teardowns (namespace, actor, reason, started_at, runner, lease_until, attempts, next_at)
                      VALUES (?, ?, ?, ?, ?, ?, 0, ?)`,
                params: [row.namespace, row.actor, row.reason, row.startedAt, row.runner, row.leaseUntil, row.nextAt]
              },
              // parts left over from an earlier deletion of the same name cannot exist (they go
              // with its row), but a fresh start must never inherit a done mark
              { sql: "DELETE FROM portico_teardown_parts WHERE namespace = ?", params: [row.namespace] },
              ...TEARDOWN_PARTS.map((part) => ({
                sql: "INSERT INTO portico_teardown_parts (namespace, part, attempts) VALUES (?, ?, 0)",
                params: [row.namespace, part]
              })),
              ...also
            ])
            .pipe(
              Effect.as(true),
              // the primary key: a deletion of that name is recorded already. Another constraint
              // (a trigger, a check) refused the record: that is a failure, not someone else's run.
              Effect.catchIf(
                (e) => e.reason === "constraint",
                (e) =>
                  Effect.flatMap(
                    store.query({ sql: "SELECT 1 AS here FROM portico_teardowns WHERE namespace = ?", params: [row.namespace] }),
                    (rows) => (rows.length > 0 ? Effect.succeed(false) : Effect.fail(e))
                  )
              )
            ),
        claim: (namespace, runner, now, leaseUntil) =>
          Effect.map(
            store.exec({
              sql: "UPDATE portico_teardowns SET runner = ?, lease_until = ? WHERE namespace = ? AND (lease_until <= ? OR runner = ?)",
              params: [runner, leaseUntil, namespace, now, runner]
            }),
            (result) => result.rowsAffected > 0
          ),
        get: (namespace) =>
          Effect.map(store.query({ sql: `${ROW} WHERE namespace = ?`, params: [namespace] }), (rows) =>
            rows[0] === undefined ? undefined : toRow(rows[0])
          ),
        owed: (namespace) =>
          Effect.map(
            store.query({
              sql: "SELECT part, attempts, last_error FROM portico_teardown_parts WHERE namespace = ? AND done_at IS NULL",
              params: [namespace]
            }),
            (rows) => {
              const owed = new Map(
                rows.flatMap((r) => {
                  const part = String(r.part)
                  return isPart(part)
                    ? [[part, { part, attempts: Number(r.attempts), lastError: r.last_error === null ? undefined : String(r.last_error) }] as const]
                    : []
                })
              )
              return TEARDOWN_PARTS.flatMap((part) => {
                const found = owed.get(part)
                return found === undefined ? [] : [found]
              })
            }
          ),
        done: (namespace, part, at) =>
          Effect.asVoid(
            store.exec({
              sql: "UPDATE portico_teardown_parts SET done_at = ?, last_error = NULL WHERE namespace = ? AND part = ?",
              params: [at, namespace, part]
            })
          ),
        failed: (namespace, part, error) =>
          Effect.asVoid(
            store.exec({
              sql: "UPDATE portico_teardown_parts SET attempts = attempts + 1, last_error = ? WHERE namespace = ? AND part = ?",
              params: [error.slice(0, 500), namespace, part]
            })
          ),
        later: (namespace, runner, nextAt) =>
          Effect.asVoid(
            store.exec({
              sql: "UPDATE portico_teardowns SET attempts = attempts + 1, next_at = ?, lease_until = 0 WHERE namespace = ? AND runner = ?",
              params: [nextAt, namespace, runner]
            })
          ),
        all: Effect.map(store.query({ sql: `${ROW} ORDER BY started_at LIMIT 1000` }), (rows) => rows.map(toRow)),
        close: (namespace) => [
          { sql: "DELETE FROM portico_teardown_parts WHERE namespace = ?", params: [namespace] },
          { sql: "DELETE FROM portico_teardowns WHERE namespace = ?", params: [namespace] }
        ]
      } satisfies TeardownLedgerService
    })
  )

  /** Over the SQLite registry test double. */
  static readonly Test = Layer.suspend(() => TeardownLedger.Live.pipe(Layer.provide(SqliteRegistryStore.Test)))
}

export { StoreError }
