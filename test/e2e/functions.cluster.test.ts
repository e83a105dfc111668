/**
 * The functions suite's cluster case: two gateways on rqlite, Redis, Kubo and IPFS Cluster (real
 * processes). IPFS Cluster always attempts NAT port mapping, so, as storage.cluster.test.ts does,
 * the case runs in a child vitest inside a new network namespace where only loopback exists.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { expect, it } from "vitest"
import { hasKubo, kuboMissingMessage } from "../support/kubo.js"
import { IN_NETNS } from "../support/storageEngines.js"

const root = path.resolve(import.meta.dirname, "../..")

it("passes the functions suite's cluster case on rqlite, Redis, Kubo and IPFS Cluster", async () => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const vitest = path.join(root, "node_modules", "vitest", "vitest.mjs")
  const script = `ip link set lo up && exec "${process.execPath}" "${vitest}" run test/e2e/functions.test.ts -t "functions on the cluster engines"`
  const child = spawn("unshare", ["--map-root-user", "--net", "sh", "-c", script], {
    cwd: root,
    env: { ...process.env, [IN_NETNS]: "1", CI: "1", NO_COLOR: "1", FORCE_COLOR: "0" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (c: Buffer) => (output += c.toString()))
  child.stderr.on("data", (c: Buffer) => (output += c.toString()))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  expect(code, output).toBe(0)
  // the filter ran the cluster case's tests, not nothing
  expect(Number(/Tests\s+(\d+) passed/.exec(output)?.[1] ?? 0), output).toBe(2)
  expect(output).not.toMatch(/\d+ failed/)
}, 900_000)
