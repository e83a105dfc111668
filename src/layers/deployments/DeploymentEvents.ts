/**
 * A deployment's events (spec §6.1, the `events` route): rows of type, version, time and a small
 * flat detail, newest first, at most `kept` per deployment (older ones trimmed in the same batch
 * as each insert, so the table stays bounded without a sweeper).
 */
import { Clock, Effect } from "effect"
import { type Page, type PageRequest, readPage } from "../registry/Keyset.js"
import type { RegistryStoreService, Statement, StoreError } from "../registry/RegistryStore.js"
import { type DeploymentEvent, type DeploymentEventType, type EventDetail, stampText } from "./DeploymentRecord.js"
import { decodeEvents, toEvent } from "./DeploymentRows.js"

export const nowSeconds = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

/**
 * The event insert and the trim, for a write's batch. With `stamp`, the event is written only
 * beside the row write that set the record's `updated_at` to it, so a write that its predicate
 * refused leaves no event.
 */
export const eventStatements = (
  kept: number,
  id: string,
  type: DeploymentEventType,
  at: number,
  detail: EventDetail,
  stamp?: bigint
): ReadonlyArray<Statement> => [
  {
    sql: `INSERT INTO deployment_events (deployment_id, type, version, at, detail)
          SELECT id, ?, version, ?, ? FROM deployments WHERE id = ?${stamp === undefined ? "" : " AND updated_at = ?"}`,
    params: stamp === undefined ? [type, at, JSON.stringify(detail), id] : [type, at, JSON.stringify(detail), id, stampText(stamp)]
  },
  {
    sql: `DELETE FROM deployment_events WHERE deployment_id = ? AND seq <= (
            SELECT seq FROM deployment_events WHERE deployment_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`,
    params: [id, id, kept]
  }
]

export interface DeploymentEventsService {
  /** Adds an event to a deployment that exists (none otherwise): the supervisor's and replicas' events. */
  readonly addEvent: (id: string, type: DeploymentEventType, detail?: EventDetail) => Effect.Effect<void, StoreError>
  /** Newest first, in keyset pages on seq; empty for a deployment not in the namespace. */
  readonly events: (namespace: string, id: string, page: PageRequest) => Effect.Effect<Page<DeploymentEvent>, StoreError>
}

export const makeDeploymentEvents = (store: RegistryStoreService, kept: number): DeploymentEventsService => ({
  addEvent: (id, type, detail = {}) => Effect.flatMap(nowSeconds, (now) => Effect.asVoid(store.batch(eventStatements(kept, id, type, now, detail)))),
  events: (namespace, id, page) =>
    Effect.gen(function* () {
      const read = yield* readPage(
        store,
        {
          // the namespace is checked through the record, so another namespace's id reads nothing
          select: `SELECT seq, type, version, at, detail FROM deployment_events`,
          where: ["deployment_id = (SELECT id FROM deployments WHERE namespace = ? AND id = ?)"],
          params: [namespace, id],
          order: ["seq"],
          direction: "desc"
        },
        page,
        (row) => row
      )
      return { items: (yield* decodeEvents(read.items)).map(toEvent), next: read.next } satisfies Page<DeploymentEvent>
    })
})
