/** Health checks and the public status view (spec §4.9: no address, id, hostname or error text). */
import { Clock, Context, Duration, Effect, Layer } from "effect"
import * as fs from "node:fs"
import { RegistryStore } from "../registry/RegistryStore.js"
import { SqliteRegistryStore } from "../registry/SqliteRegistryStore.js"

export type CheckStatus = "ok" | "failing"

export interface HealthReport {
  readonly status: "ok" | "degraded"
  readonly checks: Readonly<Record<string, CheckStatus>>
}

export interface HealthService {
  readonly check: Effect.Effect<HealthReport>
  /** The same report, reused for 5 seconds: `/v1/status` is open and must stay cheap. */
  readonly cached: Effect.Effect<HealthReport>
  readonly startedAt: number
  readonly version: string
}

/**
 * The version in Portico's package.json, found by walking up from this module: it runs from src/
 * (tsx), dist/layers/health/ or a chunk of dist/bundle/, each at another depth.
 */
const readVersion = (): string => {
  for (let dir = new URL(".", import.meta.url); ; dir = new URL("..", dir)) {
    try {
      const pkg: unknown = JSON.parse(fs.readFileSync(new URL("package.json", dir), "utf8"))
      if (typeof pkg === "object" && pkg !== null && "name" in pkg && pkg.name === "portico")
        return "version" in pkg && typeof pkg.version === "string" ? pkg.version : "unknown"
    } catch {
      // no package.json here, or not one that reads: look higher
    }
    if (dir.pathname === "/") return "unknown"
  }
}

export const VERSION = readVersion()

export class Health extends Context.Tag("portico/Health")<Health, HealthService>() {
  static readonly Live = Layer.effect(
    Health,
    Effect.gen(function* () {
      const store = yield* RegistryStore
      const startedAt = yield* Clock.currentTimeMillis
      const registry: Effect.Effect<CheckStatus> = store.query({ sql: "SELECT 1 AS ok", params: [] }).pipe(
        Effect.timeout(Duration.seconds(2)),
        Effect.as("ok" as const),
        Effect.orElseSucceed(() => "failing" as const)
      )
      const check = Effect.map(registry, (r): HealthReport => ({
        status: r === "ok" ? "ok" : "degraded",
        checks: { registry: r }
      }))
      const cached = yield* Effect.cachedWithTTL(check, Duration.seconds(5))
      return { check, cached, startedAt, version: VERSION }
    })
  )

  /** The service over its collaborators' test doubles (src/layers/TestLayer.ts). */
  static readonly Test = Layer.suspend(() => Health.Live.pipe(Layer.provide(SqliteRegistryStore.Test)))
}
