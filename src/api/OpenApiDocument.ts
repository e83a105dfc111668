/**
 * The OpenAPI document as clients generate code from it: what HttpApi writes, corrected where
 * it cannot know better. The route policy table (RoutePolicy.ts) decides which operations
 * declare the bearer credential; internal node-to-node routes stay (they are routes of the
 * spec) but are marked `x-internal` with the peer MAC they take; headers and statuses the
 * handlers set by hand are declared.
 */
import { PAGE_LIMIT } from "./Paging.js"
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
        name: { type: "string", maxLength: 255, pattern: "^[^\\x00-\\x1f\\x7f]*$", description: "a name for the pin (no control characters); defaults to the file's name" }
      },
      // any other part is refused (400): the form holds these two only
      additionalProperties: false
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
 * Routes that refuse an API key, and an access token exchanged from one (/v1/auth/token), with
 * 403 SESSION_REQUIRED: the route policy `session` (storage) and the handlers that act for the
 * signed-in session itself (its keys, its sessions, its devices). A test checks each of them
 * answers an API key so.
 */
export const SESSION_ONLY: ReadonlyArray<string> = [
  ...Object.entries(routePolicies)
    .filter(([, policy]) => policy.kind === "session")
    .map(([key]) => key),
  "POST /v1/auth/api-key",
  "POST /v1/auth/logout",
  "GET /v1/auth/sessions",
  "DELETE /v1/auth/sessions/:id",
  "POST /v1/auth/devices/approve",
  "GET /v1/auth/devices",
  "DELETE /v1/auth/devices/:id",
  // a device-bound session only: anything else is 403 FETCH_CAP_DEVICE_REQUIRED (spec §4.4)
  "POST /v1/storage/fetch-caps"
]

const SESSION_NOTE =
  "Needs a signed-in session's access token (wallet sign-in or device login): an API key, or an access token exchanged from one at /v1/auth/token, is refused with 403 SESSION_REQUIRED."

/**
 * The bearer scheme, required by every operation whose policy is not open (HttpApi would say
 * `security: []`, "no credential", everywhere, and generated clients would never send one).
 * Session-only routes name the `session` scheme instead, and say so in their description. Each
 * operation also carries `x-portico-credential` (`none`, `any`, `session` or `peer`), which tools
 * can filter on (scripts/schemathesis.sh does).
 */
const withSecurity = (spec: Json): Json => {
  const components = isObject(spec["components"]) ? spec["components"] : {}
  components["securitySchemes"] = {
    bearer: {
      type: "http",
      scheme: "bearer",
      description: "an API key (portico_key_…) or an access token (a JWT from /v1/auth/token or wallet sign-in)"
    },
    session: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "JWT",
      description:
        "a signed-in session's access token (from /v1/auth/verify, /v1/auth/device/token or /v1/auth/refresh); API keys and tokens exchanged from them are refused"
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
      operation["x-portico-credential"] = "peer"
    } else if (SESSION_ONLY.includes(key)) {
      operation["security"] = [{ session: [] }]
      operation["x-portico-credential"] = "session"
      const said = typeof operation["description"] === "string" ? operation["description"] + "\n\n" : ""
      operation["description"] = said + SESSION_NOTE
    } else {
      const open = policy === undefined || policy.kind === "open"
      operation["security"] = open ? [] : [{ bearer: [] }]
      operation["x-portico-credential"] = open ? "none" : "any"
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
    const ruled = isObject(schema) && (Array.isArray(schema["oneOf"]) || Array.isArray(schema["anyOf"]))
    if (isObject(schema) && schema["type"] === "object" && !ruled && (!Array.isArray(schema["required"]) || schema["required"].length === 0)) {
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

/** The largest value a QueryInteger takes: 15 decimal digits (Wire.ts). */
const QUERY_INTEGER_MAX = 999_999_999_999_999
const QUERY_INTEGER_PATTERNS: ReadonlySet<string> = new Set(["^[0-9]{1,15}$", "^-?[0-9]{1,15}$"])

interface IntegerQuery {
  readonly minimum: number
  readonly maximum: number
  readonly description: string
}

/**
 * Integer query parameters by route: HttpApi describes them by their wire type (a string of
 * digits) and loses the bounds, which sit on the decoded integer. Every other integer query
 * parameter is a page `limit` (Paging.ts) or an unbounded non-negative integer.
 */
const INTEGER_QUERIES: Readonly<Record<string, Readonly<Record<string, IntegerQuery>>>> = {
  "GET /v1/audit": {
    since: { minimum: 0, maximum: QUERY_INTEGER_MAX, description: "only entries at or after this time: Unix seconds, an integer (decimal digits)" },
    limit: { minimum: 1, maximum: 200, description: "entries per page: an integer from 1 to 200 (decimal digits); default 50" }
  }
}

const integerQuery = (key: string, name: string, described: unknown): IntegerQuery => {
  const listed = INTEGER_QUERIES[key]?.[name]
  if (listed !== undefined) return listed
  // a description HttpApi wrote from the wire pattern says "a string matching …": not what a client sends
  const own = typeof described === "string" && !described.startsWith("a string") ? described : undefined
  if (name === "limit") {
    return { minimum: 1, maximum: PAGE_LIMIT.max, description: own ?? `items per page: an integer from 1 to ${PAGE_LIMIT.max}` }
  }
  return { minimum: 0, maximum: QUERY_INTEGER_MAX, description: own ?? "a non-negative integer (decimal digits)" }
}

/** Query parameters that are integers to a client: typed, bounded and described as integers. */
const withIntegerQueries = (spec: Json): Json => {
  for (const { key, operation } of operations(spec)) {
    const parameters = operation["parameters"]
    if (!Array.isArray(parameters)) continue
    for (const p of parameters) {
      if (!isObject(p) || p["in"] !== "query" || typeof p["name"] !== "string" || !isObject(p["schema"])) continue
      const wire = p["schema"]
      if (!(typeof wire["pattern"] === "string" && QUERY_INTEGER_PATTERNS.has(wire["pattern"])) && INTEGER_QUERIES[key]?.[p["name"]] === undefined) {
        continue
      }
      const { description, maximum, minimum } = integerQuery(key, p["name"], p["description"])
      p["schema"] = { type: "integer", minimum, maximum }
      p["description"] = description
    }
  }
  return spec
}

/**
 * Rules over a whole body that a field's schema cannot carry. The handlers enforce them; the
 * document says them so a generated client knows.
 */
const withBodyRules = (spec: Json): Json => {
  const schemas = isObject(spec["components"]) && isObject(spec["components"]["schemas"]) ? spec["components"]["schemas"] : {}
  const mintKey = schemas["MintKey"]
  if (isObject(mintKey)) {
    // exactly one of the two: both, or neither, is 400 VALIDATION_FAILED
    mintKey["oneOf"] = [
      { required: ["scopes"], not: { required: ["profile"] } },
      { required: ["profile"], not: { required: ["scopes"] } }
    ]
    mintKey["description"] = "Exactly one of scopes or profile: a key is minted from an explicit scope list or from a profile"
  }
  const transfer = schemas["TransferOwnership"]
  if (isObject(transfer) && isObject(transfer["properties"]) && isObject(transfer["properties"]["wallet"])) {
    // nobody holds the zero address's key: an offer to it could never be accepted (400)
    transfer["properties"]["wallet"] = { allOf: [transfer["properties"]["wallet"], { not: { pattern: "^0x0{40}$" } }] }
  }
  const rateLimit = schemas["SetRateLimit"]
  if (isObject(rateLimit)) {
    // null restores the default for both, so a burst with it is 400 VALIDATION_FAILED
    rateLimit["anyOf"] = [
      { properties: { requests_per_second: { type: "integer" } } },
      { properties: { requests_per_second: { type: "null" } }, not: { required: ["burst"] } }
    ]
  }
  return spec
}

/** The per-namespace rate-limit ceiling of a gateway (its operator's default). */
export interface RateLimitCeiling {
  readonly rps: number
  readonly burst: number
}

/**
 * A namespace may lower its own limit, never raise it past the gateway's per-namespace default
 * (NamespaceHandlers.ts): the document a gateway serves carries that gateway's ceiling as the
 * maximum, since it is set per deployment.
 */
export const withRateLimitCeiling = (spec: Json, ceiling: RateLimitCeiling): Json => {
  const schemas = isObject(spec["components"]) && isObject(spec["components"]["schemas"]) ? spec["components"]["schemas"] : {}
  const body = schemas["SetRateLimit"]
  if (!isObject(body) || !isObject(body["properties"])) return spec
  const bound = (node: unknown, maximum: number): void => {
    if (!isObject(node)) return
    if (node["type"] === "integer" || (typeof node["$ref"] === "string" && node["$ref"].endsWith("/Int"))) {
      node["maximum"] = maximum
      node["description"] = `an integer from 1 to ${maximum}: this gateway's per-namespace default is the ceiling`
    }
    for (const branch of ["anyOf", "oneOf"]) {
      const list = node[branch]
      if (Array.isArray(list)) for (const item of list) bound(item, maximum)
    }
  }
  bound(body["properties"]["requests_per_second"], ceiling.rps)
  bound(body["properties"]["burst"], ceiling.burst)
  return spec
}

export const openApiDocument = (spec: Json): Json =>
  withIntegerQueries(
    withHandWrittenAnswers(
      withOptionalBodies(withBodyRules(withSecurity(withStreamedBodies(withoutSchemaIds(withEnvelopeOnly(spec)) as Json))))
    )
  )
