/** The deployment store's settings: PORTICO_APP_PORTS and PORTICO_DEPLOYMENTS_PER_NAMESPACE. */
import { ConfigProvider, Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { deploymentStoreSettings } from "../../../src/layers/deployments/DeploymentSettings.js"

const read = (env: Record<string, string>) =>
  Effect.runSyncExit(Effect.withConfigProvider(deploymentStoreSettings, ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" })))

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
})
