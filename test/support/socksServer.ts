/**
 * A real SOCKS5 server for the anonymity proxy's tests: microsocks (Debian's package, installed by
 * scripts/engines.sh) on 127.0.0.1 at a free port.
 *
 * The gateway refuses loopback destinations, so a test destination needs a name that only the
 * SOCKS server resolves. microsocks resolves with the system resolver, which reads /etc/hosts
 * first; it runs in a mount namespace of its own (`unshare -m`, root) where a copy of /etc/hosts
 * with the test's names bind-mounted over the real one maps e.g. `dest.portico-test` to 127.0.0.1.
 * Nothing else on the machine sees those names. A /etc/resolv.conf naming only 127.0.0.1, where
 * no resolver listens, is bind-mounted beside it, so a name the test did not list fails at once
 * rather than being asked of the machine's resolver (a query that would leave the machine).
 *
 * microsocks logs each connection as `client[fd] <client ip>: connected to <host>:<port>`, with
 * the host as the client sent it: a hostname there means the gateway sent the name (SOCKS5 with
 * remote resolution), never an address it had resolved.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { freePort, killChild } from "./process.js"

export interface SocksServer {
  readonly port: number
  /** `socks5h://127.0.0.1:<port>`, what PORTICO_PROXY_SOCKS_URL is set to. */
  readonly url: string
  /** The destinations the server connected to, as the client named them, in order. */
  readonly connections: () => ReadonlyArray<{ readonly host: string; readonly port: number }>
  readonly logs: () => string
  readonly stop: () => Promise<void>
}

export interface SocksServerOptions {
  /** Names only this server resolves: name → address (127.0.0.1 for a local destination). */
  readonly hosts?: Readonly<Record<string, string>>
}

const connected = /connected to (.+):(\d+)\s*$/

const waitForListening = async (port: number, child: ChildProcess, output: () => string): Promise<void> => {
  const deadline = Date.now() + 10_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`microsocks exited (${child.exitCode}):\n${output()}`)
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1")
      socket.once("connect", () => {
        socket.destroy()
        resolve(true)
      })
      socket.once("error", () => resolve(false))
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`microsocks did not listen on ${port}:\n${output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export const startSocksServer = async (options: SocksServerOptions = {}): Promise<SocksServer> => {
  const port = await Effect.runPromise(freePort)
  const dir = fs.mkdtempSync(path.join(process.env["PORTICO_TEST_TMP"] ?? os.tmpdir(), "portico-socks-"))
  const hostsFile = path.join(dir, "hosts")
  const extra = Object.entries(options.hosts ?? {}).map(([name, address]) => `${address}\t${name}\n`)
  fs.writeFileSync(hostsFile, extra.join("") + fs.readFileSync("/etc/hosts", "utf8"))
  const resolvFile = path.join(dir, "resolv.conf")
  fs.writeFileSync(resolvFile, "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
  // unshare runs sh in the new namespace; sh bind-mounts the files and becomes microsocks, so the
  // child's pid is the server's own
  const script = `mount --bind "$1" /etc/hosts && mount --bind "$3" /etc/resolv.conf && exec microsocks -i 127.0.0.1 -p "$2"`
  const child = spawn("unshare", ["-m", "--propagation", "private", "sh", "-c", script, "sh", hostsFile, String(port), resolvFile], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  try {
    await waitForListening(port, child, () => output)
  } catch (error) {
    await Effect.runPromise(killChild(child))
    throw error
  }
  return {
    port,
    url: `socks5h://127.0.0.1:${port}`,
    connections: () =>
      output.split("\n").flatMap((line) => {
        const m = connected.exec(line)
        return m === null ? [] : [{ host: m[1] as string, port: Number(m[2]) }]
      }),
    logs: () => output,
    stop: async () => {
      await Effect.runPromise(killChild(child))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
