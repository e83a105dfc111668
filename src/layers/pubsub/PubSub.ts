/**
 * Publish/subscribe's rules over whichever engine is configured (docs/pubsub.md): topic names,
 * the platform's reserved prefix, grants narrowed to topics, payload bounds, the namespace's rate
 * budget charged per message, and the engine's deadline. The routes and the sockets
 * (PubSubSockets.ts) both go through here, so a message is judged the same way wherever it comes
 * from; the platform's own events enter through `publishPlatform` alone.
 */
import { Context, Data, Duration, Effect, Layer } from "effect"
import { type PubSubCode, statusOfCode } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import { base64Bytes, isReserved, isTopic, RESERVED_PREFIX, reachesTopic, TOPIC_RULE } from "../../domain/PubSubRules.js"
import { PorticoConfig } from "../config/PorticoConfig.js"
import type { PubSubSettings } from "../config/PubSubSettings.js"
import { MessageBudget } from "./MessageBudget.js"
import { MemoryPubSubEngine } from "./MemoryPubSubEngine.js"
import { type Position, type PresenceMember, PubSubEngine, type PubSubEngineService, PubSubUnavailable } from "./PubSubEngine.js"

/** A rule refused the request, in the family's codes. */
export class PubSubRefused extends Data.TaggedError("PubSubRefused")<{
  readonly status: number
  readonly code: PubSubCode
  readonly reason: string
  readonly hint?: string | undefined
  readonly retryAfterSeconds?: number | undefined
}> {}

export const refuse = (code: PubSubCode, reason: string, hint?: string, retryAfterSeconds?: number) =>
  new PubSubRefused({ status: statusOfCode[code], code, reason, hint, retryAfterSeconds })

/** A message as the routes take it. */
export interface Outgoing {
  readonly topic: string
  readonly data_base64: string
  /**
   * Set on a function's publishes only: how many topic triggers deep the publishing function runs
   * (1 for one invoked over HTTP). Its frame carries it as `depth`, so a function a topic runs
   * cannot start an endless chain (docs/functions.md, "Topics").
   */
  readonly depth?: number | undefined
}

export interface PubSubService {
  readonly engine: PubSubEngineService
  readonly settings: PubSubSettings
  /** Why the caller may not publish `message`, or undefined: every rule but the rate budget. */
  readonly publishRefusal: (caller: Principal, message: Outgoing) => PubSubRefused | undefined
  /** Why the caller may not read `topic` (subscribe, presence), or undefined. */
  readonly readRefusal: (caller: Principal, topic: string) => PubSubRefused | undefined
  /** Takes `count` messages from the namespace's rate budget; refused as a whole when it runs out. */
  readonly charge: (namespace: string, count: number) => Effect.Effect<void, PubSubRefused>
  /** One message, judged, then held by the engine; its position on the topic. */
  readonly publish: (caller: Principal, message: Outgoing) => Effect.Effect<Position, PubSubRefused>
  /**
   * Every message judged before any is published, then published in order. The request itself
   * was charged by the gate, so the batch takes its other messages from the budget.
   */
  readonly publishBatch: (caller: Principal, messages: ReadonlyArray<Outgoing>) => Effect.Effect<ReadonlyArray<Position>, PubSubRefused>
  /**
   * A page of the namespace's live topics the caller's grants reach, sorted: at most `limit` after
   * `after`, and the last one's name when more follow.
   */
  readonly topics: (
    caller: Principal,
    page: { readonly limit: number; readonly after: string | undefined }
  ) => Effect.Effect<{ readonly topics: ReadonlyArray<string>; readonly next: string | undefined }, PubSubRefused>
  /** The topic's present members. */
  readonly presence: (caller: Principal, topic: string) => Effect.Effect<ReadonlyArray<PresenceMember>, PubSubRefused>
  /**
   * The platform's own event on a reserved topic (`_portico/...`): frame members `"type":"event",
   * "event":<name>, "body":<body JSON>`. The one entry point for platform publishers.
   */
  readonly publishPlatform: (namespace: string, topic: string, event: string, bodyJson: string) => Effect.Effect<Position, PubSubRefused>
  /** The engine within the publish deadline; UNAVAILABLE past it. */
  readonly withinDeadline: <A>(effect: Effect.Effect<A, PubSubUnavailable>) => Effect.Effect<A, PubSubRefused>
}

const badTopic = (topic: string) =>
  refuse("VALIDATION_FAILED", `"${topic.slice(0, 64)}" is not a topic name`, `a topic is ${TOPIC_RULE}`)

export class PubSub extends Context.Tag("portico/PubSub")<PubSub, PubSubService>() {
  static readonly Live = Layer.effect(
    PubSub,
    Effect.gen(function* () {
      const engine = yield* PubSubEngine
      const settings = (yield* PorticoConfig).pubsub
      const budget = yield* MessageBudget
      const deadline = Duration.millis(settings.publishTimeoutMs)
      const unavailable = refuse(
        "UNAVAILABLE",
        "publish/subscribe is unavailable",
        "retry shortly; a publish that timed out may still have been delivered",
        5
      )

      // an engine that answers in the calling turn is not raced against a timer: the race would
      // fork two fibers and a timeout for what cannot be late
      const withinDeadline = <A>(effect: Effect.Effect<A, PubSubUnavailable>): Effect.Effect<A, PubSubRefused> =>
        engine.immediate ? Effect.mapError(effect, () => unavailable) : effect.pipe(
          Effect.timeoutFail({ duration: deadline, onTimeout: () => new PubSubUnavailable({ detail: "deadline" }) }),
          Effect.mapError(() => unavailable)
        )

      const readRefusal = (caller: Principal, topic: string) =>
        !isTopic(topic) ? badTopic(topic) : reachesTopic(caller, topic) ? undefined : refuse("GRANT_REQUIRED", `your pubsub grant does not cover the topic ${topic}`)

      const publishRefusal = (caller: Principal, message: Outgoing): PubSubRefused | undefined => {
        if (!isTopic(message.topic)) return badTopic(message.topic)
        if (isReserved(message.topic)) {
          return refuse("FORBIDDEN", `topics under ${RESERVED_PREFIX} are the platform's`, "subscribe to them; publish on a topic of your own")
        }
        if (!reachesTopic(caller, message.topic)) return refuse("GRANT_REQUIRED", `your pubsub grant does not cover the topic ${message.topic}`)
        const bytes = base64Bytes(message.data_base64)
        if (bytes === undefined) return refuse("VALIDATION_FAILED", "data_base64 is not canonical base64", "standard alphabet with = padding, as btoa() writes it")
        if (bytes > settings.maxMessageBytes) {
          return refuse("PAYLOAD_TOO_LARGE", `a message is at most ${settings.maxMessageBytes} bytes, decoded`, "split it, or keep large content in storage and publish its CID")
        }
        return undefined
      }

      const charge = (namespace: string, count: number): Effect.Effect<void, PubSubRefused> =>
        Effect.gen(function* () {
          for (let i = 0; i < count; i++) {
            const decision = yield* budget.take(namespace)
            if (!decision.allowed) {
              return yield* refuse("RATE_LIMITED", "the namespace's rate budget is spent", "each message counts against it", decision.retryAfterSeconds)
            }
          }
        })

      const content = (message: Outgoing) =>
        message.depth === undefined
          ? `"type":"message","data":"${message.data_base64}"`
          : `"type":"message","data":"${message.data_base64}","depth":${message.depth}`

      const send = (caller: Principal, message: Outgoing) =>
        withinDeadline(engine.publish(caller.namespace, message.topic, content(message), Date.now()))

      return {
        engine,
        settings,
        publishRefusal,
        readRefusal,
        charge,
        withinDeadline,
        publish: (caller, message) => {
          const refused = publishRefusal(caller, message)
          return refused === undefined ? send(caller, message) : Effect.fail(refused)
        },
        publishBatch: (caller, messages) =>
          Effect.gen(function* () {
            if (messages.length > settings.batchMax) {
              return yield* refuse("VALIDATION_FAILED", `a batch holds at most ${settings.batchMax} messages`, "send the rest in another batch")
            }
            for (const [i, message] of messages.entries()) {
              const refused = publishRefusal(caller, message)
              if (refused !== undefined) return yield* Effect.fail(new PubSubRefused({ ...refused, reason: `messages[${i}]: ${refused.reason}` }))
            }
            yield* charge(caller.namespace, messages.length - 1)
            const positions: Array<Position> = []
            for (const message of messages) {
              const sent = yield* Effect.either(send(caller, message))
              if (sent._tag === "Left") {
                return yield* refuse(
                  "UNAVAILABLE",
                  `publish/subscribe stopped answering after ${positions.length} of ${messages.length} messages`,
                  `the first ${positions.length} were published (the one after may have been); publish the rest again`,
                  5
                )
              }
              positions.push(sent.right)
            }
            return positions
          }),
        topics: (caller, page) =>
          Effect.map(withinDeadline(engine.topics(caller.namespace)), (all) => {
            const reached = all.filter((t) => reachesTopic(caller, t) && (page.after === undefined || t > page.after))
            const topics = reached.slice(0, page.limit)
            return { topics, next: reached.length > page.limit ? topics[topics.length - 1] : undefined }
          }),
        presence: (caller, topic) => {
          const refused = readRefusal(caller, topic)
          return refused === undefined ? withinDeadline(engine.presence(caller.namespace, topic)) : Effect.fail(refused)
        },
        publishPlatform: (namespace, topic, event, bodyJson) =>
          isReserved(topic) && isTopic(topic)
            ? withinDeadline(engine.publish(namespace, topic, `"type":"event","event":${JSON.stringify(event)},"body":${bodyJson}`, Date.now()))
            : Effect.die(new Error(`platform events go on ${RESERVED_PREFIX} topics, not ${topic}`))
      }
    })
  )

  /** Over the embedded engine, test settings and a budget that never runs out: the rules without Redis. */
  static readonly Test = Layer.suspend(() =>
    PubSub.Live.pipe(Layer.provide(Layer.mergeAll(MemoryPubSubEngine.Test, PorticoConfig.Test, MessageBudget.Test)))
  )
}
