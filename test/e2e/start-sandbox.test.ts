/**
 * `npm start`'s sandbox step (scripts/ensure-sandbox.mjs, which ensure-deps.mjs runs as prestart; run
 * alone here, so no test ever runs the npm install of ensure-deps) on a machine without the
 * deployment sandbox (issue 34): as root it runs `bash scripts/engines.sh sandbox` and the helpers
 * are there for the gateway; when that fails it says so in one line and never fails the start.
 * The engines directory is a temporary one (PORTICO_ENGINES_DIR), so the project's own helpers
 * are not touched.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { repoRoot, runProcess } from "../support/cli.js"
import { testTmp } from "../support/gateway.js"

const prestart = (enginesDir: string) =>
  runProcess(process.execPath, [path.join(repoRoot, "scripts", "ensure-sandbox.mjs")], { cwd: repoRoot, env: { PORTICO_ENGINES_DIR: enginesDir } })

const sandboxLines = (stderr: string) => stderr.split("\n").filter((line) => line.startsWith("[sandbox]"))

describe("npm start's prestart and the deployment sandbox", () => {
  it("as root, builds the missing sandbox helpers once; a second start says nothing about them", async () => {
    expect(process.getuid?.(), "this case runs as root, as CI does").toBe(0)
    const engines = fs.mkdtempSync(path.join(testTmp(), "prestart-engines-"))
    const first = await prestart(engines)
    expect(first.code, first.stderr).toBe(0)
    expect(sandboxLines(first.stderr)[0]).toBe("[sandbox] installing the deployment sandbox for apps (bash scripts/engines.sh sandbox; once)")
    for (const helper of ["portico-sandbox-bpf", "portico-sandbox-exec"]) expect(fs.existsSync(path.join(engines, helper)), helper).toBe(true)
    const second = await prestart(engines)
    expect(second.code, second.stderr).toBe(0)
    expect(sandboxLines(second.stderr)).toEqual([])
  }, 180_000)

  it("when the install fails, says what to run and still lets the gateway start (exit 0)", async () => {
    // a directory that cannot be made: engines.sh stops at once
    const ran = await prestart("/proc/portico-no-engines-here")
    expect(ran.code, ran.stderr).toBe(0)
    expect(sandboxLines(ran.stderr).at(-1)).toBe(
      "[sandbox] `bash scripts/engines.sh sandbox` failed (its reason is above): until then the gateway serves static sites, and dynamic deploys answer 503"
    )
  }, 60_000)
})
