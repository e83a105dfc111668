import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { fromRefusal } from "../../domain/Errors.js"
import { ClusterSql } from "../../layers/sql/ClusterSql.js"
import { PorticoApi } from "../Api.js"
import { rawJson } from "./RawJson.js"
import { CurrentPrincipal } from "../../domain/Principal.js"

export const SqlHandlers = HttpApiBuilder.group(PorticoApi, "sql", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* ClusterSql
    /** Runs a service call for the caller and answers its JSON text. */
    const answer = <E>(run: (caller: Effect.Effect.Success<typeof CurrentPrincipal>) => Effect.Effect<string, E>) =>
      Effect.flatMap(CurrentPrincipal, (caller) => Effect.map(run(caller), rawJson))
    return handlers
      .handle("query", ({ payload }) => answer((c) => Effect.mapError(sql.query(c, payload.sql, payload.args ?? []), fromRefusal)))
      .handle("exec", ({ payload }) => answer((c) => Effect.mapError(sql.exec(c, payload.sql, payload.args ?? []), fromRefusal)))
      .handle("find", ({ payload }) => answer((c) => Effect.mapError(sql.find(c, payload, false), fromRefusal)))
      .handle("findOne", ({ payload }) => answer((c) => Effect.mapError(sql.find(c, payload, true), fromRefusal)))
      .handle("select", ({ payload }) => answer((c) => Effect.mapError(sql.select(c, payload, payload.one === true), fromRefusal)))
      .handle("transaction", ({ payload }) =>
        answer((c) =>
          Effect.mapError(
            sql.transaction(
              c,
              payload.ops.map((op) => ({ kind: op.kind, sql: op.sql, args: op.args ?? [] })),
              payload.return_results === true
            ),
            fromRefusal
          )
        )
      )
      .handle("schema", () =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const tables = yield* Effect.mapError(sql.schema(caller), fromRefusal)
          return {
            tables: tables.map((t) => ({ name: t.name, type: t.type === "view" ? ("view" as const) : ("table" as const), sql: t.sql })),
            count: tables.length
          }
        })
      )
      .handle("createTable", ({ payload }) => answer((c) => Effect.mapError(sql.createTable(c, payload.schema), fromRefusal)))
      .handle("dropTable", ({ payload }) => answer((c) => Effect.mapError(sql.dropTable(c, payload.table), fromRefusal)))
      .handle("export", () =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          // the snapshot file lives until the request's scope closes, after the body has been
          // written; the transfer slot is given back as the body's last byte is read
          const exported = yield* Effect.mapError(sql.exportDb(caller), fromRefusal)
          return HttpServerResponse.stream(
            exported.body,
            {
              contentType: "application/vnd.sqlite3",
              contentLength: exported.size,
              headers: {
                "content-disposition": `attachment; filename="${caller.namespace}.sqlite"`,
                "cache-control": "no-store"
              }
            }
          )
        })
      )
      .handle("import", () =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const request = yield* HttpServerRequest.HttpServerRequest
          const result = yield* Effect.mapError(sql.importDb(caller, request.stream), fromRefusal)
          return { status: "ok" as const, bytes: result.bytes, tables: result.tables }
        })
      )
  })
)
