/**
 * wrk, the HTTP load generator of the benches, run on CPU 1 (`taskset -c 1 wrk -t1 -c64`) against
 * one request: its method, body and headers written into a Lua script in the run's directory.
 * It runs without blocking the driver, so a bench's background work keeps going meanwhile.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

export interface WrkRequest {
  /** Names the script file (and any error). */
  readonly name: string
  readonly url: string
  readonly method?: string
  readonly body?: string
  readonly headers?: Readonly<Record<string, string>>
}

export interface WrkSample {
  readonly rps: number
  /** wrk's latency text (`850.00us`, `1.23ms`); `millis` reads it. */
  readonly p50: string
  readonly p99: string
  /** Non-2xx answers and socket errors together. */
  readonly errors: number
}

const luaScript = (dir: string, request: WrkRequest) => {
  const file = path.join(dir, `${request.name.replace(/\W+/g, "-")}.lua`)
  const lines = [`wrk.method = ${JSON.stringify(request.method ?? "GET")}`]
  if (request.body !== undefined) lines.push(`wrk.body = ${JSON.stringify(request.body)}`, `wrk.headers["Content-Type"] = "application/json"`)
  for (const [name, value] of Object.entries(request.headers ?? {})) lines.push(`wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}`)
  fs.writeFileSync(file, lines.join("\n") + "\n")
  return file
}

/** `seconds` of `request` at 64 connections; the script goes in `dir`. */
export const wrk = async (dir: string, request: WrkRequest, seconds: number): Promise<WrkSample> => {
  const args = ["-c", "1", "wrk", "-t1", "-c64", `-d${seconds}s`, "--latency", "-s", luaScript(dir, request), request.url]
  const run = await new Promise<{ status: number | null; signal: string | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn("taskset", args, { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
    child.on("error", reject)
    child.on("close", (status, signal) => resolve({ status, signal, stdout, stderr }))
  })
  if (run.status !== 0) throw new Error(`wrk failed on ${request.name} (${run.status ?? run.signal}): ${run.stderr}`)
  const out = run.stdout
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  const socketErrors = socket === null ? 0 : socket.slice(1).reduce((sum, n) => sum + Number(n), 0)
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0),
    p50: /^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? "?",
    p99: /^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? "?",
    errors: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0) + socketErrors
  }
}

/** wrk's latency text (`850.00us`, `1.23ms`, `1.02s`) in milliseconds; NaN when unreadable. */
export const millis = (text: string): number => {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (m === null) return NaN
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[m[2] as "us" | "ms" | "s" | "m"]
  return Number(m[1]) * scale
}
