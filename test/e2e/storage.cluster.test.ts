/**
 * The storage suite on the cluster engine: real Kubo and IPFS Cluster processes. IPFS Cluster
 * always attempts NAT port mapping (UPnP, NAT-PMP), so the suite runs in a child vitest inside a
 * new network namespace where only loopback exists: the gateway, the engines and the client all
 * meet on 127.0.0.1 and nothing can reach another machine.
 */
import { expect, it } from "vitest"
import { hasKubo, kuboMissingMessage } from "../support/kubo.js"
import { runInLoopbackNetns } from "../support/netns.js"

it("passes the storage suite on Kubo and IPFS Cluster", async () => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const { code, output, passed } = await runInLoopbackNetns("test/e2e/storage.test.ts", "on the kubo engine")
  expect(code, output).toBe(0)
  // the filter ran the engine's tests, not nothing
  expect(passed, output).toBeGreaterThanOrEqual(10)
  expect(output).not.toMatch(/\d+ failed/)
}, 600_000)
