/**
 * The namespace deletion suite with storage on Kubo and IPFS Cluster (real processes), the
 * registry and the namespaces' cluster SQL on rqlite and the cache on Redis. IPFS Cluster always
 * attempts NAT port mapping, so, as storage.cluster.test.ts does, the suite runs in a child vitest
 * inside a new network namespace where only loopback exists.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { expect, it } from "vitest"
import { hasKubo, kuboMissingMessage } from "../support/kubo.js"
import { IN_NETNS } from "../support/storageEngines.js"

const root = path.resolve(import.meta.dirname, "../..")

it("passes the namespace deletion suite on Kubo and IPFS Cluster", async () => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const vitest = path.join(root, "node_modules", "vitest", "vitest.mjs")
  const script = `ip link set lo up && exec "${process.execPath}" "${vitest}" run test/e2e/namespace-delete.test.ts -t "storage on the kubo engine"`
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
  // the filter ran the Kubo setup's tests, not nothing
  expect(Number(/Tests\s+(\d+) passed/.exec(output)?.[1] ?? 0), output).toBe(4)
  expect(output).not.toMatch(/\d+ failed/)
}, 900_000)
