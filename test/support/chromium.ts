/**
 * A real browser for real-time media's browser test: Debian's chromium (installed by
 * scripts/engines.sh), headless, with a fake camera and microphone that need no permission prompt,
 * on a temp profile, its DevTools HTTP endpoint on a loopback port the browser picks. Pages are
 * opened and read through that endpoint (`/json/new`, `/json/list`): a page reports its progress in
 * its title, so the test needs no CDP client.
 *
 * Nothing it does leaves this machine. The binary is started directly, not through Debian's
 * launcher (/usr/bin/chromium), which adds the package's Google API keys and flags that load
 * extensions; background networking, component updates, sync, translation, safe browsing, crash
 * reports and metrics are off; and every host name resolves to nothing (only IP literals work).
 * As root (a container) it needs --no-sandbox.
 *
 * `servePages` serves a fixture directory on 127.0.0.1 to open pages from: 127.0.0.1 is a secure
 * context, so getUserMedia works over plain HTTP there.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { listenOnLoopback } from "./process.js"

/** Debian's browser binary (the launcher script's target), else whatever `chromium` is on PATH. */
const DEBIAN_BINARY = "/usr/lib/chromium/chromium"

const onPath = (tool: string): string | undefined =>
  (process.env["PATH"] ?? "")
    .split(path.delimiter)
    .map((dir) => path.join(dir, tool))
    .find((file) => fs.existsSync(file))

export const chromiumBinary = (): string | undefined => (fs.existsSync(DEBIAN_BINARY) ? DEBIAN_BINARY : onPath("chromium"))

export const hasChromium = (): boolean => chromiumBinary() !== undefined

export interface PageTarget {
  readonly id: string
  readonly type: string
  readonly url: string
  readonly title: string
}

export interface Browser {
  /** The DevTools HTTP port on 127.0.0.1. */
  readonly port: number
  /** Opens `url` in a new tab: its target id. */
  readonly open: (url: string) => Promise<string>
  /** The page targets (`/json/list`). */
  readonly pages: () => Promise<ReadonlyArray<PageTarget>>
  /** The title of the page with target `id` ("" once it is gone). */
  readonly title: (id: string) => Promise<string>
  /** What the browser wrote (with --enable-logging=stderr a page's console lines are in it). */
  readonly logs: () => string
  readonly stop: () => Promise<void>
}

const FLAGS = [
  "--headless=new",
  "--use-fake-device-for-media-stream",
  "--use-fake-ui-for-media-stream",
  "--remote-debugging-address=127.0.0.1",
  "--remote-debugging-port=0",
  // nothing off this machine
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-default-apps",
  "--disable-extensions",
  "--disable-domain-reliability",
  "--disable-client-side-phishing-detection",
  "--disable-breakpad",
  "--disable-crash-reporter",
  "--metrics-recording-only",
  "--no-pings",
  "--safebrowsing-disable-auto-update",
  "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,CertificateTransparencyComponentUpdater,AutofillServerCommunication,InterestFeedContentSuggestions,PrivacySandboxSettings4,NetworkTimeServiceQuerying",
  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
  "--no-first-run",
  "--no-default-browser-check",
  "--password-store=basic",
  "--use-mock-keychain",
  // a container: root, a small /dev/shm, no GPU
  "--no-sandbox",
  "--disable-dev-shm-usage",
  "--disable-gpu",
  // the TURN server is on loopback
  "--allow-loopback-in-peer-connection",
  // a hidden tab's timers and media are not throttled
  "--disable-background-timer-throttling",
  "--disable-renderer-backgrounding",
  "--disable-backgrounding-occluded-windows",
  "--autoplay-policy=no-user-gesture-required",
  "--enable-logging=stderr",
  "--v=0"
]

/**
 * The flags for a browser started by a CDP client of its own (puppeteer-core, which adds its
 * DevTools connection and headless mode): the same offline, container and no-throttling ones.
 */
export const clientLaunchFlags: ReadonlyArray<string> = FLAGS.filter(
  (flag) => flag !== "--headless=new" && !flag.startsWith("--remote-debugging-") && flag !== "--enable-logging=stderr" && flag !== "--v=0"
)

const running = new Set<ChildProcess>()
process.once("exit", () => {
  for (const proc of running) killGroup(proc, "SIGKILL")
})

/** The browser and its helpers (renderer, GPU, zygote) share its process group. */
const killGroup = (proc: ChildProcess, signal: NodeJS.Signals) => {
  if (proc.pid === undefined) return
  try {
    process.kill(-proc.pid, signal)
  } catch {
    // gone already
  }
}

const devtools = async <A>(port: number, route: string, method = "GET"): Promise<A> => {
  const answer = await fetch(`http://127.0.0.1:${port}${route}`, { method })
  if (!answer.ok) throw new Error(`DevTools ${method} ${route}: ${answer.status} ${await answer.text()}`)
  return (await answer.json()) as A
}

export const startChromium = async (): Promise<Browser> => {
  const binary = chromiumBinary()
  if (binary === undefined) throw new Error("chromium is missing: bash scripts/engines.sh chromium")
  const profile = fs.mkdtempSync(path.join(process.env["PORTICO_TEST_TMP"] ?? os.tmpdir(), "portico-chromium-"))
  // no Google API keys (Debian's launcher exports the package's), no display
  const env: NodeJS.ProcessEnv = { ...process.env, GOOGLE_API_KEY: "no", GOOGLE_DEFAULT_CLIENT_ID: "no", GOOGLE_DEFAULT_CLIENT_SECRET: "no" }
  delete env["DISPLAY"]
  delete env["WAYLAND_DISPLAY"]
  const child = spawn(binary, [...FLAGS, `--user-data-dir=${profile}`, "about:blank"], { stdio: ["ignore", "pipe", "pipe"], detached: true, env })
  running.add(child)
  child.once("exit", () => running.delete(child))
  let output = ""
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()))
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()))

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      killGroup(child, "SIGTERM")
      const late = setTimeout(() => killGroup(child, "SIGKILL"), 5_000)
      await exited
      clearTimeout(late)
    }
    // helpers that outlived the browser
    killGroup(child, "SIGKILL")
    fs.rmSync(profile, { recursive: true, force: true })
  }

  // the browser writes the port it bound to its profile
  const activePort = path.join(profile, "DevToolsActivePort")
  const deadline = Date.now() + 20_000
  let port = 0
  while (port === 0) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`chromium exited (${child.exitCode ?? child.signalCode}):\n${output}`)
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`chromium did not open its DevTools port in 20 s:\n${output}`)
    }
    const first = fs.existsSync(activePort) ? fs.readFileSync(activePort, "utf8").split("\n")[0] : undefined
    if (first !== undefined && /^\d+$/.test(first)) port = Number(first)
    else await new Promise((r) => setTimeout(r, 50))
  }

  const pages = async () => (await devtools<Array<PageTarget>>(port, "/json/list")).filter((t) => t.type === "page")
  return {
    port,
    // the endpoint unescapes its query into the URL
    open: async (url) => (await devtools<PageTarget>(port, `/json/new?${encodeURIComponent(url)}`, "PUT")).id,
    pages,
    title: async (id) => (await pages()).find((t) => t.id === id)?.title ?? "",
    logs: () => output,
    stop
  }
}

export interface PageServer {
  /** The URL of `file` in the served directory. */
  readonly url: (file: string) => string
  readonly stop: () => Promise<void>
}

/** Serves the files of `dir` (no subdirectories) on 127.0.0.1. */
export const servePages = async (dir: string): Promise<PageServer> => {
  const types: Record<string, string> = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8" }
  const server = createServer((req, res) => {
    const name = path.basename(new URL(req.url ?? "/", "http://127.0.0.1").pathname)
    const file = path.join(dir, name)
    if (name === "" || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, { "content-type": types[path.extname(name)] ?? "application/octet-stream", "cache-control": "no-store" })
    res.end(fs.readFileSync(file))
  })
  const port = await listenOnLoopback(server)
  return {
    url: (file) => `http://127.0.0.1:${port}/${file}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
