/**
 * One structured line per request: method, route, status, duration, namespace. Never a header,
 * a query string or a body: credentials can travel in all three. The listener calls it once per
 * answer (see `onAnswered` in NodeAdapter.ts), so what it refuses before any route runs (413) is
 * logged like the rest.
 */
import type * as http from "node:http"
import { RequestMeta } from "./RequestMeta.js"

export const logLine = (fields: Readonly<Record<string, unknown>>): void => {
  process.stdout.write(JSON.stringify({ time: new Date().toISOString(), ...fields }) + "\n")
}

const round = (ms: number) => Math.round(ms * 100) / 100

/** The access-log line of a request the listener answered (or whose client left: 499). */
export const logRequest = (req: http.IncomingMessage, status: number, ms: number): void => {
  const url = req.url ?? "/"
  const q = url.indexOf("?")
  logLine({
    level: "info",
    msg: "request",
    method: req.method ?? null,
    route: q < 0 ? url : url.slice(0, q),
    status,
    ms: round(ms),
    namespace: RequestMeta.namespaceOfSource(req) ?? null
  })
}

/**
 * The line of a request node's HTTP parser refused (400, 408, 431): no method or route could be
 * read from it, and it never reached the listener, so neither is known nor how long it took.
 */
export const logParserRefusal = (status: number): void => {
  logLine({ level: "info", msg: "request", method: null, route: null, status, ms: null, namespace: null })
}
