/**
 * The functions suite's cluster case: two gateways on rqlite, Redis, Kubo and IPFS Cluster (real
 * processes). IPFS Cluster always attempts NAT port mapping, so, as storage.cluster.test.ts does,
 * the case runs in a child vitest inside a new network namespace where only loopback exists.
 */
import { expect, it } from "vitest"
import { hasKubo, kuboMissingMessage } from "../support/kubo.js"
import { runInLoopbackNetns } from "../support/netns.js"

it("passes the functions suite's cluster case on rqlite, Redis, Kubo and IPFS Cluster", async () => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const { code, output, passed } = await runInLoopbackNetns("test/e2e/functions.test.ts", "functions on the cluster engines")
  expect(code, output).toBe(0)
  // the filter ran the cluster case's tests, not nothing
  expect(passed, output).toBe(2)
  expect(output).not.toMatch(/\d+ failed/)
}, 900_000)
