/**
 * The namespace audit trail. A change and its audit row are written in one atomic batch, so
 * `entry` builds the statement for the caller's batch instead of writing on its own.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type Statement, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export interface AuditEntry {
  readonly id: number
  readonly namespace: string
  readonly at: number
  readonly action: string
  readonly principal: string
  readonly target: string
  readonly detail: Readonly<Record<string, unknown>>
}

export interface AuditQuery {
  readonly action: string | undefined
  readonly principal: string | undefined
  /** Unix milliseconds, inclusive. */
  readonly since: number | undefined
}

export interface AuditService {
  /** The audit row for a change, to be written in the same batch as the change. */
  readonly entry: (
    namespace: string,
    action: string,
    principal: string,
    target: string,
    detail?: Readonly<Record<string, unknown>>,
    options?: { readonly onlyIfChanged?: boolean }
  ) => Effect.Effect<Statement>
  /**
   * Writes an audit row on its own, for a change that cannot share its batch (a file written,
   * content imported, a store outside the registry). Best effort: a failure is logged, the
   * change it records has happened either way.
   */
  readonly record: (
    namespace: string,
    action: string,
    principal: string,
    target: string,
    detail?: Readonly<Record<string, unknown>>
  ) => Effect.Effect<void>
  /** One page of entries, newest first (key: id, descending). */
  readonly list: (namespace: string, query: AuditQuery, page: PageRequest) => Effect.Effect<Page<AuditEntry>, StoreError>
}

export class Audit extends Context.Tag("portico/Audit")<Audit, AuditService>() {
  static readonly Live = Layer.effect(
    Audit,
    Effect.map(RegistryStore, (store): AuditService => {
      const entry: AuditService["entry"] = (namespace, action, principal, target, detail = {}, options = {}) =>
        Effect.map(Clock.currentTimeMillis, (at) => ({
          // `changes()` is the row count of the batch's previous statement: a conditional change
          // that touched nothing leaves no audit row either.
          sql:
            "INSERT INTO audit (namespace, at, action, principal, target, detail) SELECT ?, ?, ?, ?, ?, ?" +
            (options.onlyIfChanged === true ? " WHERE changes() > 0" : ""),
          params: [namespace, at, action, principal, target, JSON.stringify(detail)]
        }))
      return {
        entry,
        record: (namespace, action, principal, target, detail) =>
          entry(namespace, action, principal, target, detail).pipe(
            Effect.flatMap(store.exec),
            Effect.catchAll((e) => Effect.logWarning(`audit row for ${action} not written: ${e.detail}`))
          ),
        list: (namespace, query, page) => {
          const where = ["namespace = ?"]
          const params: Array<string | number> = [namespace]
          if (query.action !== undefined) {
            where.push("action = ?")
            params.push(query.action)
          }
          if (query.principal !== undefined) {
            where.push("principal = ?")
            params.push(query.principal)
          }
          if (query.since !== undefined) {
            where.push("at >= ?")
            params.push(query.since)
          }
          return readPage(
            store,
            { select: "SELECT id, namespace, at, action, principal, target, detail FROM audit", where, params, order: ["id"], direction: "desc" },
            page,
            (r) => ({
              id: Number(r.id),
              namespace: String(r.namespace),
              at: Number(r.at),
              action: String(r.action),
              principal: String(r.principal),
              target: String(r.target),
              detail: parseDetail(r.detail)
            })
          )
        }
      }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() => Audit.Live.pipe(Layer.provide(SqliteRegistryStore.Test)))
}

const parseDetail = (text: unknown): Readonly<Record<string, unknown>> => {
  if (typeof text !== "string") return {}
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}
