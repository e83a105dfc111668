/**
 * Sign-in and refresh throughput of a real gateway process, and the per-request cost of a
 * session JWT against an API key on whoami.
 *
 *   npx tsx bench/auth/run.ts            (AUTH_N=400 AUTH_CONCURRENCY=16)
 *
 * Wallet signing happens on the client before the timed phase (it is the wallet's cost, not the
 * gateway's): challenges are fetched and signed first, then verify is timed alone.
 */
import { Wallet } from "ethers"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { startBackgroundLoad } from "../support/load.js"
import { reported, type TargetResult, writeSummary } from "../support/summary.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const N = Number(process.env.AUTH_N ?? 400)
const C = Number(process.env.AUTH_CONCURRENCY ?? 16)

const pool = async <T>(items: ReadonlyArray<T>, work: (item: T) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < items.length) {
        const item = items[next++]
        if (item !== undefined) await work(item)
      }
    })
  )
}

/** Each timed phase's rate, for the bench summary (no targets: reported beside them). */
const rates: Array<TargetResult> = []

const timed = async (label: string, count: number, run: () => Promise<void>) => {
  const t = performance.now()
  await run()
  const s = (performance.now() - t) / 1000
  rates.push(reported(`sign-in bench: ${label}`, "-", count / s, "/s", `${count} at concurrency ${C}`))
  process.stdout.write(`${label.padEnd(28)} ${(count / s).toFixed(0).padStart(6)} /s  (${count} in ${s.toFixed(2)} s, concurrency ${C})\n`)
}

const post = async (url: string, body: unknown, token?: string) => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
    body: JSON.stringify(body)
  })
  const json: unknown = await res.json()
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${JSON.stringify(json)}`)
  return json as Record<string, string>
}

const main = async () => {
  startBackgroundLoad()
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-auth-bench-"))
  const env = { ...process.env, PORTICO_RATE_LIMIT: "false", PORTICO_LOG_REQUESTS: "false" }
  const cli = (args: ReadonlyArray<string>) =>
    JSON.parse(execFileSync(process.execPath, ["--import", "tsx", "src/main.ts", ...args, "--data-dir", dataDir], { cwd: root, env }).toString())
  const owner = Wallet.createRandom()
  const created = cli(["namespace", "create", "bench", "--owner", owner.address])
  const server = spawn(process.execPath, ["--max-semi-space-size=64", "--import", "tsx", "src/main.ts", "serve", "--port", "0", "--data-dir", dataDir], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "inherit"]
  })
  const port = await new Promise<number>((resolve) => {
    let buf = ""
    server.stdout?.on("data", (d: Buffer) => {
      buf += d.toString()
      const line = buf.split("\n").find((l) => l.includes('"msg":"listening"'))
      if (line !== undefined) resolve(JSON.parse(line).port)
    })
  })
  const base = `http://127.0.0.1:${port}`
  try {
    // warm-up
    for (let i = 0; i < 20; i++) {
      const c = await post(`${base}/v1/auth/challenge`, { wallet: owner.address, namespace: "bench" })
      await post(`${base}/v1/auth/verify`, { message: c.message, signature: await owner.signMessage(c.message ?? "") })
    }
    const challenges: Array<Record<string, string>> = []
    await timed("challenge", N, () =>
      pool(Array.from({ length: N }, (_, i) => i), async () => {
        challenges.push(await post(`${base}/v1/auth/challenge`, { wallet: owner.address, namespace: "bench" }))
      })
    )
    const signed = await Promise.all(challenges.map(async (c) => ({ message: c.message, signature: await owner.signMessage(c.message ?? "") })))
    const sessions: Array<Record<string, string>> = []
    await timed("verify (sign-in)", N, () =>
      pool(signed, async (s) => {
        sessions.push(await post(`${base}/v1/auth/verify`, s))
      })
    )
    await timed("refresh (rotation)", sessions.length, () =>
      pool(sessions, async (s) => {
        await post(`${base}/v1/auth/refresh`, { refresh_token: s.refresh_token })
      })
    )
    const session = sessions[0]?.access_token ?? ""
    const get = (token: string) => async () => {
      const res = await fetch(`${base}/v1/auth/whoami`, { headers: { authorization: `Bearer ${token}` } })
      await res.arrayBuffer()
    }
    const M = N * 10
    for (const [label, token] of [["whoami, API key", created.api_key], ["whoami, session JWT", session], ["whoami, API key (again)", created.api_key]] as const) {
      await timed(label, M, () => pool(Array.from({ length: M }, (_, i) => i), get(token)))
    }
    writeSummary("auth", `AUTH_N=${N} AUTH_CONCURRENCY=${C}`, rates)
  } finally {
    server.kill("SIGTERM")
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((e: unknown) => {
  process.stderr.write(String(e) + "\n")
  process.exit(1)
})
