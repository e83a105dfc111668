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

const readVersion = (): string => {
  try {
    const pkg: unknown = JSON.parse(fs.readFileSync(new URL("../../../package.json", import.meta.url), "utf8"))
    return typeof pkg === "object" && pkg !== null && "version" in pkg && typeof pkg.version === "string"
      ? pkg.version
      : "unknown"
  } catch {
    return "unknown"
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
