/**
 * A suite's cases run in a child vitest inside a new network namespace where only loopback exists
 * (`unshare --map-root-user --net`): IPFS Cluster always attempts NAT port mapping, so every case
 * that starts Kubo and IPFS Cluster runs there, where the gateways, the engines and the client all
 * meet on 127.0.0.0/8 and nothing can reach another machine. Used by the `*.cluster.test.ts` files.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { IN_NETNS } from "./storageEngines.js"

const root = path.resolve(import.meta.dirname, "../..")

export interface NetnsRun {
  readonly code: number | null
  readonly output: string
  /** How many tests the child run passed. */
  readonly passed: number
}

/**
 * Runs `vitest run <file> -t <filter>` in a loopback-only network namespace. `asRoot`: without a
 * user namespace of its own (the test runs as root), so the deployment sandbox works in it
 * (bubblewrap, cgroups and the apps' uids need the real root).
 */
export const runInLoopbackNetns = async (file: string, filter: string, options: { readonly asRoot?: boolean } = {}): Promise<NetnsRun> => {
  const vitest = path.join(root, "node_modules", "vitest", "vitest.mjs")
  const script = `ip link set lo up && exec "${process.execPath}" "${vitest}" run ${file} -t "${filter}"`
  const child = spawn("unshare", [...(options.asRoot === true ? [] : ["--map-root-user"]), "--net", "sh", "-c", script], {
    cwd: root,
    env: { ...process.env, [IN_NETNS]: "1", CI: "1", NO_COLOR: "1", FORCE_COLOR: "0" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (c: Buffer) => (output += c.toString()))
  child.stderr.on("data", (c: Buffer) => (output += c.toString()))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  return { code, output, passed: Number(/Tests\s+(\d+) passed/.exec(output)?.[1] ?? 0) }
}
