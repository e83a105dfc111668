/**
 * SQL benchmark, side by side in one run, each gateway route against its anchor:
 *
 *   1. `POST /v1/rqlite/query` (point read by primary key, 1000-row table) through the gateway
 *      against `rqlited` direct (`POST /db/query?level=weak`), the same rqlited process being
 *      the namespace's cluster SQL store. Target ratio >= 0.7.
 *   2. `POST /v1/rqlite/exec` (one INSERT) through the gateway against rqlited direct
 *      (`POST /db/execute`), same process. Target ratio >= 0.85.
 *   3. `POST /v1/db/sqlite/query` (the same point read on a node-local database) through the
 *      gateway against a bare node:http server running the statement with better-sqlite3
 *      in-process on an equivalent file (bench/sql/servers.ts). Target ratio >= 0.5, and its p99
 *      at most 3x the bare server's (the p99 ratio column).
 *   3b. The same route doing an INSERT (`events`) against the bare server doing the insert.
 *      Target ratio >= 0.5.
 *   3c. The point read on a second namespace's node-local database while the first namespace
 *      runs a runaway statement (`WITH RECURSIVE` counting to 1e12) over and over, each stopped
 *      at the statement timeout (2 s here), against the same read with nothing else running.
 *      The two databases are on the same worker by hash (the worst case). Target ratio >= 0.5.
 *   4. Reference rows, no target: a bare node:http proxy (bench/sql/servers.ts `proxy`) in front
 *      of the same rqlited for 1 and 2, i.e. the least any Node front costs beside rqlited; and
 *      for 1 a bare node:http front that batches reads as the gateway does (servers.ts `batch`:
 *      no credential, guard, statement timeout or answering as stored), i.e. what batching alone
 *      gives.
 *
 * One gateway process serves all three (`src/main.ts serve`, registry embedded, rate limit and
 * request log off, `PORTICO_SQL_RQLITE_URLS=<ns>=<rqlited>`). Gateway (with its SQLite worker
 * processes), rqlited and the bare server run on CPU 0 (`taskset -c 0`); `wrk -t1 -c64` runs on
 * CPU 1. Each round runs every pair (anchor and gateway, order swapped every round) after a
 * warm-up. The summary gives, per comparison, the median over rounds of each round's ratio (the
 * two runs of a round are back to back, so they share the machine's mood: on this shared VM a
 * slow spell of several seconds slows every process on the CPU alike), which decides "met"; the
 * ratio of the two sides' medians beside it; and in how many rounds the ratio met the target.
 *
 *   npx tsx bench/sql/run.ts
 *
 * Needs wrk, taskset and `.engines/bin/rqlited` (`scripts/engines.sh rqlite`, or
 * PORTICO_ENGINES_DIR). Knobs: SQL_DURATION seconds per measured run (5), SQL_ROUNDS (6),
 * SQL_ONLY a word of the comparisons to run (e.g. `exec`, or `node-local` for the three
 * node-local rows), SQL_GATEWAY_NODE_ARGS extra node flags
 * for the gateway process (e.g. "--cpu-prof --cpu-prof-dir=/tmp/p").
 * Everything it writes goes to a temp dir under os.tmpdir(), removed at the end (kept on failure).
 */
import { spawnSync } from "node:child_process"
import { millis, wrk as runWrk, type WrkSample } from "../support/wrk.js"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { freePort, startPinned, stopAll, waitUntil } from "../support/children.js"
import { hasRqlited, rqlitedMissingMessage, rqlitedPath } from "../../test/support/rqlited.js"
import {
  bareAuthorization,
  eventArgs,
  eventsSchema,
  insertEvent,
  insertUser,
  pointId,
  pointRead,
  USERS,
  userRow,
  usersSchema
} from "./shared.js"
import { startBackgroundLoad } from "../support/load.js"
import { median } from "../support/stats.js"
import { atLeast, below, reported, rounds as roundsText, type TargetResult, writeSummary } from "../support/summary.js"
import { hashOf } from "../../src/layers/sql/WorkerPool.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const duration = Math.max(1, Math.round(Number(process.env.SQL_DURATION ?? 5)))
const rounds = Math.max(1, Math.round(Number(process.env.SQL_ROUNDS ?? 6)))
const warmup = Math.max(1, Math.round(duration / 4))
const namespace = "sqlbench"
const databaseName = "bench"
/** The namespace whose reads go on beside the runaway, and its database. */
const otherNamespace = "sqlbench2"
const runawayTimeoutMs = 2000
const sqlWorkers = 2
/** Counts to 1e12: runs until the statement timeout stops it. */
const runawaySql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000) SELECT count(*) FROM c"

/** One wrk run: a run with any error (non-2xx answers, socket errors) is not a fair number. */
type Sample = WrkSample

/** One side of a comparison: where wrk sends which body with which headers. */
interface Target {
  readonly name: string
  readonly url: string
  readonly body: string
  readonly authorization: string | undefined
  /** A substring the answer must hold, checked once before the load. */
  readonly expect: string
}

interface Pair {
  readonly label: string
  readonly anchor: Target
  readonly gateway: Target
  /** Lowest acceptable gateway/anchor ratio, if the comparison has one. */
  readonly target: number | undefined
  /** Highest acceptable gateway/anchor p99 ratio, if the comparison has one. */
  readonly p99Target?: number
  /** Load started before the gateway side's run and stopped after it; says what it did. */
  readonly during?: () => () => Promise<string>
}

// ---- child processes (bench/support/children.ts) ----------------------------------------

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void stopAll().then(() => process.exit(130))
  })
}

const answers = (url: string, init?: RequestInit) => async () => (await fetch(url, { ...init, signal: AbortSignal.timeout(2000) })).ok

// ---- servers -----------------------------------------------------------------------------

const startRqlited = async (dir: string) => {
  const httpPort = await freePort()
  const raftPort = await freePort()
  const url = `http://127.0.0.1:${httpPort}`
  // Short Raft timeouts as in test/support/rqlited.ts: a single node elects itself quickly.
  const child = startPinned("rqlited", dir, rqlitedPath(), [
    "-node-id", "n1",
    "-http-addr", `127.0.0.1:${httpPort}`,
    "-raft-addr", `127.0.0.1:${raftPort}`,
    "-raft-election-timeout", "200ms",
    "-raft-timeout", "200ms",
    "-raft-leader-lease-timeout", "200ms",
    path.join(dir, "rqlite-data")
  ])
  await waitUntil(child, answers(`${url}/readyz`))
  return url
}

const startGateway = async (dir: string, rqliteUrl: string) => {
  const dataDir = path.join(dir, "gateway")
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORTICO_RATE_LIMIT: "false",
    PORTICO_LOG_REQUESTS: "false",
    PORTICO_SQL_TIMEOUT_MS: String(runawayTimeoutMs),
    PORTICO_SQL_WORKERS: String(sqlWorkers)
  }
  delete env.PORTICO_RQLITE_URL // the registry stays embedded
  const createNamespace = (name: string) => {
    const created = spawnSync(process.execPath, ["--import", "tsx", "src/main.ts", "namespace", "create", name, "--data-dir", dataDir], {
      cwd: root,
      env,
      encoding: "utf8"
    })
    if (created.status !== 0) throw new Error(`namespace create failed (${created.status}): ${created.stderr}`)
    const line = created.stdout.trim().split("\n").pop() ?? ""
    const parsed: unknown = JSON.parse(line)
    const key = typeof parsed === "object" && parsed !== null && "api_key" in parsed && typeof parsed.api_key === "string" ? parsed.api_key : ""
    if (key === "") throw new Error(`namespace create printed no api_key: ${line}`)
    return key
  }
  const apiKey = createNamespace(namespace)
  const otherKey = createNamespace(otherNamespace)

  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child = startPinned(
    "gateway",
    dir,
    process.execPath,
    [
      ...(process.env.SQL_GATEWAY_NODE_ARGS ?? "").split(" ").filter((a) => a !== ""),
      "--import",
      "tsx",
      "src/main.ts",
      "serve",
      "--port",
      String(port),
      "--data-dir",
      dataDir
    ],
    { env: { ...env, PORTICO_SQL_RQLITE_URLS: `${namespace}=${rqliteUrl}` } }
  )
  await waitUntil(child, answers(`${url}/health`))
  // the other namespace's database on the same worker as the first's (WorkerPool.ts routes an
  // idle file by this hash), so the runaway row measures the worst case
  const fileOf = (ns: string, name: string) => path.join(dataDir, "databases", ns, `${name}.db`)
  const lane = hashOf(fileOf(namespace, databaseName)) % sqlWorkers
  let otherDatabase = "bench"
  for (let i = 0; hashOf(fileOf(otherNamespace, otherDatabase)) % sqlWorkers !== lane; i++) otherDatabase = `bench${i}`
  return { url, authorization: `Bearer ${apiKey}`, other: { authorization: `Bearer ${otherKey}`, database: otherDatabase } }
}

const startBare = async (dir: string) => {
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child = startPinned("bare", dir, process.execPath, ["--import", "tsx", path.join(here, "servers.ts"), "bare", String(port), path.join(dir, "bare.db")])
  // any HTTP answer means it listens (the file is built before listen)
  await waitUntil(child, async () => (await fetch(url, { signal: AbortSignal.timeout(2000) })).status > 0)
  return url
}

// ---- requests ----------------------------------------------------------------------------

/**
 * A bare node:http front of rqlited from bench/sql/servers.ts, for the reference rows: `proxy`
 * (one request to rqlited per request) or `batch` (reads sent together, as the gateway does).
 */
const startFront = async (kind: "proxy" | "batch", dir: string, rqliteUrl: string) => {
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child = startPinned(kind, dir, process.execPath, ["--import", "tsx", path.join(here, "servers.ts"), kind, String(port), rqliteUrl])
  await waitUntil(child, async () => (await fetch(url, { signal: AbortSignal.timeout(2000) })).status > 0)
  return url
}

const post = async (url: string, body: unknown, authorization?: string) => {
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (authorization !== undefined) headers.authorization = authorization
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) })
  const text = await response.text()
  if (!response.ok) throw new Error(`${url} answered ${response.status}: ${text}`)
  return text
}

type Gateway = Awaited<ReturnType<typeof startGateway>>

/** Tables through the gateway: `users` and `events` (cluster store and node-local, both namespaces). */
const fill = async (gateway: Gateway) => {
  const call = (route: string, body: unknown) => post(gateway.url + route, body, gateway.authorization)
  await call("/v1/rqlite/create-table", { schema: usersSchema })
  await call("/v1/rqlite/create-table", { schema: eventsSchema })
  const ids = Array.from({ length: USERS }, (_, i) => i + 1)
  for (let i = 0; i < ids.length; i += 1000) {
    const ops = ids.slice(i, i + 1000).map((id) => ({ kind: "exec", sql: insertUser, args: userRow(id) }))
    await call("/v1/rqlite/transaction", { ops })
  }

  const local = async (database_name: string, authorization: string) => {
    const call = (body: unknown) => post(`${gateway.url}/v1/db/sqlite/${"query" in (body as object) ? "query" : "create"}`, body, authorization)
    await call({ database_name })
    await call({ database_name, query: usersSchema })
    await call({ database_name, query: eventsSchema })
    for (let i = 0; i < ids.length; i += 250) {
      const chunk = ids.slice(i, i + 250)
      await call({
        database_name,
        query: `INSERT INTO users (id, name, age) VALUES ${chunk.map(() => "(?, ?, ?)").join(", ")}`,
        params: chunk.flatMap((id) => userRow(id))
      })
    }
  }
  await local(databaseName, gateway.authorization)
  await local(gateway.other.database, gateway.other.authorization)
}

/**
 * The runaway statement on the first namespace's database, sent again each time the timeout
 * stops it, until stopped; says how many were stopped and how (each must be STATEMENT_TIMEOUT).
 */
const runaway = (gateway: Gateway) => () => {
  let running = true
  const answers = new Map<string, number>()
  const loop = (async () => {
    while (running) {
      const response = await fetch(`${gateway.url}/v1/db/sqlite/query`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: gateway.authorization },
        body: JSON.stringify({ database_name: databaseName, query: runawaySql })
      })
      const text = await response.text()
      const code = /"code":"(\w+)"/.exec(text)?.[1] ?? String(response.status)
      answers.set(code, (answers.get(code) ?? 0) + 1)
    }
  })()
  return async () => {
    running = false
    await loop
    return [...answers].map(([code, n]) => `${n} ${code}`).join(", ")
  }
}

/** Sends the target's request once and checks the answer, so wrk never measures an error page. */
const check = async (target: Target) => {
  const text = await post(target.url, JSON.parse(target.body), target.authorization)
  if (!text.includes(target.expect) || /"error"/.test(text)) throw new Error(`${target.name}: unexpected answer ${text}`)
}

// ---- wrk ---------------------------------------------------------------------------------

/** Runs wrk (bench/support/wrk.ts) with the target's POST: a row's background load (`during`) keeps going. */
const wrk = (dir: string, target: Target, seconds: number): Promise<Sample> =>
  runWrk(
    dir,
    { name: target.name, url: target.url, method: "POST", body: target.body, headers: target.authorization === undefined ? {} : { Authorization: target.authorization } },
    seconds
  )

// ---- main --------------------------------------------------------------------------------

const pairs = (
  rqliteUrl: string,
  gateway: Gateway,
  bareUrl: string,
  proxyUrl: string,
  batchUrl: string
): ReadonlyArray<Pair> => {
  const statement = (sql: string, args: ReadonlyArray<unknown>) => JSON.stringify({ sql, args })
  const direct = (sql: string, args: ReadonlyArray<unknown>) => JSON.stringify([[sql, ...args]])
  const nodeLocal = JSON.stringify({ database_name: databaseName, query: pointRead, params: [pointId] })
  const nodeLocalInsert = JSON.stringify({ database_name: databaseName, query: insertEvent, params: eventArgs })
  const otherRead: Target = {
    name: `gateway /v1/db/sqlite/query (${otherNamespace})`,
    url: gateway.url + "/v1/db/sqlite/query",
    body: JSON.stringify({ database_name: gateway.other.database, query: pointRead, params: [pointId] }),
    authorization: gateway.other.authorization,
    expect: JSON.stringify(userRow(pointId))
  }
  const row = JSON.stringify(userRow(pointId)) // [42,"user-42",60] in every answer
  const inserted = `"rows_affected":1`
  const viaGateway = (route: string, body: string, expect: string): Target => ({
    name: `gateway ${route}`,
    url: gateway.url + route,
    body,
    authorization: gateway.authorization,
    expect
  })
  return [
    {
      label: "cluster query (point read)",
      anchor: { name: "rqlited /db/query?level=weak", url: `${rqliteUrl}/db/query?level=weak`, body: direct(pointRead, [pointId]), authorization: undefined, expect: row },
      gateway: viaGateway("/v1/rqlite/query", statement(pointRead, [pointId]), row),
      target: 0.7
    },
    {
      label: "cluster exec (insert)",
      anchor: { name: "rqlited /db/execute", url: `${rqliteUrl}/db/execute`, body: direct(insertEvent, eventArgs), authorization: undefined, expect: inserted },
      gateway: viaGateway("/v1/rqlite/exec", statement(insertEvent, eventArgs), inserted),
      target: 0.85
    },
    {
      label: "node-local query (point read)",
      anchor: { name: "bare node:http + better-sqlite3", url: `${bareUrl}/v1/db/sqlite/query`, body: nodeLocal, authorization: bareAuthorization, expect: row },
      gateway: viaGateway("/v1/db/sqlite/query", nodeLocal, row),
      target: 0.5,
      p99Target: 3
    },
    {
      label: "node-local insert",
      anchor: { name: "bare node:http + better-sqlite3 insert", url: `${bareUrl}/v1/db/sqlite/query`, body: nodeLocalInsert, authorization: bareAuthorization, expect: inserted },
      gateway: { ...viaGateway("/v1/db/sqlite/query", nodeLocalInsert, inserted), name: "gateway /v1/db/sqlite/query insert" },
      target: 0.5
    },
    {
      label: "node-local read beside a runaway",
      anchor: { ...otherRead, name: `${otherRead.name}, unloaded` },
      gateway: { ...otherRead, name: `${otherRead.name}, ${namespace} runaway` },
      target: 0.5,
      during: runaway(gateway)
    },
    // What a Node front costs at the least: no credential, guard or reshaping (servers.ts proxy).
    {
      label: "reference: node:http proxy, query",
      anchor: { name: "rqlited /db/query?level=weak", url: `${rqliteUrl}/db/query?level=weak`, body: direct(pointRead, [pointId]), authorization: undefined, expect: row },
      gateway: { name: "node:http proxy /v1/rqlite/query", url: `${proxyUrl}/v1/rqlite/query`, body: statement(pointRead, [pointId]), authorization: undefined, expect: row },
      target: undefined
    },
    {
      label: "reference: node:http batching front, query",
      anchor: { name: "rqlited /db/query?level=weak", url: `${rqliteUrl}/db/query?level=weak`, body: direct(pointRead, [pointId]), authorization: undefined, expect: row },
      gateway: { name: "node:http batching front /v1/rqlite/query", url: `${batchUrl}/v1/rqlite/query`, body: statement(pointRead, [pointId]), authorization: undefined, expect: row },
      target: undefined
    },
    {
      label: "reference: node:http proxy, exec",
      anchor: { name: "rqlited /db/execute", url: `${rqliteUrl}/db/execute`, body: direct(insertEvent, eventArgs), authorization: undefined, expect: inserted },
      gateway: { name: "node:http proxy /v1/rqlite/exec", url: `${proxyUrl}/v1/rqlite/exec`, body: statement(insertEvent, eventArgs), authorization: undefined, expect: inserted },
      target: undefined
    }
  ]
}

/**
 * A comparison's entries in the bench summary, named as docs/performance.md names the targets.
 * The cluster read's target holds in every round (issue 21), so its figure is the lowest round.
 */
const summaryOf = (pair: Pair, perRound: ReadonlyArray<number>, p99Ratio: number): ReadonlyArray<TargetResult> => {
  const anchor = pair.anchor.name
  const detail = `rounds ${roundsText(perRound)}`
  switch (pair.label) {
    case "cluster query (point read)":
      return [atLeast("cluster read, in every round (5, 21)", anchor, Math.min(...perRound), 0.7, `lowest round; median ${median(perRound).toFixed(2)}, ${detail}`)]
    case "cluster exec (insert)":
      return [atLeast("cluster exec (5, 21)", anchor, median(perRound), 0.85, detail)]
    case "node-local query (point read)":
      return [
        atLeast("node-local point read (21)", anchor, median(perRound), 0.5, detail),
        below("node-local point read p99, × the bare server's (21)", anchor, p99Ratio, 3, "×", "median of the rounds' p99 ratios", true)
      ]
    case "node-local insert":
      return [atLeast("node-local insert (21)", anchor, median(perRound), 0.5, detail)]
    case "node-local read beside a runaway":
      return [atLeast("read beside a runaway, of the unloaded read (21)", anchor, median(perRound), 0.5, detail)]
    default:
      return [reported(pair.label, anchor, median(perRound), "ratio", detail)]
  }
}

const main = async () => {
  if (!hasRqlited()) throw new Error(rqlitedMissingMessage())
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-sql-bench-"))
  let ok = false
  try {
    const rqliteUrl = await startRqlited(dir)
    const gateway = await startGateway(dir, rqliteUrl)
    await fill(gateway)
    const bareUrl = await startBare(dir)
    const proxyUrl = await startFront("proxy", dir, rqliteUrl)
    const batchUrl = await startFront("batch", dir, rqliteUrl)
    const only = process.env.SQL_ONLY
    const comparisons = pairs(rqliteUrl, gateway, bareUrl, proxyUrl, batchUrl).filter((p) => only === undefined || p.label.includes(only))
    for (const pair of comparisons) {
      await check(pair.anchor)
      await check(pair.gateway)
    }

    const samples = new Map<Target, Array<Sample>>()
    const log: Array<{ readonly round: number; readonly pair: Pair; readonly side: "anchor" | "gateway"; readonly sample: Sample }> = []
    for (const pair of comparisons) for (const t of [pair.anchor, pair.gateway]) await wrk(dir, t, warmup)
    for (let round = 1; round <= rounds; round++) {
      for (const pair of comparisons) {
        const order = round % 2 === 1 ? (["anchor", "gateway"] as const) : (["gateway", "anchor"] as const)
        for (const side of order) {
          const target = pair[side]
          const stop = side === "gateway" ? pair.during?.() : undefined
          const sample = await wrk(dir, target, duration)
          const load = stop === undefined ? "" : ` (beside: ${await stop()})`
          samples.set(target, [...(samples.get(target) ?? []), sample])
          log.push({ round, pair, side, sample })
          process.stderr.write(`round ${round} ${target.name}: ${sample.rps.toFixed(0)} req/s, p99 ${sample.p99}${load}\n`)
        }
      }
    }

    const out: Array<string> = []
    out.push(`\nwrk -t1 -c64, ${duration} s per run after ${warmup} s warm-up, ${rounds} round(s); servers on CPU 0, wrk on CPU 1`)
    out.push(`users: ${USERS} rows; point read id ${pointId}; gateway registry embedded, cluster SQL store = the same rqlited\n`)
    out.push("| round | target | req/s | p50 | p99 | errors | ratio to anchor |")
    out.push("|---:|---|---:|---:|---:|---:|---:|")
    for (const { round, pair, side, sample } of log) {
      const anchor = log.find((e) => e.round === round && e.pair === pair && e.side === "anchor")?.sample.rps ?? 0
      const ratio = side === "anchor" ? "1.00 (anchor)" : anchor > 0 ? (sample.rps / anchor).toFixed(2) : "?"
      out.push(`| ${round} | ${pair[side].name} | ${sample.rps.toFixed(0)} | ${sample.p50} | ${sample.p99} | ${sample.errors} | ${ratio} |`)
    }
    out.push(
      "\n| comparison | gateway req/s | anchor req/s | ratio (median of rounds) | ratio of medians | rounds (min-max) | target | rounds at target | p99 ratio (median) | met |"
    )
    out.push("|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
    const summary: Array<TargetResult> = []
    for (const pair of comparisons) {
      const g = median((samples.get(pair.gateway) ?? []).map((s) => s.rps))
      const a = median((samples.get(pair.anchor) ?? []).map((s) => s.rps))
      const perRound = Array.from({ length: rounds }, (_, i) => {
        const at = (side: "anchor" | "gateway") => log.find((e) => e.round === i + 1 && e.pair === pair && e.side === side)?.sample.rps ?? 0
        return at("anchor") > 0 ? at("gateway") / at("anchor") : 0
      })
      const ratio = median(perRound)
      const spread = `${Math.min(...perRound).toFixed(2)}-${Math.max(...perRound).toFixed(2)}`
      const target = pair.target
      const atTarget = target === undefined ? "-" : `${perRound.filter((r) => r >= target).length} of ${rounds}`
      const p99Ratio = median(
        Array.from({ length: rounds }, (_, i) => {
          const at = (side: "anchor" | "gateway") => millis(log.find((e) => e.round === i + 1 && e.pair === pair && e.side === side)?.sample.p99 ?? "?")
          return at("gateway") / at("anchor")
        }).filter((r) => Number.isFinite(r))
      )
      const p99Met = pair.p99Target === undefined || p99Ratio <= pair.p99Target
      const met = target === undefined ? "-" : ratio >= target && p99Met ? "yes" : "no"
      const p99Text = `${p99Ratio.toFixed(2)}${pair.p99Target === undefined ? "" : ` (<= ${pair.p99Target})`}`
      out.push(
        `| ${pair.label} | ${g.toFixed(0)} | ${a.toFixed(0)} | ${ratio.toFixed(2)} | ${(a > 0 ? g / a : 0).toFixed(2)} | ${spread} | ${target === undefined ? "-" : `>= ${target}`} | ${atTarget} | ${p99Text} | ${met} |`
      )
      summary.push(...summaryOf(pair, perRound, p99Ratio))
    }
    writeSummary("sql", `SQL_ROUNDS=${rounds} SQL_DURATION=${duration}${process.env.SQL_ONLY === undefined ? "" : ` SQL_ONLY=${process.env.SQL_ONLY}`}`, summary)
    const errors = log.reduce((sum, e) => sum + e.sample.errors, 0)
    if (errors > 0) out.push(`\nwarning: ${errors} non-2xx answers or socket errors during the runs; those numbers are not comparable`)
    process.stdout.write(out.join("\n") + "\n")
    ok = true
  } finally {
    await stopAll()
    if (ok) fs.rmSync(dir, { recursive: true, force: true })
    else process.stderr.write(`kept ${dir} (logs of the servers)\n`)
  }
}

main().catch((e: unknown) => {
  process.stderr.write((e instanceof Error ? e.message : String(e)) + "\n")
  process.exit(1)
})
