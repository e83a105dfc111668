/**
 * The guarded egress client (src/layers/egress/GuardedFetch.ts) as the fetch-like function the
 * ntfy and Expo clients take, for tenant-chosen hosts (a namespace's relay `base_url`, the legacy
 * relay). Its refusals reject with FetchRefused, so a device's outcome names them: `EgressRefused`
 * (the host resolves only to refused ranges), `Unresolvable`, `Timeout`, `ConnectionFailed`,
 * `InvalidUrl`, `AnswerTooLarge`. The caller's abort signal interrupts the request.
 */
import { Cause, Effect, Exit, Option } from "effect"
import type { EgressError, GuardedFetchService } from "../egress/GuardedFetch.js"
import { type FetchLike, FetchRefused, Reasons } from "./Delivery.js"

const reasons: Record<EgressError["reason"], string> = {
  refused: "EgressRefused",
  unresolvable: "Unresolvable",
  timeout: Reasons.timeout,
  transport: Reasons.connection,
  invalid_url: "InvalidUrl",
  too_large: "AnswerTooLarge"
}

/** Statuses whose Response may not carry a body. */
const NO_BODY = new Set([101, 204, 205, 304])

export const fetchThroughGuard = (guard: GuardedFetchService): FetchLike => async (input, init) => {
  const headers = Object.fromEntries(new Headers(init.headers).entries())
  const body = typeof init.body === "string" ? init.body : undefined
  const request = guard.request({ url: input, method: init.method ?? "GET", headers, ...(body === undefined ? {} : { body }) })
  const exit = await Effect.runPromiseExit(request, init.signal ? { signal: init.signal } : undefined)
  if (Exit.isFailure(exit)) {
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) throw new FetchRefused(reasons[failure.value.reason], failure.value.detail)
    throw new Error("the request was interrupted")
  }
  const answer = exit.value
  const responseHeaders = new Headers()
  for (const [name, value] of Object.entries(answer.headers)) {
    if (typeof value === "string") responseHeaders.set(name, value)
    else if (value !== undefined) for (const item of value) responseHeaders.append(name, item)
  }
  return new Response(NO_BODY.has(answer.status) ? null : answer.body, { status: answer.status, headers: responseHeaders })
}
