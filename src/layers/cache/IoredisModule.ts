/**
 * ioredis loaded on first use (a gateway with no Redis configured does not pay for it at start).
 * Through tsx, Node's own import of the CommonJS module names its `Redis` export; in the bundle
 * `npm start` runs (dist/bundle/), the chunk exports the module only as its default, whose `Redis`
 * is the same class. Both are read here, so the cache and the shared rate-limit buckets start in
 * either.
 */
import type * as Ioredis from "ioredis"

export const loadRedisClass = async (): Promise<typeof Ioredis.Redis> => {
  const loaded = (await import("ioredis")) as typeof Ioredis & { readonly default?: { readonly Redis?: typeof Ioredis.Redis } }
  const Redis = loaded.Redis ?? loaded.default?.Redis
  if (Redis === undefined) throw new Error("ioredis exports no Redis class")
  return Redis
}
