/** Node-local databases (spec §4.2; control plane: admin key or wallet with role developer or above). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { Schema } from "effect"
import { SqlRefusals, wiresOf } from "../../domain/Errors.js"
import { NameKeyedPage, NextCursor, pageQueryFields, TimeAndText } from "../Paging.js"
import { Authentication } from "../Gates.js"
import { controlPlane } from "../Policy.js"
import { FastLaneRoute, RoutePolicy } from "../RouteFacts.js"
import { strict, UnixSeconds, WellFormedText } from "../Wire.js"

export const DatabaseName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, {
    message: () => "1-64 letters, digits, underscores or hyphens"
  })
).annotations({ description: "1-64 of A-Z, a-z, 0-9, _ and -" })

/** An integer literal past 2^53, kept whole by the body parser (ExactJson.ts); on the wire a JSON integer. */
const WideInteger = Schema.BigIntFromSelf.pipe(
  // both engines bind 64-bit integers; past that rqlite would round to a double without a word
  Schema.filter((n) => n >= -(2n ** 63n) && n < 2n ** 63n, { message: () => "an integer argument must fit in 64 bits" })
).annotations({ jsonSchema: { type: "integer" }, description: "an integer past 2^53, bound with all 64 bits" })

/**
 * SQL text and text arguments: SQLite keeps text as UTF-8, where a lone surrogate has no form;
 * it would be stored as U+FFFD, so two different values would read back as one.
 */
export const SqlText = WellFormedText.annotations({ description: "one SQL statement with ? placeholders" })

/** A bound parameter: JSON scalars only (booleans bind as 1 and 0, whole numbers as integers). */
export const SqlArg = Schema.Union(WellFormedText, Schema.Number, WideInteger, Schema.Boolean, Schema.Null).annotations({
  identifier: "SqlArg"
})
export const SqlArgs = Schema.Array(SqlArg).pipe(Schema.maxItems(32_766))

export const NameRequest = strict(Schema.Struct({ database_name: DatabaseName })).annotations({ identifier: "DatabaseNameRequest" })
export const QueryRequest = strict(
  Schema.Struct({
    database_name: DatabaseName,
    query: SqlText,
    params: Schema.optional(SqlArgs)
  })
).annotations({ identifier: "DatabaseQuery" })

export const DatabaseCreated = Schema.Struct({
  name: Schema.String,
  home_node: Schema.String,
  created_at: UnixSeconds
}).annotations({ identifier: "DatabaseCreated" })

/**
 * A row id in an answer: SQLite's 64-bit INTEGER, written digit for digit (SqlAnswers.ts, docs/databases.md
 * "Values"). Not `Schema.Int`, which stops at 2^53: a row id such as 9223372036854775806 is a
 * correct answer, which a client parsing into doubles reads rounded, still a whole number.
 */
export const RowId = Schema.Number.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= -(2 ** 63) && n <= 2 ** 63, {
    message: () => "a 64-bit integer",
    // the filter's jsonSchema replaces the description, so it says it
    jsonSchema: {
      type: "integer",
      format: "int64",
      description: "a 64-bit integer, written digit for digit: past 2^53 read it with a big-number-aware JSON parser"
    }
  })
)

/** A write's counts (spec §2.2, §2.3); both database families answer it. */
export const WriteCounts = Schema.Struct({ rows_affected: Schema.Int, last_insert_id: RowId })

/** A read answers rows; a write answers its counts (spec §2.2). */
export const QueryAnswer = Schema.Union(
  Schema.Struct({ columns: Schema.Array(Schema.String), rows: Schema.Array(Schema.Array(Schema.Unknown)) }),
  WriteCounts
).annotations({ identifier: "DatabaseQueryAnswer" })

export const DatabaseList = Schema.Struct({
  databases: Schema.Array(
    Schema.Struct({
      name: Schema.String,
      size_bytes: Schema.Int,
      backup_cid: Schema.NullOr(Schema.String),
      created_at: UnixSeconds
    })
  ),
  count: Schema.Int.annotations({ description: "databases in this page" }),
  next_cursor: NextCursor
}).annotations({ identifier: "DatabaseList" })

export const DatabaseDeleted = Schema.Struct({ name: Schema.String, deleted: Schema.Literal(true) }).annotations({
  identifier: "DatabaseDeleted"
})

export const BackupRecord = Schema.Struct({
  id: Schema.String,
  database_name: Schema.String,
  backup_cid: Schema.String.annotations({ description: "the backup's CID in content storage (GET /v1/storage/get/{cid})" }),
  size_bytes: Schema.Int,
  created_at: UnixSeconds
}).annotations({ identifier: "DatabaseBackup" })

export const BackupList = Schema.Struct({
  database_name: Schema.String,
  backups: Schema.Array(BackupRecord).annotations({ description: "one page, newest first" }),
  count: Schema.Int.annotations({ description: "backups in this page" }),
  next_cursor: NextCursor
}).annotations({ identifier: "DatabaseBackupList" })

export class DatabaseGroup extends HttpApiGroup.make("databases")
  .add(HttpApiEndpoint.post("create", "/v1/db/sqlite/create").setPayload(NameRequest).addSuccess(DatabaseCreated, { status: 201 }))
  .add(HttpApiEndpoint.post("query", "/v1/db/sqlite/query").setPayload(QueryRequest).addSuccess(QueryAnswer).annotate(FastLaneRoute, "db.query"))
  .add(HttpApiEndpoint.get("list", "/v1/db/sqlite/list").setUrlParams(NameKeyedPage).addSuccess(DatabaseList))
  .add(HttpApiEndpoint.post("delete", "/v1/db/sqlite/delete").setPayload(NameRequest).addSuccess(DatabaseDeleted))
  .add(HttpApiEndpoint.post("backup", "/v1/db/sqlite/backup").setPayload(NameRequest).addSuccess(BackupRecord, { status: 201 }))
  .add(
    HttpApiEndpoint.get("backups", "/v1/db/sqlite/backups")
      .setUrlParams(strict(Schema.Struct({ database_name: DatabaseName, ...pageQueryFields(TimeAndText) })))
      .addSuccess(BackupList)
  )
  .addError(wiresOf(SqlRefusals))
  .middleware(Authentication)
  .annotate(RoutePolicy, controlPlane) {}
