/**
 * The one place the HTTP adapter relies on how Effect is built inside rather than on what it
 * documents. test/api/AdapterParity.test.ts runs the same requests through this adapter and
 * through `NodeHttpServer.layerTest`, so an `effect` upgrade that changes any of this fails CI.
 *
 * - `Context#unsafeMap` / `Context.unsafeMake`: a Context is a `Map` keyed by `Tag.key`. Each
 *   request's fiber gets the server's context plus its request and scope by copying that map
 *   and setting two keys, instead of `Context.add` twice (two contexts, two copies) or
 *   `Effect.provideService` (two more fiber-ref frames per request).
 * - `Scheduler.PriorityBuckets#buckets`: the batching scheduler (FastRuntime.ts) takes the whole
 *   queue at once by swapping the array, as Effect's own schedulers do.
 *
 * Effect interfaces that the adapter implements itself, by their type ids (LeanServerRequest.ts
 * for `HttpServerRequest`, RequestScope.ts for `Scope.CloseableScope`), are public, but the
 * parity test guards them too: a new member Effect starts calling would show up there.
 */
import type * as ServerRequest from "@effect/platform/HttpServerRequest"
import * as PlatformRequest from "@effect/platform/HttpServerRequest"
import * as Context from "effect/Context"
import * as Runtime from "effect/Runtime"
import type * as Scheduler from "effect/Scheduler"
import * as Scope from "effect/Scope"

/**
 * For a server's runtime: the runtime one request's fiber runs in, its context being the
 * server's plus `request` as the HttpServerRequest and `scope` as the Scope.
 */
export const requestRuntime = <R>(
  runtime: Runtime.Runtime<R>
): (request: ServerRequest.HttpServerRequest, scope: Scope.Scope) => Runtime.Runtime<R | ServerRequest.HttpServerRequest | Scope.Scope> => {
  const baseMap = runtime.context.unsafeMap
  const runtimeFlags = runtime.runtimeFlags
  const fiberRefs = runtime.fiberRefs
  return (request, scope) => {
    const map = new Map(baseMap)
    map.set(PlatformRequest.HttpServerRequest.key, request)
    map.set(Scope.Scope.key, scope)
    return Runtime.make({ context: Context.unsafeMake<R | ServerRequest.HttpServerRequest | Scope.Scope>(map), runtimeFlags, fiberRefs })
  }
}

/** Everything queued in `tasks`, by priority, leaving it empty. */
export const takeAll = (tasks: Scheduler.PriorityBuckets): Array<[number, Array<Scheduler.Task>]> => {
  const buckets = tasks.buckets
  tasks.buckets = []
  return buckets
}
