/** The deployments' settings: PORTICO_APP_PORTS, PORTICO_DEPLOYMENTS_PER_NAMESPACE and the runtime's. */
import { ConfigProvider, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { deploymentConfig } from "../../../src/layers/config/DeploymentSettings.js"

const read = (env: Record<string, string>) =>
  Effect.runSyncExit(
    Effect.withConfigProvider(
      Effect.map(deploymentConfig, (s) => ({ ports: s.appPorts, perNamespace: s.perNamespace })),
      ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" })
    )
  )
const runtime = (env: Record<string, string>) =>
  Effect.runSyncExit(
    Effect.withConfigProvider(
      Effect.map(deploymentConfig, (s) => ({ publicUrl: s.publicUrl, health: s.healthIntervalMs, start: s.startTimeoutMs })),
      ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" })
    )
  )

describe("deployment store settings", () => {
  it("defaults to spec §8's port range and 100 deployments a namespace", () => {
    expect(read({})).toEqual(Exit.succeed({ ports: { first: 10200, last: 19999 }, perNamespace: 100 }))
  })
  it("takes an operator's range and bound", () => {
    expect(read({ PORTICO_APP_PORTS: "20000-20019", PORTICO_DEPLOYMENTS_PER_NAMESPACE: "3" })).toEqual(
      Exit.succeed({ ports: { first: 20000, last: 20019 }, perNamespace: 3 })
    )
  })
  it.each(["0", "-1", "1.5", "many"])("refuses PORTICO_DEPLOYMENTS_PER_NAMESPACE=%s at start", (value) => {
    expect(Exit.isFailure(read({ PORTICO_DEPLOYMENTS_PER_NAMESPACE: value }))).toBe(true)
  })
  it("reads the runtime's public URL (no trailing slash) and timings, and refuses a timing that is not positive", () => {
    expect(runtime({})).toEqual(Exit.succeed({ publicUrl: undefined, health: 30_000, start: 60_000 }))
    expect(runtime({ PORTICO_PUBLIC_URL: "https://gw.example/", PORTICO_APP_START_TIMEOUT_MS: "500" })).toEqual(
      Exit.succeed({ publicUrl: "https://gw.example", health: 30_000, start: 500 })
    )
    expect(Exit.isFailure(runtime({ PORTICO_APP_HEALTH_INTERVAL_MS: "0" }))).toBe(true)
  })
})
