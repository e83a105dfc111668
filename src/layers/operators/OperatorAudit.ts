/**
 * The operator audit trail: every action an operator takes on the platform (operators added,
 * invites made and redeemed, settings changed, creators allowed, namespaces removed), one row
 * each, readable by operators (`GET /v1/operator/audit`). Apart from the namespace audit trail
 * (src/layers/audit/Audit.ts): these actions belong to no namespace, and a namespace's deletion
 * must not take its removal's record with it.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import { RegistryStore, type Statement, type StoreError } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export interface OperatorAuditInput {
  /** The wallet that acted, or `cli` for the gateway machine's own commands. */
  readonly actor: string
  readonly action: string
  readonly target?: string | undefined
  readonly detail?: Readonly<Record<string, string | number>> | undefined
}

export interface OperatorAuditEntry {
  readonly id: number
  readonly at: number
  readonly actor: string
  readonly action: string
  readonly target: string
  readonly detail: Readonly<Record<string, string | number>>
}

export interface OperatorAuditService {
  /** Writes one row on its own. */
  readonly record: (entry: OperatorAuditInput) => Effect.Effect<void, StoreError>
  /**
   * The row's statement, for a caller that writes it in the same batch as the change it records.
   * `onlyIf`: a condition (SQL with its parameters) the row is written under, e.g.
   * `changes() > 0` so a change that touched nothing leaves no row.
   */
  readonly statement: (entry: OperatorAuditInput, onlyIf?: Statement) => Effect.Effect<Statement>
  /** One page, newest first (key: id, descending). */
  readonly list: (page: PageRequest) => Effect.Effect<Page<OperatorAuditEntry>, StoreError>
}

export class OperatorAudit extends Context.Tag("portico/OperatorAudit")<OperatorAudit, OperatorAuditService>() {
  static readonly Live = Layer.effect(
    OperatorAudit,
    Effect.map(RegistryStore, (store): OperatorAuditService => {
      const statement: OperatorAuditService["statement"] = (entry, onlyIf) =>
        Effect.map(Clock.currentTimeMillis, (at) => ({
          sql: "INSERT INTO operator_audit (at, actor, action, target, detail) SELECT ?, ?, ?, ?, ?" + (onlyIf === undefined ? "" : ` WHERE ${onlyIf.sql}`),
          params: [at, entry.actor, entry.action, entry.target ?? "", JSON.stringify(entry.detail ?? {}), ...(onlyIf?.params ?? [])]
        }))
      return {
        statement,
        record: (entry) => statement(entry).pipe(Effect.flatMap(store.exec), Effect.asVoid),
        list: (page) =>
          readPage(
            store,
            { select: "SELECT id, at, actor, action, target, detail FROM operator_audit", where: ["1 = 1"], params: [], order: ["id"], direction: "desc" },
            page,
            (r) => ({
              id: Number(r.id),
              at: Number(r.at),
              actor: String(r.actor),
              action: String(r.action),
              target: String(r.target),
              detail: parseDetail(r.detail)
            })
          )
      }
    })
  )

  /** The service over the registry's test double (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() => OperatorAudit.Live.pipe(Layer.provide(SqliteRegistryStore.Test)))
}

const parseDetail = (text: unknown): Readonly<Record<string, string | number>> => {
  if (typeof text !== "string") return {}
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value !== "object" || value === null || Array.isArray(value)) return {}
    return Object.fromEntries(
      Object.entries(value).filter((e): e is [string, string | number] => typeof e[1] === "string" || typeof e[1] === "number")
    )
  } catch {
    return {}
  }
}
