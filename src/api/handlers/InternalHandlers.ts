import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option, Stream } from "effect"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { createReadStream } from "node:fs"
import { CoordinationRefused, fromRefusal, refusal } from "../../domain/Errors.js"
import { canonicalJson, Coordination } from "../../layers/coordination/Coordination.js"
import { DatabaseBackups } from "../../layers/sql/DatabaseBackups.js"
import { FORWARD_PATHS, toPrincipal } from "../../layers/sql/HomeNode.js"
import { LocalDatabases } from "../../layers/sql/LocalDatabases.js"
import { EVICT_PATH } from "../../layers/storage/Evictor.js"
import { Cache } from "../../layers/cache/Cache.js"
import { COPY_PATH, NamespaceBackups } from "../../layers/namespaces/backup/NamespaceBackups.js"
import { CACHE_DROP_PATH } from "../../layers/namespaces/TeardownParts.js"
import { OperatorHealth, SNAPSHOT_PATH } from "../../layers/operators/OperatorHealth.js"
import { Storage } from "../../layers/storage/Storage.js"
import { PorticoApi } from "../Api.js"
import { backupWire, bind } from "./DatabaseHandlers.js"
import { rawJson } from "./RawJson.js"

const unavailable = (error: string) => refusal("UNAVAILABLE", error, "retry shortly", 5)

export const InternalHandlers = HttpApiBuilder.group(PorticoApi, "internal", (handlers) =>
  Effect.gen(function* () {
    const storage = yield* Storage
    const databases = yield* LocalDatabases
    const backups = yield* DatabaseBackups
    const coordination = yield* Coordination
    const cache = yield* Cache
    const health = yield* OperatorHealth
    const namespaceBackups = yield* NamespaceBackups

    /** Another node of this cluster, over the overlay, with a MAC for this node over this body. */
    const fromPeer = (path: string, payload: unknown, acceptV1 = false) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const refused = yield* coordination.verify(
          "POST",
          path,
          canonicalJson(payload),
          request.headers,
          Option.getOrUndefined(request.remoteAddress),
          acceptV1
        )
        if (refused !== undefined) return yield* Effect.fail(new CoordinationRefused({ error: refused }))
      })

    return handlers
      .handle("evict", ({ payload }) =>
        Effect.gen(function* () {
          // eviction is idempotent: v1 still accepted from a node not yet upgraded (spec §9.4)
          yield* fromPeer(EVICT_PATH, payload, true)
          return { evicted: yield* Effect.mapError(storage.evictHere(payload.cid), fromRefusal) }
        })
      )
      .handle("sqliteQuery", ({ payload }) =>
        Effect.gen(function* () {
          yield* fromPeer(FORWARD_PATHS.query, payload)
          const caller = toPrincipal(payload.principal)
          return rawJson(
            yield* Effect.mapError(databases.queryHere(caller, payload.database_name, payload.query, bind(payload.params)), fromRefusal)
          )
        })
      )
      .handle("sqliteDelete", ({ payload }) =>
        Effect.gen(function* () {
          yield* fromPeer(FORWARD_PATHS.delete, payload)
          yield* Effect.mapError(databases.deleteHere(toPrincipal(payload.principal), payload.database_name), fromRefusal)
          return { name: payload.database_name, deleted: true as const }
        })
      )
      .handle("sqliteCopy", ({ payload }) =>
        Effect.gen(function* () {
          yield* fromPeer(COPY_PATH, payload)
          // the copy is a file of the request's scope, removed once its last byte is sent
          const copy = yield* Effect.mapError(namespaceBackups.copyHere(toPrincipal(payload.principal), payload.database_name), fromRefusal)
          return HttpServerResponse.stream(
            Stream.fromAsyncIterable(createReadStream(copy.file, { highWaterMark: 64 * 1024 }) as AsyncIterable<Uint8Array>, (e) => e),
            { contentType: "application/octet-stream", contentLength: copy.size }
          )
        })
      )
      .handle("cacheDropNamespace", ({ payload }) =>
        Effect.gen(function* () {
          yield* fromPeer(CACHE_DROP_PATH, payload)
          return { dropped: yield* Effect.mapError(cache.dropNamespace(payload.namespace), () => unavailable("this node's cache did not answer")) }
        })
      )
      .handle("nodeSnapshot", ({ payload }) =>
        Effect.gen(function* () {
          yield* fromPeer(SNAPSHOT_PATH, payload)
          const here = yield* Effect.mapError(health.here, () => unavailable("no check of this node answered"))
          return { ...here, namespaces: here.namespaces ?? null }
        })
      )
      .handle("sqliteBackup", ({ payload }) =>
        Effect.gen(function* () {
          yield* fromPeer(FORWARD_PATHS.backup, payload)
          return backupWire(yield* Effect.mapError(backups.backupHere(toPrincipal(payload.principal), payload.database_name), fromRefusal))
        })
      )
  })
)
