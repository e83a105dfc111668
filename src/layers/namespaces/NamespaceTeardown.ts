/**
 * Deleting a namespace and everything it holds, on every engine it uses (spec §4.9; the decisions
 * are docs/namespaces.md, "Deleting a namespace").
 *
 * Crash-safe by a ledger (TeardownLedger.ts): the deletion's record is written first, naming
 * every part owed; each part (TeardownParts.ts, the namespace's access first) is removed
 * idempotently and marked done; the last batch removes the namespace's remaining
 * registry rows, the namespace row and the record together. A part that fails stays owed: the
 * answer says `cleanup_pending`, and this gateway retries it in the background with backoff. The
 * gateway's start finishes every deletion it finds recorded.
 *
 * `pending` is NAMESPACE_TEARDOWN_PENDING's source of truth: true from the record's write to the
 * last batch. `NamespaceTeardown.Pending` serves it where the deletion itself cannot run (the CLI).
 */
import { KeptReads } from "../registry/KeptReads.js"
import { Clock, Context, Duration, Effect, Layer, Schedule } from "effect"
import type { TeardownCode } from "../../domain/Errors.js"
import { reservedNamespaces } from "../../domain/Names.js"
import { Cache } from "../cache/Cache.js"
import { PubSub } from "../pubsub/PubSub.js"
import { Vault } from "../vault/Vault.js"
import { Membership } from "../cluster/Membership.js"
import { Coordination } from "../coordination/Coordination.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { Deployments } from "../deployments/Deployments.js"
import { type Refused, refuse } from "../Refused.js"
import { OperatorAudit } from "../operators/OperatorAudit.js"
import { RegistryStore, type Statement, type StoreError } from "../registry/RegistryStore.js"
import { ClusterSqlStore } from "../sql/ClusterSqlStore.js"
import { LocalDatabases } from "../sql/LocalDatabases.js"
import { SqliteWorkers } from "../sql/SqliteWorkers.js"
import { ContentEngine } from "../storage/ContentEngine.js"
import { ContentIndex } from "../storage/ContentIndex.js"
import { Evictor } from "../storage/Evictor.js"
import { TeardownLedger, type TeardownLedgerService } from "./TeardownLedger.js"
import { finalStatements, PartFailed, type PartTools, removePart } from "./TeardownParts.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"
import { EmbeddedContentEngine } from "../storage/EmbeddedContentEngine.js"

export type TeardownRefused = Refused<TeardownCode>

export interface TeardownOutcome {
  /** A part could not be removed yet: it is recorded as owed and retried in the background. */
  readonly cleanupPending: boolean
}

export interface NamespaceTeardownService {
  /** A deletion of that name still runs or is owed. */
  readonly pending: (name: string) => Effect.Effect<boolean, StoreError>
  /**
   * Deletes the namespace. Idempotent: a name with no namespace and no deletion owed is done
   * already. 409 while another request or gateway runs its deletion; 500 (retryable) when the
   * deletion could not be recorded, and then nothing was removed.
   */
  readonly remove: (namespace: string, by: { readonly actor: string; readonly reason?: string }) => Effect.Effect<TeardownOutcome, TeardownRefused>
  /**
   * `remove` by an operator (`POST /v1/operator/namespaces/remove`): the operator audit trail's
   * row, with the reason, is written in the batch that records the deletion (or on its own when
   * the deletion was recorded already or the namespace is gone), so no removal goes unaudited.
   */
  readonly removeByOperator: (namespace: string, by: { readonly actor: string; readonly reason: string }) => Effect.Effect<TeardownOutcome, TeardownRefused>
}

/** How long a gateway holds a deletion it works on; renewed after every part. */
const LEASE_MS = 5 * 60_000
/** The background retry's first wait; it doubles per attempt up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 5_000
const RETRY_MAX_MS = 10 * 60_000
/** How often the background loop looks for deletions owed. */
const LOOP_EVERY = Duration.seconds(5)

const inProgress = () =>
  refuse("NAMESPACE_DELETE_IN_PROGRESS", "a deletion of this namespace is running", "retry after Retry-After: a repeated delete then answers its outcome", 5)
const notRecorded = () =>
  refuse("NAMESPACE_DELETE_FAILED", "the namespace's deletion could not be recorded; nothing was removed", "retry after Retry-After", 5)

export const retryDelayMs = (attempts: number): number => Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(attempts, 20))

export class NamespaceTeardown extends Context.Tag("portico/NamespaceTeardown")<NamespaceTeardown, NamespaceTeardownService>() {
  /**
   * The deletion, with its background loop (scoped: it runs as long as the gateway does). Needs
   * the deployments service, so it sits above it in the gateway's layers.
   */
  static readonly Live = Layer.scoped(
    NamespaceTeardown,
    Effect.gen(function* () {
      const config = yield* PorticoConfig
      const registry = yield* RegistryStore
      const ledger = yield* TeardownLedger
      const operatorAudit = yield* OperatorAudit
      const tools: PartTools = {
        config,
        registry,
        deployments: yield* Deployments,
        databases: yield* LocalDatabases,
        clusterSql: yield* ClusterSqlStore,
        workers: yield* SqliteWorkers,
        cache: yield* Cache,
        pubsub: yield* PubSub,
        index: yield* ContentIndex,
        engine: yield* ContentEngine,
        evictor: yield* Evictor,
        coordination: yield* Coordination,
        membership: yield* Membership,
        vault: yield* Vault,
        kept: yield* KeptReads
      }
      // Test-only: a pause before each part, so a test can stop the gateway mid-deletion.
      const partDelayMs = config.testPauses.teardownPartMs
      const me = config.nodeId
      /** Deletions this process runs now: a second request for one is 409 at once. */
      const running = new Set<string>()

      /** Runs every owed part, then the last batch; the deletion must be claimed by `me`. */
      const run = (namespace: string): Effect.Effect<TeardownOutcome> =>
        Effect.gen(function* () {
          const owed = yield* ledger.owed(namespace)
          let failed = false
          for (const { part } of owed) {
            if (partDelayMs > 0) yield* Effect.sleep(Duration.millis(partDelayMs))
            // a defect in a part (a bug, an engine's unexpected answer) leaves it owed, like a failure
            const outcome = yield* Effect.either(
              removePart(tools, namespace, part).pipe(Effect.catchAllDefect((defect) => Effect.fail(new PartFailed(`${part}: ${String(defect)}`))))
            )
            if (outcome._tag === "Left") {
              failed = true
              yield* Effect.logWarning(`namespace ${namespace} teardown: ${part} owed: ${outcome.left.detail}`)
              yield* Effect.ignore(ledger.failed(namespace, part, outcome.left.detail))
              continue
            }
            const now = yield* Clock.currentTimeMillis
            yield* ledger.done(namespace, part, now)
            yield* ledger.claim(namespace, me, now, now + LEASE_MS)
          }
          if (!failed) {
            yield* registry.batch([...finalStatements(namespace), ...ledger.close(namespace)])
            yield* Effect.logInfo(`namespace ${namespace} deleted`)
            return { cleanupPending: false }
          }
          yield* later(namespace)
          return { cleanupPending: true }
        }).pipe(
          // the record stands: whatever is left is retried from it
          Effect.catchAll((e) =>
            Effect.zipRight(
              Effect.zipRight(Effect.logWarning(`namespace ${namespace} teardown interrupted: ${e.detail}`), Effect.ignore(later(namespace))),
              Effect.succeed({ cleanupPending: true })
            )
          )
        )

      const later = (namespace: string) =>
        Effect.gen(function* () {
          const row = yield* ledger.get(namespace)
          const now = yield* Clock.currentTimeMillis
          yield* ledger.later(namespace, me, now + retryDelayMs(row?.attempts ?? 0))
        })

      /** Runs the deletion unless this process already does; `running` guards the whole run. */
      const guarded = (namespace: string, work: Effect.Effect<TeardownOutcome, TeardownRefused>) =>
        Effect.suspend(() => {
          if (running.has(namespace)) return Effect.fail(inProgress())
          running.add(namespace)
          return Effect.ensuring(work, Effect.sync(() => running.delete(namespace)))
        })

      const claimAndRun = (namespace: string) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const claimed = yield* Effect.mapError(ledger.claim(namespace, me, now, now + LEASE_MS), notRecorded)
          if (!claimed) return yield* Effect.fail(inProgress())
          return yield* run(namespace)
        })

      const remove = (
        namespace: string,
        by: { readonly actor: string; readonly reason?: string | undefined },
        audit?: { readonly statement: Statement; readonly alone: Effect.Effect<void, StoreError> }
      ) =>
        guarded(
          namespace,
          Effect.gen(function* () {
            if (reservedNamespaces.has(namespace)) {
              return yield* Effect.fail(refuse("FORBIDDEN", "reserved namespaces cannot be deleted"))
            }
            const auditAlone = audit === undefined ? Effect.void : Effect.mapError(audit.alone, notRecorded)
            const recorded = yield* Effect.mapError(ledger.pending(namespace), notRecorded)
            if (recorded) return yield* Effect.zipRight(auditAlone, claimAndRun(namespace))
            const exists = yield* Effect.mapError(
              registry.query({ sql: "SELECT 1 AS here FROM namespaces WHERE name = ?", params: [namespace] }),
              notRecorded
            )
            // nothing of it and nothing owed: deleted already
            if (exists.length === 0) return yield* Effect.as(auditAlone, { cleanupPending: false })
            const now = yield* Clock.currentTimeMillis
            const opened = yield* Effect.mapError(
              ledger.open(
                { namespace, actor: by.actor, reason: by.reason ?? "", startedAt: now, runner: me, leaseUntil: now + LEASE_MS, nextAt: now },
                audit === undefined ? [] : [audit.statement]
              ),
              notRecorded
            )
            yield* Effect.logInfo(`namespace ${namespace} deletion recorded by ${by.actor}`)
            // another request recorded it between our two reads: its runner decides
            if (!opened) return yield* Effect.zipRight(auditAlone, claimAndRun(namespace))
            return yield* run(namespace)
          })
        )

      /** The start's and the retry loop's pass: every deletion due that no other gateway holds. */
      const resume = (atStart: boolean) =>
        Effect.gen(function* () {
          const rows = yield* ledger.all
          const now = yield* Clock.currentTimeMillis
          for (const row of rows) {
            const mine = row.runner === me
            const due = atStart ? mine || row.leaseUntil <= now : row.nextAt <= now && (row.leaseUntil <= now || mine)
            if (!due || running.has(row.namespace)) continue
            yield* Effect.logInfo(`namespace ${row.namespace} teardown resumed`)
            yield* guarded(row.namespace, claimAndRun(row.namespace)).pipe(
              Effect.catchAllCause((cause) => Effect.logWarning(`namespace ${row.namespace} teardown not resumed`, cause))
            )
          }
        }).pipe(Effect.catchAll((e) => Effect.logWarning(`namespace teardowns not read: ${e.detail}`)))

      yield* resume(true).pipe(
        Effect.zipRight(resume(false).pipe(Effect.schedule(Schedule.spaced(LOOP_EVERY)))),
        Effect.forkScoped
      )

      return {
        pending: ledger.pending,
        remove: (namespace, by) => remove(namespace, by),
        removeByOperator: (namespace, by) =>
          Effect.flatMap(
            operatorAudit.statement({ actor: by.actor, action: "namespace.remove", target: namespace, detail: { reason: by.reason } }),
            (statement) => remove(namespace, by, { statement, alone: Effect.asVoid(registry.exec(statement)) })
          )
      } satisfies NamespaceTeardownService
    })
  ).pipe(Layer.provideMerge(TeardownLedger.Live))

  /**
   * `pending` alone, for where no deletion runs (the CLI's `namespace create`): `remove` refuses,
   * since the deletion needs the gateway's services (its apps, its databases, its storage).
   */
  static readonly Pending = Layer.effect(
    NamespaceTeardown,
    Effect.map(TeardownLedger, (ledger: TeardownLedgerService) => {
      const elsewhere = () =>
        Effect.fail(refuse("NAMESPACE_DELETE_FAILED", "a namespace is deleted by a running gateway", "use POST /v1/namespace/delete", 5))
      return { pending: ledger.pending, remove: elsewhere, removeByOperator: elsewhere }
    })
  ).pipe(Layer.provide(TeardownLedger.Live))

  /** The Live layer over the test doubles of what it reads (docs/architecture.md "Test doubles"). */
  static readonly Test = Layer.suspend(() =>
    NamespaceTeardown.Live.pipe(
      Layer.provide(
        Layer.mergeAll(
          Cache.Test,
          PubSub.Test,
          ClusterSqlStore.Test,
          EmbeddedContentEngine.Test,
          ContentIndex.Test,
          Coordination.Test,
          Membership.Test,
          Deployments.Test,
          Evictor.Test,
          LocalDatabases.Test,
          OperatorAudit.Test,
          PorticoConfig.Test,
          SqliteRegistryStore.Test,
          SqliteWorkers.Test,
          Vault.Test,
          KeptReads.Test
        )
      )
    )
  )
}
