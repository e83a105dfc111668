/**
 * What a published message takes from its namespace's rate budget (docs/pubsub.md "Routes"): one
 * token per message from the bucket every route of the namespace draws on. A Tag of its own so
 * pub/sub needs nothing of the rate limiter's module (RateLimiter.MessageBudget provides it).
 */
import { Context, Effect, Layer } from "effect"

export interface MessageBudgetService {
  /** Takes one message's token; `allowed: false` with the seconds until there is one again. */
  readonly take: (namespace: string) => Effect.Effect<{ readonly allowed: boolean; readonly retryAfterSeconds: number }>
}

export class MessageBudget extends Context.Tag("portico/MessageBudget")<MessageBudget, MessageBudgetService>() {
  /** A budget that never runs out. */
  static readonly Test = Layer.succeed(MessageBudget, { take: () => Effect.succeed({ allowed: true, retryAfterSeconds: 0 }) })
}
