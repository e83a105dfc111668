import { readdirSync, readFileSync } from "node:fs"
import { availableParallelism } from "node:os"
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
// Run one at a time (one fork, beside the other projects' suites): the three-node suites (each runs its cluster in a network
// namespace of its own, test/support/netns.ts), which start three gateways and their engines and
// hold failover deadlines that a second such suite beside them on two cores would eat into; and the
// suites that measure a gateway's memory going up and coming back down, which a busy neighbour
// slows (its garbage collection and the pages it gives back).
const measuresMemory = ["test/e2e/bodies.test.ts", "test/e2e/databases.test.ts", "test/e2e/deployments-connections.test.ts"]
const oneAtATime = all.filter((file) => file.endsWith(".cluster.test.ts") || measuresMemory.includes(file))
const integration = all.filter((file) => !unit.includes(file) && !oneAtATime.includes(file))

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // At least two suites at once, even on two cores (where vitest's default is one): an
    // integration suite spends most of its time waiting on processes it started, so a second
    // one beside it keeps the cores busy. Suites never share a port, an app port block
    // (test/support/gateway.ts) or a data directory.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    globalSetup: ["test/support/globalSetup.ts"],
    projects: [
      { extends: true, test: { name: "unit", include: unit } },
      { extends: true, test: { name: "integration", include: integration } },
      { extends: true, test: { name: "alone", include: oneAtATime, poolOptions: { forks: { singleFork: true } } } }
    ]
  }
})
