/**
 * Runs the `portico` command as a user does: bin/portico.mjs, the compiled JavaScript in dist/
 * (built first when stale). Tests call `ensureDist()` in a beforeAll and then run with
 * PORTICO_SKIP_BUILD=1, so a build never counts against a test's time.
 */
import { spawn, spawnSync } from "node:child_process"
import * as path from "node:path"

export const repoRoot = path.resolve(import.meta.dirname, "../..")
export const portico = path.join(repoRoot, "bin", "portico.mjs")

/** Compiles src/ to dist/ when stale (scripts/build.mjs); throws when tsc emits nothing. */
export const ensureDist = (): void => {
  const result = spawnSync(process.execPath, [path.join(repoRoot, "scripts", "build.mjs")], { cwd: repoRoot, encoding: "utf8" })
  if (result.status !== 0) throw new Error(`build failed:\n${result.stdout}${result.stderr}`)
}

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
}

/** Runs a program to its end; never rejects on a non-zero exit. */
export const runProcess = (
  file: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd?: string; readonly env?: Readonly<Record<string, string>>; readonly input?: string } = {}
): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const child = spawn(file, [...args], {
      cwd: options.cwd ?? repoRoot,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    child.once("error", reject)
    child.once("close", (code) => resolve({ code, stdout, stderr, ms: performance.now() - started }))
    child.stdin.end(options.input ?? "")
  })

/** `portico <args>` through bin/portico.mjs, on the dist/ that `ensureDist` built. */
export const runPortico = (args: ReadonlyArray<string>, options: { readonly cwd?: string; readonly env?: Readonly<Record<string, string>> } = {}) =>
  runProcess(process.execPath, [portico, ...args], { ...options, env: { PORTICO_SKIP_BUILD: "1", ...options.env } })

/** `stderr` without the build's progress lines (a build may run when another edit made dist/ stale). */
export const errorLines = (ran: Ran): Array<string> => ran.stderr.split("\n").filter((l) => l !== "" && !l.startsWith("[build]"))
