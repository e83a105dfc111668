/**
 * The storage suite on the cluster engine: real Kubo and IPFS Cluster processes. IPFS Cluster
 * always attempts NAT port mapping (UPnP, NAT-PMP), so the suite runs in a child vitest inside a
 * new network namespace where only loopback exists: the gateway, the engines and the client all
 * meet on 127.0.0.1 and nothing can reach another machine.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { expect, it } from "vitest"
import { hasKubo, kuboMissingMessage } from "../support/kubo.js"
import { IN_NETNS } from "../support/storageEngines.js"

const root = path.resolve(import.meta.dirname, "../..")

it("passes the storage suite on Kubo and IPFS Cluster", async () => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const vitest = path.join(root, "node_modules", "vitest", "vitest.mjs")
  const script = `ip link set lo up && exec "${process.execPath}" "${vitest}" run test/e2e/storage.test.ts -t "on the kubo engine"`
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
  // the filter ran the engine's tests, not nothing
  const passed = Number(/Tests\s+(\d+) passed/.exec(output)?.[1] ?? 0)
  expect(passed, output).toBeGreaterThanOrEqual(10)
  expect(output).not.toMatch(/\d+ failed/)
}, 600_000)
