/**
 * The OpenAPI document as clients generate code from it: what HttpApi writes from the endpoints
 * (their schemas, declared errors, the security of their gates, and the per-endpoint overrides of
 * OpenApiFacts.ts), with the document-wide corrections below, each for something HttpApi cannot
 * express. Nothing here is listed by route.
 */
import { PAGE_LIMIT } from "./Paging.js"
import { QUERY_INTEGER_MAX } from "./OpenApiFacts.js"

type Json = Record<string, unknown>

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * HttpApi always declares its own decode error; we answer schema failures with the catalogue's
 * VALIDATION_FAILED instead (see ErrorResponses.ts), so the document must say so too.
 */
const withEnvelopeOnly = (spec: Json): Json => {
  const from = "#/components/schemas/HttpApiDecodeError"
  const to = "#/components/schemas/ValidationFailed"
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

/** Every operation of the document. */
const operations = (spec: Json): Array<Json> => {
  const paths = spec["paths"]
  if (!isObject(paths)) return []
  const out: Array<Json> = []
  for (const item of Object.values(paths)) {
    if (!isObject(item)) continue
    for (const operation of Object.values(item)) if (isObject(operation)) out.push(operation)
  }
  return out
}

const SESSION_NOTE =
  "Needs a signed-in session's access token (wallet sign-in or device login): an API key, or an access token exchanged from one at /v1/auth/token, is refused with 403 SESSION_REQUIRED."
const WALLET_NOTE =
  "Needs a wallet's signed-in session (the platform realm's or a namespace's): an API key, or an access token exchanged from one at /v1/auth/token, is refused with 403 SESSION_REQUIRED."
const OPERATOR_NOTE =
  "Needs the signed-in session of a wallet on the operator list: an API key, or an access token exchanged from one at /v1/auth/token, is refused with 403 NOT_AN_OPERATOR."

/**
 * Operations whose gate takes any bearer credential but whose policy takes only a wallet's
 * session, by operation id (`group.endpoint`): the gate's security says `bearer`, the policy
 * refuses keys. Read from the endpoints' policies where the API is built (Api.ts).
 */
export type WalletOnly = (operationId: string) => "wallet" | "operator" | undefined

/**
 * Each operation's credential as an extension tools can filter on (scripts/schemathesis.sh does):
 * `none`, `any`, `session` or `peer`, read from the security its gate declared. Session routes
 * also say it in words, since generated docs rarely show which of two bearer schemes is meant.
 * HttpApi writes `security: []` at the top as well, which says nothing; it goes.
 */
const withCredentialMarks = (spec: Json, walletOnly: WalletOnly): Json => {
  delete spec["security"]
  for (const operation of operations(spec)) {
    const schemes = Array.isArray(operation["security"]) ? operation["security"].flatMap((s) => (isObject(s) ? Object.keys(s) : [])) : []
    const gate = schemes.includes("coordinationMac") ? "peer" : schemes.includes("session") ? "session" : schemes.includes("bearer") ? "any" : "none"
    const wallet = gate === "any" && typeof operation["operationId"] === "string" ? walletOnly(operation["operationId"]) : undefined
    operation["x-portico-credential"] = wallet === undefined ? gate : "session"
    // the document names the scheme the policy takes, which is narrower than the gate's
    if (wallet !== undefined) operation["security"] = [{ session: [] }]
    const note = gate === "session" ? SESSION_NOTE : wallet === "wallet" ? WALLET_NOTE : wallet === "operator" ? OPERATOR_NOTE : undefined
    if (note !== undefined) {
      const said = typeof operation["description"] === "string" ? operation["description"] + "\n\n" : ""
      operation["description"] = said + note
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
  for (const operation of operations(spec)) {
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

/** `Retry-After` on every 429 and 503: the gate and the services set it, HttpApi cannot declare a header. */
const withRetryAfter = (spec: Json): Json => {
  const retryAfter = { "Retry-After": { description: "seconds to wait before retrying", schema: { type: "integer", minimum: 1 } } }
  for (const operation of operations(spec)) {
    const responses = operation["responses"]
    if (!isObject(responses)) continue
    for (const status of ["429", "503"]) {
      const answer = responses[status]
      if (isObject(answer)) answer["headers"] = { ...(isObject(answer["headers"]) ? answer["headers"] : {}), ...retryAfter }
    }
  }
  return spec
}

const QUERY_INTEGER_PATTERNS: ReadonlySet<string> = new Set(["^[0-9]{1,15}$", "^-?[0-9]{1,15}$"])

/**
 * Query parameters that are integers to a client, typed, bounded and described as integers:
 * HttpApi describes a query parameter by its wire type (a string of digits). A page `limit`
 * (Paging.ts) is bounded by the page size; any other is a non-negative integer. Parameters with
 * bounds of their own say them on their endpoint (OpenApiFacts.ts `integerQueries`).
 */
const withIntegerQueries = (spec: Json): Json => {
  for (const operation of operations(spec)) {
    const parameters = operation["parameters"]
    if (!Array.isArray(parameters)) continue
    for (const p of parameters) {
      if (!isObject(p) || p["in"] !== "query" || typeof p["name"] !== "string" || !isObject(p["schema"])) continue
      const wire = p["schema"]
      if (!(typeof wire["pattern"] === "string" && QUERY_INTEGER_PATTERNS.has(wire["pattern"]))) continue
      // a description HttpApi wrote from the wire pattern says "a string matching …": not what a client sends
      const own = typeof p["description"] === "string" && !p["description"].startsWith("a string") ? p["description"] : undefined
      if (p["name"] === "limit") {
        p["schema"] = { type: "integer", minimum: 1, maximum: PAGE_LIMIT.max }
        p["description"] = own ?? `items per page: an integer from 1 to ${PAGE_LIMIT.max}`
      } else {
        p["schema"] = { type: "integer", minimum: 0, maximum: QUERY_INTEGER_MAX }
        p["description"] = own ?? "a non-negative integer (decimal digits)"
      }
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

export const openApiDocument = (spec: Json, walletOnly: WalletOnly): Json =>
  withIntegerQueries(withRetryAfter(withOptionalBodies(withBodyRules(withCredentialMarks(withoutSchemaIds(withEnvelopeOnly(spec)) as Json, walletOnly)))))
