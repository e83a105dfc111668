/**
 * The runtime settings that make Effect cheap per request: the tracer off and a scheduler that
 * runs every fiber's continuations in one batch per microtask.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as FiberRef from "effect/FiberRef"
import { constTrue } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Scheduler from "effect/Scheduler"
import { takeAll } from "./EffectInternals.js"

/**
 * Where a drain is queued: a `then` on a settled promise. Node's `queueMicrotask` wraps every
 * callback in an AsyncResource (an async id, init hooks, a bound function), which is most of
 * the cost of a drain that runs one continuation.
 */
const settled = Promise.resolve()

/**
 * One run queue for all fibers, drained in a single microtask per batch.
 *
 * The default MixedScheduler keeps a runner per fiber (a WeakMap lookup and a
 * Promise per resumption) and, after 2048 back-to-back microtask drains, falls
 * back to `setTimeout(0)`, which costs at least 1 ms of idle time under load.
 * Here the fallback is `setImmediate`, which lets node's I/O poll run and then
 * continues without a timer floor.
 */
export class BatchScheduler implements Scheduler.Scheduler {
  private tasks = new Scheduler.PriorityBuckets()
  private running = false
  private depth = 0
  constructor(readonly maxMicrotaskDrains: number) {}

  shouldYield(fiber: Parameters<Scheduler.Scheduler["shouldYield"]>[0]): number | false {
    return fiber.currentOpCount > fiber.getFiberRef(FiberRef.currentMaxOpsBeforeYield)
      ? fiber.getFiberRef(FiberRef.currentSchedulingPriority)
      : false
  }

  scheduleTask(task: Scheduler.Task, priority: number): void {
    this.tasks.scheduleTask(task, priority)
    if (!this.running) {
      this.running = true
      void settled.then(this.drain)
    }
  }

  private readonly drain = (): void => {
    const buckets = takeAll(this.tasks)
    for (const [, toRun] of buckets) {
      for (let i = 0; i < toRun.length; i++) toRun[i]?.()
    }
    if (this.tasks.buckets.length === 0) {
      this.running = false
      this.depth = 0
    } else if (++this.depth >= this.maxMicrotaskDrains) {
      this.depth = 0
      setImmediate(this.drain)
    } else {
      void settled.then(this.drain)
    }
  }
}

export const batchScheduler: Scheduler.Scheduler = new BatchScheduler(2048)

/**
 * Runtime settings for serving HTTP. Provide it below (i.e. build it before)
 * every layer that captures a runtime for serving, e.g.
 * `Main.pipe(Layer.provide(fastRuntimeLayer))`, so the captured FiberRefs carry it.
 *
 * - tracer off: no span objects or attributes per request;
 * - HttpMiddleware tracer predicate always true: the official server's tracer
 *   middleware skips URL parsing and header redaction too;
 * - the batching scheduler above.
 */
export const fastRuntimeLayer: Layer.Layer<never> = Layer.mergeAll(
  Layer.setTracerEnabled(false),
  Layer.setScheduler(batchScheduler),
  Layer.locallyScoped(HttpMiddleware.currentTracerDisabledWhen, constTrue)
)
