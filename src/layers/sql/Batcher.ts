/**
 * Statements sent together: the calls that arrive while the previous requests are on their way
 * leave as one request. Nothing waits for company: a call made when fewer than `maxInFlight`
 * requests are out leaves at the end of the event-loop turn, with whatever else arrived in that
 * turn; only when `maxInFlight` are out do calls gather, and the first answer sends them.
 *
 * Why: a cluster SQL point read through the gateway cost rqlited and the gateway one HTTP
 * exchange each, and on a shared machine the two processes then take turns on the CPU once per
 * request; rqlite runs a request's statements one after another on one connection (one Raft
 * entry for writes), so N statements in one request cost about one exchange
 * (docs/performance.md, "2026-11-25 (fifth session)").
 *
 * A batch holds at most `maxItems` calls and `maxWeight` of their weight (the engine weighs by
 * the statements' last run time and their text's size), one call at least, in arrival order.
 */
import { Cause, Effect, Exit } from "effect"

export interface BatcherOptions<I, O, E> {
  /** Sends the items as one request: one outcome per item, in their order; a failure is every item's. */
  readonly send: (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, E>
  readonly maxInFlight: number
  readonly maxItems: number
  readonly maxWeight: number
  readonly weigh: (item: I) => number
}

/** A call's outcome and how many calls its request carried. */
export interface Batched<O> {
  readonly out: O
  readonly size: number
}

/** A batcher: a call as an effect, or `offer`ed by a caller outside a fiber. */
export interface Batcher<I, O, E> {
  (item: I): Effect.Effect<Batched<O>, E>
  /**
   * The same call without a fiber: `done` gets its outcome once, never before `offer` returns.
   * There is no calling it off (the fast lane's statements, see FastLane.ts).
   */
  readonly offer: (item: I, done: (exit: Exit.Exit<Batched<O>, E>) => void) => void
}

class Waiter<I, O, E> {
  /** Set when the caller went away before its batch left: it is skipped. */
  cancelled = false
  constructor(
    readonly item: I,
    readonly weight: number,
    readonly resume: (exit: Exit.Exit<Batched<O>, E>) => void
  ) {}
}

export const batcher = <I, O, E>(options: BatcherOptions<I, O, E>): Batcher<I, O, E> => {
  let queue: Array<Waiter<I, O, E>> = []
  let inFlight = 0
  let scheduled = false

  const schedule = (): void => {
    if (scheduled || inFlight >= options.maxInFlight || queue.length === 0) return
    scheduled = true
    setImmediate(flush)
  }

  /** The next batch off the queue: arrival order, within the item and weight bounds. */
  const take = (): Array<Waiter<I, O, E>> => {
    const batch: Array<Waiter<I, O, E>> = []
    let weight = 0
    let i = 0
    for (; i < queue.length; i++) {
      const waiter = queue[i] as Waiter<I, O, E>
      if (waiter.cancelled) continue
      if (batch.length > 0 && (batch.length >= options.maxItems || weight + waiter.weight > options.maxWeight)) break
      batch.push(waiter)
      weight += waiter.weight
    }
    queue = i === queue.length ? [] : queue.slice(i)
    return batch
  }

  const flush = (): void => {
    scheduled = false
    while (inFlight < options.maxInFlight && queue.length > 0) {
      const batch = take()
      if (batch.length === 0) continue
      inFlight++
      Effect.runCallback(options.send(batch.map((w) => w.item)), {
        onExit: (exit) => {
          inFlight--
          const size = batch.length
          let thrown: { readonly error: unknown } | undefined
          for (let i = 0; i < size; i++) {
            const waiter = batch[i] as Waiter<I, O, E>
            // an `offer` callback that throws must not keep the others from their outcome
            try {
              if (Exit.isFailure(exit)) waiter.resume(Exit.failCause(exit.cause))
              // `send` owes one outcome per item: a short answer is its defect
              else if (i >= exit.value.length) waiter.resume(Exit.die(new Error("a batch answered fewer outcomes than items")))
              else waiter.resume(Exit.succeed({ out: exit.value[i] as O, size }))
            } catch (error) {
              thrown ??= { error }
            }
          }
          schedule()
          // nor is it swallowed
          if (thrown !== undefined) Effect.runFork(Effect.logError("a batched call's callback threw", Cause.die(thrown.error)))
        }
      })
    }
  }

  const enqueue = (waiter: Waiter<I, O, E>): void => {
    queue.push(waiter)
    schedule()
  }
  const call = (item: I) =>
    Effect.async<Batched<O>, E>((resume) => {
      const waiter = new Waiter(item, options.weigh(item), resume)
      enqueue(waiter)
      return Effect.sync(() => {
        waiter.cancelled = true
      })
    })
  return Object.assign(call, { offer: (item: I, done: (exit: Exit.Exit<Batched<O>, E>) => void) => enqueue(new Waiter(item, options.weigh(item), done)) })
}
