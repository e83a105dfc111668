import { readdirSync, readFileSync } from "node:fs"
import * as path from "node:path"
import { defineConfig } from "vitest/config"

const root = import.meta.dirname

// The suites find the engine binaries the way .ci/run did: PORTICO_ENGINES_DIR (default
// .engines/bin, where scripts/engines.sh puts them; `npm test` runs it first) and PATH.
process.env["PORTICO_ENGINES_DIR"] ??= path.join(root, ".engines", "bin")
const enginesDir = process.env["PORTICO_ENGINES_DIR"]
if (!(process.env["PATH"] ?? "").split(path.delimiter).includes(enginesDir)) {
  process.env["PATH"] = `${enginesDir}${path.delimiter}${process.env["PATH"] ?? ""}`
}

const testFiles = (dir: string): Array<string> =>
  readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const rel = `${dir}/${entry.name}`
    return entry.isDirectory() ? testFiles(rel) : entry.name.endsWith(".test.ts") ? [rel] : []
  })

// A unit test runs in-process with no engine and no gateway: it lives under test/domain, test/api
// or test/layers and imports none of the support modules that start a process. `npm run
// test:unit` runs only these (seconds, for the edit loop); `npm test` runs both projects.
const startsProcesses = /support\/(gateway|rqlited|redis|kubo|storageEngines)\.js/
const all = testFiles("test")
const unit = all.filter(
  (file) => /^test\/(domain|api|layers)\//.test(file) && !startsProcesses.test(readFileSync(path.join(root, file), "utf8"))
)
const integration = all.filter((file) => !unit.includes(file))

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    globalSetup: ["test/support/globalSetup.ts"],
    projects: [
      { extends: true, test: { name: "unit", include: unit } },
      { extends: true, test: { name: "integration", include: integration } }
    ]
  }
})
