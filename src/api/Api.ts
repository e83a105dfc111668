/** The Portico HTTP API: every route group, its errors, and the gate in front of them. */
import { HttpApi, OpenApi } from "@effect/platform"
import { Wire } from "../domain/Errors.js"
import { Authentication } from "./Authentication.js"
import { AuditGroup } from "./groups/AuditGroup.js"
import { AuthGroup } from "./groups/AuthGroup.js"
import { CacheGroup } from "./groups/CacheGroup.js"
import { DeviceGroup } from "./groups/DeviceGroup.js"
import { NamespaceGroup } from "./groups/NamespaceGroup.js"
import { DatabaseGroup } from "./groups/DatabaseGroup.js"
import { SqlGroup } from "./groups/SqlGroup.js"
import { InternalGroup } from "./groups/InternalGroup.js"
import { StorageGroup } from "./groups/StorageGroup.js"
import { SystemGroup } from "./groups/SystemGroup.js"

/**
 * HttpApi always declares its own decode error; we answer schema failures with the common
 * envelope instead (see ErrorResponses.ts), so the document must say so too.
 */
function withEnvelopeOnly(spec: Record<string, unknown>): Record<string, unknown> {
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
  return withStreamedBodies(next)
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
        name: { type: "string", maxLength: 255, description: "a name for the pin; defaults to the file's name" }
      }
    },
    description: "multipart form with the file (upload cap and namespace quota: 413 past either)"
  }
}

function withStreamedBodies(spec: Record<string, unknown>): Record<string, unknown> {
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

export class PorticoApi extends HttpApi.make("portico")
  // The gate is a group middleware, not an API one: only route-level middleware sees the
  // matched route, which is how it finds the route's policy.
  .add(SystemGroup.middleware(Authentication))
  .add(AuthGroup.middleware(Authentication))
  .add(NamespaceGroup.middleware(Authentication))
  .add(AuditGroup.middleware(Authentication))
  .add(DeviceGroup.middleware(Authentication))
  .add(CacheGroup.middleware(Authentication))
  .add(DatabaseGroup.middleware(Authentication))
  .add(SqlGroup.middleware(Authentication))
  .add(StorageGroup.middleware(Authentication))
  .add(InternalGroup.middleware(Authentication))
  .addError(Wire.BadRequest)
  .addError(Wire.PayloadTooLarge)
  .addError(Wire.Internal)
  .addError(Wire.Unavailable)
  .annotate(OpenApi.Title, "Portico")
  .annotate(OpenApi.Description, "Multi-tenant application platform gateway. Every error body is {error, code, hint?}.")
  .annotate(OpenApi.Version, "v1")
  .annotate(OpenApi.Transform, withEnvelopeOnly) {}
