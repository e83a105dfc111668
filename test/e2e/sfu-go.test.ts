/**
 * The media server's own Go tests (engines/sfu/*_test.go): its channel to the gateway (mux.go)
 * and its participant reports (events.go), run with the Go toolchain that builds it
 * (scripts/engines.sh), so `npm test` runs them as it runs every other suite.
 */
import { spawnSync } from "node:child_process"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const sfuDir = path.resolve(import.meta.dirname, "../../engines/sfu")

describe("the media server's Go tests", () => {
  it("pass", () => {
    const run = spawnSync("go", ["test", "-count=1", "./..."], {
      cwd: sfuDir,
      encoding: "utf8",
      env: { ...process.env, GOFLAGS: "-mod=readonly -buildvcs=false" },
      timeout: 280_000
    })
    expect(run.error, "go is on PATH (scripts/engines.sh builds the media server with it)").toBeUndefined()
    expect(`${run.stdout}${run.stderr}`).toMatch(/^ok\s+portico\/sfu/m)
    expect(run.status).toBe(0)
  }, 300_000)
})
