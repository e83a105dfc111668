/**
 * The web console's TypeScript (console/, browser code with its own tsconfig: DOM types, Preact's
 * JSX) is checked here, since the project's `tsc --noEmit` covers src/ and test/ only and the build
 * bundles the console with esbuild, which does not check types. It checks the console's use of
 * the typed client against the API definition, so a changed endpoint that the console calls the
 * old way fails here. Kept apart from the browser suite: it is a compile, about 30 s of CPU.
 */
import { spawnSync } from "node:child_process"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { repoRoot } from "../support/cli.js"

describe("the web console's types", () => {
  it("check with console/tsconfig.json", () => {
    const tsc = path.join(repoRoot, "node_modules", "typescript", "bin", "tsc")
    const result = spawnSync(process.execPath, [tsc, "-p", path.join(repoRoot, "console", "tsconfig.json")], { cwd: repoRoot, encoding: "utf8" })
    expect(result.stdout + result.stderr).toBe("")
    expect(result.status).toBe(0)
  }, 180_000)
})
