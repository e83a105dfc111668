/**
 * What an endpoint's operation in the OpenAPI document says beyond its schemas, as annotations on
 * the endpoint itself (`OpenApi.Override`, `OpenApi.Transform`). Each is something HttpApi cannot
 * express, with the reason beside it. Client-safe.
 */
import * as OpenApi from "@effect/platform/OpenApi"
import { Context } from "effect"
import { StreamedBody, type StreamedBodyFacts } from "./RouteFacts.js"

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * A body the handler reads as a stream (a file): the route fact for the listener, and the request
 * body for the document, which HttpApi cannot derive from a payload the handler reads itself.
 */
export const streamedBody = (facts: StreamedBodyFacts) =>
  Context.make(StreamedBody, facts).pipe(
    Context.add(OpenApi.Override, {
      requestBody: { required: true, description: facts.description, content: { [facts.contentType]: { schema: facts.schema } } }
    })
  )

/**
 * Content answers with Range and ETag (storage get, relayed): the handler writes 206, 304 and 416
 * itself, with headers HttpApi has no way to declare.
 */
export const rangedAnswers = (operation: Json): Json => {
  const responses = operation["responses"]
  if (!isObject(responses) || !isObject(responses["200"])) return operation
  responses["206"] = {
    ...responses["200"],
    description: "the requested range",
    headers: { "Content-Range": { description: "bytes <first>-<last>/<size>", schema: { type: "string" } } }
  }
  responses["304"] = { description: "not modified: the ETag matched (no body)" }
  responses["416"] = {
    description: "the range starts past the end of the content (RANGE_NOT_SATISFIABLE)",
    headers: { "Content-Range": { description: "bytes */<size>", schema: { type: "string" } } },
    content: { "application/json": { schema: { $ref: "#/components/schemas/RangeNotSatisfiable" } } }
  }
  return operation
}

/** `/status` answers a browser with a page: HttpApi keeps one schema per status, the JSON one. */
export const htmlToo = (operation: Json): Json => {
  const responses = operation["responses"]
  if (isObject(responses) && isObject(responses["200"]) && isObject(responses["200"]["content"])) {
    responses["200"]["content"]["text/html"] = { schema: { type: "string" } }
  }
  return operation
}

/** The largest value a QueryInteger takes: 15 decimal digits (Wire.ts). */
export const QUERY_INTEGER_MAX = 999_999_999_999_999

export interface IntegerQuery {
  readonly minimum: number
  readonly maximum: number
  readonly description: string
}

/**
 * Integer query parameters with bounds of their own: HttpApi describes a query parameter by its
 * wire type (a string of digits) and loses the bounds, which sit on the decoded integer. The
 * document's transform types the others (OpenApiDocument.ts); these say their own bounds.
 */
export const integerQueries =
  (bounds: Readonly<Record<string, IntegerQuery>>) =>
  (operation: Json): Json => {
    const parameters = operation["parameters"]
    if (!Array.isArray(parameters)) return operation
    for (const p of parameters) {
      if (!isObject(p) || p["in"] !== "query" || typeof p["name"] !== "string") continue
      const bound = bounds[p["name"]]
      if (bound === undefined) continue
      p["schema"] = { type: "integer", minimum: bound.minimum, maximum: bound.maximum }
      p["description"] = bound.description
    }
    return operation
  }

/** Node-to-node routes: generators that honour `x-internal` leave them out of client code. */
export const internalOnly = { "x-internal": true }
