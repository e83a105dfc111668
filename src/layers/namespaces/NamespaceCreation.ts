/**
 * Namespaces made and looked up over HTTP by a signed-in wallet (docs/namespaces.md): who may
 * create is the operator setting `namespace-creation`, a wallet owns at most
 * `max-namespaces-per-wallet`, and a name whose deletion still runs or is owed waits for it
 * (NamespaceTeardown.pending). The creator becomes the owner (an owner member) and is answered
 * the owner-level admin key, shown once, as `namespace create` prints it.
 */
import { Context, Effect, Layer, Option } from "effect"
import type { NamespaceCreateCode } from "../../domain/Errors.js"
import { reservedNamespaces } from "../../domain/Names.js"
import { Operators } from "../operators/Operators.js"
import { OperatorAudit } from "../operators/OperatorAudit.js"
import { type Refused, refuse } from "../Refused.js"
import { RegistryStore, type StoreError } from "../registry/RegistryStore.js"
import { NamespaceTeardown } from "./NamespaceTeardown.js"
import { type CreatedNamespace, Namespaces, type NamespaceRecord } from "./Namespaces.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

/** The most namespaces one registry hosts: creation past it is NAMESPACE_CAPACITY. */
export const MAX_HOSTED_NAMESPACES = 100_000
/** The most namespaces one list answers (an operator's "all"). */
export const LIST_MAX = 10_000
/** How long a creation of a name being deleted is told to wait. */
const TEARDOWN_RETRY_SECONDS = 5

export type CreateRefused = Refused<NamespaceCreateCode>

export interface NamespaceSummary {
  readonly name: string
  readonly owner: string | undefined
  readonly createdAt: number
  /** The caller's role in it (owner, admin, ...); undefined in an operator's listing of others'. */
  readonly role: string | undefined
}

export interface NamespaceCreationService {
  readonly create: (name: string, wallet: string) => Effect.Effect<CreatedNamespace, CreateRefused>
  /** The namespaces the wallet is a member of, or all of them (`all`, for an operator). */
  readonly list: (wallet: string, all: boolean) => Effect.Effect<ReadonlyArray<NamespaceSummary>, StoreError>
  readonly status: (name: string) => Effect.Effect<Option.Option<NamespaceRecord & { readonly members: number; readonly deleting: boolean }>, StoreError>
  /** The wallet's role in the namespace, if it is a member. */
  readonly roleIn: (name: string, wallet: string) => Effect.Effect<string | undefined, StoreError>
  /** Whether `wallet` owns fewer namespaces than the cap (ownership transfer's check). */
  readonly belowCap: (wallet: string) => Effect.Effect<boolean, StoreError>
}

const down = (): CreateRefused => refuse("UNAVAILABLE", "the registry did not answer", "retry shortly", 5)

export class NamespaceCreation extends Context.Tag("portico/NamespaceCreation")<NamespaceCreation, NamespaceCreationService>() {
  static readonly Live = Layer.effect(
    NamespaceCreation,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const namespaces = yield* Namespaces
      const operators = yield* Operators
      const teardown = yield* NamespaceTeardown
      const operatorAudit = yield* OperatorAudit

      const owned = (wallet: string) =>
        Effect.map(store.query({ sql: "SELECT COUNT(*) AS n FROM namespaces WHERE owner = ?", params: [wallet] }), (rows) => Number(rows[0]?.n ?? 0))
      const cap = Effect.map(operators.setting("max-namespaces-per-wallet"), Number)
      const belowCap = (wallet: string) => Effect.zipWith(owned(wallet), cap, (n, max) => n < max)

      const mayCreate = (wallet: string) =>
        Effect.gen(function* () {
          const setting = yield* operators.setting("namespace-creation")
          if (setting === "open") return true
          if (yield* operators.isOperator(wallet)) return true
          return setting === "allowlist" && (yield* operators.isCreator(wallet))
        })

      const create = (name: string, wallet: string): Effect.Effect<CreatedNamespace, CreateRefused | StoreError> =>
        Effect.gen(function* () {
          if (reservedNamespaces.has(name)) return yield* refuse("VALIDATION_FAILED", `${name} is a reserved name`)
          if (!(yield* mayCreate(wallet))) {
            return yield* refuse("FORBIDDEN", "this platform does not let this wallet create namespaces", "ask an operator (the namespace-creation setting, the creators allowlist)")
          }
          if (yield* teardown.pending(name)) {
            return yield* refuse("NAMESPACE_TEARDOWN_PENDING", "a deletion of this name is still running", "retry after Retry-After", TEARDOWN_RETRY_SECONDS)
          }
          if (Option.isSome(yield* namespaces.get(name))) return yield* refuse("NAMESPACE_EXISTS", "namespace exists")
          if (!(yield* belowCap(wallet))) {
            return yield* refuse("FORBIDDEN", "this wallet owns as many namespaces as it may", "delete one, or ask an operator (max-namespaces-per-wallet)")
          }
          const [hosted] = yield* store.query({ sql: "SELECT COUNT(*) AS n FROM namespaces" })
          if (Number(hosted?.n ?? 0) >= MAX_HOSTED_NAMESPACES) return yield* refuse("NAMESPACE_CAPACITY", "this platform hosts as many namespaces as it may")
          const created = yield* namespaces.create(name, wallet, wallet).pipe(
            Effect.catchTag("NamespaceRuleError", () => Effect.fail(refuse("NAMESPACE_EXISTS", "namespace exists")))
          )
          // an operator's creation is an operator action too; the namespace's own trail has it either way
          if (yield* operators.isOperator(wallet)) {
            yield* Effect.catchAll(operatorAudit.record({ actor: wallet, action: "namespace.create", target: name }), (e) =>
              Effect.logWarning(`operator audit row for namespace.create not written: ${e.detail}`)
            )
          }
          return created
        })

      return {
        create: (name, wallet) =>
          create(name, wallet).pipe(
            Effect.catchTag("StoreError", (e): Effect.Effect<never, CreateRefused> =>
              e.reason === "unavailable"
                ? Effect.fail(down())
                : Effect.zipRight(
                    Effect.logError(`namespace ${name} not provisioned: ${e.detail}`),
                    Effect.fail(refuse("NAMESPACE_PROVISION_FAILED", "the namespace could not be provisioned", "retry later; the operator's log has the detail"))
                  )
            )
          ),
        list: (wallet, all) =>
          Effect.map(
            all
              ? store.query({
                  sql: `SELECT n.name, n.owner, n.created_at, m.role FROM namespaces n
                        LEFT JOIN members m ON m.namespace = n.name AND m.wallet = ? ORDER BY n.name LIMIT ?`,
                  params: [wallet, LIST_MAX]
                })
              : store.query({
                  sql: `SELECT n.name, n.owner, n.created_at, m.role FROM members m JOIN namespaces n ON n.name = m.namespace
                        WHERE m.wallet = ? ORDER BY n.name LIMIT ?`,
                  params: [wallet, LIST_MAX]
                }),
            (rows) =>
              rows.map((r) => ({
                name: String(r.name),
                owner: r.owner === null ? undefined : String(r.owner),
                createdAt: Number(r.created_at),
                role: r.role === null ? undefined : String(r.role)
              }))
          ),
        status: (name) =>
          Effect.gen(function* () {
            const found = yield* namespaces.get(name)
            if (Option.isNone(found)) return Option.none()
            const [members] = yield* store.query({ sql: "SELECT COUNT(*) AS n FROM members WHERE namespace = ?", params: [name] })
            const deleting = yield* teardown.pending(name)
            return Option.some({ ...found.value, members: Number(members?.n ?? 0), deleting })
          }),
        roleIn: (name, wallet) =>
          Effect.map(store.query({ sql: "SELECT role FROM members WHERE namespace = ? AND wallet = ?", params: [name, wallet] }), (rows) =>
            rows[0] === undefined ? undefined : String(rows[0].role)
          ),
        belowCap
      }
    })
  )

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    NamespaceCreation.Live.pipe(
      Layer.provide(Layer.mergeAll(NamespaceTeardown.Test, Namespaces.Test, OperatorAudit.Test, Operators.Test, SqliteRegistryStore.Test))
    )
  )
}
