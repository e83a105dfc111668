/**
 * Lean node:http adapter for an Effect HttpApp (e.g. the one HttpApiBuilder
 * builds), plus the runtime settings that make Effect cheap per request.
 *
 * Why not `NodeHttpServer.layer`: per request it wraps the app in the tracer
 * middleware (URL parse, header redaction, a span), a Scope plus
 * uninterruptible/catchAllCause layers, and it keeps the fiber alive until
 * node's `end()` callback fires, which costs one more async hop and scheduler
 * turn for every response. See docs/performance.md for the measurements.
 *
 * What this keeps: the full HttpServerRequest surface (headers, url, method,
 * search params via the router, remote address, text/json/urlencoded/
 * multipart/stream bodies), every HttpBody kind on the way out, cookies,
 * pre-response handlers, client-abort interruption and a body cap.
 *
 * The parts, in src/api/node/: RequestListener (the node:http listener), LeanServerRequest (the
 * request), ResponseWriter (the response), RequestScope (the per-request Scope), FastRuntime
 * (scheduler and runtime settings), JsonBodyRead and DirectAnswers (bodies read and refused
 * before the app runs), EffectInternals (what the adapter relies on inside Effect).
 */
export type { AdapterOptions } from "./node/RequestListener.js"
export { makeRequestListener } from "./node/RequestListener.js"
export { BatchScheduler, batchScheduler, fastRuntimeLayer } from "./node/FastRuntime.js"
export { BodyNotUtf8, bodyOf, LeanServerRequest } from "./node/LeanServerRequest.js"
export { internalBody } from "./node/DirectAnswers.js"
