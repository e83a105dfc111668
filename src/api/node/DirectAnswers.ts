/**
 * Answers the adapter gives without the app (a body over its cap, an unexpected failure), and
 * the discarding of what a refused client is still sending.
 */
import type * as http from "node:http"
import { Code, envelopeText } from "../../domain/Errors.js"

export const tooLargeBody = (limit: number) =>
  envelopeText({ error: "request body too large", code: Code.PAYLOAD_TOO_LARGE, hint: `the limit is ${limit} bytes` })
/** What a request that failed unexpectedly is told; the cause goes to the log only. */
export const internalBody = envelopeText({ error: "internal error", code: Code.INTERNAL })

/** Answers outside the app; `connection: close` so an unread body is not drained. */
export const answerDirect = (res: http.ServerResponse, status: number, body: string): void => {
  if (res.headersSent || res.writableEnded) return
  res.shouldKeepAlive = false
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    connection: "close"
  })
  res.end(body)
}

/** How much of a refused upload we read and discard so the client gets to see our 413. */
export const DRAIN_BUDGET_BYTES = 16 * 1024 * 1024
const DRAIN_BUDGET_MS = 15_000

/**
 * Answers 413 at once for an announced oversize body, then discards what the client is still
 * sending, up to a budget: a client that is mid-upload when the socket closes reports a broken
 * pipe instead of our answer. Past the budget the connection is cut.
 */
export const refuseOversize = (req: http.IncomingMessage, res: http.ServerResponse, body: string, cap: number): void => {
  // No `Connection: close` here: closing right after the answer resets a client still writing.
  // Node reuses the connection once the discarded body has been read; past the budget it is cut.
  res.writeHead(413, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  res.end(body)
  // a client streaming a large upload may push a good part of it before it reads our answer
  discardRest(req, Math.max(DRAIN_BUDGET_BYTES, cap / 4))
}

/**
 * Reads and drops what a refused client is still sending, up to a budget, so it gets to read our
 * answer: closing on unread data would reset the connection and take the answer with it.
 */
export const discardRest = (req: http.IncomingMessage, budgetBytes: number): void => {
  req.unpipe()
  let drained = 0
  const cut = () => req.socket.destroy()
  const timer = setTimeout(cut, DRAIN_BUDGET_MS)
  timer.unref()
  req.on("data", (chunk: Buffer) => {
    drained += chunk.length
    if (drained > budgetBytes) {
      clearTimeout(timer)
      cut()
    }
  })
  req.once("end", () => clearTimeout(timer))
  req.once("error", () => clearTimeout(timer))
  req.resume()
}
