/**
 * The browser origins a namespace admits (docs/api.md, "Browsers and CORS"). A namespace setting
 * beside the rate limit: anyone of the namespace reads it, owners and admins change it.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { Wire } from "../../domain/Errors.js"
import { MAX_CORS_ORIGINS } from "../../domain/Limits.js"
import { Authentication } from "../Gates.js"
import { authenticated, namespaceWrite } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { strict } from "../Wire.js"

/** The origin as a browser writes it in `Origin`: lowercase, no default port (`https://App.example:443` → `https://app.example`). */
const canonicalOrigin = (text: string): string => {
  try {
    return new URL(text).origin
  } catch {
    // a host the URL parser refuses (an xn-- label that is not Punycode): kept as written,
    // lowercase; no browser sends it, so it admits nothing, and refusing it would refuse a value
    // the documented pattern allows
    return text.toLowerCase()
  }
}

const label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
// the last label starts with a letter: one that looks like a number makes the host an IPv4 address
const hostname = `(?:${label}\\.)*[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?`
const octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
const ipv4 = `(?:${octet}\\.){3}${octet}`
const port = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0)"

/**
 * An exact origin: http or https, a host name or an IPv4 address, an optional port; no path, no
 * wildcard. Every string of this form is taken, and stored as a browser sends it (`canonicalOrigin`).
 */
export const CorsOrigin = Schema.transform(
  Schema.String.pipe(
    Schema.maxLength(255),
    Schema.pattern(new RegExp(`^https?://(?:${hostname}|${ipv4})(?::${port})?$`), {
      message: () => "an origin is http(s)://host[:port] with no path and no wildcard, as a browser sends it in Origin (https://app.example, http://localhost:5173)"
    })
  ),
  Schema.String,
  { strict: true, decode: canonicalOrigin, encode: (origin) => origin }
).annotations({ description: "an exact origin: scheme, host and port; stored lowercase without a default port, as browsers send Origin" })

export const CorsView = Schema.Struct({
  namespace: Schema.String,
  origins: Schema.Array(Schema.String).annotations({ description: "origins whose pages may call this namespace's API" })
}).annotations({ identifier: "CorsOrigins" })

export const SetCors = strict(
  Schema.Struct({
    origins: Schema.Array(CorsOrigin).pipe(Schema.maxItems(MAX_CORS_ORIGINS))
  })
).annotations({ identifier: "SetCorsOrigins", description: "replaces the list; [] admits no origin (the default)" })

export class CorsGroup extends HttpApiGroup.make("cors")
  .add(HttpApiEndpoint.get("get", "/v1/namespace/cors").addSuccess(CorsView))
  .add(HttpApiEndpoint.put("set", "/v1/namespace/cors").setPayload(SetCors).addSuccess(CorsView).annotate(RoutePolicy, namespaceWrite))
  .middleware(Authentication)
  .annotate(RoutePolicy, authenticated) {}
