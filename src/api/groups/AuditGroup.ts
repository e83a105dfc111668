/** The namespace audit trail (spec §4.9, §8: default 50, at most 200). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { QueryInteger, strict, UnixSeconds } from "../Wire.js"

export const AuditQuery = Schema.Struct({
  action: Schema.optional(Schema.String.pipe(Schema.maxLength(64))),
  principal: Schema.optional(Schema.String.pipe(Schema.maxLength(128))),
  since: Schema.optional(QueryInteger().annotations({ description: "Unix seconds" })),
  limit: Schema.optional(QueryInteger().pipe(Schema.between(1, 200)))
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
  entries: Schema.Array(AuditEntryView),
  count: Schema.Int
}).annotations({ identifier: "AuditList" })

export class AuditGroup extends HttpApiGroup.make("audit").add(
  HttpApiEndpoint.get("list", "/v1/audit").setUrlParams(strict(AuditQuery)).addSuccess(AuditList)
) {}
