/**
 * One structured line per request: method, route, status, duration, namespace. Never a header,
 * a query string or a body: credentials can travel in all three.
 */
import { type HttpApp, HttpServerRequest } from "@effect/platform"
import { Cause, Effect } from "effect"
import { RequestMeta } from "./RequestMeta.js"

export const logLine = (fields: Readonly<Record<string, unknown>>): void => {
  process.stdout.write(JSON.stringify({ time: new Date().toISOString(), ...fields }) + "\n")
}

export const accessLog = <E, R>(
  app: HttpApp.Default<E, R>,
  enabled: boolean
): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> => {
  if (!enabled) return app
  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const started = performance.now()
    return Effect.onExit(app, (exit) =>
      Effect.sync(() => {
        // Every failure is rendered into a response before it gets here; what still ends without
        // one was interrupted because the client went away: 499, as nginx logs it, not a 500.
        const status = exit._tag === "Success" ? exit.value.status : Cause.isInterruptedOnly(exit.cause) ? 499 : 500
        logLine({
          level: "info",
          msg: "request",
          method: request.method,
          route: request.url.split("?")[0],
          status,
          ms: Math.round((performance.now() - started) * 100) / 100,
          namespace: RequestMeta.namespaceOf(request) ?? null
        })
      })
    )
  })
}

