/**
 * The engine under publish/subscribe (docs/pubsub.md "Engines"): one contract, two engines, one
 * suite (test/layers/pubsub/PubSubEngine.suite.ts). The embedded engine keeps everything in this
 * process (one gateway); the Redis engine shares topics, history and presence between gateways.
 *
 * Every message on a topic gets the topic's next offset (1, 2, ...) within the topic's epoch, a
 * random name given when the topic's sequence starts (again after its state expired or the engine
 * lost it). Offsets are assigned by the engine in one place, so every subscriber on every gateway
 * sees one order per topic. A delivery carries the frame text every socket sends as it is, built
 * once per message (by the Redis engine inside Redis, in the same step that assigns the offset).
 */
import { Context, Data, type Effect } from "effect"
import { randomBytes } from "node:crypto"

/** The engine did not answer (Redis gone, a publish past its deadline); `detail` is for the log. */
export class PubSubUnavailable extends Data.TaggedError("PubSubUnavailable")<{ readonly detail: string }> {}

/** Where a topic stands: its epoch and the offset of its latest message (0 before the first). */
export interface Position {
  readonly epoch: string
  readonly offset: number
}

/** One message or platform event on a topic, as a socket sends it. */
export interface Delivery {
  readonly topic: string
  readonly offset: number
  /** The topic's epoch: when it differs from the last one seen, offsets started again at 1. */
  readonly epoch: string
  /**
   * The frame: `{"topic":..,"offset":..,"epoch":..,"timestamp":..,<content>}`, where `content` is
   * what the publisher gave (`"type":"message","data":"<base64>"`, or a platform event's members).
   */
  readonly frame: string
}

export interface Listener {
  /** A message, in offset order; never called again for an offset already delivered. */
  readonly deliver: (delivery: Delivery) => void
  /**
   * The engine may have lost messages for this subscription (its connection to Redis dropped):
   * the subscriber is told so. Delivery resumes on its own when the engine is back.
   */
  readonly interrupted: (detail: string) => void
}

export interface Subscription {
  /**
   * The topic's position, read once the subscription took effect: every message after it is
   * delivered (one published while the subscription was set up may be delivered too, with an
   * offset at or below this one; the socket skips what it has sent).
   */
  readonly position: Position
  readonly close: () => void
}

/** What history holds after a position: the messages, or that it cannot fill the gap. */
export type HistoryAnswer =
  | { readonly complete: true; readonly deliveries: ReadonlyArray<Delivery>; readonly position: Position }
  /** The epoch changed, or history no longer reaches back to the message after `offset`. */
  | { readonly complete: false; readonly position: Position }

/** A member on a topic, one entry per connection (a user's two tabs are two connections). */
export interface PresenceEntry {
  readonly connection: string
  readonly memberId: string
  /** Who the credential says the member is (a wallet, `key:<id>`, `deployment:<id>`). */
  readonly subject: string
  readonly joinedAt: number
  /** The metadata's JSON object text, or undefined. */
  readonly meta: string | undefined
}

/** A member as listed: its connections joined (earliest join, the first connection's metadata). */
export interface PresenceMember {
  readonly memberId: string
  readonly subject: string
  readonly joinedAt: number
  readonly meta: string | undefined
  readonly connections: number
}

export interface PubSubEngineService {
  readonly engine: "memory" | "redis"
  /**
   * Its operations complete in the calling turn, with no I/O to wait for (the embedded engine): no
   * deadline applies, so none is raced against them.
   */
  readonly immediate: boolean
  /**
   * Appends `content` to the topic (the frame's members after the position, see Delivery) and
   * delivers it to every subscriber; resolves with its position once the engine holds it.
   */
  readonly publish: (namespace: string, topic: string, content: string, timestamp: number) => Effect.Effect<Position, PubSubUnavailable>
  /** Subscribes; resolves once every later publish will be delivered to `listener`. */
  readonly subscribe: (namespace: string, topic: string, listener: Listener) => Effect.Effect<Subscription, PubSubUnavailable>
  /** The messages after `after` that history still holds, oldest first. */
  readonly history: (namespace: string, topic: string, after: Position) => Effect.Effect<HistoryAnswer, PubSubUnavailable>
  /** The namespace's topics with at least one subscriber on any gateway, sorted. */
  readonly topics: (namespace: string) => Effect.Effect<ReadonlyArray<string>, PubSubUnavailable>
  /**
   * Enters a connection on the topic's presence until `expiresAt` (Unix ms); the member's first
   * connection publishes a `presence` join event on the topic (presenceContent, memberJson).
   */
  readonly join: (namespace: string, topic: string, entry: PresenceEntry, expiresAt: number) => Effect.Effect<void, PubSubUnavailable>
  /**
   * Moves the expiry of these connections' entries (a live socket's heartbeat). An entry that is
   * gone meanwhile (it expired while its gateway stalled, or the engine lost it) is entered again,
   * with a join event as `join` would publish, so a live socket is never left out of presence.
   */
  readonly refresh: (
    namespace: string,
    entries: ReadonlyArray<{ readonly topic: string; readonly entry: PresenceEntry }>,
    expiresAt: number
  ) => Effect.Effect<void, PubSubUnavailable>
  /** Removes a connection's entry; the member's last connection publishes a leave event. */
  readonly leave: (namespace: string, topic: string, connection: string) => Effect.Effect<void, PubSubUnavailable>
  /** The topic's members whose entries have not expired, by member id. */
  readonly presence: (namespace: string, topic: string) => Effect.Effect<ReadonlyArray<PresenceMember>, PubSubUnavailable>
  /** Drops the namespace's history, sequences and presence (its deletion); subscribers are the sockets' to close. */
  readonly dropNamespace: (namespace: string) => Effect.Effect<void, PubSubUnavailable>
  readonly ping: Effect.Effect<void, PubSubUnavailable>
}

export class PubSubEngine extends Context.Tag("portico/PubSubEngine")<PubSubEngine, PubSubEngineService>() {}

/** History kept per topic: the newest `size` messages no older than `maxAgeMs` (0 and 0: none). */
export interface HistorySettings {
  readonly size: number
  readonly maxAgeMs: number
}

/** A new epoch's name: 12 characters of base64url. */
export const newEpoch = (): string => randomBytes(9).toString("base64url")

/** A frame's members before its content: what both engines write, in this order. */
export const framePrefix = (topic: string, offset: number, epoch: string, timestamp: number): string =>
  `{"topic":${JSON.stringify(topic)},"offset":${offset},"epoch":"${epoch}","timestamp":${timestamp},`

/** A presence event's content: `"type":"presence","event":"join"|"leave","member":{...}`. */
export const presenceContent = (event: "join" | "leave", member: string): string => `"type":"presence","event":"${event}","member":${member}`

/** A presence entry as its event and the listing show it (JSON text). */
export const memberJson = (entry: { readonly memberId: string; readonly subject: string; readonly joinedAt: number; readonly meta: string | undefined }): string =>
  `{"member_id":${JSON.stringify(entry.memberId)},"subject":${JSON.stringify(entry.subject)},"joined_at":${entry.joinedAt},"meta":${entry.meta ?? "null"}}`

/** Entries joined by member id (earliest join first), as the listing shows them. */
export const membersOf = (entries: ReadonlyArray<PresenceEntry>): ReadonlyArray<PresenceMember> => {
  const byMember = new Map<string, { first: PresenceEntry; connections: number }>()
  for (const entry of [...entries].sort((a, b) => a.joinedAt - b.joinedAt || a.connection.localeCompare(b.connection))) {
    const seen = byMember.get(entry.memberId)
    if (seen === undefined) byMember.set(entry.memberId, { first: entry, connections: 1 })
    else seen.connections++
  }
  return [...byMember.values()]
    .map(({ first, connections }) => ({ memberId: first.memberId, subject: first.subject, joinedAt: first.joinedAt, meta: first.meta, connections }))
    .sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0))
}
