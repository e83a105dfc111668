/**
 * The deadline chain of a change to a replicated app (spec §8; docs/deployments.md, "Replicas"):
 * each inner deadline ends before the one holding it, so a caller never gives up on work that
 * still runs and then finishes behind its back.
 */
import { Duration } from "effect"
import { describe, expect, it } from "vitest"
import { CHANGE_TIMEOUT } from "../../../src/layers/deployments/DeploymentHome.js"
import { LOCK_WAIT } from "../../../src/layers/deployments/DeploymentLocks.js"
import { POLL_FOR } from "../../../src/layers/deployments/replicas/ReplicaHost.js"
import { REPLICA_CALL, REPLICAS_TOTAL } from "../../../src/layers/deployments/replicas/ReplicaFanout.js"
import { defaultDeploymentSettings } from "../../../src/layers/config/DeploymentSettings.js"
import { INSTALL_TIMEOUT_MS } from "../../../src/layers/deployments/build/AppBuilds.js"

const ms = Duration.toMillis

describe("replica deadlines", () => {
  it("nest: the artifact poll within one replica call, one call within all of them, the home node's work and the replicas within the forwarding hop", () => {
    // a replica's setup: the artifact polled, then the app started and judged healthy
    expect(ms(POLL_FOR) + defaultDeploymentSettings.startTimeoutMs).toBeLessThan(ms(REPLICA_CALL))
    expect(ms(REPLICA_CALL)).toBeLessThan(ms(REPLICAS_TOTAL))
    // the home node: the lock's wait, an install, a start, then the replicas
    const home = ms(LOCK_WAIT) + INSTALL_TIMEOUT_MS + defaultDeploymentSettings.startTimeoutMs + ms(REPLICAS_TOTAL)
    expect(home).toBeLessThan(ms(CHANGE_TIMEOUT))
  })
})
