/**
 * Memory per entry of the embedded engine: 1e6 entries of 100-byte JSON values, heap (after a
 * full collection) and RSS growth. Run in its own process with --expose-gc (run.ts does).
 */
import { Effect } from "effect"
import { makeMemoryCacheStore } from "../../src/layers/cache/MemoryCacheStore.js"

const N = 1_000_000
const value = JSON.stringify("v".repeat(98))
global.gc?.()
const before = process.memoryUsage()
const store = makeMemoryCacheStore(4 * 1024 ** 3)
// Values arrive as fresh strings from request bodies, never shared: copy each one.
for (let i = 0; i < N; i++) Effect.runSync(store.put("bench", "bench", `key:${i}`, { json: (" " + value).slice(1), expiresAt: undefined }))
global.gc?.()
const after = process.memoryUsage()
const check = Effect.runSync(store.get("bench", "bench", `key:${N - 1}`))
process.stdout.write(
  JSON.stringify({ heapPerEntry: (after.heapUsed - before.heapUsed) / N, rssPerEntry: (after.rss - before.rss) / N, present: check._tag === "Some" }) + "\n"
)
