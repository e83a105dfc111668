/**
 * bench/cluster (issue 37): a 3-node cluster on this machine, each node on a loopback address of
 * its own (127.0.0.31-33): one voter of a three-voter rqlite registry and one gateway (the bundle,
 * as `npm start` runs it) per node, a shared root secret, heartbeats every second and a 3 s TTL.
 * Nothing listens off loopback.
 *
 * Targets, side by side in one run, median of the rounds (rounds alternate which side goes first):
 *   - a node-local database read (`SELECT … WHERE id = ?`) sent to a gateway that is not the
 *     database's home, >= 0.5 of the same read sent to the home gateway (the forward hop);
 *   - `whoami` (an API key) on a gateway of the running cluster >= 0.9 of the same gateway running
 *     alone (the other two gateways stopped; the registry's voters stay);
 *   - a deployed Node.js app's host sent to a gateway that does not run the app (it relays the
 *     request to the one that does, docs/deployments.md "Replicas") >= 0.5 of the same request
 *     sent to the gateway that runs it (next-wave 6f). Needs root (the sandbox).
 * Reported: from killing a node's gateway to it being `inactive` in `/v1/network/peers`; from
 * killing the rqlite leader's node (its voter and its gateway) to the next successful registry
 * write through another node.
 *
 * Layout: every server on CPU 0, this driver (the client) on CPU 1. Knobs: CLUSTER_ROUNDS (5),
 * CLUSTER_DURATION (seconds per side per round, 5), CLUSTER_CONCURRENCY (2x CPUs),
 * CLUSTER_GATEWAY_NODE_ARGS (more node arguments for the gateways, e.g. `--cpu-prof`).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Wallet } from "ethers"
import { rqlitedPath } from "../../test/support/rqlited.js"
import { buildBundle, type Child, logTail, sleep, startPinned, stop, stopAll, waitUntil } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { pinSelf } from "../support/processes.js"
import { BENCH_APP } from "../support/app.js"
import { median } from "../support/stats.js"
import { atLeast, reported, rounds as roundsText, writeSummary } from "../support/summary.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const int = (name: string, fallback: number) => Math.max(1, Math.round(Number(process.env[name] ?? fallback)))
const rounds = int("CLUSTER_ROUNDS", 5)
const durationS = int("CLUSTER_DURATION", 5)
const concurrency = int("CLUSTER_CONCURRENCY", 2 * os.availableParallelism())
const HEARTBEAT_MS = 1000
const TTL_MS = 3000
const GATEWAY_PORT = 6101
const hosts = ["127.0.0.31", "127.0.0.32", "127.0.0.33"]
const secret = "6b".repeat(32)
const operator = Wallet.createRandom()

const APP = BENCH_APP

for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stopAll().then(() => process.exit(130)))

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })

const request = (url: string, method: string, body: string | undefined, headers: Record<string, string>) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }) } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }))
    })
    req.setTimeout(10_000, () => req.destroy(new Error("timed out")))
    req.on("error", reject)
    req.end(body)
  })

/** `concurrency` clients sending `make()` for `durationS`; requests per second. */
const load = async (make: () => { url: string; method: string; body?: string }, headers: Record<string, string>) => {
  let done = 0
  const until = performance.now() + durationS * 1000
  const started = performance.now()
  const client = async () => {
    while (performance.now() < until) {
      const r = make()
      const answer = await request(r.url, r.method, r.body, headers)
      if (answer.status !== 200) throw new Error(`${r.url} answered ${answer.status}: ${answer.text.slice(0, 300)}`)
      done++
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client))
  return done / ((performance.now() - started) / 1000)
}

interface Node {
  readonly index: number
  readonly id: string
  readonly host: string
  readonly url: string
  readonly rqliteUrl: string
  readonly dir: string
  rqlited: Child | undefined
  gateway: Child | undefined
}

const main = async () => {
  if (!fs.existsSync(rqlitedPath())) throw new Error("rqlited is missing: bash scripts/engines.sh rqlite")
  buildBundle()
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-cluster-"))
  const nodes: Array<Node> = hosts.map((host, index) => ({
    index,
    id: `node-${index + 1}`,
    host,
    url: `http://${host}:${GATEWAY_PORT}`,
    rqliteUrl: `http://${host}:4001`,
    dir: path.join(dir, `node-${index + 1}`),
    rqlited: undefined,
    gateway: undefined
  }))
  const raftPeers = hosts.map((h) => `${h}:4002`).join(",")
  const envOf = (node: Node): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORTICO_SECRET: secret,
      PORTICO_NODE_ID: node.id,
      PORTICO_HOST: node.host,
      PORTICO_RQLITE_URL: node.rqliteUrl,
      PORTICO_NODE_HEARTBEAT_MS: String(HEARTBEAT_MS),
      PORTICO_NODE_TTL_MS: String(TTL_MS),
      PORTICO_OPERATORS: operator.address.toLowerCase(),
      PORTICO_RATE_LIMIT: "false",
      PORTICO_LOG_REQUESTS: "false"
    }
    delete env.PORTICO_REDIS_URL
    return env
  }
  const startVoter = async (node: Node) => {
    fs.mkdirSync(node.dir, { recursive: true })
    node.rqlited = startPinned(`${node.id}-rqlited`, dir, rqlitedPath(), [
      "-node-id", node.id, "-http-addr", `${node.host}:4001`, "-raft-addr", `${node.host}:4002`,
      "-bootstrap-expect", "3", "-join", raftPeers, path.join(node.dir, "rqlite")
    ])
  }
  const voterReady = (node: Node) =>
    waitUntil(node.rqlited!, async () => (await fetch(`${node.rqliteUrl}/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200, 90_000)
  const startGateway = async (node: Node) => {
    // the log is appended to across restarts: this start's "listening" is after its current end
    const logFile = path.join(dir, `${node.id}-gateway.log`)
    const from = fs.existsSync(logFile) ? fs.statSync(logFile).size : 0
    node.gateway = startPinned(`${node.id}-gateway`, dir, process.execPath, ["--enable-source-maps", ...(process.env["CLUSTER_GATEWAY_NODE_ARGS"] ?? "").split(" ").filter((a) => a !== ""), "bin/portico.mjs", "serve", "--port", String(GATEWAY_PORT), "--data-dir", path.join(node.dir, "data")], {
      env: { ...envOf(node), PORTICO_SKIP_BUILD: "1" }
    })
    await waitUntil(node.gateway, () => fs.readFileSync(node.gateway!.log).subarray(from).toString("utf8").includes('"msg":"listening"'), 90_000)
  }
  const stopGateway = async (node: Node) => {
    if (node.gateway !== undefined) await stop(node.gateway.process, 10_000)
    node.gateway = undefined
  }
  try {
    for (const node of nodes) await startVoter(node)
    for (const node of nodes) await voterReady(node)
    for (const node of nodes) await startGateway(node)
    const [home, other] = [nodes[0]!, nodes[1]!]

    const cli = spawnSync(process.execPath, ["bin/portico.mjs", "namespace", "create", "clusterbench", "--data-dir", path.join(home.dir, "data")], {
      cwd: root,
      env: { ...envOf(home), PORTICO_SKIP_BUILD: "1" },
      encoding: "utf8"
    })
    if (cli.status !== 0) throw new Error(`namespace create failed: ${cli.stderr}`)
    const key = String((JSON.parse(cli.stdout) as { api_key: string }).api_key)
    const auth = { authorization: `Bearer ${key}` }
    const sql = (node: Node, query: string, params: ReadonlyArray<unknown> = []) =>
      request(`${node.url}/v1/db/sqlite/query`, "POST", JSON.stringify({ database_name: "reads", query, params }), auth)
    const created = await request(`${home.url}/v1/db/sqlite/create`, "POST", JSON.stringify({ database_name: "reads" }), auth)
    if (created.status !== 201) throw new Error(`database create: ${created.status} ${created.text}`)
    await sql(home, "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT)")
    await sql(home, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO users (id, name, email) SELECT i, 'user ' || i, 'u' || i || '@example.com' FROM n")
    const read = (node: Node) => () => ({
      url: `${node.url}/v1/db/sqlite/query`,
      method: "POST",
      body: JSON.stringify({ database_name: "reads", query: "SELECT id, name, email FROM users WHERE id = ?", params: [1 + Math.floor(Math.random() * 1000)] })
    })
    const whoami = () => ({ url: `${home.url}/v1/auth/whoami`, method: "GET" })

    // the forward hop, after one uncounted pass of each side: the first seconds of a path measure
    // its JIT warming up (rounds 1-2 read 0.39-0.40 where the rest read 0.52-0.56 without it)
    await load(read(home), auth)
    await load(read(other), auth)
    const hopRatios: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const first = round % 2 === 0
      const a = first ? await load(read(home), auth) : 0
      const b = await load(read(other), auth)
      const homeRps = first ? a : await load(read(home), auth)
      hopRatios.push(b / homeRps)
      process.stderr.write(`[cluster] round ${round + 1}: read home ${homeRps.toFixed(0)}/s, forwarded ${b.toFixed(0)}/s\n`)
    }

    // a deployed app's host through the gateway that runs it and through one that relays to it
    // (docs/deployments.md, "Replicas": embedded storage here, so the app runs on its home alone)
    const appDir = path.join(dir, "app")
    fs.mkdirSync(appDir)
    fs.writeFileSync(path.join(appDir, "index.js"), APP)
    fs.writeFileSync(path.join(appDir, "package.json"), JSON.stringify({ name: "bench-app", version: "1.0.0", main: "index.js" }))
    const deploy = spawnSync(process.execPath, ["bin/portico.mjs", "deploy", appDir, "--name", "api", "--type", "nodejs", "--health-check", "/", "--json"], {
      cwd: root,
      env: { ...process.env, PORTICO_URL: home.url, PORTICO_TOKEN: key, PORTICO_SKIP_BUILD: "1" },
      encoding: "utf8"
    })
    if (deploy.status !== 0) throw new Error(`deploy failed: ${deploy.stderr}${deploy.stdout}`)
    const appHost = { host: String((JSON.parse(deploy.stdout) as { domain: string }).domain) }
    const appGet = (node: Node) => () => ({ url: `${node.url}/items`, method: "GET" })
    await waitUntil(home.gateway!, async () => (await request(`${other.url}/items`, "GET", undefined, appHost).catch(() => ({ status: 0 }))).status === 200, 30_000)
    await load(appGet(home), appHost)
    await load(appGet(other), appHost)
    const relayRatios: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const first = round % 2 === 0
      const a = first ? await load(appGet(home), appHost) : 0
      const b = await load(appGet(other), appHost)
      const homeRps = first ? a : await load(appGet(home), appHost)
      relayRatios.push(b / homeRps)
      process.stderr.write(`[cluster] round ${round + 1}: app host on its node ${homeRps.toFixed(0)}/s, relayed ${b.toFixed(0)}/s\n`)
    }

    // whoami in the running cluster and alone (the other gateways stopped cleanly, the voters kept)
    const aloneRatios: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const inCluster = await load(whoami, auth)
      await Promise.all(nodes.slice(1).map(stopGateway))
      const alone = await load(whoami, auth)
      await Promise.all(nodes.slice(1).map(startGateway))
      aloneRatios.push(inCluster / alone)
      process.stderr.write(`[cluster] round ${round + 1}: whoami in the cluster ${inCluster.toFixed(0)}/s, alone ${alone.toFixed(0)}/s\n`)
    }

    // an operator's session, to read /v1/network/peers
    const challenge = JSON.parse((await request(`${home.url}/v1/auth/challenge`, "POST", JSON.stringify({ wallet: operator.address }), {})).text) as { message: string }
    const verified = JSON.parse(
      (await request(`${home.url}/v1/auth/verify`, "POST", JSON.stringify({ message: challenge.message, signature: await operator.signMessage(challenge.message) }), {})).text
    ) as { access_token: string }
    const statusOf = async (id: string) => {
      const answer = await request(`${home.url}/v1/network/peers`, "GET", undefined, { authorization: `Bearer ${verified.access_token}` })
      return (JSON.parse(answer.text) as { peers: Array<{ node: string; status: string }> }).peers.find((p) => p.node === id)?.status
    }

    // a killed node turns inactive
    const inactiveMs: Array<number> = []
    const victim = nodes[2]!
    for (let round = 0; round < Math.min(rounds, 3); round++) {
      const killedAt = performance.now()
      victim.gateway?.process.kill("SIGKILL")
      while ((await statusOf(victim.id)) !== "inactive") await sleep(50)
      inactiveMs.push(performance.now() - killedAt)
      await stopGateway(victim)
      await startGateway(victim)
    }

    // the rqlite leader's node killed: the next registry write through another node
    const writeBackMs: Array<number> = []
    let serial = 0
    for (let round = 0; round < Math.min(rounds, 3); round++) {
      const leaderAnswer = await fetch(`${home.rqliteUrl}/nodes?ver=2`).then((r) => r.json() as Promise<{ nodes: Array<{ id: string; leader: boolean }> }>)
      const leader = nodes.find((n) => n.id === leaderAnswer.nodes.find((x) => x.leader)?.id)
      if (leader === undefined) throw new Error(`no leader: ${JSON.stringify(leaderAnswer)}`)
      const writer = nodes.find((n) => n !== leader)!
      const killedAt = performance.now()
      leader.gateway?.process.kill("SIGKILL")
      leader.rqlited?.process.kill("SIGKILL")
      for (;;) {
        const answer = await request(`${writer.url}/v1/db/sqlite/create`, "POST", JSON.stringify({ database_name: `w${serial++}` }), auth).catch(() => ({ status: 0, text: "" }))
        if (answer.status === 201) break
        if (performance.now() - killedAt > 60_000) throw new Error(`no write within 60 s: ${answer.status} ${answer.text}`)
        await sleep(50)
      }
      writeBackMs.push(performance.now() - killedAt)
      await stopGateway(leader)
      await startVoter(leader)
      await voterReady(leader)
      await startGateway(leader)
    }

    const settings = `3 nodes on 127.0.0.31-33, rqlite 3 voters, heartbeat ${HEARTBEAT_MS} ms, TTL ${TTL_MS} ms, ${concurrency} in flight, ${durationS} s per side, ${rounds} rounds`
    const results = [
      atLeast("node-local read through a gateway that is not the home", "the same read sent to the home gateway", median(hopRatios), 0.5, `rounds ${roundsText(hopRatios)}`),
      atLeast("whoami on a gateway of a running 3-node cluster", "the same gateway running alone", median(aloneRatios), 0.9, `rounds ${roundsText(aloneRatios)}`),
      atLeast("an app host through a gateway that does not run the app", "the same through the gateway that runs it", median(relayRatios), 0.5, `rounds ${roundsText(relayRatios)}`),
      reported("killed node inactive in /v1/network/peers", `TTL ${TTL_MS} ms`, median(inactiveMs), "ms", `tries ${roundsText(inactiveMs, 0)}`),
      reported("rqlite leader's node killed to the next registry write", "-", median(writeBackMs), "ms", `tries ${roundsText(writeBackMs, 0)}`)
    ]
    for (const r of results) process.stdout.write(`${r.target}: ${r.unit === "ratio" ? r.value.toFixed(2) : `${r.value.toFixed(0)} ${r.unit}`} (${r.detail})\n`)
    writeSummary("cluster", settings, results)
  } catch (e) {
    for (const node of nodes) for (const child of [node.gateway, node.rqlited]) if (child !== undefined) process.stderr.write(`--- ${child.name}\n${logTail(child)}\n`)
    throw e
  } finally {
    await stopAll()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`)
    process.exit(1)
  }
)
