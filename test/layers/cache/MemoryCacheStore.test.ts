import { Effect } from "effect"
import { MemoryCacheStore } from "../../../src/layers/cache/MemoryCacheStore.js"
import { cacheStoreSuite } from "./CacheStore.suite.js"

cacheStoreSuite("MemoryCacheStore", { provision: Effect.succeed(MemoryCacheStore.layer(64 * 1024 * 1024)) })
