/**
 * A real TURN server for real-time media's tests: coturn (Debian's package, installed by
 * scripts/engines.sh) on 127.0.0.1 at a free port, run from the shipped configuration
 * (engines/coturn/turnserver.conf) with what a loopback-only test needs on top: one listening and
 * relay address (`host`, 127.0.0.1 unless given: the cluster's nodes reach another one), a small
 * relay port range, and loopback peers allowed (the shipped file denies them). `relay` runs
 * coturn's own client (`turnutils_uclient`), which allocates with a credential and sends messages
 * between two allocations through the server.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { freePort, killChild } from "./process.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
export const SHIPPED_CONFIG = path.join(root, "engines/coturn/turnserver.conf")

export interface TurnServer {
  readonly port: number
  /** The URI the gateway hands out (PORTICO_TURN_URIS). */
  readonly uri: string
  readonly logs: () => string
  /**
   * Allocates with `username`/`password` and relays `messages` messages each way between two
   * allocations: how many were sent and came back in all, and the client's output.
   */
  readonly relay: (username: string, password: string, messages?: number) => Promise<{ readonly sent: number; readonly received: number; readonly output: string }>
  readonly stop: () => Promise<void>
}

export const hasTurnServer = (): boolean =>
  ["turnserver", "turnutils_uclient"].every((tool) => (process.env["PATH"] ?? "").split(":").some((dir) => fs.existsSync(path.join(dir, tool))))

/**
 * The shipped configuration with what a loopback run adds: one listening and relay address,
 * a relay port range, loopback peers allowed, no TLS, the log on stdout, and `extra` lines.
 */
export const loopbackTurnConfig = (options: {
  readonly host: string
  readonly port: number
  readonly relayPorts: { readonly min: number; readonly max: number }
  readonly dir: string
  readonly extra?: ReadonlyArray<string>
}): string =>
  [
    fs.readFileSync(SHIPPED_CONFIG, "utf8"),
    "# the run's own, on loopback",
    `listening-ip=${options.host}`,
    `relay-ip=${options.host}`,
    `listening-port=${options.port}`,
    `min-port=${options.relayPorts.min}`,
    `max-port=${options.relayPorts.max}`,
    "allow-loopback-peers",
    `allowed-peer-ip=${options.host}`,
    ...(options.extra ?? []),
    "no-tls",
    "no-dtls",
    "log-file=stdout",
    `pidfile=${path.join(options.dir, "turnserver.pid")}`,
    ""
  ].join("\n")

export const startTurnServer = async (secret: string, host = "127.0.0.1"): Promise<TurnServer> => {
  const port = await Effect.runPromise(freePort)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-coturn-"))
  const config = path.join(dir, "turnserver.conf")
  const relayBase = 40000 + Math.floor(Math.random() * 20000)
  fs.writeFileSync(config, loopbackTurnConfig({ host, port, relayPorts: { min: relayBase, max: relayBase + 40 }, dir }))
  let output = ""
  const child: ChildProcess = spawn("turnserver", ["-c", config, "--static-auth-secret", secret], { stdio: ["ignore", "pipe", "pipe"] })
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()))
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()))
  const until = Date.now() + 10_000
  while (!/Total General servers|listener opened on/i.test(output)) {
    if (child.exitCode !== null || Date.now() > until) throw new Error(`turnserver did not start:\n${output}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return {
    port,
    uri: `turn:${host}:${port}?transport=udp`,
    logs: () => output,
    relay: (username, password, messages = 5) =>
      new Promise((resolve) => {
        execFile(
          "turnutils_uclient",
          ["-u", username, "-w", password, "-p", String(port), "-n", String(messages), "-m", "1", "-l", "120", "-y", "-e", host, host],
          { timeout: 20_000 },
          (_error, stdout, stderr) => {
            const text = `${stdout}${stderr}`
            const totals = /tot_send_msgs=(\d+), tot_recv_msgs=(\d+)\s*$/m.exec(text)
            resolve({ sent: Number(totals?.[1] ?? 0), received: Number(totals?.[2] ?? 0), output: text })
          }
        )
      }),
    stop: async () => {
      await Effect.runPromise(killChild(child))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
