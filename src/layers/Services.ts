/**
 * The platform services wired together, each on the engine the settings select. The CLI uses
 * this without the HTTP stack; the gateway puts its routes on top.
 */
import { Layer } from "effect"
import { Audit } from "./audit/Audit.js"
import { Cache } from "./cache/Cache.js"
import { MemoryCacheStore } from "./cache/MemoryCacheStore.js"
import { RedisCacheStore } from "./cache/RedisCacheStore.js"
import { Authenticator } from "./auth/Authenticator.js"
import { PorticoConfig, type PorticoSettings } from "./config/PorticoConfig.js"
import { Health } from "./health/Health.js"
import { ApiKeys } from "./keys/ApiKeys.js"
import { Namespaces } from "./namespaces/Namespaces.js"
import { RateLimiter } from "./ratelimit/RateLimiter.js"
import { registryLayer } from "./registry/registryLayer.js"
import { Sealer } from "./secrets/Sealer.js"
import { Sessions } from "./sessions/Sessions.js"
import { SessionPolicy } from "./sessions/SessionPolicy.js"
import { Devices } from "./devices/Devices.js"
import { KeyRing } from "./tokens/KeyRing.js"
import { ClusterSql } from "./sql/ClusterSql.js"
import { ClusterSqlStore } from "./sql/ClusterSqlStore.js"
import { LocalDatabases } from "./sql/LocalDatabases.js"
import { SqliteWorkers } from "./sql/SqliteWorkers.js"
import { TransferSlot } from "./transfer/TransferSlot.js"

export const servicesLayer = (settings: PorticoSettings) => {
  const core = Layer.mergeAll(Sealer.Live, registryLayer(settings)).pipe(
    Layer.provideMerge(PorticoConfig.layer(settings))
  )
  const registry = Layer.mergeAll(Audit.Live, ApiKeys.Live, KeyRing.Live, Health.Live).pipe(Layer.provideMerge(core))
  const sessions = Layer.mergeAll(Namespaces.Live, Sessions.Live, SessionPolicy.Live).pipe(Layer.provideMerge(registry))
  const namespaces = Devices.Live.pipe(Layer.provideMerge(sessions))
  const liveness = Sessions.Liveness.pipe(Layer.provideMerge(namespaces))
  const cacheStore =
    settings.cache.redisUrl === undefined
      ? MemoryCacheStore.layer(settings.cache.maxBytesPerNamespace)
      : RedisCacheStore.layer({ url: settings.cache.redisUrl })
  const cache = Cache.Live.pipe(Layer.provide(cacheStore))
  const workers = SqliteWorkers.layer({
    workers: settings.sql.workers,
    timeoutMs: settings.sql.timeoutMs,
    maxQueue: 1024,
    worker: { maxResultBytes: settings.sql.maxResultBytes, busyTimeoutMs: 5000, maxOpen: 256 }
  })
  const sql = Layer.mergeAll(LocalDatabases.Live, ClusterSql.Live).pipe(
    Layer.provide(Layer.mergeAll(ClusterSqlStore.Live, TransferSlot.Live).pipe(Layer.provideMerge(workers)))
  )
  return Layer.mergeAll(RateLimiter.Live, Authenticator.Live, cache, sql).pipe(Layer.provideMerge(liveness))
}
