/**
 * The embedded pub/sub engine: one gateway, everything in this process (docs/pubsub.md
 * "Engines"). A publish assigns the topic's next offset, keeps the message in the topic's history
 * and hands it to every listener before it returns, so the order is the order of publishes.
 *
 * Memory is bounded: history per topic by count and age, and all history of a namespace by bytes
 * (`historyBytesPerNamespace`: past it the oldest messages of the topic being published to go
 * first, then other topics' histories). A topic's state (its sequence, history, presence) is
 * dropped once it has had no subscriber, no present member and no message for `maxAgeMs` (at
 * least a minute); its next message starts a new epoch, which a resuming subscriber is told.
 */
import { Effect, Layer } from "effect"
import {
  type Delivery,
  framePrefix,
  type HistorySettings,
  type Listener,
  memberJson,
  membersOf,
  newEpoch,
  type Position,
  type PresenceEntry,
  presenceContent,
  PubSubEngine,
  type PubSubEngineService
} from "./PubSubEngine.js"

interface Kept {
  readonly delivery: Delivery
  readonly at: number
  readonly bytes: number
}

interface TopicState {
  readonly name: string
  epoch: string
  offset: number
  readonly listeners: Set<Listener>
  history: Array<Kept>
  readonly presence: Map<string, { readonly entry: PresenceEntry; expiresAt: number }>
  lastUsed: number
}

interface Space {
  readonly topics: Map<string, TopicState>
  historyBytes: number
}

export interface MemoryPubSubOptions {
  readonly history: HistorySettings
  readonly historyBytesPerNamespace: number
  readonly now?: () => number
}

export const makeMemoryPubSubEngine = (options: MemoryPubSubOptions) => {
  const now = options.now ?? Date.now
  const { size: historySize, maxAgeMs } = options.history
  const spaces = new Map<string, Space>()

  const spaceOf = (namespace: string): Space => {
    let space = spaces.get(namespace)
    if (space === undefined) {
      space = { topics: new Map(), historyBytes: 0 }
      spaces.set(namespace, space)
    }
    return space
  }

  const topicOf = (space: Space, topic: string): TopicState => {
    let state = space.topics.get(topic)
    if (state === undefined) {
      state = { name: topic, epoch: newEpoch(), offset: 0, listeners: new Set(), history: [], presence: new Map(), lastUsed: now() }
      space.topics.set(topic, state)
    }
    return state
  }

  const dropOldest = (space: Space, state: TopicState, count: number) => {
    for (const kept of state.history.splice(0, count)) space.historyBytes -= kept.bytes
  }

  /** Drops messages past their age or the topic's count. */
  const trim = (space: Space, state: TopicState, at: number) => {
    let stale = 0
    while (stale < state.history.length && at - state.history[stale]!.at > maxAgeMs) stale++
    const over = state.history.length - stale - historySize
    dropOldest(space, state, stale + Math.max(0, over))
  }

  /** Keeps the namespace's history within its bytes: this topic's oldest first, then the others'. */
  const bound = (space: Space, state: TopicState) => {
    while (space.historyBytes > options.historyBytesPerNamespace && state.history.length > 1) dropOldest(space, state, 1)
    if (space.historyBytes <= options.historyBytesPerNamespace) return
    for (const other of space.topics.values()) {
      if (other !== state) dropOldest(space, other, other.history.length)
      if (space.historyBytes <= options.historyBytesPerNamespace) return
    }
  }

  /** Appends to a topic and hands it to every listener, in the caller's turn. */
  const append = (namespace: string, topic: string, content: string, timestamp: number): Position => {
    const space = spaceOf(namespace)
    const state = topicOf(space, topic)
    const offset = ++state.offset
    const delivery: Delivery = { topic, offset, epoch: state.epoch, frame: `${framePrefix(topic, offset, state.epoch, timestamp)}${content}}` }
    const at = now()
    state.lastUsed = at
    if (historySize > 0 && maxAgeMs > 0) {
      const bytes = delivery.frame.length * 2 + 64
      state.history.push({ delivery, at, bytes })
      space.historyBytes += bytes
      trim(space, state, at)
      bound(space, state)
    }
    for (const listener of state.listeners) {
      try {
        listener.deliver(delivery)
      } catch {
        // a listener's failure is its own (its socket closes); the others still get the message
      }
    }
    return { epoch: state.epoch, offset }
  }

  /** Whether the member has a connection on the topic. */
  const present = (state: TopicState, memberId: string) => {
    for (const other of state.presence.values()) if (other.entry.memberId === memberId) return true
    return false
  }

  /** Removes expired presence entries, with a leave event for each member whose last entry went. */
  const reap = (namespace: string, state: TopicState, at: number) => {
    for (const [connection, kept] of state.presence) {
      if (kept.expiresAt > at) continue
      state.presence.delete(connection)
      announceLeave(namespace, state, kept.entry)
    }
  }

  const announceLeave = (namespace: string, state: TopicState, entry: PresenceEntry) => {
    if (!present(state, entry.memberId)) append(namespace, state.name, presenceContent("leave", memberJson(entry)), now())
  }

  /** Enters a connection, or moves its expiry when it is in; a member's first connection is announced. */
  const enter = (namespace: string, topic: string, entry: PresenceEntry, expiresAt: number) => {
    const state = topicOf(spaceOf(namespace), topic)
    const kept = state.presence.get(entry.connection)
    if (kept !== undefined) {
      kept.expiresAt = expiresAt
      return
    }
    const first = !present(state, entry.memberId)
    state.presence.set(entry.connection, { entry, expiresAt })
    if (first) append(namespace, topic, presenceContent("join", memberJson(entry)), now())
  }

  /** Drops the state of topics nobody uses any more (see the header), and reaps presence. */
  const sweep = () => {
    const at = now()
    const idle = Math.max(maxAgeMs, 60_000)
    for (const [namespace, space] of spaces) {
      for (const [name, state] of space.topics) {
        reap(namespace, state, at)
        trim(space, state, at)
        if (state.listeners.size === 0 && state.presence.size === 0 && state.history.length === 0 && at - state.lastUsed > idle) {
          space.topics.delete(name)
        }
      }
      if (space.topics.size === 0) spaces.delete(namespace)
    }
  }

  const service: PubSubEngineService = {
    engine: "memory",
    immediate: true,
    publish: (namespace, topic, content, timestamp) => Effect.sync(() => append(namespace, topic, content, timestamp)),
    subscribe: (namespace, topic, listener) =>
      Effect.sync(() => {
        const space = spaceOf(namespace)
        const state = topicOf(space, topic)
        state.listeners.add(listener)
        state.lastUsed = now()
        return {
          position: { epoch: state.epoch, offset: state.offset },
          close: () => {
            state.listeners.delete(listener)
            state.lastUsed = now()
          }
        }
      }),
    history: (namespace, topic, after) =>
      Effect.sync(() => {
        const space = spaceOf(namespace)
        const state = topicOf(space, topic)
        trim(space, state, now())
        const position = { epoch: state.epoch, offset: state.offset }
        if (after.epoch !== state.epoch || after.offset > state.offset) return { complete: false as const, position }
        const deliveries = state.history.filter((k) => k.delivery.offset > after.offset).map((k) => k.delivery)
        const next = deliveries[0]?.offset ?? state.offset + 1
        return next === after.offset + 1 ? { complete: true as const, deliveries, position } : { complete: false as const, position }
      }),
    topics: (namespace) =>
      Effect.sync(() => {
        const space = spaces.get(namespace)
        if (space === undefined) return []
        const live: Array<string> = []
        for (const state of space.topics.values()) if (state.listeners.size > 0) live.push(state.name)
        return live.sort()
      }),
    join: (namespace, topic, entry, expiresAt) => Effect.sync(() => enter(namespace, topic, entry, expiresAt)),
    refresh: (namespace, entries, expiresAt) =>
      Effect.sync(() => {
        for (const { topic, entry } of entries) enter(namespace, topic, entry, expiresAt)
      }),
    leave: (namespace, topic, connection) =>
      Effect.sync(() => {
        const state = spaces.get(namespace)?.topics.get(topic)
        const kept = state?.presence.get(connection)
        if (state === undefined || kept === undefined) return
        state.presence.delete(connection)
        announceLeave(namespace, state, kept.entry)
      }),
    presence: (namespace, topic) =>
      Effect.sync(() => {
        const state = spaces.get(namespace)?.topics.get(topic)
        if (state === undefined) return []
        reap(namespace, state, now())
        return membersOf([...state.presence.values()].map((k) => k.entry))
      }),
    dropNamespace: (namespace) =>
      Effect.sync(() => {
        spaces.delete(namespace)
      }),
    ping: Effect.void
  }
  return { service, sweep }
}

const layer = (options: MemoryPubSubOptions) =>
  Layer.scoped(
    PubSubEngine,
    Effect.gen(function* () {
      const { service, sweep } = makeMemoryPubSubEngine(options)
      const timer = setInterval(sweep, 5_000)
      timer.unref()
      yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(timer)))
      return service
    })
  )

export const MemoryPubSubEngine = {
  layer,
  /** A fresh bus with the default history (100 messages, 5 minutes, 64 MiB per namespace). */
  Test: Layer.suspend(() => layer({ history: { size: 100, maxAgeMs: 300_000 }, historyBytesPerNamespace: 64 * 1024 * 1024 }))
}
