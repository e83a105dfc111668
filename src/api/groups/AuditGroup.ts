/** The namespace audit trail (spec §4.9, §8: default 50, at most 200). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Authentication } from "../Gates.js"
import { integerQueries, QUERY_INTEGER_MAX } from "../OpenApiFacts.js"
import { IdKey, NextCursor, pageQueryFields } from "../Paging.js"
import { controlPlane } from "../Policy.js"
import { RoutePolicy } from "../RouteFacts.js"
import { QueryInteger, strict, UnixSeconds } from "../Wire.js"

export const AUDIT_LIMIT = { default: 50, max: 200 } as const

export const AuditQuery = Schema.Struct({
  action: Schema.optional(Schema.String.pipe(Schema.maxLength(64))),
  principal: Schema.optional(Schema.String.pipe(Schema.maxLength(128))),
  since: Schema.optional(QueryInteger().annotations({ description: "Unix seconds" })),
  // the spec's bounds (§8): default 50, at most 200
  ...pageQueryFields(IdKey, AUDIT_LIMIT.max, AUDIT_LIMIT.default)
})

export const AuditEntryView = Schema.Struct({
  id: Schema.Int,
  at: UnixSeconds,
  action: Schema.String,
  principal: Schema.String,
  target: Schema.String,
  detail: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}).annotations({ identifier: "AuditEntry" })

export const AuditList = Schema.Struct({
  namespace: Schema.String,
  entries: Schema.Array(AuditEntryView).annotations({ description: "one page, newest first" }),
  count: Schema.Int.annotations({ description: "entries in this page" }),
  next_cursor: NextCursor
}).annotations({ identifier: "AuditList" })

export class AuditGroup extends HttpApiGroup.make("audit")
  .add(
    HttpApiEndpoint.get("list", "/v1/audit")
      .setUrlParams(strict(AuditQuery))
      .addSuccess(AuditList)
      .annotate(
        OpenApi.Transform,
        integerQueries({
          since: { minimum: 0, maximum: QUERY_INTEGER_MAX, description: "only entries at or after this time: Unix seconds, an integer (decimal digits)" },
          limit: { minimum: 1, maximum: AUDIT_LIMIT.max, description: `entries per page: an integer from 1 to ${AUDIT_LIMIT.max} (decimal digits); default ${AUDIT_LIMIT.default}` }
        })
      )
  )
  .middleware(Authentication)
  .annotate(RoutePolicy, controlPlane) {}
