/**
 * bench/vault (issue 39): a 64 KiB envelope pushed and pulled through the gateway's vault on three
 * nodes (each a gateway on its own loopback address, 127.0.0.41-43, sharing one rqlited registry,
 * each guardian in its own store) against the anchor (anchor.ts: a bare front doing the same
 * verification, split or combine, and a POST to each of three 30-line SQLite share stores), side
 * by side in one run, rounds alternating which goes first.
 *
 * Targets: pushes per second and pulls per second through the gateway each >= 0.5 of the anchor's
 * (median of the rounds). Reported beside them: split and combine times of a 512 KiB envelope.
 *
 * Layout: every server (the three gateways, rqlited, the anchor's front and stores) on CPU 0; this
 * driver, the client, signing every request, on CPU 1. Knobs: VAULT_ROUNDS (5), VAULT_DURATION
 * (seconds per side per round, 5), VAULT_CONCURRENCY (8), VAULT_ENVELOPE_KIB (64),
 * VAULT_GATEWAY_NODE_ARGS (more node arguments for the gateways, e.g. `--cpu-prof`), VAULT_ACTIONS
 * (`push,pull`; one alone to profile it).
 *
 * Beside the rates: the servers' CPU per operation (utime + stime from /proc over each counted
 * round, divided by the operations done), for the front gateway, the other two gateways together,
 * rqlited, and the anchor's front and stores. Steadier than the rates when other work shares the
 * machine, since it counts only the servers' own CPU.
 */
import { spawnSync } from "node:child_process"
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { combine, split } from "../../src/domain/Shamir.js"
import { rqlitedPath } from "../../test/support/rqlited.js"
import { buildBundle, type Child, freePort, logTail, startPinned, stopAll, waitUntil } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { pinSelf } from "../support/processes.js"
import { median } from "../support/stats.js"
import { atLeast, reported, rounds as roundsText, writeSummary } from "../support/summary.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const int = (name: string, fallback: number) => Math.max(1, Math.round(Number(process.env[name] ?? fallback)))
const rounds = int("VAULT_ROUNDS", 5)
const durationS = int("VAULT_DURATION", 5)
const concurrency = int("VAULT_CONCURRENCY", 8)
const envelopeKiB = int("VAULT_ENVELOPE_KIB", 64)
/** Which measures run (`push,pull`; one alone to profile it). */
const actions = (process.env["VAULT_ACTIONS"] ?? "push,pull").split(",").filter((a): a is "push" | "pull" => a === "push" || a === "pull")
/** More node arguments for the gateways (`--cpu-prof --cpu-prof-dir=…` to profile them). */
const gatewayNodeArgs = (process.env["VAULT_GATEWAY_NODE_ARGS"] ?? "").split(" ").filter((a) => a !== "")
const TARGET = 0.5
const hosts = ["127.0.0.41", "127.0.0.42", "127.0.0.43"]
const REGISTRY = "127.0.0.40"
const GATEWAY_PORT = 8080

for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stopAll().then(() => process.exit(130)))

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 })
const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...headers } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }))
    })
    req.on("error", reject)
    req.end(body)
  })

interface Identity {
  readonly identity: string
  readonly pubkey: string
  readonly key: KeyObject
  version: number
  lastSecond: number
}
const identity = (): Identity => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519")
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(12)
  return { identity: createHash("sha256").update(raw).digest("hex"), pubkey: raw.toString("hex"), key: privateKey, version: 0, lastSecond: 0 }
}
const signHex = (key: KeyObject, message: string) => sign(null, Buffer.from(message), key).toString("hex")

const envelope = new Uint8Array(randomBytes(envelopeKiB * 1024))
const envelopeText = Buffer.from(envelope).toString("base64")
const digest = createHash("sha256").update(envelope).digest("hex")
const pushBody = (id: Identity) => {
  id.version += 1
  return JSON.stringify({ identity: id.identity, version: id.version, envelope: envelopeText, pubkey: id.pubkey, signature: signHex(id.key, `vault-push-v2:${id.identity}:${id.version}:${digest}`) })
}
/** A pull signed for a second this identity has not signed before (each pull signature is honoured once). */
const pullBody = (ids: ReadonlyArray<Identity>, turn: number) => {
  const now = Math.floor(Date.now() / 1000)
  for (let i = 0; i < ids.length; i++) {
    const id = ids[(turn + i) % ids.length]!
    const second = Math.max(id.lastSecond + 1, now - 110)
    if (second > now + 110) continue
    id.lastSecond = second
    return JSON.stringify({ identity: id.identity, timestamp: second, pubkey: id.pubkey, signature: signHex(id.key, `vault-pull-v1:${id.identity}:${second}`) })
  }
  throw new Error("every identity has signed a pull for every second in the window")
}

/** `concurrency` clients sending `next()` bodies to `url` for the round: requests per second, and how many were done. */
const load = async (url: string, next: (worker: number) => string, headers: Record<string, string>) => {
  let done = 0
  const until = performance.now() + durationS * 1000
  const started = performance.now()
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < until) {
        const answer = await post(url, next(worker), headers)
        if (answer.status !== 200) throw new Error(`${url} answered ${answer.status}: ${answer.text.slice(0, 300)}`)
        done++
      }
    })
  )
  return { rate: done / ((performance.now() - started) / 1000), done }
}

/** A process's CPU time so far in ms (user + system, or system alone with `sys`; from /proc/<pid>/stat). */
const cpuMsOf = (pid: number | undefined, sys = false): number => {
  if (pid === undefined) return 0
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((sys ? 0 : Number(fields[11])) + Number(fields[12])) * 1000 / CLOCK_TICKS
  } catch {
    return 0
  }
}
const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

const readyLine = async (child: Child) => {
  const line = await readline.createInterface({ input: child.process.stdout! })[Symbol.asyncIterator]().next()
  if (line.value !== "READY") throw new Error(`${child.name} did not start\n${logTail(child)}`)
}

const main = async () => {
  if (!fs.existsSync(rqlitedPath())) throw new Error("rqlited is missing: bash scripts/engines.sh rqlite")
  buildBundle()
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-vault-"))
  try {
    const rqlited = startPinned("rqlited", dir, rqlitedPath(), ["-node-id", "registry", "-http-addr", `${REGISTRY}:4001`, "-raft-addr", `${REGISTRY}:4002`, path.join(dir, "rqlite")])
    await waitUntil(rqlited, async () => (await fetch(`http://${REGISTRY}:4001/readyz`, { signal: AbortSignal.timeout(1000) })).status === 200, 90_000)
    const envOf = (i: number): NodeJS.ProcessEnv => {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        PORTICO_SECRET: "7e".repeat(32),
        PORTICO_NODE_ID: `node-${i + 1}`,
        PORTICO_HOST: hosts[i],
        PORTICO_RQLITE_URL: `http://${REGISTRY}:4001`,
        PORTICO_RATE_LIMIT: "false",
        PORTICO_LOG_REQUESTS: "false",
        PORTICO_SKIP_BUILD: "1",
        PORTICO_VAULT_CLIENT_PUSHES_PER_MINUTE: "1000000",
        PORTICO_VAULT_CLIENT_PULLS_PER_MINUTE: "1000000",
        PORTICO_VAULT_IDENTITY_PUSHES_PER_HOUR: "1000000",
        PORTICO_VAULT_IDENTITY_PULLS_PER_HOUR: "1000000"
      }
      delete env.PORTICO_REDIS_URL
      return env
    }
    const gateways = hosts.map((host, i) => {
      const child = startPinned(`node-${i + 1}`, dir, process.execPath, ["--enable-source-maps", ...gatewayNodeArgs, "bin/portico.mjs", "serve", "--port", String(GATEWAY_PORT), "--data-dir", path.join(dir, `node-${i + 1}`)], { env: envOf(i) })
      return { host, child }
    })
    for (const g of gateways) await waitUntil(g.child, () => fs.readFileSync(g.child.log, "utf8").includes('"msg":"listening"'), 90_000)
    const cli = spawnSync(process.execPath, ["bin/portico.mjs", "namespace", "create", "vaultbench", "--data-dir", path.join(dir, "node-1")], { cwd: root, env: envOf(0), encoding: "utf8" })
    if (cli.status !== 0) throw new Error(`namespace create failed: ${cli.stderr}`)
    const auth = { authorization: `Bearer ${String((JSON.parse(cli.stdout) as { api_key: string }).api_key)}` }
    const front = `http://${hosts[0]}:${GATEWAY_PORT}`
    await waitUntil(gateways[0]!.child, async () => {
      const res = await fetch(`${front}/v1/vault/health`, { headers: auth, signal: AbortSignal.timeout(2000) })
      return res.status === 200 && ((await res.json()) as { healthy: number }).healthy === 3
    }, 60_000)

    const storeUrls: Array<string> = []
    const stores: Array<Child> = []
    for (let i = 0; i < 3; i++) {
      const port = await freePort()
      const storeDir = path.join(dir, `store-${i + 1}`)
      fs.mkdirSync(storeDir)
      const store = startPinned(`store-${i + 1}`, dir, process.execPath, ["--import", "tsx", path.join(here, "anchor.ts"), "store", "127.0.0.1", String(port), storeDir], { pipeStdout: true })
      await readyLine(store)
      stores.push(store)
      storeUrls.push(`http://127.0.0.1:${port}`)
    }
    const anchorPort = await freePort()
    const anchor = startPinned("anchor", dir, process.execPath, ["--import", "tsx", path.join(here, "anchor.ts"), "front", String(anchorPort), ...storeUrls], { pipeStdout: true })
    await readyLine(anchor)
    const anchorUrl = `http://127.0.0.1:${anchorPort}`
    /** The processes whose CPU a round of each side counts, by role. */
    const roles = {
      gateway: { front: [gateways[0]!.child], peers: [gateways[1]!.child, gateways[2]!.child], rqlited: [rqlited] },
      anchor: { front: [anchor], stores: stores }
    }

    const sides = {
      gateway: { push: `${front}/v1/vault/push`, pull: `${front}/v1/vault/pull`, headers: auth, pushers: [] as Array<Identity>, pulled: [] as Array<Identity> },
      anchor: { push: `${anchorUrl}/push`, pull: `${anchorUrl}/pull`, headers: {}, pushers: [] as Array<Identity>, pulled: [] as Array<Identity> }
    }
    for (const side of Object.values(sides)) {
      side.pushers = Array.from({ length: concurrency }, identity)
      side.pulled = Array.from({ length: 64 }, identity)
      for (const id of side.pulled) {
        const answer = await post(side.push, pushBody(id), side.headers)
        if (answer.status !== 200) throw new Error(`a pull identity's push answered ${answer.status}: ${answer.text}`)
      }
    }
    let turn = 0
    type Cpu = Record<string, number>
    /** Each role's CPU ms so far, and the front's system time alone (`front sys`: its socket writes and reads, its flushes). */
    const cpuNow = (which: "gateway" | "anchor"): Cpu => ({
      ...Object.fromEntries(Object.entries(roles[which]).map(([role, children]) => [role, children.reduce((sum, c) => sum + cpuMsOf(c.process.pid), 0)])),
      "front sys": cpuMsOf(roles[which].front[0]!.process.pid, true)
    })
    /** One side's round: its rate, and its servers' CPU ms per operation by role. */
    const run = async (which: "gateway" | "anchor", action: "push" | "pull") => {
      const side = sides[which]
      const before = cpuNow(which)
      const { rate, done } = await (action === "push"
        ? load(side.push, (worker) => pushBody(side.pushers[worker]!), side.headers)
        : load(side.pull, () => pullBody(side.pulled, turn++), side.headers))
      const after = cpuNow(which)
      const cpu: Cpu = Object.fromEntries(Object.keys(after).map((role) => [role, (after[role]! - before[role]!) / Math.max(1, done)]))
      return { rate, cpu }
    }
    const cpuText = (cpu: Cpu) => Object.entries(cpu).map(([role, ms]) => `${role} ${ms.toFixed(2)}`).join(", ")
    const results: Record<"push" | "pull", Array<{ g: number; a: number; gCpu: Cpu; aCpu: Cpu }>> = { push: [], pull: [] }
    for (const action of actions) {
      // one uncounted pass of each side: the first seconds of a path measure its JIT warming up
      await run("gateway", action)
      await run("anchor", action)
      for (let r = 0; r < rounds; r++) {
        const gatewayFirst = r % 2 === 1
        const one = await run(gatewayFirst ? "gateway" : "anchor", action)
        const two = await run(gatewayFirst ? "anchor" : "gateway", action)
        const [g, a] = gatewayFirst ? [one, two] : [two, one]
        results[action].push({ g: g.rate, a: a.rate, gCpu: g.cpu, aCpu: a.cpu })
        console.error(
          `${action} round ${r + 1}: gateway ${g.rate.toFixed(0)}/s, anchor ${a.rate.toFixed(0)}/s, ratio ${(g.rate / a.rate).toFixed(2)}; ` +
            `CPU ms/op gateway: ${cpuText(g.cpu)}; anchor: ${cpuText(a.cpu)}`
        )
      }
    }

    // split and combine of an envelope at the cap, in this process (the same code the gateway runs)
    const big = new Uint8Array(randomBytes(512 * 1024))
    const splits: Array<number> = []
    const combines: Array<number> = []
    for (let i = 0; i < 7; i++) {
      let t = performance.now()
      const shares = split(big, 3, 2)
      splits.push(performance.now() - t)
      t = performance.now()
      combine([shares[0]!, shares[2]!])
      combines.push(performance.now() - t)
    }

    const ratioOf = (action: "push" | "pull") => median(results[action].map((x) => x.g / x.a))
    console.log(`bench/vault: ${rounds} rounds of ${durationS} s per side, ${concurrency} in flight, ${envelopeKiB} KiB envelope, 3 nodes`)
    console.log("| measure | gateway /s | anchor /s | ratio | target | met |")
    console.log("|---|---:|---:|---:|---|---|")
    for (const action of actions) {
      const ratio = ratioOf(action)
      console.log(`| ${action} (median) | ${median(results[action].map((x) => x.g)).toFixed(0)} | ${median(results[action].map((x) => x.a)).toFixed(0)} | ${ratio.toFixed(2)} | >= ${TARGET} | ${ratio >= TARGET ? "yes" : "no"} |`)
    }
    const medianCpu = (cpus: ReadonlyArray<Cpu>): Cpu => Object.fromEntries(Object.keys(cpus[0] ?? {}).map((role) => [role, median(cpus.map((c) => c[role]!))]))
    for (const action of actions) {
      console.log(
        `${action} CPU ms per operation (medians): gateway ${cpuText(medianCpu(results[action].map((x) => x.gCpu)))}; ` +
          `anchor ${cpuText(medianCpu(results[action].map((x) => x.aCpu)))}`
      )
    }
    console.log(`split of 512 KiB into 3: ${median(splits).toFixed(1)} ms; combine of 2: ${median(combines).toFixed(1)} ms (medians of 7)`)
    const anchorText = "a bare front: node:crypto verify, the same split/combine, POSTs to three SQLite share stores"
    // the summary holds both measures: a run of one alone (to profile it) writes none
    if (actions.length === 2) writeSummary("vault", `VAULT_ROUNDS=${rounds} VAULT_DURATION=${durationS} VAULT_CONCURRENCY=${concurrency} VAULT_ENVELOPE_KIB=${envelopeKiB}`, [
      atLeast("vault push, 3 nodes (39)", anchorText, ratioOf("push"), TARGET, `rounds ${roundsText(results.push.map((x) => x.g / x.a))}`),
      atLeast("vault pull, 3 nodes (39)", anchorText, ratioOf("pull"), TARGET, `rounds ${roundsText(results.pull.map((x) => x.g / x.a))}`),
      reported("vault split of 512 KiB into 3 shares (39)", "-", median(splits), "ms", `combine of 2: ${median(combines).toFixed(1)} ms`)
    ])
  } finally {
    agent.destroy()
    await stopAll()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exitCode = 1
})
