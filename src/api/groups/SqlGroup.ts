/** The cluster SQL store's ORM routes (spec §2.3, §4.3; control plane with grant db:write). */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { SqlRefusals, wiresOf } from "../../domain/Errors.js"
import { Authentication } from "../Gates.js"
import { streamedBody } from "../OpenApiFacts.js"
import { sqlControl, sqlOwner } from "../Policy.js"
import { BodyCap, FastLaneRoute, RoutePolicy } from "../RouteFacts.js"
import { strict, WellFormedText } from "../Wire.js"
import { SqlArg, SqlArgs, SqlText, WriteCounts } from "./DatabaseGroup.js"

const Sql = SqlText
const Name = WellFormedText.pipe(Schema.minLength(1), Schema.maxLength(128), Schema.pattern(/^[^\u0000]*$/))
const Fragment = WellFormedText.pipe(Schema.minLength(1), Schema.maxLength(4096)).annotations({
  description: "an SQL expression; text needed as data goes in args"
})
// A decoded record is a plain object, where "__proto__" would set the prototype instead of a
// member: the criterion would vanish and widen the match. Refused instead (select can name it).
const CriterionColumn = Name.pipe(
  Schema.filter((k) => k !== "__proto__", { message: () => "a criteria column cannot be named __proto__; use select with a where expression" })
)
const Count = Schema.Int.pipe(Schema.between(0, Number.MAX_SAFE_INTEGER))

const Join = strict(
  Schema.Struct({
    kind: Schema.optional(Schema.Literal("INNER", "LEFT", "CROSS")),
    table: Name,
    alias: Schema.optional(Name),
    on: Schema.optional(Fragment)
  })
).annotations({ identifier: "SqlJoin" })
const Where = strict(
  Schema.Struct({ conj: Schema.optional(Schema.Literal("AND", "OR")), expr: Fragment, args: Schema.optional(SqlArgs) })
).annotations({ identifier: "SqlWhere" })
const Shaping = {
  joins: Schema.optional(Schema.Array(Join).pipe(Schema.maxItems(64))),
  order_by: Schema.optional(Schema.Array(Fragment).pipe(Schema.maxItems(64))),
  group_by: Schema.optional(Schema.Array(Fragment).pipe(Schema.maxItems(64))),
  limit: Schema.optional(Count),
  offset: Schema.optional(Count)
}

export const StatementRequest = strict(Schema.Struct({ sql: Sql, args: Schema.optional(SqlArgs) })).annotations({
  identifier: "SqlStatement"
})
export const FindRequest = strict(
  Schema.Struct({
    table: Name,
    criteria: Schema.Record({ key: CriterionColumn, value: SqlArg }),
    options: Schema.optional(strict(Schema.Struct(Shaping)))
  })
).annotations({ identifier: "SqlFind" })
export const SelectRequest = strict(
  Schema.Struct({
    table: Name,
    alias: Schema.optional(Name),
    select: Schema.optional(Schema.Array(Fragment).pipe(Schema.maxItems(256))),
    where: Schema.optional(Schema.Array(Where).pipe(Schema.maxItems(256))),
    one: Schema.optional(Schema.Boolean),
    ...Shaping
  })
).annotations({ identifier: "SqlSelect" })
export const TransactionRequest = strict(
  Schema.Struct({
    ops: Schema.Array(strict(Schema.Struct({ kind: Schema.Literal("exec", "query"), sql: Sql, args: Schema.optional(SqlArgs) }))).pipe(
      Schema.minItems(1)
    ),
    return_results: Schema.optional(Schema.Boolean)
  })
).annotations({ identifier: "SqlTransaction" })
export const CreateTableRequest = strict(Schema.Struct({ schema: Sql })).annotations({ identifier: "SqlCreateTable" })
export const DropTableRequest = strict(Schema.Struct({ table: Name })).annotations({ identifier: "SqlDropTable" })

export const Rows = Schema.Struct({
  columns: Schema.Array(Schema.String),
  rows: Schema.Array(Schema.Array(Schema.Unknown)),
  count: Schema.Int
}).annotations({ identifier: "SqlRows" })
export const Exec = WriteCounts.annotations({ identifier: "SqlExec" })
const Row = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export const Items = Schema.Struct({ items: Schema.Array(Row), count: Schema.Int }).annotations({ identifier: "SqlItems" })
export const OneRow = Schema.NullOr(Row).annotations({ identifier: "SqlRow", description: "the row, or null when none" })
export const TransactionAnswer = Schema.Union(
  Schema.Struct({ results: Schema.Array(Schema.Union(Rows, Exec)), count: Schema.Int }),
  Schema.Struct({ status: Schema.Literal("ok"), count: Schema.Int })
).annotations({ identifier: "SqlTransactionAnswer" })
export const SchemaAnswer = Schema.Struct({
  tables: Schema.Array(Schema.Struct({ name: Schema.String, type: Schema.Literal("table", "view"), sql: Schema.NullOr(Schema.String) })),
  count: Schema.Int
}).annotations({ identifier: "SqlSchema" })
export const ImportAnswer = Schema.Struct({ status: Schema.Literal("ok"), bytes: Schema.Int, tables: Schema.Int }).annotations({
  identifier: "SqlImported"
})

export class SqlGroup extends HttpApiGroup.make("sql")
  .add(HttpApiEndpoint.post("query", "/v1/rqlite/query").setPayload(StatementRequest).addSuccess(Rows).annotate(FastLaneRoute, "sql.query"))
  .add(HttpApiEndpoint.post("exec", "/v1/rqlite/exec").setPayload(StatementRequest).addSuccess(Exec).annotate(FastLaneRoute, "sql.exec"))
  .add(HttpApiEndpoint.post("find", "/v1/rqlite/find").setPayload(FindRequest).addSuccess(Items))
  .add(HttpApiEndpoint.post("findOne", "/v1/rqlite/find-one").setPayload(FindRequest).addSuccess(OneRow))
  .add(HttpApiEndpoint.post("select", "/v1/rqlite/select").setPayload(SelectRequest).addSuccess(Schema.Union(Items, OneRow)))
  .add(HttpApiEndpoint.post("transaction", "/v1/rqlite/transaction").setPayload(TransactionRequest).addSuccess(TransactionAnswer))
  .add(HttpApiEndpoint.get("schema", "/v1/rqlite/schema").addSuccess(SchemaAnswer))
  .add(HttpApiEndpoint.post("createTable", "/v1/rqlite/create-table").setPayload(CreateTableRequest).addSuccess(Exec))
  .add(HttpApiEndpoint.post("dropTable", "/v1/rqlite/drop-table").setPayload(DropTableRequest).addSuccess(Exec))
  .add(
    HttpApiEndpoint.get("export", "/v1/rqlite/export").addSuccess(
      HttpApiSchema.Uint8Array({ contentType: "application/vnd.sqlite3" }).annotations({ description: "the raw SQLite database file" })
    ).annotate(RoutePolicy, sqlOwner)
  )
  .add(
    HttpApiEndpoint.post("import", "/v1/rqlite/import")
      .addSuccess(ImportAnswer)
      .annotate(RoutePolicy, sqlOwner)
      .annotate(BodyCap, "sqlImport")
      // a SQLite file streamed to disk by the handler
      .annotateContext(
        streamedBody({
          contentType: "application/octet-stream",
          schema: { type: "string", format: "binary" },
          description: "a SQLite database file (at most 256 MiB)"
        })
      )
  )
  .addError(wiresOf(SqlRefusals))
  .middleware(Authentication)
  // the control plane holding db:write (spec §4.3); export and import are the owner's
  .annotate(RoutePolicy, sqlControl) {}
