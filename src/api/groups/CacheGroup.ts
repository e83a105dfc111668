/** The cache routes (spec §4.1; grant `cache`, narrowable to `cache:key=<map>/*`). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { CacheRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { grant } from "../Policy.js"
import { FastLaneRoute, RoutePolicy } from "../RouteFacts.js"
import { strict, WellFormedText } from "../Wire.js"
import { MGET_MAX_KEYS } from "../../domain/CacheRules.js"

// Names are valid Unicode: on Redis two names with lone surrogates would share one key.
const Text = WellFormedText
const notEmpty = { message: () => "must not be empty" }
/**
 * Spec §8: the map name (its UTF-8 bytes plus 2) and the key together are at most 255 bytes; a
 * longer pair is 413 naming the limit (a get or delete of one is 404). A sum of byte lengths is
 * more than a schema can say, so the descriptions say it.
 */
const PAIR_LIMIT = "the map name's UTF-8 bytes plus 2, and the key's, are at most 255 bytes together (a put past it is 413)"
const Dmap = Text.pipe(Schema.minLength(1, notEmpty)).annotations({ description: "the map's name; " + PAIR_LIMIT })
const Key = Text.pipe(Schema.minLength(1, notEmpty)).annotations({ description: "the key; " + PAIR_LIMIT })
const NotNull = Schema.Unknown.pipe(
  Schema.filter((v) => v !== null && v !== undefined, {
    message: () => "value is required and cannot be null",
    // a get answers null for a miss, so a stored null could not be told from one
    jsonSchema: { not: { type: "null" } }
  })
).annotations({ description: "any JSON value except null; returned with its exact JSON text" })

/**
 * A Go-style duration, parsed by the cache service (CacheRules.ts parseTtl). The pattern is the
 * grammar; the 10-year ceiling is a sum over the parts, which a pattern cannot bound, so the
 * format names the rule and the description says it.
 */
const Ttl = Schema.String.pipe(Schema.maxLength(64)).annotations({
  jsonSchema: {
    type: "string",
    maxLength: 64,
    pattern: "^(?:0|(?:[0-9]+(?:\\.[0-9]+)?(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)$",
    format: "go-duration",
    description: "how long the entry lives: a duration such as 30s, 5m, 1h30m or 1.5h, at most 10 years of 365.25 days (87660h); 0 or 0s for no expiry"
  }
})

export const PutRequest = strict(
  Schema.Struct({ dmap: Dmap, key: Key, value: NotNull, ttl: Schema.optional(Ttl) })
).annotations({ identifier: "CachePut" })
export const KeyRequest = strict(Schema.Struct({ dmap: Dmap, key: Text })).annotations({ identifier: "CacheKey" })
export const MgetRequest = strict(
  Schema.Struct({ dmap: Dmap, keys: Schema.Array(Text).pipe(Schema.maxItems(MGET_MAX_KEYS, { message: () => `at most ${MGET_MAX_KEYS} keys per mget` })) })
).annotations({
  identifier: "CacheMget"
})
export const ScanRequest = strict(
  Schema.Struct({ dmap: Dmap, match: Schema.optional(Schema.String.pipe(Schema.maxLength(1024))) })
).annotations({ identifier: "CacheScan", description: "match: an RE2 regular expression applied to the key as written" })

export const Changed = Schema.Struct({ status: Schema.Literal("ok"), key: Schema.String, dmap: Schema.String }).annotations({
  identifier: "CacheChanged"
})
export const GetAnswer = Schema.Struct({ key: Schema.String, value: Schema.Unknown, dmap: Schema.String }).annotations({
  identifier: "CacheValue"
})
export const MgetAnswer = Schema.Struct({
  dmap: Schema.String,
  results: Schema.Array(Schema.Struct({ key: Schema.String, value: Schema.Unknown.annotations({ description: "null for a miss" }) }))
}).annotations({ identifier: "CacheValues" })
export const ScanAnswer = Schema.Struct({ keys: Schema.Array(Schema.String), count: Schema.Int, dmap: Schema.String }).annotations({
  identifier: "CacheKeys"
})
/*
 * Answers are assembled around the stored JSON text rather than parsed and re-encoded, which
 * would round large integers and long decimals. The HttpApi handlers and the fast lane both
 * answer through these.
 */

/** The answer of a put or delete. */
export const changedText = (key: string, dmap: string): string => `{"status":"ok","key":${JSON.stringify(key)},"dmap":${JSON.stringify(dmap)}}`

/** The answer of a get: the value's stored JSON text, as it was put. */
export const valueText = (key: string, json: string, dmap: string): string =>
  `{"key":${JSON.stringify(key)},"value":${json},"dmap":${JSON.stringify(dmap)}}`

/** The answer of an mget: one result per requested key, in request order, null for a miss. */
export const valuesText = (dmap: string, keys: ReadonlyArray<string>, values: ReadonlyArray<string | undefined>): string => {
  const results = keys.map((k, i) => `{"key":${JSON.stringify(k)},"value":${values[i] ?? "null"}}`)
  return `{"dmap":${JSON.stringify(dmap)},"results":[${results.join(",")}]}`
}

export const CacheHealth = Schema.Struct({ status: Schema.Literal("ok"), service: Schema.Literal("cache") })

export class CacheGroup extends HttpApiGroup.make("cache")
  .add(HttpApiEndpoint.post("put", "/v1/cache/put").setPayload(PutRequest).addSuccess(Changed).annotate(FastLaneRoute, "cache.put"))
  .add(HttpApiEndpoint.post("get", "/v1/cache/get").setPayload(KeyRequest).addSuccess(GetAnswer).annotate(FastLaneRoute, "cache.get"))
  .add(HttpApiEndpoint.post("delete", "/v1/cache/delete").setPayload(KeyRequest).addSuccess(Changed).annotate(FastLaneRoute, "cache.delete"))
  .add(HttpApiEndpoint.post("mget", "/v1/cache/mget").setPayload(MgetRequest).addSuccess(MgetAnswer).annotate(FastLaneRoute, "cache.mget"))
  .add(HttpApiEndpoint.post("scan", "/v1/cache/scan").setPayload(ScanRequest).addSuccess(ScanAnswer))
  .add(HttpApiEndpoint.get("health", "/v1/cache/health").addSuccess(CacheHealth))
  .addError(wiresOf(CacheRefusals))
  .middleware(Authentication)
  // the grant may be narrowed to keys (cache:key=<map>/*): the cache service checks the key
  .annotate(RoutePolicy, grant("cache")) {}
