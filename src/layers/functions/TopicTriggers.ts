/**
 * Functions run by topics (docs/functions.md, "Topics"): every running gateway subscribes, on the
 * pub/sub engine, to the topics of the functions' triggers, and for each message claims it per
 * function in the registry; the one gateway whose claim made the row runs the function, so a
 * message runs each of its functions at most once across the cluster however many gateways hear
 * it. The function gets the message's frame, with `"trigger":"pubsub"`, as its input.
 *
 * A function's own publishes carry its trigger depth (`depth` in the frame): a message deeper than
 * PORTICO_FUNCTIONS_MAX_DEPTH runs nothing, which ends a chain of functions triggering each other.
 * The triggers are read from the registry every PORTICO_FUNCTIONS_TRIGGER_REFRESH_MS (5 s). A message published while the engine
 * was away from this gateway is not replayed: topic triggers are at most once.
 */
import { Effect, Layer, Schedule, Scope } from "effect"
import { PorticoConfig } from "../config/PorticoConfig.js"
import { PubSub } from "../pubsub/PubSub.js"
import type { Delivery, Subscription } from "../pubsub/PubSubEngine.js"
import { FunctionStore, type TopicTrigger } from "./FunctionStore.js"
import { Invocations, runClaimed } from "./Invocations.js"

/** A message's frame (presence and platform event frames run nothing). */
const MESSAGE_FRAME = /^\{"topic":"[^"]*","offset":\d+,"epoch":"[^"]*","timestamp":\d+,"type":"message",/

interface Subscribed {
  readonly subscription: Subscription
  names: ReadonlyArray<string>
}

/** The frame's depth member, when a function published it. */
const depthOf = (frame: string): number => {
  const match = /"depth":(\d{1,4})\}$/.exec(frame)
  return match === null ? 0 : Number(match[1])
}

export const FunctionTopicTriggers = Layer.scopedDiscard(
  Effect.gen(function* () {
    const store = yield* FunctionStore
    const invocations = yield* Invocations
    const engine = (yield* PubSub).engine
    const refreshMs = (yield* PorticoConfig).functions.triggerRefreshMs
    const scope = yield* Effect.scope
    const subscribed = new Map<string, Subscribed>()
    const keyOf = (namespace: string, topic: string) => `${namespace}\u0000${topic}`

    const run = (trigger: TopicTrigger, delivery: Delivery) =>
      runClaimed(invocations, store.claimMessage(trigger, delivery.epoch, delivery.offset, Date.now()), {
        namespace: trigger.namespace,
        name: trigger.name,
        caller: undefined,
        input: new TextEncoder().encode(`{"trigger":"pubsub",${delivery.frame.slice(1)}`),
        trigger: `pubsub ${trigger.topic}`,
        depth: depthOf(delivery.frame)
      })

    const listen = (namespace: string, topic: string) => ({
      deliver: (delivery: Delivery) => {
        const entry = subscribed.get(keyOf(namespace, topic))
        if (entry === undefined || !MESSAGE_FRAME.test(delivery.frame)) return
        for (const name of entry.names) Effect.runFork(Effect.forkIn(run({ namespace, name, topic }, delivery), scope))
      },
      // at most once: what was published while the engine was away is not replayed
      interrupted: () => undefined
    })

    const refresh = Effect.gen(function* () {
      const triggers = yield* store.allTopicTriggers
      const wanted = new Map<string, { namespace: string; topic: string; names: Array<string> }>()
      for (const t of triggers) {
        const key = keyOf(t.namespace, t.topic)
        const entry = wanted.get(key) ?? { namespace: t.namespace, topic: t.topic, names: [] }
        entry.names.push(t.name)
        wanted.set(key, entry)
      }
      for (const [key, entry] of subscribed) {
        if (!wanted.has(key)) {
          entry.subscription.close()
          subscribed.delete(key)
        }
      }
      for (const [key, want] of wanted) {
        const have = subscribed.get(key)
        if (have !== undefined) {
          have.names = want.names
          continue
        }
        const subscription = yield* Effect.either(engine.subscribe(want.namespace, want.topic, listen(want.namespace, want.topic)))
        if (subscription._tag === "Right") subscribed.set(key, { subscription: subscription.right, names: want.names })
      }
    })

    yield* Effect.ignore(refresh)
    yield* Effect.forkScoped(Effect.repeat(Effect.ignore(refresh), Schedule.spaced(`${refreshMs} millis`)))
    yield* Scope.addFinalizer(
      scope,
      Effect.sync(() => {
        for (const entry of subscribed.values()) entry.subscription.close()
        subscribed.clear()
      })
    )
  })
)
