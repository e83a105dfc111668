/**
 * The OpenAPI document as clients generate code from it: what HttpApi writes, corrected where
 * it cannot know better. The route policy table (RoutePolicy.ts) decides which operations
 * declare the bearer credential; internal node-to-node routes stay (they are routes of the
 * spec) but are marked `x-internal` with the peer MAC they take; headers and statuses the
 * handlers set by hand are declared.
 */
import { policyKey, routePolicies } from "./RoutePolicy.js"

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * HttpApi always declares its own decode error; we answer schema failures with the common
 * envelope instead (see ErrorResponses.ts), so the document must say so too.
 */
const withEnvelopeOnly = (spec: Json): Json => {
  const from = "#/components/schemas/HttpApiDecodeError"
  const to = "#/components/schemas/ErrorBody"
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) {
      const mapped = node.map(rewrite)
      const seen = new Set<string>()
      return mapped.filter((item) => {
        const key = JSON.stringify(item)
        if (seen.has(key)) return false
        seen.add(key)
        return true
      })
    }
    if (typeof node !== "object" || node === null) return node
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(node)) out[k] = k === "$ref" && v === from ? to : rewrite(v)
    const anyOf = out["anyOf"]
    if (Array.isArray(anyOf) && anyOf.length === 1 && Object.keys(out).length === 1) return anyOf[0]
    return out
  }
  const next = rewrite(spec) as Record<string, unknown>
  const components = next["components"]
  if (typeof components === "object" && components !== null && "schemas" in components) {
    const schemas = components.schemas as Record<string, unknown>
    delete schemas["HttpApiDecodeError"]
    delete schemas["Issue"]
    delete schemas["PropertyKey"]
  }
  return next
}

/** Routes whose body is a file read as a stream by the handler, not a schema'd payload. */
const streamedBodies: Readonly<
  Record<string, { readonly contentType: string; readonly schema: Record<string, unknown>; readonly description: string }>
> = {
  "/v1/rqlite/import": {
    contentType: "application/octet-stream",
    schema: { type: "string", format: "binary" },
    description: "a SQLite database file (at most 256 MiB)"
  },
  "/v1/storage/upload": {
    contentType: "multipart/form-data",
    schema: {
      type: "object",
      required: ["file"],
      properties: {
        file: { type: "string", format: "binary", description: "the bytes; streamed to disk, never held whole" },
        name: { type: "string", maxLength: 255, description: "a name for the pin (no control characters); defaults to the file's name" }
      }
    },
    description: "multipart form with the file (upload cap and namespace quota: 413 past either)"
  }
}

const withStreamedBodies = (spec: Json): Json => {
  const paths = spec["paths"]
  if (typeof paths !== "object" || paths === null) return spec
  for (const [route, body] of Object.entries(streamedBodies)) {
    const operation = (paths as Record<string, Record<string, Record<string, unknown>> | undefined>)[route]?.["post"]
    if (operation === undefined) continue
    operation["requestBody"] = {
      required: true,
      description: body.description,
      content: { [body.contentType]: { schema: body.schema } }
    }
  }
  return spec
}


/** Every operation of the document with its method and path as the route table writes them. */
const operations = (spec: Json): Array<{ readonly key: string; readonly path: string; readonly operation: Json }> => {
  const paths = spec["paths"]
  if (!isObject(paths)) return []
  const out: Array<{ key: string; path: string; operation: Json }> = []
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue
    for (const [method, operation] of Object.entries(item)) {
      if (!isObject(operation)) continue
      out.push({ key: policyKey(method.toUpperCase(), path.replace(/\{([^}]+)\}/g, ":$1")), path, operation })
    }
  }
  return out
}

/**
 * The bearer scheme, required by every operation whose policy is not open (HttpApi would say
 * `security: []`, "no credential", everywhere, and generated clients would never send one).
 */
const withSecurity = (spec: Json): Json => {
  const components = isObject(spec["components"]) ? spec["components"] : {}
  components["securitySchemes"] = {
    bearer: {
      type: "http",
      scheme: "bearer",
      description: "an API key (portico_key_…) or an access token (a JWT from /v1/auth/token or wallet sign-in)"
    },
    coordinationMac: {
      type: "apiKey",
      in: "header",
      name: "X-Portico-Coordination-Mac",
      description: "node to node only: a MAC keyed by the cluster's shared secret, with X-Portico-Coordination-Time"
    }
  }
  spec["components"] = components
  delete spec["security"]
  for (const { key, operation } of operations(spec)) {
    const policy = routePolicies[key]
    if (policy?.kind === "internal") {
      // generators that honour x-internal leave these out of client code: no client can call them
      operation["x-internal"] = true
      operation["security"] = [{ coordinationMac: [] }]
    } else {
      operation["security"] = policy === undefined || policy.kind === "open" ? [] : [{ bearer: [] }]
    }
  }
  return spec
}

/**
 * Effect writes `$id: "/schemas/unknown"` (and the like) into every schema of an unknown value,
 * so one document holds the same `$id` many times, which JSON Schema validators refuse.
 */
const withoutSchemaIds = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(withoutSchemaIds)
  if (!isObject(node)) return node
  const out: Json = {}
  for (const [k, v] of Object.entries(node)) if (k !== "$id") out[k] = withoutSchemaIds(v)
  return out
}

/** A JSON body with no required member may be left out: the gateway reads none as `{}`. */
const withOptionalBodies = (spec: Json): Json => {
  const schemas = isObject(spec["components"]) && isObject(spec["components"]["schemas"]) ? spec["components"]["schemas"] : {}
  const resolve = (schema: unknown): unknown =>
    isObject(schema) && typeof schema["$ref"] === "string" ? schemas[schema["$ref"].replace("#/components/schemas/", "")] : schema
  for (const { operation } of operations(spec)) {
    const body = operation["requestBody"]
    if (!isObject(body) || !isObject(body["content"])) continue
    const json = body["content"]["application/json"]
    if (!isObject(json)) continue
    const schema = resolve(json["schema"])
    if (isObject(schema) && schema["type"] === "object" && (!Array.isArray(schema["required"]) || schema["required"].length === 0)) {
      body["required"] = false
    }
  }
  return spec
}

/** Statuses and headers the handlers write themselves. */
const withHandWrittenAnswers = (spec: Json): Json => {
  const retryAfter = { "Retry-After": { description: "seconds to wait before retrying", schema: { type: "integer", minimum: 1 } } }
  for (const { key, operation } of operations(spec)) {
    const responses = operation["responses"]
    if (!isObject(responses)) continue
    for (const status of ["429", "503"]) {
      const answer = responses[status]
      if (isObject(answer)) answer["headers"] = { ...(isObject(answer["headers"]) ? answer["headers"] : {}), ...retryAfter }
    }
    // a Range request answers 206 with the part and its Content-Range, or 416 (storage get, relayed)
    if ((key === "GET /v1/storage/get/:cid" || key === "GET /v1/storage/relayed/:cid") && isObject(responses["200"])) {
      responses["206"] = {
        ...responses["200"],
        description: "the requested range",
        headers: { "Content-Range": { description: "bytes <first>-<last>/<size>", schema: { type: "string" } } }
      }
      responses["304"] = { description: "not modified: the ETag matched (no body)" }
      // the handler answers this one itself, with the content's size: every client must expect it
      responses["416"] = {
        description: "the range starts past the end of the content (RANGE_NOT_SATISFIABLE)",
        headers: { "Content-Range": { description: "bytes */<size>", schema: { type: "string" } } },
        content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorBody" } } }
      }
    }
    // a browser asking /status for HTML gets a page
    if (key === "GET /status" && isObject(responses["200"]) && isObject(responses["200"]["content"])) {
      responses["200"]["content"]["text/html"] = { schema: { type: "string" } }
    }
  }
  return spec
}

/** Query parameters HttpApi describes by their wire type (a string) that are integers to a client. */
const INTEGER_QUERIES: Readonly<Record<string, ReadonlyArray<string>>> = { "GET /v1/audit": ["since", "limit"] }
const withIntegerQueries = (spec: Json): Json => {
  for (const { key, operation } of operations(spec)) {
    const names = INTEGER_QUERIES[key]
    const parameters = operation["parameters"]
    if (names === undefined || !Array.isArray(parameters)) continue
    for (const p of parameters) {
      if (isObject(p) && typeof p["name"] === "string" && names.includes(p["name"])) {
        p["schema"] = { type: "integer", minimum: p["name"] === "limit" ? 1 : 0, ...(p["name"] === "limit" ? { maximum: 200 } : {}) }
      }
    }
  }
  return spec
}

export const openApiDocument = (spec: Json): Json =>
  withIntegerQueries(
    withHandWrittenAnswers(withOptionalBodies(withSecurity(withStreamedBodies(withoutSchemaIds(withEnvelopeOnly(spec)) as Json))))
  )
