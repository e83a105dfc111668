/**
 * A build leaves an earlier build's files in dist/ for a day (scripts/build.mjs `pruneEarlier`):
 * a gateway still running from it loads its lazy chunks when it first needs them.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
// @ts-expect-error: a build script in plain JavaScript, without declarations
import { pruneEarlier } from "../../scripts/build.mjs"

const dir = mkdtempSync(path.join(tmpdir(), "portico-prune-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("a build's pruning of earlier builds", () => {
  it("keeps what it wrote and what an earlier build wrote in the last day; removes older leftovers", () => {
    mkdirSync(path.join(dir, "runner"))
    const file = (name: string, ageHours: number) => {
      const at = path.join(dir, name)
      writeFileSync(at, name)
      const when = (Date.now() - ageHours * 3600_000) / 1000
      utimesSync(at, when, when)
      return at
    }
    const written = file("chunk-NEW.js", 30)
    file("chunk-RECENT.js", 2)
    file("chunk-OLD.js", 30)
    file("runner/chunk-OLD.js", 48)
    pruneEarlier(dir, new Set([written]))
    expect(readdirSync(dir).sort()).toEqual(["chunk-NEW.js", "chunk-RECENT.js", "runner"])
    expect(readdirSync(path.join(dir, "runner"))).toEqual([])
  })
})
