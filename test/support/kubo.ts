/**
 * A real Kubo node and a real IPFS Cluster peer on loopback, for the storage engine suite. The
 * binaries come from `scripts/engines.sh`. IPFS Cluster always tries NAT port mapping, so these
 * run only inside a network namespace with nothing but loopback (see storage.cluster.test.ts):
 * no packet of theirs can leave the machine.
 */
import { Effect } from "effect"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
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

/** One Kubo node and its IPFS Cluster peer, of a set started by `startKuboPeers`. */
export interface KuboPeer extends KuboCluster {
  /** SIGKILL of both: a lost machine. */
  readonly kill: () => Promise<void>
}

/** Starts Kubo in `root`, listening on the ports given; its peer id. */
const startKubo = async (root: string, ports: { api: number; swarm: number; gateway: number }, offline: boolean, log: (text: string) => void) => {
  const ipfsEnv = { ...process.env, IPFS_PATH: path.join(root, "ipfs"), IPFS_TELEMETRY: "off" }
  const ipfs = (...args: Array<string>) => run(ipfsPath(), args, { env: ipfsEnv })
  await ipfs("init", "--profile=unixfs-v1-2025,test", "--empty-repo")
  await ipfs("config", "Addresses.API", `/ip4/127.0.0.1/tcp/${ports.api}`)
  await ipfs("config", "Addresses.Gateway", `/ip4/127.0.0.1/tcp/${ports.gateway}`)
  await ipfs("config", "--json", "Addresses.Swarm", JSON.stringify([`/ip4/127.0.0.1/tcp/${ports.swarm}`]))
  await ipfs("bootstrap", "rm", "--all")
  await ipfs("config", "--json", "Discovery.MDNS.Enabled", "false")
  await ipfs("config", "Routing.Type", "none")
  await ipfs("config", "Plugins.Plugins.telemetry.Config.Mode", "off")
  const child = spawn(ipfsPath(), ["daemon", ...(offline ? ["--offline"] : [])], { env: ipfsEnv, stdio: ["ignore", "pipe", "pipe"] })
  child.stdout?.on("data", (c: Buffer) => log(c.toString()))
  child.stderr?.on("data", (c: Buffer) => log(c.toString()))
  const url = `http://127.0.0.1:${ports.api}`
  return { child, url }
}

/** Starts an IPFS Cluster peer in `root` over the Kubo API at `kuboApi`; `secret` and `bootstrap` join it to others. */
const startClusterPeer = async (
  root: string,
  ports: { listen: number; rest: number },
  kuboApi: number,
  log: (text: string) => void,
  join?: { readonly secret: string; readonly bootstrap: string | undefined }
) => {
  const clusterEnv = { ...process.env, IPFS_CLUSTER_PATH: path.join(root, "cluster") }
  await run(clusterPath(), ["init", "--consensus", "crdt"], { env: clusterEnv })
  const configFile = path.join(root, "cluster", "service.json")
  const config = JSON.parse(readFileSync(configFile, "utf8"))
  config.cluster.listen_multiaddress = [`/ip4/127.0.0.1/tcp/${ports.listen}`]
  config.cluster.mdns_interval = "0s"
  config.cluster.enable_relay_hop = false
  if (join !== undefined) {
    config.cluster.secret = join.secret
    config.consensus.crdt.trusted_peers = ["*"]
  }
  config.ipfs_connector.ipfshttp.node_multiaddress = `/ip4/127.0.0.1/tcp/${kuboApi}`
  config.api.restapi.http_listen_multiaddress = `/ip4/127.0.0.1/tcp/${ports.rest}`
  delete config.api.ipfsproxy
  delete config.api.pinsvcapi
  writeFileSync(configFile, JSON.stringify(config, null, 2))
  const id = (JSON.parse(readFileSync(path.join(root, "cluster", "identity.json"), "utf8")) as { id: string }).id
  const child = spawn(clusterPath(), ["daemon", ...(join?.bootstrap === undefined ? [] : ["--bootstrap", join.bootstrap])], {
    env: clusterEnv,
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.on("data", (c: Buffer) => log(c.toString()))
  child.stderr?.on("data", (c: Buffer) => log(c.toString()))
  return { child, url: `http://127.0.0.1:${ports.rest}`, id, multiaddr: `/ip4/127.0.0.1/tcp/${ports.listen}/p2p/${id}` }
}

const hasBlockAt = (kuboUrl: string) => async (cid: string) =>
  (await fetch(`${kuboUrl}/api/v0/block/stat?arg=${cid}&offline=true`, { method: "POST", signal: AbortSignal.timeout(10_000) })).status === 200

/** A started Kubo node and its cluster peer, as the suites use them: stopped cluster peer first. */
const engineOf = (kubo: { child: ChildProcess; url: string }, cluster: { child: ChildProcess; url: string }): KuboCluster => ({
  kuboUrl: kubo.url,
  clusterUrl: cluster.url,
  hasBlock: hasBlockAt(kubo.url),
  stop: async () => {
    await stopChild(cluster.child)
    await stopChild(kubo.child)
  }
})

export const startKuboCluster = async (): Promise<KuboCluster> => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  const root = mkdtempSync(path.join(testTmp(), "portico-kubo-"))
  const [api, swarm, gateway, listen, rest] = await Promise.all(Array.from({ length: 5 }, () => Effect.runPromise(freePort)))
  let logs = ""
  const log = (text: string) => void (logs += text)
  const kubo = await startKubo(root, { api: api!, swarm: swarm!, gateway: gateway! }, true, log)
  await waitUntil(async () => (await fetch(`${kubo.url}/api/v0/id`, { method: "POST" })).status === 200, 60_000, "kubo", () => logs)
  const cluster = await startClusterPeer(root, { listen: listen!, rest: rest! }, api!, log)
  await waitUntil(async () => (await fetch(`${cluster.url}/id`)).status === 200, 60_000, "ipfs-cluster-service", () => logs)
  return engineOf(kubo, cluster)
}

/**
 * `count` Kubo nodes connected to each other and `count` IPFS Cluster peers of one cluster (CRDT,
 * a shared secret, every peer trusted), one over each Kubo: content pinned through any peer is
 * pinned on every peer (the gateway pins with replication -1), its blocks fetched over Kubo's
 * swarm. Loopback only, inside a loopback-only network namespace (IPFS Cluster tries NAT mapping).
 */
export const startKuboPeers = async (count: number): Promise<{ readonly peers: ReadonlyArray<KuboPeer>; readonly logs: () => string }> => {
  if (!hasKubo()) throw new Error(kuboMissingMessage())
  let logs = ""
  const log = (text: string) => void (logs = (logs + text).slice(-40_000))
  const secret = randomBytes(32).toString("hex")
  const roots = Array.from({ length: count }, () => mkdtempSync(path.join(testTmp(), "portico-kubo-peer-")))
  const ports = await Promise.all(
    roots.map(async () => {
      const [api, swarm, gateway, listen, rest] = await Promise.all(Array.from({ length: 5 }, () => Effect.runPromise(freePort)))
      return { api: api!, swarm: swarm!, gateway: gateway!, listen: listen!, rest: rest! }
    })
  )
  const kubos = await Promise.all(roots.map((root, i) => startKubo(root, ports[i]!, false, log)))
  await Promise.all(kubos.map((k) => waitUntil(async () => (await fetch(`${k.url}/api/v0/id`, { method: "POST" })).status === 200, 60_000, "kubo", () => logs)))
  // Kubo finds no one by itself here (no routing, no bootstrap): connect each pair
  const ids = await Promise.all(kubos.map(async (k) => ((await (await fetch(`${k.url}/api/v0/id`, { method: "POST" })).json()) as { ID: string }).ID))
  for (let i = 0; i < count; i++) {
    for (let j = i + 1; j < count; j++) {
      const target = `/ip4/127.0.0.1/tcp/${ports[j]!.swarm}/p2p/${ids[j]}`
      const answer = await fetch(`${kubos[i]!.url}/api/v0/swarm/connect?arg=${encodeURIComponent(target)}`, { method: "POST" })
      if (answer.status !== 200) throw new Error(`kubo ${i} could not connect to kubo ${j}: ${await answer.text()}\n${logs}`)
    }
  }
  const first = await startClusterPeer(roots[0]!, ports[0]!, ports[0]!.api, log, { secret, bootstrap: undefined })
  await waitUntil(async () => (await fetch(`${first.url}/id`)).status === 200, 60_000, "ipfs-cluster-service", () => logs)
  const rest = await Promise.all(roots.slice(1).map((root, i) => startClusterPeer(root, ports[i + 1]!, ports[i + 1]!.api, log, { secret, bootstrap: first.multiaddr })))
  const clusters = [first, ...rest]
  // every peer sees every other before anything is pinned
  await Promise.all(
    clusters.map((c) =>
      waitUntil(async () => ((await (await fetch(`${c.url}/id`)).json()) as { cluster_peers?: Array<string> }).cluster_peers?.length === count, 60_000, "the cluster's peers", () => logs)
    )
  )
  const peers = kubos.map((kubo, i): KuboPeer => {
    const cluster = clusters[i]!
    return {
      ...engineOf(kubo, cluster),
      kill: async () => {
        for (const child of [cluster.child, kubo.child]) {
          if (child.exitCode !== null || child.signalCode !== null) continue
          const exit = new Promise<void>((resolve) => child.once("exit", () => resolve()))
          child.kill("SIGKILL")
          await exit
        }
      }
    }
  })
  return { peers, logs: () => logs }
}
