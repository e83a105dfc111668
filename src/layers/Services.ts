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
  return Layer.mergeAll(RateLimiter.Live, Authenticator.Live, cache).pipe(Layer.provideMerge(liveness))
}
