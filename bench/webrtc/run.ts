/**
 * bench/webrtc (issue 39): `POST /v1/webrtc/turn/credentials` through the gateway against
 * `GET /v1/auth/whoami` on the same gateway with the same signed-in session (both are the gate and
 * one keyed hash), side by side in one run, rounds alternating which goes first. Target: the
 * credentials' requests per second >= 0.8 of whoami's (median of the rounds).
 *
 * The signalling and media rows of next-wave §3f wait for the SFU (docs/webrtc.md, "Not built yet").
 *
 * Layout: the gateway (the bundle, embedded engines) on CPU 0, wrk -t1 -c64 on CPU 1. Knobs:
 * WEBRTC_ROUNDS (5), WEBRTC_DURATION (seconds per side per round, 5), WEBRTC_GATEWAY_NODE_ARGS (more
 * node arguments for the gateway, e.g. `--cpu-prof`).
 */
import { spawnSync } from "node:child_process"
import { Wallet } from "ethers"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { buildBundle, freePort, logTail, startPinned, stopAll, waitUntil } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { pinSelf } from "../support/processes.js"
import { median } from "../support/stats.js"
import { atLeast, rounds as roundsText, writeSummary } from "../support/summary.js"
import { wrk } from "../support/wrk.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const int = (name: string, fallback: number) => Math.max(1, Math.round(Number(process.env[name] ?? fallback)))
const rounds = int("WEBRTC_ROUNDS", 5)
const durationS = int("WEBRTC_DURATION", 5)
/** More node arguments for the gateway (`--cpu-prof --cpu-prof-dir=…` to profile it). */
const gatewayNodeArgs = (process.env["WEBRTC_GATEWAY_NODE_ARGS"] ?? "").split(" ").filter((a) => a !== "")
const TARGET = 0.8

for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stopAll().then(() => process.exit(130)))

const json = async (url: string, init: RequestInit) => {
  const res = await fetch(url, init)
  const text = await res.text()
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${url} answered ${res.status}: ${text}`)
  return JSON.parse(text) as Record<string, any>
}

const main = async () => {
  buildBundle()
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-webrtc-"))
  try {
    const dataDir = path.join(dir, "data")
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORTICO_RATE_LIMIT: "false",
      PORTICO_LOG_REQUESTS: "false",
      PORTICO_SKIP_BUILD: "1",
      PORTICO_NODE_ID: "bench",
      // credentials are minted without calling the TURN server: an address that is never dialled
      PORTICO_TURN_URIS: "turn:127.0.0.1:3478?transport=udp",
      PORTICO_TURN_SECRET: "bench-turn-secret"
    }
    delete env.PORTICO_RQLITE_URL
    delete env.PORTICO_REDIS_URL
    const created = spawnSync(process.execPath, ["bin/portico.mjs", "namespace", "create", "rtcbench", "--data-dir", dataDir], { cwd: root, env, encoding: "utf8" })
    if (created.status !== 0) throw new Error(`namespace create failed: ${created.stderr}`)
    const owner = { authorization: `Bearer ${String(JSON.parse(created.stdout).api_key)}`, "content-type": "application/json" }
    const port = await freePort()
    const gateway = startPinned("gateway", dir, process.execPath, ["--enable-source-maps", ...gatewayNodeArgs, "bin/portico.mjs", "serve", "--port", String(port), "--data-dir", dataDir], { env })
    await waitUntil(gateway, () => fs.readFileSync(gateway.log, "utf8").includes('"msg":"listening"'), 60_000)
    const url = `http://127.0.0.1:${port}`
    const member = Wallet.createRandom()
    await json(`${url}/v1/namespace/members`, { method: "POST", headers: owner, body: JSON.stringify({ wallet: member.address, role: "runtime" }) })
    await json(`${url}/v1/namespace/webrtc/enable`, { method: "POST", headers: owner, body: "{}" })
    const challenge = await json(`${url}/v1/auth/challenge`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ wallet: member.address, namespace: "rtcbench" }) })
    const session = await json(`${url}/v1/auth/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message: challenge.message, signature: await member.signMessage(challenge.message) })
    })
    const bearer = { Authorization: `Bearer ${String(session.access_token)}` }
    const sides = {
      whoami: { name: "whoami", url: `${url}/v1/auth/whoami`, headers: bearer },
      credentials: { name: "credentials", url: `${url}/v1/webrtc/turn/credentials`, method: "POST", body: "{}", headers: bearer }
    }
    const checked = await json(sides.credentials.url, { method: "POST", headers: { ...bearer, "content-type": "application/json" }, body: "{}" })
    if (!String(checked.username).endsWith(":rtcbench")) throw new Error(`unexpected credentials ${JSON.stringify(checked)}`)
    const run = async (which: keyof typeof sides) => {
      const sample = await wrk(dir, sides[which], durationS)
      if (sample.errors > 0) throw new Error(`${which}: ${sample.errors} errors\n${logTail(gateway)}`)
      return sample.rps
    }
    await run("whoami")
    await run("credentials")
    const ratios: Array<number> = []
    const results: Array<{ c: number; w: number }> = []
    for (let r = 0; r < rounds; r++) {
      const credentialsFirst = r % 2 === 1
      const one = await run(credentialsFirst ? "credentials" : "whoami")
      const two = await run(credentialsFirst ? "whoami" : "credentials")
      const [c, w] = credentialsFirst ? [one, two] : [two, one]
      results.push({ c, w })
      ratios.push(c / w)
      console.error(`round ${r + 1}: credentials ${c.toFixed(0)}/s, whoami ${w.toFixed(0)}/s, ratio ${(c / w).toFixed(2)}`)
    }
    const ratio = median(ratios)
    console.log(`bench/webrtc: ${rounds} rounds of ${durationS} s per side, wrk -t1 -c64, one signed-in session`)
    console.log("| measure | credentials /s | whoami /s | ratio | target | met |")
    console.log("|---|---:|---:|---:|---|---|")
    console.log(`| TURN credentials against whoami (median) | ${median(results.map((x) => x.c)).toFixed(0)} | ${median(results.map((x) => x.w)).toFixed(0)} | ${ratio.toFixed(2)} | >= ${TARGET} | ${ratio >= TARGET ? "yes" : "no"} |`)
    writeSummary("webrtc", `WEBRTC_ROUNDS=${rounds} WEBRTC_DURATION=${durationS}`, [
      atLeast("webrtc: TURN credentials against whoami (39)", "GET /v1/auth/whoami, same session, same gateway", ratio, TARGET, `rounds ${roundsText(ratios)}`)
    ])
  } finally {
    await stopAll()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exitCode = 1
})
