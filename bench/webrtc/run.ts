/**
 * bench/webrtc (issue 39): real-time media through the gateway against the same work without it,
 * three rows in one run, rounds alternating which side goes first, medians reported.
 *
 * 1. **TURN credentials**: `POST /v1/webrtc/turn/credentials` against `GET /v1/auth/whoami` on the
 *    same gateway with the same signed-in session (both are the gate and one keyed hash), wrk -t1
 *    -c64. Target: credentials' requests per second >= 0.8 of whoami's.
 * 2. **Signalling join**: from opening the WebSocket to the SFU's `welcome` frame, one join after
 *    another (each socket closed once welcomed, not timed), through the gateway
 *    (`/v1/webrtc/signal?room=…&jwt=…`: the gate, the room's placement, the join on the gateway's
 *    channel to the SFU, the relayed socket) against the same SFU process joined directly with a
 *    ticket sealed by the bench (sealed before the clock starts). Target: the gateway's p50 <= 1.5 ×
 *    the direct p50 (median of the rounds' ratios). Each round also prints the CPU the gateway and
 *    the SFU spent per join on each side (their participant events included), which is where the
 *    gateway's time goes when the machine is busy.
 * 3. **RTP forwarded**: RTP packets per second one werift peer receives from another, both
 *    relay-only through the same coturn: through the SFU (both joined to a room through the
 *    gateway, test/support/mediaPeers.ts) against the same two kinds of werift peer connected to
 *    each other directly (directPeer.ts: one offer and answer passed by the bench, no SFU). The
 *    sender writes bursts of packets as fast as it goes for the round's duration; what reached the
 *    receiver is counted. Target: through the SFU >= 0.8 of direct (median of the rounds' ratios).
 *    Reported beside it: the rate sent, and coturn's and the SFU's CPU over each side's rounds.
 *    (coturn's own client, `turnutils_uclient`, is no measure of the relay's rate: it paces itself,
 *    well under what the werift pair gets through, and waits 10 s for stragglers at the end.)
 *    Runs before row 2, whose joins each have the SFU allocate a relay on the same coturn. Both
 *    sides' peers run with srtpRollover.mjs preloaded: werift's own SRTP rollover counter is lost
 *    for good when the receiver drops the packets around a sequence number wrap, as it does here.
 *
 * "The same SFU": the gateway always runs its node's SFU itself, with a key it makes at each start.
 * The bench points PORTICO_SFU_BINARY at a wrapper it writes into the run's temp dir that records
 * the SFU's address and key (SFU_LISTEN, SFU_KEY) in a file beside it and execs the real binary, so
 * the direct joins reach the very process the gateway's joins do. A direct join's ticket carries an
 * event key the bench made up, so the gateway refuses that join's participant events (a 4xx the SFU
 * does not retry); the gateway's own joins' events are recorded as in production.
 *
 * Layout: the gateway, its SFU and coturn (bench/webrtc/turn.ts: the shipped configuration, on
 * loopback, without its per-session bandwidth cap) on CPU 0; wrk, the signalling client and the
 * werift peers (each its own process) on CPU 1. Knobs: WEBRTC_ROUNDS (5), WEBRTC_DURATION (seconds
 * per side per round for rows 1 and 3, 5), WEBRTC_JOINS (joins per side per round, 200),
 * WEBRTC_RTP_BURST (packets the sender writes per burst, 20), WEBRTC_RTP_BYTES (RTP payload bytes,
 * 1000), WEBRTC_ROWS (which rows run, "1,2,3"), WEBRTC_GATEWAY_NODE_ARGS (more node arguments for
 * the gateway, e.g. `--cpu-prof`), WEBRTC_KEEP_DIR=1 (keep the run's directory and its logs).
 * PORTICO_SFU_BINARY or PORTICO_ENGINES_DIR name the SFU (default .engines/bin/portico-sfu).
 */
import { spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { Wallet } from "ethers"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import WebSocket from "ws"
import { sealTicket } from "../../src/domain/SfuTicket.js"
import { connected, joinRoom, type MediaPeer, until } from "../../test/support/mediaPeers.js"
import { buildBundle, freePort, logTail, sleep, startPinned, stopAll, waitUntil } from "../support/children.js"
import { startBackgroundLoad } from "../support/load.js"
import { pinSelf } from "../support/processes.js"
import { median } from "../support/stats.js"
import { atLeast, below, rounds as roundsText, type TargetResult, writeSummary } from "../support/summary.js"
import { wrk } from "../support/wrk.js"
import { type DirectPeer, type IceServer, SRTP_ROLLOVER, startDirectPeer } from "./directPeer.js"
import { hasCoturn, startBenchTurn } from "./turn.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, "../..")
const int = (name: string, fallback: number) => Math.max(1, Math.round(Number(process.env[name] ?? fallback)))
const rounds = int("WEBRTC_ROUNDS", 5)
const durationS = int("WEBRTC_DURATION", 5)
const joinsPerSide = int("WEBRTC_JOINS", 200)
const rtpBurst = int("WEBRTC_RTP_BURST", 20)
const rtpBytes = int("WEBRTC_RTP_BYTES", 1000)
/** More node arguments for the gateway (`--cpu-prof --cpu-prof-dir=…` to profile it). */
const gatewayNodeArgs = (process.env["WEBRTC_GATEWAY_NODE_ARGS"] ?? "").split(" ").filter((a) => a !== "")
/** Which rows run (WEBRTC_ROWS, "1,2,3"): a row left out is left out of the table and the summary. */
const rows = new Set((process.env["WEBRTC_ROWS"] ?? "1,2,3").split(",").map((r) => r.trim()))
const sfuBinary = process.env["PORTICO_SFU_BINARY"] ?? path.join(process.env["PORTICO_ENGINES_DIR"] ?? path.join(root, ".engines/bin"), "portico-sfu")
const TARGET = 0.8
/** The gateway's join p50 at most this many times the direct join's. */
const SIGNAL_TARGET = 1.5
const MEDIA_TARGET = 0.8
const TURN_SECRET = "bench-turn-secret-" + "7".repeat(16)
const NAMESPACE = "rtcbench"

for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void stopAll().then(() => process.exit(130)))

const json = async (url: string, init: RequestInit) => {
  const res = await fetch(url, init)
  const text = await res.text()
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${url} answered ${res.status}: ${text}`)
  return JSON.parse(text) as Record<string, any>
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * The SFU wrapper: records SFU_LISTEN and SFU_KEY (what the gateway made for this start) in
 * `<dir>/sfu.env`, then execs the real binary with everything as given (stdin, env, arguments).
 */
const writeSfuTap = (dir: string) => {
  const tap = path.join(dir, "sfu-tap.sh")
  const out = path.join(dir, "sfu.env")
  fs.writeFileSync(
    tap,
    [
      "#!/bin/sh",
      "umask 077",
      // its pid is the SFU's once it execs
      `printf '%s %s %s\\n' "$SFU_LISTEN" "$SFU_KEY" "$$" > ${shellQuote(`${out}.tmp`)}`,
      `mv ${shellQuote(`${out}.tmp`)} ${shellQuote(out)}`,
      `exec ${shellQuote(sfuBinary)} "$@"`,
      ""
    ].join("\n"),
    { mode: 0o700 }
  )
  return { tap, out }
}

/** What the wrapper recorded: the SFU's address, key and pid. */
const readSfuTap = (out: string) => {
  const text = fs.readFileSync(out, "utf8")
  const [listen, keyHex, pid] = text.trim().split(" ")
  if (listen === undefined || keyHex === undefined || !/^[0-9a-f]{64}$/i.test(keyHex) || !/^\d+$/.test(pid ?? "")) throw new Error(`the SFU wrapper wrote ${text}`)
  return { listen, key: Buffer.from(keyHex, "hex"), pid: Number(pid) }
}

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

/** CPU seconds (user and system, every thread) `pid` has used; NaN once it is gone. */
const cpuSeconds = (pid: number) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return Number.NaN
  }
}

const med = <A,>(xs: ReadonlyArray<A>, f: (a: A) => number) => median(xs.map(f))
const pct = (share: number) => `${(share * 100).toFixed(0)}%`
const yes = (met: boolean) => (met ? "yes" : "no")

/** A signed-in session of a new member of the namespace: its access token. */
const signedIn = async (url: string, owner: Record<string, string>) => {
  const member = Wallet.createRandom()
  await json(`${url}/v1/namespace/members`, { method: "POST", headers: owner, body: JSON.stringify({ wallet: member.address, role: "runtime" }) })
  const challenge = await json(`${url}/v1/auth/challenge`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ wallet: member.address, namespace: NAMESPACE }) })
  const session = await json(`${url}/v1/auth/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message: challenge.message, signature: await member.signMessage(challenge.message) })
  })
  return { user: member.address.toLowerCase(), token: String(session.access_token) }
}

/**
 * Opens a signalling socket to `url`: ms from opening it to its upgrade (101) and to the welcome
 * frame; the socket is closed (untimed) before it answers.
 */
const joinOnce = (url: string) =>
  new Promise<{ readonly upgraded: number; readonly welcomed: number }>((resolve, reject) => {
    let upgraded = 0
    let welcomed = 0
    const start = performance.now()
    const ws = new WebSocket(url)
    ws.once("upgrade", () => (upgraded = performance.now() - start))
    ws.once("message", (raw) => {
      welcomed = performance.now() - start
      const frame = JSON.parse(raw.toString()) as { type?: string }
      if (frame.type !== "welcome") {
        welcomed = 0
        reject(new Error(`the first frame was ${raw.toString().slice(0, 200)}`))
      }
      ws.close(1000)
    })
    ws.once("unexpected-response", (_req, res) => reject(new Error(`the join was refused: HTTP ${res.statusCode}`)))
    ws.once("error", reject)
    ws.once("close", () => (welcomed > 0 ? resolve({ upgraded, welcomed }) : reject(new Error("closed before a welcome"))))
  })

/** Both ends of one way media goes: the sender writes, the receiver counts. */
interface MediaPair {
  readonly sendRtp: (count: number, everyMs: number, bytes: number) => Promise<void>
  readonly received: () => Promise<number>
  /** The two peer connections' states, for an error. */
  readonly states: () => Promise<string>
  readonly close: () => Promise<void>
}

/**
 * joinRoom with srtpRollover.mjs preloaded into the peer's process (test/support/mediaPeers.ts
 * forks it with this process's environment, synchronously as it is called).
 */
const joinRoomPatched = (gatewayUrl: string, token: string, room: string) => {
  const before = process.env["NODE_OPTIONS"]
  process.env["NODE_OPTIONS"] = [before, `--import=${SRTP_ROLLOVER}`].filter((o) => o !== undefined && o !== "").join(" ")
  try {
    return joinRoom(gatewayUrl, token, room)
  } finally {
    if (before === undefined) delete process.env["NODE_OPTIONS"]
    else process.env["NODE_OPTIONS"] = before
  }
}

/** Two werift peers in one room through the gateway and its SFU, relay-only through coturn, as test/e2e/webrtc.rooms.test.ts joins them. */
const viaSfu = async (gatewayUrl: string, senderToken: string, receiverToken: string): Promise<MediaPair> => {
  const peers: Array<MediaPeer> = []
  try {
    const a = await joinRoomPatched(gatewayUrl, senderToken, "media")
    peers.push(a)
    const b = await joinRoomPatched(gatewayUrl, receiverToken, "media")
    peers.push(b)
    await until(() => connected(a, b), 30_000, "both SFU peers connected")
    for (const f of (await a.stats()).frames.filter((x) => x.type === "candidate")) {
      const line = (f["candidate"] as { candidate: string }).candidate
      if (!/ typ relay /.test(line)) throw new Error(`the SFU offered a candidate that is not a relay: ${line}`)
    }
    await until(
      async () => {
        await a.sendRtp(20, 5, rtpBytes)
        return (await b.stats()).rtp >= 20
      },
      30_000,
      "RTP through the SFU"
    )
    return {
      sendRtp: (count, everyMs, bytes) => a.sendRtp(count, everyMs, bytes),
      received: async () => (await b.stats()).rtp,
      states: async () => `sender ${(await a.stats()).connection}, receiver ${(await b.stats()).connection}`,
      close: async () => {
        for (const p of peers) await p.close().catch(() => p.kill())
      }
    }
  } catch (e) {
    for (const p of peers) p.kill()
    throw e
  }
}

/** Two werift peers connected to each other (directPeer.ts), relay-only through the same coturn, the offer and answer passed by the bench. */
const direct = async (iceServers: ReadonlyArray<IceServer>): Promise<MediaPair> => {
  const peers: Array<DirectPeer> = []
  try {
    const s = startDirectPeer()
    peers.push(s)
    const r = startDirectPeer()
    peers.push(r)
    const offer = await s.ask<string>({ cmd: "offer", iceServers })
    const answer = await r.ask<string>({ cmd: "answer", iceServers, sdp: offer })
    await s.ask({ cmd: "accept", sdp: answer })
    await until(async () => (await s.stats()).connection === "connected" && (await r.stats()).connection === "connected", 30_000, "both direct peers connected")
    for (const p of peers) {
      const lines = (await p.stats()).candidates
      if (lines.length === 0 || lines.some((l) => !/ typ relay /.test(l))) throw new Error(`a direct peer's candidates are not relay only: ${lines.join(" | ")}`)
    }
    await until(
      async () => {
        await s.sendRtp(20, 5, rtpBytes)
        return (await r.stats()).rtp >= 20
      },
      30_000,
      "RTP between the direct peers"
    )
    return {
      sendRtp: (count, everyMs, bytes) => s.sendRtp(count, everyMs, bytes),
      received: async () => (await r.stats()).rtp,
      states: async () => `sender ${(await s.stats()).connection}, receiver ${(await r.stats()).connection}`,
      close: async () => void (await Promise.all(peers.map((p) => p.close())))
    }
  } catch (e) {
    await Promise.all(peers.map((p) => p.close()))
    throw e
  }
}

const main = async () => {
  if (!hasCoturn()) throw new Error("coturn is missing (turnserver): bash scripts/engines.sh coturn")
  if (!fs.existsSync(sfuBinary)) throw new Error(`no SFU at ${sfuBinary}: bash scripts/engines.sh (or PORTICO_SFU_BINARY)`)
  buildBundle()
  pinSelf("1")
  startBackgroundLoad()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-webrtc-"))
  const pairs: Array<MediaPair> = []
  try {
    const turn = await startBenchTurn(dir, TURN_SECRET)
    const tap = writeSfuTap(dir)
    const dataDir = path.join(dir, "data")
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORTICO_RATE_LIMIT: "false",
      PORTICO_LOG_REQUESTS: "false",
      PORTICO_SKIP_BUILD: "1",
      PORTICO_NODE_ID: "bench",
      PORTICO_TURN_URIS: turn.uri,
      PORTICO_TURN_SECRET: TURN_SECRET,
      PORTICO_SFU_BINARY: tap.tap,
      // joins one after another from one user: the per-user join limit (60 a minute) would refuse them
      PORTICO_WEBRTC_JOINS_PER_MINUTE: "100000"
    }
    delete env.PORTICO_RQLITE_URL
    delete env.PORTICO_REDIS_URL
    const created = spawnSync(process.execPath, ["bin/portico.mjs", "namespace", "create", NAMESPACE, "--data-dir", dataDir], { cwd: root, env, encoding: "utf8" })
    if (created.status !== 0) throw new Error(`namespace create failed: ${created.stderr}`)
    const ownerKey = String(JSON.parse(created.stdout).api_key)
    const owner = { authorization: `Bearer ${ownerKey}`, "content-type": "application/json" }
    const port = await freePort()
    const gateway = startPinned("gateway", dir, process.execPath, ["--enable-source-maps", ...gatewayNodeArgs, "bin/portico.mjs", "serve", "--port", String(port), "--data-dir", dataDir], { env })
    await waitUntil(gateway, () => fs.readFileSync(gateway.log, "utf8").includes('"msg":"listening"'), 60_000)
    const url = `http://127.0.0.1:${port}`
    await json(`${url}/v1/namespace/webrtc/enable`, { method: "POST", headers: owner, body: "{}" })
    const alice = await signedIn(url, owner)
    const bob = await signedIn(url, owner)
    // the SFU is up once the rooms route answers, and the wrapper has said where and with which key
    await waitUntil(gateway, async () => (await fetch(`${url}/v1/webrtc/rooms`, { headers: owner })).status === 200 && fs.existsSync(tap.out), 20_000)
    const sfu = readSfuTap(tap.out)

    const bearer = { Authorization: `Bearer ${alice.token}` }
    const checked = await json(`${url}/v1/webrtc/turn/credentials`, { method: "POST", headers: { ...bearer, "content-type": "application/json" }, body: "{}" })
    if (!String(checked.username).endsWith(`:${NAMESPACE}`)) throw new Error(`unexpected credentials ${JSON.stringify(checked)}`)
    const iceServers: Array<IceServer> = [{ urls: checked.uris as Array<string>, username: String(checked.username), credential: String(checked.password) }]

    // by row, printed and summed up in the rows' order whatever order they ran in
    const lines = new Map<string, Array<string>>()
    const summary = new Map<string, Array<TargetResult>>()
    const add = (row: string, line: ReadonlyArray<string>, result: TargetResult) => {
      lines.set(row, [...line])
      summary.set(row, [result])
    }

    // ---- 1. TURN credentials against whoami ----
    if (rows.has("1")) {
      const sides = {
        whoami: { name: "whoami", url: `${url}/v1/auth/whoami`, headers: bearer },
        credentials: { name: "credentials", url: `${url}/v1/webrtc/turn/credentials`, method: "POST", body: "{}", headers: bearer }
      }
      const run = async (which: keyof typeof sides) => {
        const sample = await wrk(dir, sides[which], durationS)
        if (sample.errors > 0) throw new Error(`${which}: ${sample.errors} errors\n${logTail(gateway)}`)
        return sample.rps
      }
      await run("whoami")
      await run("credentials")
      const results: Array<{ c: number; w: number }> = []
      for (let r = 0; r < rounds; r++) {
        const credentialsFirst = r % 2 === 1
        const one = await run(credentialsFirst ? "credentials" : "whoami")
        const two = await run(credentialsFirst ? "whoami" : "credentials")
        const [c, w] = credentialsFirst ? [one, two] : [two, one]
        results.push({ c, w })
        console.error(`credentials round ${r + 1}: credentials ${c.toFixed(0)}/s, whoami ${w.toFixed(0)}/s, ratio ${(c / w).toFixed(2)}`)
      }
      const ratios = results.map((x) => x.c / x.w)
      const ratio = median(ratios)
      add(
        "1",
        [`| 1. TURN credentials /s against whoami /s (wrk -t1 -c64) | ${med(results, (x) => x.c).toFixed(0)} | ${med(results, (x) => x.w).toFixed(0)} | ${ratio.toFixed(2)} | >= ${TARGET} | ${yes(ratio >= TARGET)} |`],
        atLeast("webrtc: TURN credentials against whoami (39)", "GET /v1/auth/whoami, same session, same gateway", ratio, TARGET, `rounds ${roundsText(ratios)}`)
      )
    }

    // ---- 3. RTP forwarded: through the SFU against direct, the same coturn (before the joins of row 2, each of which has the SFU allocate a relay) ----
    if (rows.has("3")) {
      const sfuPair = await viaSfu(url, alice.token, bob.token)
      pairs.push(sfuPair)
      const directPair = await direct(iceServers)
      pairs.push(directPair)
      const media = { sfu: sfuPair, direct: directPair }
      const cpu = { coturn: turn.child.process.pid!, sfu: sfu.pid }
      /** Bursts as fast as the sender takes them for `seconds`: packets per second the receiver counted and the sender wrote, CPU of coturn and the SFU. */
      const stream = async (pair: MediaPair, seconds: number) => {
        const before = await pair.received()
        const cpuBefore = { coturn: cpuSeconds(cpu.coturn), sfu: cpuSeconds(cpu.sfu) }
        let sent = 0
        const start = performance.now()
        const end = start + seconds * 1000
        while (performance.now() < end) {
          await pair.sendRtp(rtpBurst, 0, rtpBytes)
          sent += rtpBurst
        }
        const elapsed = (performance.now() - start) / 1000
        // what is still on its way arrives, and counts for this round
        await sleep(500)
        const received = (await pair.received()) - before
        const wall = (performance.now() - start) / 1000
        if (received === 0) throw new Error(`nothing received in ${seconds} s (${await pair.states()}); the gateway's log ends:\n${logTail(gateway)}`)
        return {
          pps: received / elapsed,
          sentPps: sent / elapsed,
          coturnCpu: (cpuSeconds(cpu.coturn) - cpuBefore.coturn) / wall,
          sfuCpu: (cpuSeconds(cpu.sfu) - cpuBefore.sfu) / wall
        }
      }
      type Sample = Awaited<ReturnType<typeof stream>>
      await stream(media.direct, 1)
      await stream(media.sfu, 1)
      const results: Array<{ s: Sample; d: Sample }> = []
      for (let r = 0; r < rounds; r++) {
        const sfuFirst = r % 2 === 1
        const one = await stream(sfuFirst ? media.sfu : media.direct, durationS)
        const two = await stream(sfuFirst ? media.direct : media.sfu, durationS)
        const [s, d] = sfuFirst ? [one, two] : [two, one]
        results.push({ s, d })
        console.error(
          `media round ${r + 1}: through the SFU ${s.pps.toFixed(0)}/s received of ${s.sentPps.toFixed(0)}/s sent, direct ${d.pps.toFixed(0)}/s of ${d.sentPps.toFixed(0)}/s, ratio ${(s.pps / d.pps).toFixed(2)}` +
            ` (CPU: coturn ${pct(s.coturnCpu)} / ${pct(d.coturnCpu)}, SFU ${pct(s.sfuCpu)} / ${pct(d.sfuCpu)})`
        )
      }
      await media.sfu.close()
      await media.direct.close()
      pairs.length = 0
      const ratios = results.map((x) => x.s.pps / x.d.pps)
      const ratio = median(ratios)
      const s = (f: (x: Sample) => number) => med(results, (x) => f(x.s))
      const d = (f: (x: Sample) => number) => med(results, (x) => f(x.d))
      const context =
        `sent ${s((x) => x.sentPps).toFixed(0)}/s against ${d((x) => x.sentPps).toFixed(0)}/s; ` +
        `coturn CPU ${pct(s((x) => x.coturnCpu))} against ${pct(d((x) => x.coturnCpu))}, SFU CPU ${pct(s((x) => x.sfuCpu))} against ${pct(d((x) => x.sfuCpu))}`
      add(
        "3",
        [
          `| 3. RTP packets received /s: through the SFU against the two peers connected directly (relay-only, one coturn) | ${s((x) => x.pps).toFixed(0)} | ${d((x) => x.pps).toFixed(0)} | ${ratio.toFixed(2)} | >= ${MEDIA_TARGET} | ${yes(ratio >= MEDIA_TARGET)} |`,
          `| ... beside it: RTP packets sent /s, coturn's and the SFU's CPU (share of one core) | ${context} | | | | |`
        ],
        atLeast(
          "webrtc: RTP forwarded through the SFU (39)",
          "the same werift peers connected directly, same coturn",
          ratio,
          MEDIA_TARGET,
          `received ${s((x) => x.pps).toFixed(0)}/s against ${d((x) => x.pps).toFixed(0)}/s; ${context}; rounds ${roundsText(ratios)}`
        )
      )
    }

    // ---- 2. Signalling join: through the gateway against the same SFU directly ----
    if (rows.has("2")) {
      const room = "signal"
      const viaGateway = () => `${url.replace(/^http/, "ws")}/v1/webrtc/signal?room=${room}&jwt=${encodeURIComponent(alice.token)}`
      const directly = () =>
        `ws://${sfu.listen}/signal?ticket=${sealTicket(sfu.key, {
          ns: NAMESPACE,
          room,
          user: alice.user,
          device: "",
          peer: randomBytes(8).toString("hex"),
          exp: Math.floor(Date.now() / 1000) + 30,
          muted: false,
          ek: randomBytes(32).toString("hex")
        })}`
      /**
       * p50s of `n` joins one after another: to the upgrade, and to the welcome; and the CPU ms
       * the gateway and the SFU spent per join meanwhile (their participant events included).
       */
      const joins = async (target: () => string, n: number) => {
        const times: Array<{ readonly upgraded: number; readonly welcomed: number }> = []
        const before = { gateway: cpuSeconds(gateway.process.pid!), sfu: cpuSeconds(sfu.pid) }
        for (let i = 0; i < n; i++) times.push(await joinOnce(target()))
        const perJoin = (now: number, then: number) => ((now - then) * 1000) / n
        return {
          upgraded: med(times, (t) => t.upgraded),
          welcomed: med(times, (t) => t.welcomed),
          gatewayCpu: perJoin(cpuSeconds(gateway.process.pid!), before.gateway),
          sfuCpu: perJoin(cpuSeconds(sfu.pid), before.sfu)
        }
      }
      await joins(viaGateway, Math.min(50, joinsPerSide))
      await joins(directly, Math.min(50, joinsPerSide))
      const results: Array<{ g: number; d: number; gUp: number; dUp: number; gCpu: string; dCpu: string }> = []
      const cpuText = (side: { readonly gatewayCpu: number; readonly sfuCpu: number }) => `gateway ${side.gatewayCpu.toFixed(2)} + SFU ${side.sfuCpu.toFixed(2)}`
      for (let r = 0; r < rounds; r++) {
        const gatewayFirst = r % 2 === 1
        const one = await joins(gatewayFirst ? viaGateway : directly, joinsPerSide)
        const two = await joins(gatewayFirst ? directly : viaGateway, joinsPerSide)
        const [g, d] = gatewayFirst ? [one, two] : [two, one]
        results.push({ g: g.welcomed, d: d.welcomed, gUp: g.upgraded, dUp: d.upgraded, gCpu: cpuText(g), dCpu: cpuText(d) })
        console.error(
          `signalling round ${r + 1}: gateway p50 ${g.welcomed.toFixed(2)} ms (upgraded ${g.upgraded.toFixed(2)}), direct p50 ${d.welcomed.toFixed(2)} ms (upgraded ${d.upgraded.toFixed(2)}), ${(g.welcomed / d.welcomed).toFixed(2)}×; CPU ms a join: through the gateway ${cpuText(g)}, direct ${cpuText(d)}`
        )
      }
      const ratios = results.map((x) => x.g / x.d)
      const ratio = median(ratios)
      const g = med(results, (x) => x.g)
      const d = med(results, (x) => x.d)
      const upgraded = `to the upgrade (101) ${med(results, (x) => x.gUp).toFixed(2)} ms against ${med(results, (x) => x.dUp).toFixed(2)} ms`
      add(
        "2",
        [
          `| 2. signalling join p50 ms, socket opened to welcome: through the gateway against the same SFU directly | ${g.toFixed(2)} | ${d.toFixed(2)} | ${ratio.toFixed(2)}× (direct/gateway ${(1 / ratio).toFixed(2)}) | <= ${SIGNAL_TARGET}× | ${yes(ratio <= SIGNAL_TARGET)} |`,
          `| ... beside it: p50 ms to the upgrade (101) | ${med(results, (x) => x.gUp).toFixed(2)} | ${med(results, (x) => x.dUp).toFixed(2)} | | | |`
        ],
        below("webrtc: signalling join p50, × the SFU's own (39)", "the same SFU process joined directly with a ticket", ratio, SIGNAL_TARGET, "×", `p50 ${g.toFixed(2)} ms against ${d.toFixed(2)} ms (${upgraded}); rounds ${roundsText(ratios)}`, true)
      )
    }

    console.log(
      `bench/webrtc: ${rounds} rounds, sides alternating; credentials: ${durationS} s per side, one signed-in session; signalling: ${joinsPerSide} joins per side one after another; ` +
        `media: ${durationS} s per side, bursts of ${rtpBurst} RTP packets of ${rtpBytes} B, relay-only through one coturn (no bandwidth cap); medians of the rounds`
    )
    console.log("| measure | measured | anchor | ratio | target | met |")
    console.log("|---|---:|---:|---:|---|---|")
    const order = [...lines.keys()].sort()
    for (const row of order) for (const line of lines.get(row)!) console.log(line)
    writeSummary(
      "webrtc",
      `WEBRTC_ROWS=${order.join(",")} WEBRTC_ROUNDS=${rounds} WEBRTC_DURATION=${durationS} WEBRTC_JOINS=${joinsPerSide} WEBRTC_RTP_BURST=${rtpBurst} WEBRTC_RTP_BYTES=${rtpBytes}`,
      order.flatMap((row) => summary.get(row)!)
    )
  } finally {
    for (const pair of pairs) await pair.close().catch(() => {})
    await stopAll()
    if (process.env["WEBRTC_KEEP_DIR"] === "1") console.error(`the run's directory (logs, data) is kept: ${dir}`)
    else fs.rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e: unknown) => {
  console.error(e)
  process.exitCode = 1
})
