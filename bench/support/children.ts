/**
 * Child processes of a benchmark driver: servers pinned to CPU 0, their logs in the run's temp
 * dir, each leading its own process group so a hard stop also reaches what it started (the
 * gateway's SQLite worker processes). A driver that dies without reaching its cleanup leaves no
 * server behind.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

export interface Child {
  readonly name: string
  readonly process: ChildProcess
  readonly log: string
}

const children: Array<Child> = []

export const alive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Starts `command args` pinned to CPU 0 (taskset execs, so the pid is the command's), in the
 * repository root, stderr to `<dir>/<name>.log` and stdout too unless `pipeStdout` (a pipe nobody
 * drains could stall it); stdin is a pipe with `pipeStdin`, else closed.
 */
export const startPinned = (
  name: string,
  dir: string,
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly env?: NodeJS.ProcessEnv; readonly pipeStdout?: boolean; readonly pipeStdin?: boolean } = {}
): Child => {
  const log = path.join(dir, `${name}.log`)
  const fd = fs.openSync(log, "a")
  const child = spawn("taskset", ["-c", "0", command, ...args], {
    cwd: root,
    env: options.env ?? process.env,
    stdio: [options.pipeStdin === true ? "pipe" : "ignore", options.pipeStdout === true ? "pipe" : fd, fd],
    detached: true
  })
  fs.closeSync(fd)
  const tracked = { name, process: child, log }
  children.push(tracked)
  return tracked
}

export const logTail = (child: Child) => {
  try {
    return fs.readFileSync(child.log, "utf8").slice(-3000)
  } catch {
    return ""
  }
}

export const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (!alive(child)) return resolve()
    child.once("exit", () => resolve())
  })

/** SIGKILL to the child's process group: the child and whatever it started and left behind. */
const killGroup = (child: ChildProcess) => {
  if (child.pid === undefined) return
  try {
    process.kill(-child.pid, "SIGKILL")
  } catch {
    // the group is gone already
  }
}

/** SIGTERM to the child (a gateway then stops its workers), SIGKILL to its group after `graceMs`. */
export const stop = async (child: ChildProcess, graceMs: number) => {
  if (alive(child)) {
    child.kill("SIGTERM")
    await Promise.race([exited(child), sleep(graceMs)])
  }
  killGroup(child)
  await exited(child)
}

/** Stops every child still running, and anything left in their process groups. */
export const stopAll = () => Promise.all(children.map(({ process: child }) => stop(child, 5000)))

process.once("exit", () => {
  for (const { process: child } of children) killGroup(child)
})

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no port assigned"))))
    })
  })

/** Polls `probe` until it holds; fails with the child's log tail when it exits or time runs out. */
export const waitUntil = async (child: Child, probe: () => boolean | Promise<boolean>, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (!alive(child.process)) throw new Error(`${child.name} exited (${child.process.exitCode ?? child.process.signalCode})\n${logTail(child)}`)
    if (await Promise.resolve().then(probe).catch(() => false)) return
    await sleep(100)
  }
  throw new Error(`${child.name} not ready after ${timeoutMs} ms\n${logTail(child)}`)
}

/**
 * Builds the bundle the gateways run (scripts/build.mjs), once, before any starts: they start
 * with PORTICO_SKIP_BUILD, so no compile lands inside a measured round.
 */
export const buildBundle = () => {
  const build = spawnSync(process.execPath, ["scripts/build.mjs"], { cwd: root, encoding: "utf8" })
  if (build.status !== 0) throw new Error(`the bundle did not build: ${build.stderr}`)
}
