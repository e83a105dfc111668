/**
 * The TLS edge's real processes for tests (docs/edge.md): Pebble, Let's Encrypt's ACME test
 * server, validating challenges against the edge's ports through the DNS stand-in; and the edge,
 * Caddy built with Portico's modules (scripts/engines.sh `edge`), run with the configuration
 * `portico edge config` prints. Both bind loopback addresses only and are stopped by the test.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import * as net from "node:net"
import * as path from "node:path"
import { testTmp } from "./gateway.js"
import { testCa } from "./testCa.js"
import { waitFor } from "./wait.js"

const bin = process.env["PORTICO_ENGINES_DIR"] ?? path.resolve(import.meta.dirname, "../../.engines/bin")
export const caddyBinary = path.join(bin, "portico-caddy")
export const pebbleBinary = path.join(bin, "pebble")
export const hasEdgeEngines = () => fs.existsSync(caddyBinary) && fs.existsSync(pebbleBinary)
export const edgeMissingMessage = () => `the edge's engines are missing from ${bin}: run scripts/engines.sh edge (npm test does)`

interface Child {
  readonly child: ChildProcess
  readonly logs: () => string
  readonly stop: () => Promise<void>
}

const run = (command: string, args: ReadonlyArray<string>, options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv }): Child => {
  const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  return {
    child,
    logs: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000)
      await exited
      clearTimeout(timer)
    }
  }
}

const canListen = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, host, () => server.close(() => resolve(true)))
  })

/** A TCP port free on every one of `hosts` (the edges of several nodes listen on one port, each on its own address). */
export const portFreeOn = async (hosts: ReadonlyArray<string>): Promise<number> => {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 30000)
    let free = true
    for (const host of hosts) free = free && (await canListen(host, port))
    if (free) return port
  }
  throw new Error(`no port free on ${hosts.join(", ")}`)
}

export interface Pebble {
  /** The ACME directory URL. */
  readonly directory: string
  /** The test CA's PEM file that Pebble's own HTTPS is signed by: the edge's trusted root. */
  readonly listenerCaFile: string
  /** The root Pebble issues certificates under (it makes a new one at each start). */
  readonly issuingRoot: () => Promise<string>
  readonly logs: () => string
  readonly stop: () => Promise<void>
}

/**
 * Pebble validating HTTP-01 on `httpPort` and TLS-ALPN-01 on `tlsPort` of the address `dnsServer`
 * gives a name, and DNS-01 by asking `dnsServer` itself. Nonces are never refused at random and
 * validations do not sleep, so an order takes a second, not ten.
 */
export const startPebble = async (options: { readonly dnsServer: string; readonly httpPort: number; readonly tlsPort: number }): Promise<Pebble> => {
  const ca = testCa()
  const dir = fs.mkdtempSync(path.join(testTmp(), "portico-pebble-"))
  fs.writeFileSync(path.join(dir, "cert.pem"), ca.certPem)
  fs.writeFileSync(path.join(dir, "key.pem"), ca.keyPem)
  const port = await portFreeOn(["127.0.0.1"])
  let management = await portFreeOn(["127.0.0.1"])
  while (management === port) management = await portFreeOn(["127.0.0.1"])
  fs.writeFileSync(
    path.join(dir, "pebble.json"),
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${port}`,
        managementListenAddress: `127.0.0.1:${management}`,
        certificate: "cert.pem",
        privateKey: "key.pem",
        httpPort: options.httpPort,
        tlsPort: options.tlsPort,
        ocspResponderURL: "",
        externalAccountBindingRequired: false,
        retryAfter: { authz: 1, order: 1 },
        keyAlgorithm: "ecdsa",
        profiles: { default: { description: "the test profile", validityPeriod: 7776000 } }
      }
    })
  )
  const child = run(pebbleBinary, ["-config", "pebble.json", "-dnsserver", options.dnsServer], {
    cwd: dir,
    env: { PEBBLE_VA_NOSLEEP: "1", PEBBLE_WFE_NONCEREJECT: "0", PEBBLE_AUTHZREUSE: "0" }
  })
  const get = (url: string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      https
        .get(url, { ca: ca.caPem, headers: { "user-agent": "portico-tests" } }, (res) => {
          let body = ""
          res.on("data", (chunk: Buffer) => (body += chunk.toString()))
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
        })
        .on("error", reject)
    })
  const directory = `https://127.0.0.1:${port}/dir`
  await waitFor("pebble's directory", async () => (await get(directory).catch(() => ({ status: 0 }))).status === 200, 20_000).catch(async (e) => {
    await child.stop()
    throw new Error(`${(e as Error).message}\n${child.logs()}`)
  })
  return {
    directory,
    listenerCaFile: ca.caFile,
    issuingRoot: async () => (await get(`https://127.0.0.1:${management}/roots/0`)).body,
    logs: child.logs,
    stop: async () => {
      await child.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

export interface Edge {
  readonly logs: () => string
  readonly stop: () => Promise<void>
}

/** The edge (Caddy with Portico's modules) running `config`, its home and files in a temp directory. */
export const startEdge = async (config: unknown, listening: { readonly host: string; readonly port: number }): Promise<Edge> => {
  const dir = fs.mkdtempSync(path.join(testTmp(), "portico-edge-"))
  fs.writeFileSync(path.join(dir, "caddy.json"), JSON.stringify(config))
  // Caddy keeps nothing of its own outside this directory (its storage is the gateway's)
  const child = run(caddyBinary, ["run", "--config", "caddy.json"], {
    cwd: dir,
    env: { HOME: dir, XDG_CONFIG_HOME: path.join(dir, "config"), XDG_DATA_HOME: path.join(dir, "data") }
  })
  await waitFor(
    `the edge on ${listening.host}:${listening.port}`,
    () =>
      new Promise<boolean>((resolve) => {
        const socket = net.connect(listening.port, listening.host, () => {
          socket.destroy()
          resolve(true)
        })
        socket.once("error", () => resolve(false))
      }),
    20_000
  ).catch(async (e) => {
    await child.stop()
    throw new Error(`${(e as Error).message}\n${child.logs()}`)
  })
  return {
    logs: child.logs,
    stop: async () => {
      await child.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
