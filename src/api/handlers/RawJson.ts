import * as HttpServerResponse from "@effect/platform/HttpServerResponse"

/**
 * An answer whose JSON text is already the endpoint's success schema encoded: sent as it is,
 * without the schema's encode walking it again. For answers a service writes as text (SQL rows,
 * cache values) and for large answers built to their schema by construction (a push send's
 * envelope: the encode walked 10,000 results, 15-30 ms a send); a test holds each one to its schema.
 */
export const rawJson = (text: string) => HttpServerResponse.text(text, { contentType: "application/json" })
