/**
 * A real Kubo node and a real IPFS Cluster peer on loopback, for the storage engine suite. The
 * binaries come from `scripts/engines.sh`. IPFS Cluster always tries NAT port mapping, so these
 * run only inside a network namespace with nothing but loopback (see storage.cluster.test.ts):
 * no packet of theirs can leave the machine.
 */
import { Effect } from "effect"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import { testTmp } from "./gateway.js"
import { freePort } from "./process.js"

const run = promisify(execFile)
const bin = process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(import.meta.dirname, "../../.engines/bin")
export const ipfsPath = (): string => path.join(bin, "ipfs")
const clusterPath = (): string => path.join(bin, "ipfs-cluster-service")

export const hasKubo = (): boolean => existsSync(ipfsPath()) && existsSync(clusterPath())
export const kuboMissingMessage = (): string =>
  `Kubo and IPFS Cluster are not installed in ${bin}: run scripts/engines.sh kubo ipfs-cluster`

export interface KuboCluster {
  readonly kuboUrl: string
  readonly clusterUrl: string
  /** Whether this Kubo node holds the block itself (no network lookup). */
  readonly hasBlock: (cid: string) => Promise<boolean>
  readonly stop: () => Promise<void>
}

const waitUntil = async (check: () => Promise<boolean>, ms: number, what: string, logs: () => string) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await check().catch(() => false)) return
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`${what} did not start:\n${logs()}`)
}

const stopChild = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    child.kill("SIGTERM")
  })

export const startKuboCluster = async (): Promise<KuboCluster> => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const root = mkdtempSync(path.join(testTmp(), "portico-kubo-"))
  const [api, swarm, gateway, listen, rest] = await Promise.all(Array.from({ length: 5 }, () => Effect.runPromise(freePort)))
  const ipfsEnv = { ...process.env, IPFS_PATH: path.join(root, "ipfs"), IPFS_TELEMETRY: "off" }
  const ipfs = (...args: Array<string>) => run(ipfsPath(), args, { env: ipfsEnv })
  await ipfs("init", "--profile=unixfs-v1-2025,test", "--empty-repo")
  await ipfs("config", "Addresses.API", `/ip4/127.0.0.1/tcp/${api}`)
  await ipfs("config", "Addresses.Gateway", `/ip4/127.0.0.1/tcp/${gateway}`)
  await ipfs("config", "--json", "Addresses.Swarm", JSON.stringify([`/ip4/127.0.0.1/tcp/${swarm}`]))
  await ipfs("bootstrap", "rm", "--all")
  await ipfs("config", "--json", "Discovery.MDNS.Enabled", "false")
  await ipfs("config", "Routing.Type", "none")
  await ipfs("config", "Plugins.Plugins.telemetry.Config.Mode", "off")

  let logs = ""
  const kubo = spawn(ipfsPath(), ["daemon", "--offline"], { env: ipfsEnv, stdio: ["ignore", "pipe", "pipe"] })
  kubo.stdout?.on("data", (c: Buffer) => (logs += c.toString()))
  kubo.stderr?.on("data", (c: Buffer) => (logs += c.toString()))
  const kuboUrl = `http://127.0.0.1:${api}`
  await waitUntil(async () => (await fetch(`${kuboUrl}/api/v0/id`, { method: "POST" })).status === 200, 60_000, "kubo", () => logs)

  const clusterEnv = { ...process.env, IPFS_CLUSTER_PATH: path.join(root, "cluster") }
  await run(clusterPath(), ["init", "--consensus", "crdt"], { env: clusterEnv })
  const configFile = path.join(root, "cluster", "service.json")
  const config = JSON.parse(readFileSync(configFile, "utf8"))
  config.cluster.listen_multiaddress = [`/ip4/127.0.0.1/tcp/${listen}`]
  config.cluster.mdns_interval = "0s"
  config.cluster.enable_relay_hop = false
  config.ipfs_connector.ipfshttp.node_multiaddress = `/ip4/127.0.0.1/tcp/${api}`
  config.api.restapi.http_listen_multiaddress = `/ip4/127.0.0.1/tcp/${rest}`
  delete config.api.ipfsproxy
  delete config.api.pinsvcapi
  writeFileSync(configFile, JSON.stringify(config, null, 2))
  const cluster = spawn(clusterPath(), ["daemon"], { env: clusterEnv, stdio: ["ignore", "pipe", "pipe"] })
  cluster.stdout?.on("data", (c: Buffer) => (logs += c.toString()))
  cluster.stderr?.on("data", (c: Buffer) => (logs += c.toString()))
  const clusterUrl = `http://127.0.0.1:${rest}`
  await waitUntil(async () => (await fetch(`${clusterUrl}/id`)).status === 200, 60_000, "ipfs-cluster-service", () => logs)

  return {
    kuboUrl,
    clusterUrl,
    hasBlock: async (cid) =>
      (await fetch(`${kuboUrl}/api/v0/block/stat?arg=${cid}&offline=true`, { method: "POST", signal: AbortSignal.timeout(10_000) })).status === 200,
    stop: async () => {
      await stopChild(cluster)
      await stopChild(kubo)
    }
  }
}
