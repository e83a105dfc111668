/**
 * bench/push: one message to 10,000 APNs registrations of one user through `POST /v1/push/send`,
 * against the APNs stand-in (test/support/apnsStandIn.ts: HTTP/2 over TLS, every request's
 * provider token, path, headers and payload checked), side by side in the same run with a bare
 * Node `http2` client posting the same 10,000 requests over one connection (bare.ts).
 *
 * Targets (issue 22): the gateway's throughput ≥ 0.8 of the bare client's (median of the rounds),
 * the gateway's RSS growth during a send under 64 MiB (the largest of every send, the first
 * included), and at most one provider token minted by the gateway over the whole run.
 *
 * Layout: the gateway (`portico serve` as `npm start` runs it, compiled, on an embedded registry) and the bare client each pinned
 * to CPU 0, one at a time; this driver and the stand-in on CPU 1, so both sides meet the same
 * server on the same CPU. Before the rounds each side takes one unmeasured warm-up send (the
 * gateway's first send compiles its path and opens its connection; the bare client's connects).
 * Rounds alternate which side goes first.
 *
 * Knobs: PUSH_DEVICES (10000), PUSH_ROUNDS (5), PUSH_GATEWAY_NODE_ARGS (extra node flags for the
 * gateway only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/p"). Needs taskset and two CPUs.
 */
import { type HDNodeWallet, Wallet } from "ethers"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { apnsPayloadOf } from "../../src/layers/push/Messages.js"
import { makeP8Key, startApnsStandIn } from "../../test/support/apnsStandIn.js"
import { alive, type Child, freePort, logTail, startPinned, stop, stopAll, waitUntil } from "../support/children.js"
import { pinSelf, sampleRss } from "../support/processes.js"
import { startBackgroundLoad } from "../support/load.js"
import { median } from "../support/stats.js"
import { atLeast, below, rounds as roundsText, writeSummary } from "../support/summary.js"
import { deviceTokens } from "./tokens.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const MiB = 1024 * 1024
const devices = Math.max(1, Math.round(Number(process.env.PUSH_DEVICES ?? 10_000)))
const rounds = Math.max(1, Math.round(Number(process.env.PUSH_ROUNDS ?? 5)))
const namespace = "pushbench"
const THROUGHPUT_TARGET = 0.8
const RSS_TARGET = 64 * MiB
const message = { title: "Bench", body: "One message to every device of one user" }

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void stopAll().then(() => process.exit(130)))
}


const json = async (url: string, init: RequestInit & { readonly expect?: number } = {}) => {
  const response = await fetch(url, init)
  const text = await response.text()
  if (response.status !== (init.expect ?? 200)) throw new Error(`${init.method ?? "GET"} ${url} answered ${response.status}: ${text.slice(0, 500)}`)
  return JSON.parse(text) as Record<string, unknown>
}

const gatewayEnv = (apnsUrl: string, caFile: string): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORTICO_RATE_LIMIT: "false",
    PORTICO_LOG_REQUESTS: "false",
    PORTICO_NODE_ID: "bench",
    PORTICO_APNS_URL: apnsUrl,
    NODE_EXTRA_CA_CERTS: caFile
  }
  delete env.PORTICO_RQLITE_URL
  return env
}

const startGateway = async (dir: string, dataDir: string, env: NodeJS.ProcessEnv) => {
  const port = await freePort()
  const extra = (process.env.PUSH_GATEWAY_NODE_ARGS ?? "").split(" ").filter((a) => a !== "")
  // what `npm start` runs: the compiled gateway (bin/portico.mjs compiles src/ first when stale)
  const child = startPinned("gateway", dir, process.execPath, [...extra, "--enable-source-maps", "bin/portico.mjs", "serve", "--port", String(port), "--data-dir", dataDir], { env })
  await waitUntil(child, () => fs.readFileSync(child.log, "utf8").includes('"msg":"listening"'))
  return { child, url: `http://127.0.0.1:${port}`, pid: child.process.pid ?? 0 }
}

const signIn = async (url: string, wallet: HDNodeWallet) => {
  const post = (route: string, body: unknown) =>
    json(url + route, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  const challenge = await post("/v1/auth/challenge", { wallet: wallet.address, namespace })
  const text = String(challenge["message"])
  const verified = await post("/v1/auth/verify", { message: text, signature: await wallet.signMessage(text) })
  const token = String(verified["access_token"])
  const claims = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as { sub: string }
  return { authorization: `Bearer ${token}`, subject: claims.sub }
}

/** A bare client child; `go` runs one round and answers its milliseconds. */
const startBare = (dir: string, env: NodeJS.ProcessEnv) => {
  const child = startPinned("bare", dir, process.execPath, ["--import", "tsx", path.join(here, "bare.ts")], { env, pipeStdin: true, pipeStdout: true })
  const lines = readline.createInterface({ input: child.process.stdout! })[Symbol.asyncIterator]()
  return {
    child,
    round: async () => {
      child.process.stdin!.write("go\n")
      const line = await lines.next()
      if (line.done === true) throw new Error(`the bare client exited\n${logTail(child)}`)
      const answer = JSON.parse(line.value) as { ms: number; ok: number }
      if (answer.ok !== devices) throw new Error(`the bare client had ${answer.ok} of ${devices} accepted`)
      return answer.ms
    },
    pid: child.process.pid ?? 0
  }
}

const main = async () => {
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-push-"))
  const dataDir = path.join(dir, "data")
  const standIn = await startApnsStandIn()
  const gatewayKey = { teamId: "TEAMBENCH1", keyId: "GWKEY00001", bundleId: "dev.portico.bench", p8Key: makeP8Key() }
  const bareKey = { teamId: "TEAMBENCH1", keyId: "BAREKEY001", bundleId: "dev.portico.bench", p8Key: makeP8Key() }
  standIn.addKey(gatewayKey)
  standIn.addKey(bareKey)
  const tokens = deviceTokens(devices)
  const payload = apnsPayloadOf(message)
  try {
    const env = gatewayEnv(standIn.url, standIn.caFile)
    const owner = Wallet.createRandom()
    const created = spawnSync(
      process.execPath,
      ["--import", "tsx", "src/main.ts", "namespace", "create", namespace, "--owner", owner.address, "--data-dir", dataDir],
      { cwd: root, env, encoding: "utf8" }
    )
    if (created.status !== 0) throw new Error(`namespace create failed: ${created.stderr}`)
    const gateway = await startGateway(dir, dataDir, env)
    const { authorization, subject } = await signIn(gateway.url, owner)
    const headers = { authorization, "content-type": "application/json" }
    await json(`${gateway.url}/v1/namespace/push-credentials/ios_push`, {
      method: "PUT",
      headers,
      body: JSON.stringify({ team_id: gatewayKey.teamId, key_id: gatewayKey.keyId, bundle_id: gatewayKey.bundleId, p8_key: gatewayKey.p8Key, environment: "production" })
    })
    // the user's registrations, 16 at a time
    let next = 0
    const register = async () => {
      while (next < devices) {
        const i = next++
        await json(`${gateway.url}/v1/push/devices`, {
          method: "POST",
          headers,
          body: JSON.stringify({ device_id: `bench-${i}`, provider: "ios_push", token: tokens[i], platform: "ios" })
        })
      }
    }
    await Promise.all(Array.from({ length: 16 }, register))

    const sendThroughGateway = async () => {
      if (!alive(gateway.child.process)) throw new Error(`the gateway exited\n${logTail(gateway.child)}`)
      standIn.received.length = 0
      const growth = sampleRss(gateway.pid)
      const started = performance.now()
      const envelope = await json(`${gateway.url}/v1/push/send`, { method: "POST", headers, body: JSON.stringify({ user_id: subject, ...message }) })
      const ms = performance.now() - started
      const rss = growth()
      const results = envelope["results"] as ReadonlyArray<{ status: number }>
      const accepted = results.filter((r) => r.status === 200).length
      if (envelope["devices_attempted"] !== devices || accepted !== devices) {
        throw new Error(`the gateway attempted ${String(envelope["devices_attempted"])}, ${accepted} accepted, of ${devices}`)
      }
      return { ms, rss }
    }
    const bare = startBare(dir, {
      ...process.env,
      BARE_URL: standIn.url,
      BARE_CA_FILE: standIn.caFile,
      BARE_KEY: JSON.stringify(bareKey),
      BARE_TOKENS: String(devices),
      BARE_PAYLOAD: payload
    })
    let bareRssPeak = 0
    const sendBare = async () => {
      standIn.received.length = 0
      const growth = sampleRss(bare.pid)
      const ms = await bare.round()
      bareRssPeak = Math.max(bareRssPeak, growth())
      return ms
    }

    const warm = { gateway: await sendThroughGateway(), bare: await sendBare() }
    const ratios: Array<number> = []
    const gatewayRates: Array<number> = []
    const bareRates: Array<number> = []
    let rssPeak = warm.gateway.rss
    for (let r = 0; r < rounds; r++) {
      let g: { ms: number; rss: number }
      let b: number
      if (r % 2 === 0) {
        b = await sendBare()
        g = await sendThroughGateway()
      } else {
        g = await sendThroughGateway()
        b = await sendBare()
      }
      rssPeak = Math.max(rssPeak, g.rss)
      const gRate = devices / (g.ms / 1000)
      const bRate = devices / (b / 1000)
      gatewayRates.push(gRate)
      bareRates.push(bRate)
      ratios.push(gRate / bRate)
      console.error(`round ${r + 1}: gateway ${g.ms.toFixed(0)} ms (${gRate.toFixed(0)}/s, RSS +${(g.rss / MiB).toFixed(1)} MiB), bare ${b.toFixed(0)} ms (${bRate.toFixed(0)}/s), ratio ${(gRate / bRate).toFixed(2)}`)
    }
    const minted = standIn.jwtsSeen() - 1
    const ratio = median(ratios)
    const rows = [
      ["sends per second, 10k devices of one user (median)", median(gatewayRates).toFixed(0), median(bareRates).toFixed(0), ratio.toFixed(2), `>= ${THROUGHPUT_TARGET}`, ratio >= THROUGHPUT_TARGET ? "yes" : "no"],
      ["RSS growth during a send (max, warm-up included)", `${(rssPeak / MiB).toFixed(1)} MiB`, `${(bareRssPeak / MiB).toFixed(1)} MiB`, "-", "gateway < 64 MiB", rssPeak < RSS_TARGET ? "yes" : "no"],
      ["provider tokens minted by the gateway (whole run)", String(minted), "-", "-", "<= 1", minted <= 1 ? "yes" : "no"]
    ]
    console.log(`bench/push: ${devices} devices, ${rounds} rounds (per-round ratios ${ratios.map((x) => x.toFixed(2)).join(" / ")}; warm-up gateway ${warm.gateway.ms.toFixed(0)} ms, bare ${warm.bare.toFixed(0)} ms)`)
    console.log("| measure | gateway | bare http2 | ratio | target | met |")
    console.log("|---|---:|---:|---:|---|---|")
    for (const row of rows) console.log(`| ${row.join(" | ")} |`)
    writeSummary("push", `PUSH_ROUNDS=${rounds} PUSH_DEVICES=${devices}`, [
      atLeast(`push send to ${devices} devices, throughput (22)`, "bare node:http2 client, same requests, one connection", ratio, THROUGHPUT_TARGET, `rounds ${roundsText(ratios)}`),
      below("push send, gateway RSS growth (22)", "-", rssPeak / MiB, RSS_TARGET / MiB, "MiB", `largest of every send, warm-up included; bare client ${(bareRssPeak / MiB).toFixed(1)} MiB`),
      below("push, provider tokens minted over the run (22)", "-", minted, 1, "tokens", "the stand-in counts every token it sees", true)
    ])
    bare.child.process.stdin!.end()
    await stop(bare.child.process, 5000)
    await stop(gateway.child.process, 10_000)
    fs.rmSync(dir, { recursive: true, force: true })
  } finally {
    await stopAll()
    await standIn.stop()
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exitCode = 1
})
