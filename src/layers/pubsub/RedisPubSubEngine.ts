/**
 * The Redis pub/sub engine (docs/pubsub.md "Engines"): every gateway on one Redis shares topics,
 * their order, history and presence.
 *
 * - Keys and channels carry the namespace in a hash tag (`portico:ps:{<ns>}:<topic>` for the
 *   channel, `portico:pss|psh|psp|pse|psm:{<ns>}:<topic>` for state, history and presence), so a
 *   namespace is one slot if Redis Cluster comes.
 * - A publish, a join, a leave and a reap are each one Lua script (RedisPubSubScripts.ts): the
 *   offset, the history entry and the PUBLISH happen together.
 * - Two connections per gateway: commands (no offline queue, so a publish with Redis gone fails at
 *   once rather than waiting), and one subscriber connection holding one SUBSCRIBE per (namespace,
 *   topic) for all this gateway's listeners of it. When the subscriber connection drops, every
 *   listener is told once (messages may be lost); ioredis subscribes again when Redis is back, and
 *   deliveries resume without anyone subscribing again.
 * - Presence entries of a topic this gateway subscribes to are reaped every `reapIntervalMs`, so a
 *   crashed gateway's members leave (with their events) within their expiry and one interval.
 */
import { Duration, Effect, Layer } from "effect"
import { Redis } from "ioredis"
import {
  type Delivery,
  type HistorySettings,
  type Listener,
  memberJson,
  membersOf,
  newEpoch,
  type PresenceEntry,
  PubSubEngine,
  type PubSubEngineService,
  PubSubUnavailable
} from "./PubSubEngine.js"
import { joinScript, leaveScript, publishScript, reapScript, TOPIC_KEYS } from "./RedisPubSubScripts.js"

export interface RedisPubSubConfig {
  /** `redis://host:port[/db]` or `rediss://`. */
  readonly url: string
  readonly history: HistorySettings
  /** Deadline of one command: past it, PubSubUnavailable. */
  readonly publishTimeoutMs: number
  /** How often expired presence entries of subscribed topics are reaped; default 5000. */
  readonly reapIntervalMs?: number
  /** The layer fails when Redis does not answer PING within this; default 5000. */
  readonly connectTimeoutMs?: number
}

/** A topic idle this long (no message) starts a new epoch at its next one. */
const STATE_LIFETIME_MS = 86_400_000

/** A detail safe for the log: no peer address (ioredis messages may carry one). */
const describe = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error))
    .replace(/\[?[0-9a-f]*:[0-9a-f:]+\]?:\d+/gi, "<redis>")
    .replace(/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g, "<redis>")
    .slice(0, 200)

const escapeGlob = (text: string) => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)

const channelOf = (ns: string, topic: string) => `portico:ps:{${ns}}:${topic}`
const keysOf = (ns: string, topic: string) =>
  ["pss", "psh", "psp", "pse", "psm"].map((kind) => `portico:${kind}:{${ns}}:${topic}`) as [string, string, string, string, string]

/** `<offset> <epoch> <frame>` as the scripts publish it. */
const parseMessage = (topic: string, text: string): Delivery | undefined => {
  const first = text.indexOf(" ")
  const second = text.indexOf(" ", first + 1)
  if (first < 0 || second < 0) return undefined
  return { topic, offset: Number(text.slice(0, first)), epoch: text.slice(first + 1, second), frame: text.slice(second + 1) }
}

const POSITION = /,"offset":(\d+),"epoch":"([^"]+)"/

interface Channel {
  readonly namespace: string
  readonly topic: string
  readonly listeners: Set<Listener>
  /** Resolves once Redis confirmed the SUBSCRIBE. */
  ready: Promise<void>
}

type Scripted = Redis & {
  readonly pubsubPublish: (...args: Array<string | number>) => Promise<[number, string]>
  readonly pubsubJoin: (...args: Array<string | number>) => Promise<number>
  readonly pubsubLeave: (...args: Array<string | number>) => Promise<number>
  readonly pubsubReap: (...args: Array<string | number>) => Promise<number>
}

export const makeRedisPubSubEngine = (config: RedisPubSubConfig) =>
  Effect.gen(function* () {
    const deadline = Duration.millis(config.publishTimeoutMs)
    const retryStrategy = (times: number) => Math.min(times * 100, 1000)
    const commands = new Redis(config.url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy }) as Scripted
    const subscriber = new Redis(config.url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy })
    for (const [name, lua] of [["pubsubPublish", publishScript], ["pubsubJoin", joinScript], ["pubsubLeave", leaveScript], ["pubsubReap", reapScript]] as const) {
      commands.defineCommand(name, { numberOfKeys: TOPIC_KEYS, lua })
    }
    // connection errors are seen as failed commands and interruptions; an unheard 'error' would throw
    commands.on("error", () => {})
    subscriber.on("error", () => {})

    const call = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, PubSubUnavailable> =>
      Effect.tryPromise({ try: run, catch: (e) => new PubSubUnavailable({ detail: `${what}: ${describe(e)}` }) }).pipe(
        Effect.timeoutFail({ duration: deadline, onTimeout: () => new PubSubUnavailable({ detail: `${what}: no answer within ${config.publishTimeoutMs} ms` }) })
      )

    let reaper: NodeJS.Timeout | undefined
    // before connecting: a failed start must not leave connections retrying behind it
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        clearInterval(reaper)
        commands.disconnect()
        subscriber.disconnect()
      })
    )

    const connectWithin = Duration.millis(config.connectTimeoutMs ?? 5000)
    yield* Effect.tryPromise({
      try: () => Promise.all([commands.connect(), subscriber.connect()]).then(() => commands.ping()),
      catch: (e) => new PubSubUnavailable({ detail: `connect: ${describe(e)}` })
    }).pipe(Effect.timeoutFail({ duration: connectWithin, onTimeout: () => new PubSubUnavailable({ detail: "connect: Redis did not answer" }) }))

    const channels = new Map<string, Channel>()
    subscriber.on("message", (name: string, text: string) => {
      const channel = channels.get(name)
      if (channel === undefined) return
      const delivery = parseMessage(channel.topic, text)
      if (delivery === undefined) return
      for (const listener of channel.listeners) {
        try {
          listener.deliver(delivery)
        } catch {
          // a listener's failure is its own; the others still get the message
        }
      }
    })
    let down = false
    const interrupted = () => {
      if (down) return
      down = true
      for (const channel of channels.values()) for (const listener of channel.listeners) listener.interrupted("the connection to Redis was lost")
    }
    subscriber.on("close", interrupted)
    /** Channels this gateway left while Redis was away. */
    const stale = new Set<string>()
    subscriber.on("ready", () => {
      down = false
      for (const name of stale) {
        stale.delete(name)
        if (!channels.has(name)) subscriber.unsubscribe(name).catch(() => stale.add(name))
      }
    })

    const topicArgs = (namespace: string, topic: string, timestamp: number, presenceTtl = 0) => [
      ...keysOf(namespace, topic),
      channelOf(namespace, topic),
      JSON.stringify(topic),
      timestamp,
      config.history.size,
      config.history.maxAgeMs,
      newEpoch(),
      Math.max(config.history.maxAgeMs, STATE_LIFETIME_MS),
      presenceTtl
    ]

    /** The topic's position, giving it an epoch if it has none. */
    const positionOf = (namespace: string, topic: string) =>
      call("position", async () => {
        const [state] = keysOf(namespace, topic)
        const [, , [, epoch], [, seq]] = (await commands
          .multi()
          .hsetnx(state, "epoch", newEpoch())
          .pexpire(state, Math.max(config.history.maxAgeMs, STATE_LIFETIME_MS))
          .hget(state, "epoch")
          .hget(state, "seq")
          .exec()) as [unknown, unknown, [unknown, string], [unknown, string | null]]
        return { epoch, offset: seq === null ? 0 : Number(seq) }
      })

    /** A connection entered, or its expiry moved when it is in (joinScript). */
    const enter = (namespace: string, topic: string, entry: PresenceEntry, expiresAt: number) =>
      commands.pubsubJoin(
        ...topicArgs(namespace, topic, Date.now(), expiresAt - Date.now() + 60_000),
        entry.connection,
        entry.memberId,
        memberJson(entry),
        expiresAt
      )

    const reap = (namespace: string, topic: string) => {
      const now = Date.now()
      return call("reap", () => commands.pubsubReap(...topicArgs(namespace, topic, now, 60_000), now))
    }

    reaper = setInterval(() => {
      for (const channel of channels.values()) Effect.runFork(Effect.ignore(reap(channel.namespace, channel.topic)))
    }, config.reapIntervalMs ?? 5000)
    reaper.unref()

    const service: PubSubEngineService = {
      engine: "redis",
      immediate: false,
      publish: (namespace, topic, content, timestamp) =>
        Effect.map(
          call("publish", () => commands.pubsubPublish(...topicArgs(namespace, topic, timestamp), content)),
          ([offset, epoch]) => ({ offset: Number(offset), epoch })
        ),
      subscribe: (namespace, topic, listener) =>
        Effect.gen(function* () {
          const name = channelOf(namespace, topic)
          let channel = channels.get(name)
          if (channel === undefined) {
            const fresh: Channel = { namespace, topic, listeners: new Set(), ready: Promise.resolve() }
            fresh.ready = subscriber.subscribe(name).then(() => undefined)
            channels.set(name, fresh)
            channel = fresh
          }
          channel.listeners.add(listener)
          const subscribed = channel
          const close = () => {
            subscribed.listeners.delete(listener)
            if (subscribed.listeners.size === 0 && channels.get(name) === subscribed) {
              channels.delete(name)
              // refused while Redis is away: ioredis would subscribe it again on reconnect, so it is
              // unsubscribed once the connection is back
              subscriber.unsubscribe(name).catch(() => stale.add(name))
            }
          }
          const ready = yield* Effect.either(call("subscribe", () => subscribed.ready))
          if (ready._tag === "Left") {
            close()
            return yield* Effect.fail(ready.left)
          }
          const position = yield* Effect.tapError(positionOf(namespace, topic), () => Effect.sync(close))
          return { position, close }
        }),
      history: (namespace, topic, after) =>
        Effect.gen(function* () {
          const position = yield* positionOf(namespace, topic)
          if (after.epoch !== position.epoch || after.offset > position.offset) return { complete: false as const, position }
          const [, history] = keysOf(namespace, topic)
          const [[, time], [, kept]] = (yield* call("history", () => commands.multi().time().lrange(history, 0, -1).exec())) as [
            [unknown, [string, string]],
            [unknown, Array<string>]
          ]
          // entries carry Redis's time in µs (RedisPubSubScripts.ts): age is judged on Redis's clock
          const oldest = (Number(time[0]) * 1_000_000 + Number(time[1])) - config.history.maxAgeMs * 1000
          const deliveries: Array<Delivery> = []
          for (const entry of kept) {
            const space = entry.indexOf(" ")
            if (Number(entry.slice(0, space)) < oldest) continue
            const frame = entry.slice(space + 1)
            const at = POSITION.exec(frame)
            if (at === null || at[2] !== position.epoch) continue
            const offset = Number(at[1])
            if (offset > after.offset) deliveries.push({ topic, offset, epoch: position.epoch, frame })
          }
          const next = deliveries[0]?.offset ?? position.offset + 1
          return next === after.offset + 1 ? { complete: true as const, deliveries, position } : { complete: false as const, position }
        }),
      topics: (namespace) =>
        Effect.map(call("topics", () => commands.pubsub("CHANNELS", `${escapeGlob(channelOf(namespace, ""))}*`) as Promise<Array<string>>), (names) => {
          const prefix = channelOf(namespace, "").length
          return names.map((n) => n.slice(prefix)).sort()
        }),
      join: (namespace, topic, entry, expiresAt) => Effect.asVoid(call("join", () => enter(namespace, topic, entry, expiresAt))),
      // the join script only moves the expiry of an entry that is in, and enters one that is gone
      refresh: (namespace, entries, expiresAt) =>
        Effect.asVoid(call("refresh", () => Promise.all(entries.map(({ topic, entry }) => enter(namespace, topic, entry, expiresAt))))),
      leave: (namespace, topic, connection) =>
        Effect.asVoid(call("leave", () => commands.pubsubLeave(...topicArgs(namespace, topic, Date.now(), 60_000), connection))),
      presence: (namespace, topic) =>
        Effect.gen(function* () {
          yield* reap(namespace, topic)
          const [, , presence] = keysOf(namespace, topic)
          const stored = yield* call("presence", () => commands.hgetall(presence))
          const entries: Array<PresenceEntry> = []
          for (const [connection, text] of Object.entries(stored)) {
            const cut = text.indexOf("\n")
            const member = JSON.parse(text.slice(cut + 1)) as { member_id: string; subject: string; joined_at: number; meta: unknown }
            entries.push({
              connection,
              memberId: member.member_id,
              subject: member.subject,
              joinedAt: member.joined_at,
              meta: member.meta === null ? undefined : JSON.stringify(member.meta)
            })
          }
          return membersOf(entries)
        }),
      dropNamespace: (namespace) =>
        call("drop", async () => {
          let cursor = "0"
          do {
            const [next, keys] = await commands.scan(cursor, "MATCH", `portico:ps?:{${escapeGlob(namespace)}}:*`, "COUNT", 1000)
            if (keys.length > 0) await commands.unlink(...keys)
            cursor = next
          } while (cursor !== "0")
        }),
      ping: Effect.asVoid(call("ping", () => commands.ping()))
    }

    return service
  })

export const RedisPubSubEngine = {
  layer: (config: RedisPubSubConfig) => Layer.scoped(PubSubEngine, makeRedisPubSubEngine(config))
}
