/** The Portico HTTP API: every route group, its errors, and the gate in front of them. */
import { HttpApi, OpenApi } from "@effect/platform"
import { Wire } from "../domain/Errors.js"
import { Authentication } from "./Authentication.js"
import { openApiDocument } from "./OpenApiDocument.js"
import { AuditGroup } from "./groups/AuditGroup.js"
import { AuthGroup } from "./groups/AuthGroup.js"
import { CacheGroup } from "./groups/CacheGroup.js"
import { CorsGroup } from "./groups/CorsGroup.js"
import { DeviceGroup } from "./groups/DeviceGroup.js"
import { NamespaceGroup } from "./groups/NamespaceGroup.js"
import { DatabaseGroup } from "./groups/DatabaseGroup.js"
import { SqlGroup } from "./groups/SqlGroup.js"
import { InternalGroup } from "./groups/InternalGroup.js"
import { StorageGroup } from "./groups/StorageGroup.js"
import { SystemGroup } from "./groups/SystemGroup.js"

export class PorticoApi extends HttpApi.make("portico")
  // The gate is a group middleware, not an API one: only route-level middleware sees the
  // matched route, which is how it finds the route's policy.
  .add(SystemGroup.middleware(Authentication))
  .add(AuthGroup.middleware(Authentication))
  .add(NamespaceGroup.middleware(Authentication))
  .add(CorsGroup.middleware(Authentication))
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
  .annotate(OpenApi.Transform, openApiDocument) {}
