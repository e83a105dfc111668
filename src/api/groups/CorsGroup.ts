/**
 * The browser origins a namespace admits (docs/api.md, "Browsers and CORS"). A namespace setting
 * beside the rate limit: anyone of the namespace reads it, owners and admins change it.
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Wire } from "../../domain/Errors.js"
import { MAX_CORS_ORIGINS } from "../../layers/namespaces/CorsOrigins.js"
import { strict } from "../Wire.js"

/** Whether `text` is an origin exactly as a browser sends it in `Origin` (so it can match one). */
const isSerializedOrigin = (text: string): boolean => {
  try {
    const url = new URL(text)
    return (url.protocol === "https:" || url.protocol === "http:") && url.origin === text
  } catch {
    return false
  }
}

export const CorsOrigin = Schema.String.pipe(
  Schema.pattern(/^https?:\/\/(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:[0-9]{1,5})?$/, {
    message: () => "an origin is scheme://host[:port] in lowercase, with no path, as a browser sends it in Origin"
  }),
  Schema.maxLength(255),
  Schema.filter(isSerializedOrigin, {
    message: () => "an origin as a browser sends it: http or https, no default port, no trailing dot or slash (https://app.example, http://localhost:5173)"
  })
).annotations({ description: "an exact origin: scheme, host and port as the browser sends Origin; no wildcard" })

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
  .add(HttpApiEndpoint.put("set", "/v1/namespace/cors").setPayload(SetCors).addSuccess(CorsView))
  .addError(Wire.BadRequest)
  .addError(Wire.Forbidden) {}
