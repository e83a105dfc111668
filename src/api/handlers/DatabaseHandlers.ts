import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { fromRefusal } from "../../domain/Errors.js"
import { type Backup, DatabaseBackups } from "../../layers/sql/DatabaseBackups.js"
import { LocalDatabases } from "../../layers/sql/LocalDatabases.js"
import { PorticoApi } from "../Api.js"
import { nextCursorOf, pageRequest } from "../Paging.js"
import { toUnixSeconds } from "../Wire.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
// answers are built as JSON text by the engine so 64-bit integers keep every digit
import { rawJson } from "./RawJson.js"

export const bind = (params: ReadonlyArray<string | number | bigint | boolean | null>) =>
  params.map((p) => (typeof p === "boolean" ? (p ? 1 : 0) : p))

export const backupWire = (b: Backup) => ({
  id: b.id,
  database_name: b.databaseName,
  backup_cid: b.backupCid,
  size_bytes: b.sizeBytes,
  created_at: toUnixSeconds(b.createdAt)
})

export const DatabaseHandlers = HttpApiBuilder.group(PorticoApi, "databases", (handlers) =>
  Effect.gen(function* () {
    const databases = yield* LocalDatabases
    const backups = yield* DatabaseBackups
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const record = yield* Effect.mapError(databases.create(caller, payload.database_name), fromRefusal)
          return { name: record.name, home_node: record.homeNode, created_at: toUnixSeconds(record.createdAt) }
        })
      )
      .handle("query", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const json = yield* Effect.mapError(
            databases.query(caller, payload.database_name, payload.query, bind(payload.params ?? [])),
            fromRefusal
          )
          return rawJson(json)
        })
      )
      .handle("list", ({ urlParams }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const page = yield* Effect.mapError(databases.list(caller, pageRequest(urlParams)), fromRefusal)
          return {
            next_cursor: nextCursorOf(page),
            databases: page.items.map((d) => ({
              name: d.name,
              size_bytes: d.sizeBytes,
              backup_cid: d.backupCid,
              created_at: toUnixSeconds(d.createdAt)
            })),
            count: page.items.length
          }
        })
      )
      .handle("delete", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          yield* Effect.mapError(databases.delete(caller, payload.database_name), fromRefusal)
          return { name: payload.database_name, deleted: true as const }
        })
      )
      .handle("backup", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          return backupWire(yield* Effect.mapError(backups.backup(caller, payload.database_name), fromRefusal))
        })
      )
      .handle("backups", ({ urlParams }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const page = yield* Effect.mapError(backups.list(caller, urlParams.database_name, pageRequest(urlParams)), fromRefusal)
          return {
            database_name: urlParams.database_name,
            backups: page.items.map(backupWire),
            count: page.items.length,
            next_cursor: nextCursorOf(page)
          }
        })
      )
  })
)
