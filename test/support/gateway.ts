/**
 * Starts a real `portico serve` process on a free port with a temp data dir and speaks HTTP to
 * it, as a client would. The CLI runs against the same data dir, as an operator would.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"

const root = path.resolve(import.meta.dirname, "../..")
const run = promisify(execFile)

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The parsed body, or undefined when it is not JSON. */
  readonly body: any
}

export interface Gateway {
  readonly url: string
  readonly port: number
  /** The gateway process (to read its memory use). */
  readonly pid: number
  readonly dataDir: string
  readonly logs: () => string
  readonly request: (
    method: string,
    path: string,
    options?: { readonly token?: string; readonly json?: unknown; readonly body?: string; readonly headers?: Record<string, string> }
  ) => Promise<Reply>
  /** Runs `portico <args>` against this gateway's data dir and parses its JSON output. */
  readonly cli: (args: ReadonlyArray<string>) => Promise<any>
  /** SIGTERM, then the exit code once the process is gone. */
  readonly stop: () => Promise<number | null>
}

export interface GatewayOptions {
  readonly env?: Readonly<Record<string, string>>
  /** Reuse a data dir (a second gateway on the same registry). */
  readonly dataDir?: string
  /** A port chosen beforehand (when the gateway must know its own URL); default any free one. */
  readonly port?: number
  /**
   * Run the gateway as `npm start` does, from the bundle in dist/bundle/ (call `ensureDist()`
   * first), rather than from src/ through tsx.
   */
  readonly bundled?: boolean
  /** More arguments for `portico serve` (`--join <invite>`). */
  readonly args?: ReadonlyArray<string>
  /** The address the gateway listens on (it is also given PORTICO_HOST); default 127.0.0.1. */
  readonly host?: string
  /** A command the gateway is started through (`nsenter --net=…`: a node's own network namespace). */
  readonly wrap?: ReadonlyArray<string>
  /** How long to wait for it to listen; default 30 s. */
  readonly startTimeoutMs?: number
}

export const cliIn = async (dataDir: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) => {
  const { stdout } = await run(process.execPath, ["--import", "tsx", path.join(root, "src/main.ts"), ...args, "--data-dir", dataDir], {
    cwd: root,
    env: { ...process.env, ...env }
  })
  return JSON.parse(stdout.trim().split("\n").pop() ?? "null")
}

/** Under the run's temp root (test/support/globalSetup.ts), removed when the run ends. */
/** Mints an API key with `token` (a namespace owner's or admin's): its secret, or a thrown error naming the answer. */
export const mintKey = async (gw: Gateway, token: string, body: unknown): Promise<string> => {
  const minted = await gw.request("POST", "/v1/namespace/keys", { token, json: body })
  if (minted.status !== 201) throw new Error(`POST /v1/namespace/keys answered ${minted.status}: ${minted.text}`)
  return minted.body.api_key as string
}

/** A fetch answer as a Reply: its text, and its parsed body when that is JSON. */
export const replyOf = async (res: Response): Promise<Reply> => {
  const text = await res.text()
  let body: unknown = undefined
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: res.status, headers: res.headers, text, body }
}

/**
 * One request to the server at `baseUrl`: a bearer token, a JSON body or a raw one, more headers;
 * given up after `ms` when set (a paused node answers nothing).
 */
export const requestTo = async (
  baseUrl: string,
  method: string,
  p: string,
  opts: { readonly token?: string; readonly json?: unknown; readonly body?: string; readonly headers?: Record<string, string>; readonly ms?: number } = {}
): Promise<Reply> => {
  const headers: Record<string, string> = { ...opts.headers }
  if (opts.token !== undefined) headers["authorization"] = `Bearer ${opts.token}`
  let body: string | undefined = opts.body
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json)
    headers["content-type"] ??= "application/json"
  }
  return replyOf(await fetch(baseUrl + p, { method, headers, body, ...(opts.ms === undefined ? {} : { signal: AbortSignal.timeout(opts.ms) }) }))
}

export const testTmp = (): string => process.env["PORTICO_TEST_TMP"] ?? os.tmpdir()

/**
 * A block of 20 app ports of its own for each test gateway (PORTICO_APP_PORTS), so gateways of
 * suites running at once never hand out the same port: claimed by creating `<dir>/<block>`
 * exclusively, holding the claiming process's pid; a block whose process is gone is taken over.
 * Blocks lie in 20200-29999, below the kernel's ephemeral ports that free-port picks come from.
 */
const portBlocks = path.join(os.tmpdir(), "portico-test-app-ports")
const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}
const claimPortBlock = (): { readonly range: string; readonly release: () => void } => {
  fs.mkdirSync(portBlocks, { recursive: true })
  for (let block = 0; block < 490; block++) {
    const file = path.join(portBlocks, String(block))
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.writeFileSync(file, String(process.pid), { flag: "wx" })
        const first = 20200 + block * 20
        return { range: `${first}-${first + 19}`, release: () => fs.rmSync(file, { force: true }) }
      } catch {
        let holder = 0
        try {
          holder = Number(fs.readFileSync(file, "utf8"))
        } catch {
          continue // released meanwhile: try it again
        }
        // an empty file is a claim being written: taken
        if (!(holder > 0) || alive(holder)) break
        fs.rmSync(file, { force: true })
      }
    }
  }
  throw new Error(`no free app port block under ${portBlocks}`)
}

export const startGateway = async (options: GatewayOptions = {}): Promise<Gateway> => {
  const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(testTmp(), "portico-e2e-"))
  const ports = options.env?.["PORTICO_APP_PORTS"] === undefined ? claimPortBlock() : undefined
  const env = {
    PORTICO_RATE_LIMIT: "false",
    PORTICO_LOG_REQUESTS: "true",
    ...(ports === undefined ? {} : { PORTICO_APP_PORTS: ports.range }),
    ...(options.host === undefined ? {} : { PORTICO_HOST: options.host }),
    ...options.env
  }
  const entry = options.bundled === true ? ["--enable-source-maps", path.join(root, "bin/portico.mjs")] : ["--import", "tsx", path.join(root, "src/main.ts")]
  const wrap = options.wrap ?? []
  const child: ChildProcess = spawn(
    wrap[0] ?? process.execPath,
    [...wrap.slice(1), ...(wrap.length > 0 ? [process.execPath] : []), ...entry, "serve", "--port", String(options.port ?? 0), "--data-dir", dataDir, ...(options.args ?? [])],
    { cwd: root, env: { ...process.env, ...(options.bundled === true ? { PORTICO_SKIP_BUILD: "1" } : {}), ...env }, stdio: ["ignore", "pipe", "pipe"] }
  )
  child.once("exit", () => ports?.release())
  let output = ""
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("gateway did not start:\n" + output)), options.startTimeoutMs ?? 30_000)
    const check = () => {
      const line = output.split("\n").find((l) => l.includes('"msg":"listening"'))
      if (line !== undefined) {
        clearTimeout(timer)
        resolve(JSON.parse(line).port)
      }
    }
    child.stdout?.on("data", check)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`gateway exited with ${code}:\n${output}`))
    })
  })
  const url = `http://${options.host ?? "127.0.0.1"}:${port}`
  return {
    url,
    port,
    pid: child.pid ?? 0,
    dataDir,
    logs: () => output,
    request: (method, p, opts = {}) => requestTo(url, method, p, opts),
    cli: (args) => cliIn(dataDir, args, env),
    stop: () =>
      new Promise<number | null>((resolve) => {
        // ended already: by itself, or by a signal (a test's SIGKILL of a lost machine)
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode)
        child.once("exit", (code) => resolve(code))
        child.kill("SIGTERM")
      })
  }
}

/** A GET to a gateway with a `Host` of our choosing (fetch will not send one): an app's host. */
export const getOnHost = (port: number, host: string, urlPath: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "GET", path: urlPath, headers: { host } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end()
  })
