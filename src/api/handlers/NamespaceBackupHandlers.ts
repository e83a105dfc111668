import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import { fromRefusal } from "../../domain/Errors.js"
import { CurrentPrincipal } from "../../domain/Principal.js"
import { NamespaceBackups } from "../../layers/namespaces/backup/NamespaceBackups.js"
import { PorticoApi } from "../Api.js"

export const NamespaceBackupHandlers = HttpApiBuilder.group(PorticoApi, "namespaceBackup", (handlers) =>
  Effect.gen(function* () {
    const backups = yield* NamespaceBackups
    const key = Buffer.from(backups.restoreKey)
    return handlers
      .handle("backup", ({ payload }) =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          // the staged files live until the request's scope closes, after the body has been written
          const sealed = yield* Effect.mapError(backups.backup(caller, payload.public_key), fromRefusal)
          return HttpServerResponse.stream(sealed.body, {
            contentType: "application/octet-stream",
            contentLength: sealed.size,
            headers: { "content-disposition": `attachment; filename="${caller.namespace}.backup"`, "cache-control": "no-store" }
          })
        })
      )
      .handle("restoreKey", () =>
        Effect.succeed({
          algorithm: "X25519" as const,
          public_key: key.toString("base64"),
          public_key_hex: key.toString("hex"),
          format: "portico-namespace-backup/1" as const
        })
      )
      .handle("restore", () =>
        Effect.gen(function* () {
          const caller = yield* CurrentPrincipal
          const request = yield* HttpServerRequest.HttpServerRequest
          const r = yield* Effect.mapError(backups.restore(caller, request.stream), fromRefusal)
          return { status: "ok" as const, databases: r.databases, members: r.members, pins: r.pins, cluster_tables: r.clusterTables }
        })
      )
  })
)
