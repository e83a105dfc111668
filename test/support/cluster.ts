/**
 * A local cluster of real processes for the failure tests (next-wave §7.1; docs/cluster.md,
 * "Harness and failure tests"): per node, in its own network namespace at 127.0.0.1x
 * (test/support/clusterNetwork.ts), one voter of a three-voter rqlite registry and one
 * `portico serve` on it; one shared Redis at 127.0.0.10. Runs only inside the loopback-only
 * namespace of a `*.cluster.test.ts` child (runInLoopbackNetns).
 *
 * `kill` is the loss of a machine (SIGKILL of its gateway and its rqlited), `pause` a hung one
 * (SIGSTOP: its connections stay open and say nothing), `partition` cuts two nodes apart both
 * ways. Every node keeps its gateway's and its rqlited's output for failure messages.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { type Gateway, type Reply, startGateway, testTmp } from "./gateway.js"
import { type RedisServer, startRedis } from "./redis.js"
import { rqlitedPath } from "./rqlited.js"
import { nodeAddress, REDIS_ADDRESS, startClusterNetwork } from "./clusterNetwork.js"
import { waitFor } from "./wait.js"

export const GATEWAY_PORT = 8080
const RQLITE_HTTP = 4001
const RQLITE_RAFT = 4002
/** The shared root secret (hex) of the cluster's gateways. */
export const CLUSTER_SECRET = "5c".repeat(32)

export interface ClusterNode {
  readonly index: number
  readonly id: string
  readonly host: string
  readonly url: string
  readonly rqliteUrl: string
  /** The running gateway (a new one after each restart). */
  readonly gateway: () => Gateway
  /** SIGKILL of the gateway and the rqlited: a lost machine. */
  readonly kill: () => Promise<void>
  /** SIGSTOP of both: a hung machine. */
  readonly pause: () => void
  readonly resume: () => void
  /** A clean stop (SIGTERM) of the gateway, then of the rqlited: a rolling restart's first half. */
  readonly stop: () => Promise<void>
  /** Starts whatever is not running (rqlited, then the gateway) on the same data and ports. */
  readonly restart: () => Promise<void>
  readonly logs: () => string
}

export interface Cluster {
  readonly nodes: ReadonlyArray<ClusterNode>
  readonly redis: RedisServer
  readonly partition: (a: number, b: number) => void
  readonly heal: () => void
  /** The index of the node holding the rqlite leadership, asked of the first node that answers. */
  readonly leaderNode: () => Promise<number>
  readonly stop: () => Promise<void>
}

export interface ClusterOptions {
  readonly nodes?: number
  readonly env?: Readonly<Record<string, string>>
}

const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null
const gone = (child: ChildProcess) =>
  new Promise<void>((resolve) => (exited(child) ? resolve() : child.once("exit", () => resolve())))

export const startCluster = async (options: ClusterOptions = {}): Promise<Cluster> => {
  const count = options.nodes ?? 3
  const network = await startClusterNetwork(count)
  const redis = await Effect.runPromise(startRedis({ host: REDIS_ADDRESS })).catch((error: unknown) => {
    network.stop()
    throw error
  })
  const root = fs.mkdtempSync(path.join(testTmp(), "portico-cluster-"))
  const raftPeers = Array.from({ length: count }, (_, i) => `${nodeAddress(i)}:${RQLITE_RAFT}`).join(",")
  const env = {
    PORTICO_SECRET: CLUSTER_SECRET,
    PORTICO_REDIS_URL: redis.url,
    PORTICO_NODE_HEARTBEAT_MS: "200",
    PORTICO_NODE_TTL_MS: "1500",
    ...options.env
  }

  const nodes = Array.from({ length: count }, (_, index): ClusterNode & { readonly start: () => Promise<void>; readonly stopGateway: () => Promise<void>; readonly stopRqlited: () => Promise<void> } => {
    const host = nodeAddress(index)
    const id = `node-${index + 1}`
    const dir = path.join(root, id)
    const dataDir = path.join(dir, "gateway")
    fs.mkdirSync(dataDir, { recursive: true })
    const rqliteUrl = `http://${host}:${RQLITE_HTTP}`
    let rqlited: ChildProcess | undefined
    let gateway: Gateway | undefined
    let rqliteLog = ""
    let gatewayLogs = ""
    const startRqlited = () => {
      // Joins through every voter's Raft address; with state on disk it rejoins as it was.
      const child = spawn(
        network.enter(index)[0]!,
        [
          ...network.enter(index).slice(1),
          rqlitedPath(),
          "-node-id", id,
          "-http-addr", `${host}:${RQLITE_HTTP}`,
          "-raft-addr", `${host}:${RQLITE_RAFT}`,
          "-bootstrap-expect", String(count),
          "-join", raftPeers,
          path.join(dir, "rqlite")
        ],
        { stdio: ["ignore", "pipe", "pipe"] }
      )
      const keep = (chunk: Buffer) => (rqliteLog = (rqliteLog + chunk.toString()).slice(-20_000))
      child.stdout?.on("data", keep)
      child.stderr?.on("data", keep)
      rqlited = child
    }
    const rqliteReady = () =>
      waitFor(`${id}'s rqlited ready\n${rqliteLog.slice(-3000)}`, async () => {
        if (rqlited === undefined || exited(rqlited)) throw new Error(`${id}'s rqlited exited:\n${rqliteLog.slice(-3000)}`)
        try {
          return (await fetch(`${rqliteUrl}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200
        } catch {
          return false
        }
      }, 90_000, 200)
    const startOwnGateway = async () => {
      if (gateway !== undefined) gatewayLogs += gateway.logs()
      gateway = await startGateway({
        host,
        port: GATEWAY_PORT,
        dataDir,
        wrap: network.enter(index),
        startTimeoutMs: 120_000,
        env: { ...env, PORTICO_NODE_ID: id, PORTICO_RQLITE_URL: rqliteUrl }
      })
    }
    const exitedGateway = new WeakSet<Gateway>()
    const gatewayRunning = () => gateway !== undefined && !exitedGateway.has(gateway)
    /** SIGTERM; SIGKILL when it has not exited within 20 s (a clean stop is not under test here). */
    const terminate = async (pid: number, exit: Promise<unknown>) => {
      const send = (sig: NodeJS.Signals) => {
        try {
          process.kill(pid, sig)
        } catch {
          // exited meanwhile
        }
      }
      send("SIGTERM")
      const timer = setTimeout(() => send("SIGKILL"), 20_000)
      await exit
      clearTimeout(timer)
    }
    const stopGateway = async () => {
      if (gateway === undefined || !gatewayRunning()) return
      const running = gateway
      await terminate(running.pid, running.stop())
      exitedGateway.add(running)
    }
    const stopRqlited = async () => {
      if (rqlited !== undefined && !exited(rqlited) && rqlited.pid !== undefined) await terminate(rqlited.pid, gone(rqlited))
    }
    const signal = (sig: NodeJS.Signals) => {
      if (gateway !== undefined && gatewayRunning()) process.kill(gateway.pid, sig)
      if (rqlited !== undefined && !exited(rqlited)) rqlited.kill(sig)
    }
    return {
      index,
      id,
      host,
      url: `http://${host}:${GATEWAY_PORT}`,
      rqliteUrl,
      gateway: () => {
        if (gateway === undefined) throw new Error(`${id} has no gateway`)
        return gateway
      },
      start: async () => {
        startRqlited()
        await rqliteReady()
        await startOwnGateway()
      },
      kill: async () => {
        signal("SIGKILL")
        if (gateway !== undefined && gatewayRunning()) {
          await gateway.stop()
          exitedGateway.add(gateway)
        }
        if (rqlited !== undefined) await gone(rqlited)
      },
      pause: () => signal("SIGSTOP"),
      resume: () => signal("SIGCONT"),
      stop: async () => {
        await stopGateway()
        await stopRqlited()
      },
      stopGateway,
      stopRqlited,
      restart: async () => {
        if (rqlited === undefined || exited(rqlited)) {
          startRqlited()
          await rqliteReady()
        }
        if (!gatewayRunning()) await startOwnGateway()
      },
      logs: () => `--- ${id} gateway ---\n${(gatewayLogs + (gateway?.logs() ?? "")).slice(-20_000)}\n--- ${id} rqlited ---\n${rqliteLog.slice(-5000)}`
    }
  })

  const stop = async () => {
    for (const node of nodes) node.resume()
    // the gateways first, while the registry still has its quorum for their clean stop
    await Promise.all(nodes.map((node) => node.stopGateway().catch(() => undefined)))
    await Promise.all(nodes.map((node) => node.stopRqlited().catch(() => undefined)))
    await Effect.runPromise(redis.stop)
    network.stop()
    fs.rmSync(root, { recursive: true, force: true })
  }
  try {
    // the voters wait for each other (-bootstrap-expect): started together
    await Promise.all(nodes.map((node) => node.start()))
  } catch (error) {
    const logs = nodes.map((node) => node.logs()).join("\n")
    await stop()
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${logs}`)
  }

  const leaderNode = async () => {
    for (const node of nodes) {
      try {
        const status = (await (await fetch(`${node.rqliteUrl}/status`, { signal: AbortSignal.timeout(2000) })).json()) as {
          store?: { leader?: { node_id?: string } }
        }
        const leader = nodes.findIndex((n) => n.id === status.store?.leader?.node_id)
        if (leader >= 0) return leader
      } catch {
        // that node is down: ask the next
      }
    }
    throw new Error("no node knows the rqlite leader")
  }

  return { nodes, redis, partition: network.partition, heal: network.heal, leaderNode, stop }
}

/** A refusal a client may retry: 503 with Retry-After. */
export const retryable = (reply: Reply) => reply.status === 503 && reply.headers.get("retry-after") !== null

/**
 * Asks until the answer is something other than the registry's own 503 while it elects a leader
 * (the lost node held the leadership), at most 15 s: that refusal must be retryable. `isElection`
 * tells that 503 from the route's own (by default any 503 `UNAVAILABLE`).
 */
export const pastElection = async (
  ask: () => Promise<Reply>,
  isElection: (reply: Reply) => boolean = (reply) => reply.status === 503 && reply.body?.code === "UNAVAILABLE"
): Promise<Reply> => {
  const until = Date.now() + 15_000
  for (;;) {
    const answer = await ask()
    if (!isElection(answer) || Date.now() > until) return answer
    if (!retryable(answer)) throw new Error(`a refusal during the election is not retryable: ${answer.status} ${answer.text}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}
