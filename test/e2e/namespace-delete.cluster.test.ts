/**
 * The namespace deletion suite with storage on Kubo and IPFS Cluster (real processes), the
 * registry and the namespaces' cluster SQL on rqlite and the cache on Redis. IPFS Cluster always
 * attempts NAT port mapping, so, as storage.cluster.test.ts does, the suite runs in a child vitest
 * inside a new network namespace where only loopback exists.
 */
import { expect, it } from "vitest"
import { hasKubo, kuboMissingMessage } from "../support/kubo.js"
import { runInLoopbackNetns } from "../support/netns.js"

it("passes the namespace deletion suite on Kubo and IPFS Cluster", async () => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const { code, output, passed } = await runInLoopbackNetns("test/e2e/namespace-delete.test.ts", "storage on the kubo engine")
  expect(code, output).toBe(0)
  // the filter ran the Kubo setup's tests, not nothing
  expect(passed, output).toBe(4)
  expect(output).not.toMatch(/\d+ failed/)
}, 900_000)
