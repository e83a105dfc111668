/**
 * README.md's quick tour, run as pasted: its `sh` block goes to `sh` line by line against a real
 * gateway, and every step must answer what the README shows after `# →` (`…` matches anything)
 * with HTTP 2xx from each curl (4xx where the README shows an error answer). The README and the
 * product cannot drift apart.
 *
 * Two things differ from a terminal: `localhost:6001` becomes the test gateway's address, and
 * `npx portico` runs bin/portico.mjs directly (the commands run in a temp dir, not the checkout;
 * test/e2e/cli.test.ts checks that npx finds the command in a checkout).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ensureDist, portico, repoRoot, runProcess } from "../support/cli.js"
import { type Gateway, startGateway, testTmp } from "../support/gateway.js"

interface Step {
  /** The command as written, continuation lines included. */
  readonly command: string
  /** What the README shows after `# →`, if anything. */
  readonly answer?: string
}

/** The first ```sh block after the "## A quick tour" heading. */
export const tourBlock = (readme: string): string => {
  const section = readme.indexOf("## A quick tour")
  if (section < 0) throw new Error("README.md has no '## A quick tour' section")
  const start = readme.indexOf("```sh\n", section)
  const end = readme.indexOf("\n```", start + 6)
  if (start < 0 || end < 0) throw new Error("the tour has no sh block")
  return readme.slice(start + 6, end)
}

export const tourSteps = (block: string): Array<Step> => {
  const steps: Array<{ command: string; answer?: string }> = []
  let pending: Array<string> = []
  for (const line of block.split("\n")) {
    if (pending.length > 0) {
      pending.push(line)
      if (!line.endsWith("\\")) {
        steps.push({ command: pending.join("\n") })
        pending = []
      }
      continue
    }
    const answer = /^# → (.*)$/.exec(line)
    if (answer !== null) {
      const last = steps.at(-1)
      if (last === undefined || last.answer !== undefined) throw new Error(`an answer with no command before it: ${line}`)
      last.answer = answer[1] ?? ""
      continue
    }
    if (line.trim() === "" || line.startsWith("#")) continue
    if (line.endsWith("\\")) pending.push(line)
    else steps.push({ command: line })
  }
  if (pending.length > 0) throw new Error("the tour ends inside a continued line")
  return steps
}

/** `…` matches anything; the rest is literal; the whole output must match. */
const answerPattern = (answer: string): RegExp =>
  new RegExp(`^${answer.split("…").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`, "s")

describe("the README's quick tour", () => {
  let gw: Gateway
  beforeAll(async () => {
    ensureDist()
    // as the README's `npm start` runs it: from the bundle
    gw = await startGateway({ bundled: true })
  }, 180_000)
  afterAll(async () => {
    await gw?.stop()
  })

  it("finds the tour's steps and answers", () => {
    const steps = tourSteps(tourBlock(fs.readFileSync(path.join(repoRoot, "README.md"), "utf8")))
    expect(steps.length).toBeGreaterThan(10)
    expect(steps.some((s) => s.command.includes("npx portico login"))).toBe(true)
    expect(steps.filter((s) => s.answer !== undefined).length).toBeGreaterThan(8)
  })

  it("runs as pasted and answers what the README shows", async () => {
    const steps = tourSteps(tourBlock(fs.readFileSync(path.join(repoRoot, "README.md"), "utf8")))
    const host = `127.0.0.1:${gw.port}`
    // Each step is announced on stdout and stderr; curl reports its status on stderr.
    const script = [
      "set -e",
      `npx() { if [ "$1" = portico ]; then shift; node '${portico}' "$@"; else command npx "$@"; fi; }`,
      `curl() { command curl -w '%{stderr}@@status %{http_code}\\n' "$@"; }`,
      ...steps.flatMap((step, i) => [`printf '\\n@@step ${i}\\n'; printf '@@step ${i}\\n' >&2`, step.command.replaceAll("localhost:6001", host)]),
      `printf '\\n@@step end\\n'; printf '@@step end\\n' >&2`
    ].join("\n")
    const cwd = fs.mkdtempSync(path.join(testTmp(), "portico-tour-"))
    const ran = await runProcess("sh", ["-c", script], {
      cwd,
      env: { PORTICO_DATA_DIR: gw.dataDir, PORTICO_URL: gw.url, PORTICO_SKIP_BUILD: "1" }
    })
    const sections = (text: string): Map<string, string> => {
      const out = new Map<string, string>()
      const parts = text.split(/\n?@@step (\d+|end)\n/)
      for (let i = 1; i < parts.length; i += 2) out.set(parts[i] ?? "", parts[i + 1] ?? "")
      return out
    }
    const stdout = sections(ran.stdout)
    const stderr = sections(ran.stderr)
    expect(stdout.has("end"), `the tour stopped early (exit ${ran.code}):\n${ran.stdout}\n${ran.stderr}`).toBe(true)
    expect(ran.code).toBe(0)
    steps.forEach((step, i) => {
      const output = (stdout.get(String(i)) ?? "").trim()
      const errors = (stderr.get(String(i)) ?? "").split("\n").filter((l) => l !== "")
      const statuses = errors.filter((l) => l.startsWith("@@status ")).map((l) => Number(l.slice(9)))
      const other = errors.filter((l) => !l.startsWith("@@status "))
      const where = `step ${i}: ${step.command}\n→ ${output}\n${other.join("\n")}`
      expect(other, where).toEqual([])
      const refusal = step.answer?.startsWith('{"error"') === true
      for (const status of statuses) {
        if (refusal) expect(status >= 400 && status < 500, where).toBe(true)
        else expect(status >= 200 && status < 300, where).toBe(true)
      }
      if (step.command.includes("curl")) expect(statuses.length, where).toBeGreaterThan(0)
      if (step.answer !== undefined) expect(output, where).toMatch(answerPattern(step.answer))
    })
    // the upload came back byte for byte
    expect(fs.readFileSync(path.join(cwd, "hello.txt"), "utf8")).toBe("hello, portico\n")
  }, 120_000)
})
