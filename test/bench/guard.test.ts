/**
 * The bench guard's own parts: the summary a bench writes, the background load, and `bench/all.ts`
 * end to end on the cheapest bench (auth: a real gateway, no external tool).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { atLeast, below, type BenchSummary, reported } from "../../bench/support/summary.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const tsx = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, timeout = 120_000) =>
  spawnSync(process.execPath, ["--import", "tsx", ...args], { cwd: root, env: { ...process.env, ...env }, encoding: "utf8", timeout })

describe("bench summary", () => {
  it("says whether a bound held, and reports without one", () => {
    expect(atLeast("t", "a", 0.6, 0.6, "").met).toBe(true)
    expect(atLeast("t", "a", 0.59, 0.6, "").met).toBe(false)
    expect(atLeast("t", "a", Number.NaN, 0.6, "").met).toBe(false)
    expect(below("t", "-", 63.9, 64, "MiB", "")).toMatchObject({ met: true, goal: "< 64 MiB" })
    expect(below("t", "-", 64, 64, "MiB", "").met).toBe(false)
    expect(below("t", "-", 1.5, 1.5, "s", "", true)).toMatchObject({ met: true, goal: "<= 1.5 s" })
    expect(reported("t", "a", 3, "ratio", "")).toMatchObject({ goal: undefined, met: undefined })
  })

  it("is written only where BENCH_SUMMARY names a file, with the load it ran beside", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-guard-test-"))
    const file = path.join(dir, "s.json")
    const script = path.join(dir, "write.ts")
    fs.writeFileSync(
      script,
      `import { startBackgroundLoad } from ${JSON.stringify(path.join(root, "bench/support/load.js"))}\n` +
        `import { atLeast, writeSummary } from ${JSON.stringify(path.join(root, "bench/support/summary.js"))}\n` +
        `import { execFileSync } from "node:child_process"\n` +
        `startBackgroundLoad()\n` +
        // the busy loop is this process's child while the bench runs
        `const children = execFileSync("ps", ["-o", "args=", "--ppid", String(process.pid)], { encoding: "utf8" })\n` +
        `writeSummary("x", "K=1", [atLeast("t", "a", 1, 0.5, children.includes("for (;;)") ? "busy" : "idle")])\n`
    )
    const quiet = tsx([script], { BENCH_SUMMARY: "", BENCH_LOAD: "0" })
    expect(quiet.status).toBe(0)
    expect(fs.existsSync(file)).toBe(false)
    const loaded = tsx([script], { BENCH_SUMMARY: file, BENCH_LOAD: "1" })
    expect(loaded.status).toBe(0)
    const summary = JSON.parse(fs.readFileSync(file, "utf8")) as BenchSummary
    expect(summary).toMatchObject({ bench: "x", settings: "K=1", load: expect.stringContaining("busy-loop") })
    expect(summary.results[0]).toMatchObject({ met: true, detail: "busy" })
    fs.rmSync(dir, { recursive: true, force: true })
  })
})

describe("npm run bench", () => {
  it("refuses a bench it does not know", () => {
    const run = tsx(["bench/all.ts", "--only", "nosuch"], {})
    expect(run.status).toBe(1)
    expect(run.stderr).toContain("no bench named nosuch")
  })

  it("runs a bench and prints its rows in the one table", () => {
    const run = tsx(["bench/all.ts", "--only", "auth"], { AUTH_N: "20" }, 240_000)
    expect(run.stderr).toContain("[bench] auth")
    expect(run.status).toBe(0)
    expect(run.stdout).toContain("Mode: short. Background load: none.")
    expect(run.stdout).toContain("| target (issue) | bench | anchor | value | target | met | detail |")
    expect(run.stdout).toMatch(/\| sign-in bench: verify \(sign-in\) \| auth \| - \| \d+ \/s \| 20 at concurrency 16 \|/)
    expect(run.stdout).toContain("0 of 0 targets met; 0 bench(es) not run or failed.")
    expect(run.stdout).toContain("auth: AUTH_N=20 AUTH_CONCURRENCY=16")
  }, 300_000)
})
